package tcp

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/core"
)

var (
	srvIP = netip.MustParseAddr("198.18.0.1")
	cliIP = netip.MustParseAddr("198.18.0.2")
)

const testPort = 5000

func serverConfig() core.Config {
	return core.Config{Kind: core.KindTCPXDP, Role: core.RoleServer, Iface: "memio", LocalIP: srvIP, Port: testPort}
}

func clientConfig() core.Config {
	return core.Config{Kind: core.KindTCPXDP, Role: core.RoleClient, Iface: "memio", LocalIP: cliIP,
		Dests: []netip.Addr{srvIP}, Port: testPort, ConnectTimeout: 20 * time.Second}
}

// poller drives a backend on its own goroutine with fn as the body of
// each round (fn returns false to stop), and joins it on stop.
type poller struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startPoller(b *Backend, fn func(ctx context.Context) bool) *poller {
	ctx, cancel := context.WithCancel(context.Background())
	p := &poller{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for ctx.Err() == nil && fn(ctx) {
		}
	}()
	return p
}

func (p *poller) stop() {
	p.cancel()
	<-p.done
}

// echo is a server body: every record goes back to its sender. Errors
// other than peer closes and resets fail the test.
func echo(t *testing.T, b *Backend) func(ctx context.Context) bool {
	pkts := make([]core.Packet, 64)
	return func(ctx context.Context) bool {
		n, err := b.Rx(pkts)
		if err != nil {
			var pe *core.PeerError
			if errors.Is(err, net.ErrClosed) {
				return false
			}
			if !errors.As(err, &pe) {
				t.Errorf("server Rx: %v", err)
				return false
			}
		}
		for i := 0; i < n; i++ {
			for !b.QueueTo(pkts[i].Data, pkts[i].From) {
				if err := b.Flush(); err != nil && !isPeer(err) {
					t.Errorf("server Flush: %v", err)
					return false
				}
				if ctx.Err() != nil {
					return false
				}
			}
		}
		if err := b.Flush(); err != nil && !isPeer(err) {
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("server Flush: %v", err)
			}
			return false
		}
		if n == 0 {
			wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			b.Wait(wctx)
			cancel()
		}
		return true
	}
}

func isPeer(err error) bool {
	var pe *core.PeerError
	return errors.As(err, &pe)
}

// setup opens a server on port A of a memio pair, polled by body (echo when
// nil), and a client on port B. Both are closed at cleanup, poll loops
// first.
func setup(t *testing.T, mo memio.Options, srvCfg, cliCfg core.Config, body func(*Backend) func(context.Context) bool) (srv, cli *Backend, pa, pb *memio.Port) {
	t.Helper()
	pa, pb = memio.NewPair(mo)
	srv, err := NewOverFrameIO(srvCfg, pa, Options{Mode: "netstack over memio"})
	if err != nil {
		t.Fatalf("server: %v", err)
	}
	if body == nil {
		body = func(b *Backend) func(context.Context) bool { return echo(t, b) }
	}
	p := startPoller(srv, body(srv))
	cli, err = NewOverFrameIO(cliCfg, pb, Options{Mode: "netstack over memio"})
	if err != nil {
		p.stop()
		srv.Close()
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() {
		cli.Close()
		p.stop()
		srv.Close()
	})
	return srv, cli, pa, pb
}

// record i of a test stream: its index, then bytes derived from it.
func makeRecord(buf []byte, i uint64, size int) []byte {
	b := buf[:size]
	if size >= 8 {
		binary.BigEndian.PutUint64(b, i)
	}
	x := uint32(i)*2654435761 + 1
	for j := min(8, size); j < size; j++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[j] = byte(x)
	}
	return b
}

func checkRecord(t *testing.T, got []byte, i uint64, size int, scratch []byte) {
	t.Helper()
	want := makeRecord(scratch, i, size)
	if len(got) != len(want) || string(got) != string(want) {
		t.Fatalf("record %d: got %d bytes %x..., want %d bytes %x...", i, len(got), head(got), len(want), head(want))
	}
}

func head(b []byte) []byte {
	if len(b) > 12 {
		return b[:12]
	}
	return b
}

// stream sends total bytes from cli as records of size(i) and checks that
// every record comes back echoed, in order and byte-exact.
func stream(t *testing.T, cli *Backend, total int, size func(i uint64) int, deadline time.Duration) {
	t.Helper()
	buf := make([]byte, MaxRecord)
	scratch := make([]byte, MaxRecord)
	pkts := make([]core.Packet, 64)
	var sent, recvd uint64
	var sentBytes int
	var expect []int // sizes of records sent and not yet received
	end := time.Now().Add(deadline)
	for sentBytes < total || recvd < sent {
		if time.Now().After(end) {
			t.Fatalf("stream: %d of %d records back after %v (sent %d bytes); stats %+v", recvd, sent, deadline, sentBytes, cli.Stats())
		}
		for sentBytes < total {
			sz := size(sent)
			if !cli.Queue(makeRecord(buf, sent, sz)) {
				break
			}
			expect = append(expect, sz)
			sent++
			sentBytes += sz
		}
		if err := cli.Flush(); err != nil {
			t.Fatalf("client Flush: %v", err)
		}
		n, err := cli.Rx(pkts)
		if err != nil {
			t.Fatalf("client Rx: %v", err)
		}
		for i := 0; i < n; i++ {
			if pkts[i].From != netip.AddrPortFrom(srvIP, testPort) {
				t.Fatalf("record from %v", pkts[i].From)
			}
			checkRecord(t, pkts[i].Data, recvd, expect[0], scratch)
			expect = expect[1:]
			recvd++
		}
		if n == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			cli.Wait(ctx)
			cancel()
		}
	}
}

func TestHandshake(t *testing.T) {
	srv, cli, _, _ := setup(t, memio.Options{}, serverConfig(), clientConfig(), nil)
	if s := cli.Stats(); s.Conns != 1 {
		t.Fatalf("client Conns = %d", s.Conns)
	}
	for deadline := time.Now().Add(10 * time.Second); srv.Stats().Accepts != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("server never accepted: %+v", srv.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	st := cli.Stats()
	if v, _ := st.Counter("netstack", "tcp_active_opens"); v != 1 {
		t.Errorf("tcp_active_opens = %d", v)
	}
	if v, _ := st.Counter("netstack", "arp_requests_sent"); v != 1 {
		t.Errorf("arp_requests_sent = %d, want 1", v)
	}
}

func TestEcho16MiB(t *testing.T) {
	_, cli, _, _ := setup(t, memio.Options{}, serverConfig(), clientConfig(), nil)
	stream(t, cli, 16<<20, func(uint64) int { return 1472 }, 120*time.Second)
	st := cli.Stats()
	tx, rx := FramesPerRecord(st)
	t.Logf("frames per record: tx %.3f rx %.3f; retransmits %v", tx, rx, must(st.Counter("netstack", "tcp_retransmits")))
}

func must(v uint64, ok bool) uint64 { return v }

func TestEcho16MiBImpaired(t *testing.T) {
	seed := memio.Seed(t)
	imp := memio.Impairment{Loss: 0.01, Duplicate: 0.01, Reorder: 0.01, Corrupt: 0.01}
	_, cli, pa, pb := setup(t, memio.Options{Seed: seed, AtoB: imp, BtoA: imp}, serverConfig(), clientConfig(), nil)
	stream(t, cli, 16<<20, func(uint64) int { return 1472 }, 300*time.Second)
	st := cli.Stats()
	retr, _ := st.Counter("netstack", "tcp_retransmits")
	csum, _ := st.Counter("netstack", "tcp_checksum_errors")
	t.Logf("client: retransmits %d, checksum errors %d; memio B %v; memio A %v", retr, csum, pb.Stats().Layers, pa.Stats().Layers)
	if retr == 0 {
		t.Errorf("1%% loss and no retransmission: is the impairment on?")
	}
}

func TestRecordBoundaries(t *testing.T) {
	cfg := clientConfig()
	cfg.MaxDatagram = MaxRecord
	scfg := serverConfig()
	scfg.MaxDatagram = MaxRecord
	_, cli, _, _ := setup(t, memio.Options{}, scfg, cfg, nil)
	sizes := []int{0, 1, 2, 7, 8, 9, 100, 1459, 1460, 1461, 1472, 2920, 4000, 9000, 65535, 3, 65534, 0, 0, 1}
	stream(t, cli, 4<<20, func(i uint64) int { return sizes[i%uint64(len(sizes))] }, 120*time.Second)
}

// TestManyConnections: three clients on one server; Queue on the server
// goes to all of them, QueueTo to one.
func TestManyConnections(t *testing.T) {
	// Three clients need three wires to one server: use a tiny switch.
	t.Skip("needs a memio switch; covered over veth")
}

func TestCloseAndReset(t *testing.T) {
	var mu sync.Mutex
	var errs []error
	collect := func(b *Backend) func(context.Context) bool {
		pkts := make([]core.Packet, 8)
		return func(ctx context.Context) bool {
			_, err := b.Rx(pkts)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return false
				}
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			b.Flush()
			wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			b.Wait(wctx)
			cancel()
			return true
		}
	}
	waitErr := func(srv *Backend) *core.PeerError {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			mu.Lock()
			if len(errs) > 0 {
				err := errs[0]
				errs = errs[1:]
				mu.Unlock()
				var pe *core.PeerError
				if !errors.As(err, &pe) {
					t.Fatalf("server error %v is not a PeerError", err)
				}
				return pe
			}
			mu.Unlock()
		}
		t.Fatalf("no peer error reported: %+v", srv.Stats())
		return nil
	}

	t.Run("close", func(t *testing.T) {
		srv, cli, _, _ := setup(t, memio.Options{}, serverConfig(), clientConfig(), collect)
		if err := cli.Close(); err != nil {
			t.Fatal(err)
		}
		pe := waitErr(srv)
		if pe.Reset || pe.Peer.Addr() != cliIP {
			t.Fatalf("got %v, want an orderly close by %v", pe, cliIP)
		}
		if s := srv.Stats(); s.PeerCloses != 1 || s.Resets != 0 || s.Conns != 0 {
			t.Fatalf("server stats %+v", s)
		}
		if cli.Queue([]byte("x")) {
			t.Fatal("Queue after Close succeeded")
		}
		if _, err := cli.Rx(make([]core.Packet, 1)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Rx after Close: %v", err)
		}
	})
	t.Run("reset", func(t *testing.T) {
		srv, cli, _, _ := setup(t, memio.Options{}, serverConfig(), clientConfig(), collect)
		cli.conns[0].ep.Abort() // RST
		cli.Flush()
		pe := waitErr(srv)
		if !pe.Reset {
			t.Fatalf("got %v, want a reset", pe)
		}
		if s := srv.Stats(); s.Resets != 1 || s.Conns != 0 {
			t.Fatalf("server stats %+v", s)
		}
		// The client sees its own aborted connection as gone too.
		_, err := cli.Rx(make([]core.Packet, 1))
		if !isPeer(err) {
			t.Fatalf("client Rx after abort: %v", err)
		}
	})
}
