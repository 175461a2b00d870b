package tcp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/sock/socktest"
)

var (
	srvIP = netip.MustParseAddr("198.18.0.1")
	cliIP = netip.MustParseAddr("198.18.0.2")
)

const testPort = 5000

// testStack is the engine that serverConfig and clientConfig name; the
// tests that run on both engines set it through engines.
var testStack = dgramio.TCPStackNetstack

// engines runs f once per engine (TCP.Stack netstack, then native) as
// subtests, with serverConfig and clientConfig naming that engine.
func engines(t *testing.T, f func(t *testing.T)) {
	for _, s := range []dgramio.TCPStack{dgramio.TCPStackNetstack, dgramio.TCPStackNative} {
		t.Run(string(s), func(t *testing.T) {
			testStack = s
			defer func() { testStack = dgramio.TCPStackNetstack }()
			f(t)
		})
	}
}

// engineLayer is the counter layer of testStack's engine.
func engineLayer() string {
	if testStack == dgramio.TCPStackNative {
		return "native"
	}
	return "netstack"
}

func serverConfig() dgramio.Config {
	c := dgramio.Config{Kind: dgramio.KindTCPXDP, Role: dgramio.RoleServer, Iface: "memio", LocalIP: srvIP, Port: testPort}
	c.TCP.Stack = testStack
	return c
}

func clientConfig() dgramio.Config {
	c := dgramio.Config{Kind: dgramio.KindTCPXDP, Role: dgramio.RoleClient, Iface: "memio", LocalIP: cliIP,
		Dests: []netip.AddrPort{netip.AddrPortFrom(srvIP, testPort)}, Port: testPort, ConnectTimeout: 20 * time.Second}
	c.TCP.Stack = testStack
	return c
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

// echo is a server body: every record goes back to its sender, in order.
// Errors other than peer closes and resets fail the test.
//
// Records QueueTo refuses wait in a backlog of the test's while the echo
// goes on reading: an echo that stopped reading until its answers fit
// could stall for good over a lossy wire. Netstack shrinks its receive
// window to zero when its buffer fills, and the client's ACKs then carry
// a sequence number beyond that window (netstack sends SND.NXT where Linux
// sends the window's edge), so the server drops them whole, ACK field
// included, and its own sends never free room; both ends back off to the
// maximum RTO. (netbench's echo drops what does not fit and keeps reading.)
func echo(t *testing.T, b *Backend) func(ctx context.Context) bool {
	pkts := make([]dgramio.Packet, 64)
	var backlog []dgramio.Packet
	return func(ctx context.Context) bool {
		for len(backlog) > 0 && b.QueueTo(backlog[0].Data, backlog[0].From) == nil {
			backlog[0] = dgramio.Packet{}
			backlog = backlog[1:]
		}
		n, err := b.Rx(pkts)
		if err != nil {
			var pe *dgramio.PeerError
			if errors.Is(err, net.ErrClosed) {
				return false
			}
			if !errors.As(err, &pe) {
				t.Errorf("server Rx: %v", err)
				return false
			}
		}
		for i := 0; i < n; i++ {
			if len(backlog) == 0 && b.QueueTo(pkts[i].Data, pkts[i].From) == nil {
				continue
			}
			backlog = append(backlog, dgramio.Packet{Data: append([]byte(nil), pkts[i].Data...), From: pkts[i].From})
		}
		if err := b.Flush(); err != nil && !isPeer(err) {
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("server Flush: %v", err)
			}
			return false
		}
		if n == 0 && len(backlog) == 0 {
			idle(ctx, b, 50*time.Millisecond)
		}
		return true
	}
}

func isPeer(err error) bool {
	var pe *dgramio.PeerError
	return errors.As(err, &pe)
}

// setup opens a server on port A of a memio pair, polled by body (echo when
// nil), and a client on port B. Both are closed at cleanup, poll loops
// first.
func setup(t *testing.T, mo memio.Options, srvCfg, cliCfg dgramio.Config, body func(*Backend) func(context.Context) bool) (srv, cli *Backend, pa, pb *memio.Port) {
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
	pkts := make([]dgramio.Packet, 64)
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
			if cli.Queue(makeRecord(buf, sent, sz)) != nil {
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

func TestHandshake(t *testing.T) { engines(t, testHandshake) }

func testHandshake(t *testing.T) {
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
	if v, _ := st.Counter(engineLayer(), "tcp_active_opens"); v != 1 {
		t.Errorf("tcp_active_opens = %d", v)
	}
	if v, _ := st.Counter(engineLayer(), "arp_requests_sent"); v != 1 {
		t.Errorf("arp_requests_sent = %d, want 1", v)
	}
}

func TestEcho16MiB(t *testing.T) { engines(t, testEcho16MiB) }

func testEcho16MiB(t *testing.T) {
	_, cli, _, _ := setup(t, memio.Options{}, serverConfig(), clientConfig(), nil)
	stream(t, cli, 16<<20, func(uint64) int { return 1472 }, 120*time.Second)
	st := cli.Stats()
	tx, rx := FramesPerRecord(st)
	t.Logf("frames per record: tx %.3f rx %.3f; retransmits %v", tx, rx, must(st.Counter(engineLayer(), "tcp_retransmits")))
}

func must(v uint64, ok bool) uint64 { return v }

func TestEcho16MiBImpaired(t *testing.T) { engines(t, testEcho16MiBImpaired) }

func testEcho16MiBImpaired(t *testing.T) {
	seed := memio.Seed(t)
	imp := memio.Impairment{Loss: 0.01, Duplicate: 0.01, Reorder: 0.01, Corrupt: 0.01}
	// The wire is impaired from the first record on, not during the
	// handshake: memio corrupts without an FCS to catch it, and an ARP
	// reply with a flipped bit in its sender MAC (ARP has no checksum)
	// sends every SYN to a host that is not there until the entry ages
	// out (seed 1796001312277493776). A real wire's FCS drops that frame.
	_, cli, pa, pb := setup(t, memio.Options{Seed: seed}, serverConfig(), clientConfig(), nil)
	pa.SetImpairment(imp)
	pb.SetImpairment(imp)
	stream(t, cli, 16<<20, func(uint64) int { return 1472 }, 300*time.Second)
	st := cli.Stats()
	retr, _ := st.Counter(engineLayer(), "tcp_retransmits")
	csum, _ := st.Counter(engineLayer(), "tcp_checksum_errors")
	t.Logf("client: retransmits %d, checksum errors %d; memio B %v; memio A %v", retr, csum, pb.Stats().Layers, pa.Stats().Layers)
	if retr == 0 {
		t.Errorf("1%% loss and no retransmission: is the impairment on?")
	}
	// The frames memio lost are counted (impair_lost), but as frames:
	// TCP sent their bytes again, and no record was lost.
	if lost, _ := st.Counter("memio", "impair_lost"); lost == 0 || st.Lost() != 0 {
		t.Errorf("impair_lost %d, Lost() %d: want frames lost and no record", lost, st.Lost())
	}
}

func TestRecordBoundaries(t *testing.T) { engines(t, testRecordBoundaries) }

func testRecordBoundaries(t *testing.T) {
	cfg := clientConfig()
	cfg.MaxDatagram = MaxRecord
	scfg := serverConfig()
	scfg.MaxDatagram = MaxRecord
	_, cli, _, _ := setup(t, memio.Options{}, scfg, cfg, nil)
	sizes := []int{0, 1, 2, 7, 8, 9, 100, 1459, 1460, 1461, 1472, 2920, 4000, 9000, 65535, 3, 65534, 0, 0, 1}
	stream(t, cli, 4<<20, func(i uint64) int { return sizes[i%uint64(len(sizes))] }, 120*time.Second)
}

// TestManyConnections: three clients on one server (through a flooding
// hub). Each gets its own echoes (QueueTo); the server's Queue goes to all
// of them; and when one stops reading, the server's Queue refuses for all
// (all or none): every client ends with the same records.
func TestManyConnections(t *testing.T) { engines(t, testManyConnections) }

func testManyConnections(t *testing.T) {
	const n = 3
	h, bs := newHub(n, memio.Options{})
	srv, err := NewOverFrameIO(serverConfig(), h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p := startPoller(srv, echo(t, srv))
	var clis []*Backend
	for i := 0; i < n; i++ {
		cfg := clientConfig()
		cfg.LocalIP = netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + i)})
		c, err := NewOverFrameIO(cfg, bs[i], Options{})
		if err != nil {
			p.stop()
			t.Fatalf("client %d: %v", i, err)
		}
		defer c.Close()
		clis = append(clis, c)
	}
	for i, c := range clis {
		stream(t, c, 100*(100+i), func(uint64) int { return 100 + i }, 60*time.Second)
	}
	p.stop()
	if s := srv.Stats(); s.Conns != n || s.Accepts != n {
		t.Fatalf("server stats %+v", s)
	}

	// Fan-out with client 2 not reading: its connection backs up, and the
	// server's Queue must then refuse for everyone.
	buf := make([]byte, 1000)
	scratch := make([]byte, 1000)
	pkts := make([]dgramio.Packet, 64)
	got := make([]uint64, n)
	read := func(i int) {
		k, err := clis[i].Rx(pkts)
		if err != nil {
			t.Fatalf("client %d Rx: %v", i, err)
		}
		for j := 0; j < k; j++ {
			checkRecord(t, pkts[j].Data, got[i], len(buf), scratch)
			got[i]++
		}
	}
	var queued uint64
	for deadline := time.Now().Add(60 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatalf("server Queue never refused: queued %d, stats %+v", queued, srv.Stats())
		}
		if srv.Queue(makeRecord(buf, queued, len(buf))) != nil {
			break
		}
		queued++
		if err := srv.Flush(); err != nil {
			t.Fatal(err)
		}
		read(0)
		read(1)
	}
	if s := srv.Stats(); s.TxBackpressure != n {
		t.Fatalf("TxBackpressure = %d, want %d (one per destination)", s.TxBackpressure, n)
	}
	if queued < 100 {
		t.Fatalf("Queue refused after only %d records", queued)
	}
	// Now everyone reads; each must get exactly the queued records.
	for deadline := time.Now().Add(60 * time.Second); got[0] < queued || got[1] < queued || got[2] < queued; {
		if time.Now().After(deadline) {
			t.Fatalf("clients got %v of %d records", got, queued)
		}
		srv.Flush()
		for i := range clis {
			read(i)
			clis[i].Flush()
		}
	}
	time.Sleep(50 * time.Millisecond)
	for i := range clis {
		read(i)
	}
	if got[0] != queued || got[1] != queued || got[2] != queued {
		t.Fatalf("clients got %v records, server queued %d to each", got, queued)
	}
	t.Logf("fan-out: %d records to each of %d clients before back-pressure", queued, n)
}

func TestCloseAndReset(t *testing.T) { engines(t, testCloseAndReset) }

func testCloseAndReset(t *testing.T) {
	var mu sync.Mutex
	var errs []error
	// collect records the ends of connections the server delivers
	// (Config.Events: an EventPeerFIN as a *dgramio.PeerError of Reset false,
	// an EventReset as its Err) and any error of Rx, which must be none.
	collect := func(b *Backend) func(context.Context) bool {
		pkts := make([]dgramio.Packet, 8)
		return func(ctx context.Context) bool {
			n, err := b.Rx(pkts)
			for _, p := range pkts[:n] {
				var end error
				switch p.Event {
				case dgramio.EventPeerFIN:
					end = &dgramio.PeerError{Peer: p.From}
				case dgramio.EventReset:
					end = p.Err
				}
				if end != nil {
					mu.Lock()
					errs = append(errs, end)
					mu.Unlock()
				}
			}
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
	waitErr := func(srv *Backend) *dgramio.PeerError {
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			mu.Lock()
			if len(errs) > 0 {
				err := errs[0]
				errs = errs[1:]
				mu.Unlock()
				var pe *dgramio.PeerError
				if !errors.As(err, &pe) {
					t.Fatalf("server error %v is not a connection's end", err)
				}
				return pe
			}
			mu.Unlock()
		}
		t.Fatalf("no peer error reported: %+v", srv.Stats())
		return nil
	}

	srvCfg, cliCfg := serverConfig(), clientConfig()
	srvCfg.Events, cliCfg.Events = true, true
	t.Run("close", func(t *testing.T) {
		srv, cli, _, _ := setup(t, memio.Options{}, srvCfg, cliCfg, collect)
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
		if err := cli.Queue([]byte("x")); err != dgramio.ErrClosed {
			t.Fatalf("Queue after Close: %v, want dgramio.ErrClosed", err)
		}
		if _, err := cli.Rx(make([]dgramio.Packet, 1)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Rx after Close: %v", err)
		}
	})
	t.Run("reset", func(t *testing.T) {
		srv, cli, _, _ := setup(t, memio.Options{}, srvCfg, cliCfg, collect)
		cli.s.Conn(0).Abort() // RST (the layer removes it at the next call)
		cli.Flush()
		pe := waitErr(srv)
		if !pe.Reset {
			t.Fatalf("got %v, want a reset", pe)
		}
		if s := srv.Stats(); s.Resets != 1 || s.Conns != 0 {
			t.Fatalf("server stats %+v", s)
		}
		// The client sees its own aborted connection as gone too: a
		// reset (after its EventOpened), no error.
		var evs []dgramio.Event
		pkts := make([]dgramio.Packet, 4)
		for range 10 {
			n, err := cli.Rx(pkts)
			if err != nil {
				t.Fatalf("client Rx after abort: %v", err)
			}
			for _, p := range pkts[:n] {
				evs = append(evs, p.Event)
			}
		}
		if fmt.Sprint(evs) != "[opened reset ended]" {
			t.Fatalf("client events after abort: %v, want [opened reset ended]", evs)
		}
	})
}

// pausedServer is the server of the back-pressure tests: while reading is
// false its poll loop only keeps its stack running (Flush), otherwise it
// reads 1000-byte records, counts them in got and stores in bad the first
// that is not makeRecord's next.
type pausedServer struct {
	reading atomic.Bool
	got     atomic.Uint64
	bad     atomic.Value
}

// startPaused sets up a pausedServer (not reading yet) and a client whose
// TCP.SendStall is stall, and returns both. With flush the server flushes
// after each read.
func startPaused(t *testing.T, stall time.Duration, flush bool) (*pausedServer, *Backend) {
	p := &pausedServer{}
	ccfg := clientConfig()
	ccfg.TCP.SendStall = stall
	ccfg.Events = true // its stalls come as EventStalled
	_, cli, _, _ := setup(t, memio.Options{}, serverConfig(), ccfg, p.body(flush))
	return p, cli
}

// body is the server's poll loop. It sleeps in Wait when Rx finds nothing.
func (p *pausedServer) body(flush bool) func(*Backend) func(context.Context) bool {
	reading, got, bad := &p.reading, &p.got, &p.bad
	return func(b *Backend) func(context.Context) bool {
		pkts := make([]dgramio.Packet, 64)
		scratch := make([]byte, 1000)
		return func(ctx context.Context) bool {
			if !reading.Load() {
				if err := b.Flush(); errors.Is(err, net.ErrClosed) {
					return false
				}
				time.Sleep(time.Millisecond)
				return true
			}
			n, err := b.Rx(pkts)
			if errors.Is(err, net.ErrClosed) {
				return false
			}
			for i := 0; i < n; i++ {
				want := makeRecord(scratch, got.Load(), 1000)
				if string(pkts[i].Data) != string(want) {
					bad.Store(fmt.Sprintf("record %d differs", got.Load()))
				}
				got.Add(1)
			}
			if flush {
				b.Flush()
			}
			if n == 0 {
				wctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
				b.Wait(wctx)
				cancel()
			}
			return true
		}
	}
}

// TestBackpressure: a server that keeps its stack running but stops
// reading. The client's Queue turns false (nothing lost, nothing cut), its
// Rx delivers an EventStalled (Err matching ErrSendStall) after
// TCP.SendStall, never an error of Flush or Rx, and when the server reads
// again every record arrives, in order.
func TestBackpressure(t *testing.T) { engines(t, testBackpressure) }

func testBackpressure(t *testing.T) {
	const sendStall = 300 * time.Millisecond
	srv, cli := startPaused(t, sendStall, true)
	reading, got, bad := &srv.reading, &srv.got, &srv.bad
	buf := make([]byte, 1000)
	var sent uint64
	var stall error
	start := time.Now()
	pkts := make([]dgramio.Packet, 16)
	for deadline := start.Add(60 * time.Second); stall == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("no stall reported; sent %d, stats %+v", sent, cli.Stats())
		}
		for cli.Queue(makeRecord(buf, sent, 1000)) == nil {
			sent++
		}
		if err := cli.Flush(); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		n, err := cli.Rx(pkts)
		if err != nil {
			t.Fatalf("Rx: %v", err)
		}
		for _, p := range pkts[:n] {
			if p.Event != dgramio.EventStalled {
				continue
			}
			var se *SendStallError
			if !errors.Is(p.Err, ErrSendStall) || !errors.As(p.Err, &se) || se.Peer.Addr() != srvIP || se.Stalled < sendStall || p.From != se.Peer {
				t.Fatalf("EventStalled of %v: %v", p.From, p.Err)
			}
			stall = p.Err
		}
		time.Sleep(time.Millisecond)
	}
	if v := sendStalls(cli); v != 1 {
		t.Errorf("send_stalls %d, want 1", v)
	}
	st := cli.Stats()
	t.Logf("stalled after %v with %d records accepted; %v", time.Since(start).Round(time.Millisecond), sent, stall)
	if st.TxBackpressure == 0 {
		t.Errorf("no back-pressure counted: %+v", st)
	}
	// The window opened nothing more while the server did not read: the
	// server's netstack holds at most its receive buffer.
	if got.Load() != 0 {
		t.Fatalf("server read %d records while not reading", got.Load())
	}
	reading.Store(true)
	for deadline := time.Now().Add(60 * time.Second); got.Load() < sent; {
		if time.Now().After(deadline) {
			t.Fatalf("server got %d of %d records; client %+v", got.Load(), sent, cli.Stats())
		}
		if err := cli.Flush(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	if v := bad.Load(); v != nil {
		t.Fatal(v)
	}
	if st := cli.Stats(); st.TxSent != sent || st.TxDropped != 0 {
		t.Fatalf("client TxSent %d TxDropped %d, want %d and 0", st.TxSent, st.TxDropped, sent)
	}
}

// noWait hides memio's Wait: a FrameIO that cannot sleep, as DPDK's.
type noWait struct{ frameio.FrameIO }

// TestNoWaiter: over a FrameIO that cannot sleep the client still connects
// (New polls), records flow, and Wait says it is not supported.
func TestNoWaiter(t *testing.T) { engines(t, testNoWaiter) }

func testNoWaiter(t *testing.T) {
	pa, pb := memio.NewPair(memio.Options{})
	srv, err := NewOverFrameIO(serverConfig(), noWait{pa}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Wait(context.Background()); !errors.Is(err, dgramio.ErrNotSupported) {
		t.Fatalf("Wait without a Waiter: %v", err)
	}
	p := startPoller(srv, echo(t, srv))
	defer p.stop()
	cli, err := NewOverFrameIO(clientConfig(), noWait{pb}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	stream(t, cli, 100<<10, func(uint64) int { return 100 }, 60*time.Second)
}

// TestCloseDuringRx: Close from another goroutine while the poll loop is in
// Rx or Wait makes them return net.ErrClosed, many times over, never a
// crash (run with -race).
func TestCloseDuringRx(t *testing.T) { engines(t, testCloseDuringRx) }

func testCloseDuringRx(t *testing.T) {
	for i := 0; i < 20; i++ {
		_, cli, _, _ := setup(t, memio.Options{}, serverConfig(), clientConfig(), nil)
		done := make(chan error, 1)
		go func() {
			pkts := make([]dgramio.Packet, 16)
			buf := make([]byte, 200)
			for {
				cli.Queue(buf)
				if err := cli.Flush(); errors.Is(err, net.ErrClosed) {
					done <- nil
					return
				}
				if _, err := cli.Rx(pkts); err != nil {
					if errors.Is(err, net.ErrClosed) {
						done <- nil
					} else {
						done <- err
					}
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				err := cli.Wait(ctx)
				cancel()
				if errors.Is(err, net.ErrClosed) {
					done <- nil
					return
				}
			}
		}()
		time.Sleep(time.Duration(i) * time.Millisecond)
		if err := cli.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("poll loop ended with %v, want net.ErrClosed", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("poll loop did not end after Close")
		}
		if err := cli.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}
}

// TestConnectErrors: a refused connection and one nobody answers fail New
// with ECONNREFUSED and ETIMEDOUT, releasing the FrameIO.
func TestConnectErrors(t *testing.T) { engines(t, testConnectErrors) }

func testConnectErrors(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		pa, pb := memio.NewPair(memio.Options{})
		scfg := serverConfig()
		scfg.Port = testPort + 1 // the stack answers RST on testPort
		srv, err := NewOverFrameIO(scfg, pa, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		p := startPoller(srv, echo(t, srv))
		defer p.stop()
		_, err = NewOverFrameIO(clientConfig(), pb, Options{})
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("connect to a closed port: %v, want ECONNREFUSED", err)
		}
		if pb.Kick() == nil {
			t.Errorf("the FrameIO was not released")
		}
	})
	t.Run("timeout", func(t *testing.T) {
		pa, pb := memio.NewPair(memio.Options{})
		defer pa.Close()
		cfg := clientConfig()
		cfg.ConnectTimeout = 300 * time.Millisecond
		_, err := NewOverFrameIO(cfg, pb, Options{})
		if !errors.Is(err, syscall.ETIMEDOUT) {
			t.Fatalf("connect to nobody: %v, want ETIMEDOUT", err)
		}
	})
}

// TestBackpressureClearsWithoutFlush: a client whose buffers filled while
// the server did not read, and which then only calls Rx (an open-loop
// sender whose Queue is refused has nothing to Flush), still gets its
// flushed records through once the server reads, and its Queue takes
// records again. Records queued after the last Flush wait for the next.
// (netbench's tcp-xdp cells stalled for good this way: both ends held
// released bytes that only a Flush handed to netstack.)
func TestBackpressureClearsWithoutFlush(t *testing.T) { engines(t, testBackpressureClearsWithoutFlush) }

func testBackpressureClearsWithoutFlush(t *testing.T) {
	srv, cli := startPaused(t, 100*time.Millisecond, false)
	reading, got, bad := &srv.reading, &srv.got, &srv.bad
	buf := make([]byte, 1000)
	var sent uint64
	for deadline, stalled := time.Now().Add(60*time.Second), false; !stalled; {
		if time.Now().After(deadline) {
			t.Fatalf("no stall reported; sent %d, stats %+v", sent, cli.Stats())
		}
		for cli.Queue(makeRecord(buf, sent, 1000)) == nil {
			sent++
		}
		if err := cli.Flush(); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		stalled = sendStalls(cli) > 0
		time.Sleep(time.Millisecond)
	}
	if cli.Queue(makeRecord(buf, sent, 1000)) != dgramio.ErrBackPressure {
		t.Fatal("Queue took a record with the staging full")
	}
	// Every record accepted so far went through a Flush. From here on the
	// client only receives.
	reading.Store(true)
	pkts := make([]dgramio.Packet, 16)
	rxOnce := func() {
		t.Helper()
		if _, err := cli.Rx(pkts); err != nil {
			t.Fatalf("client Rx: %v", err)
		}
		wctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		cli.Wait(wctx)
		cancel()
	}
	rxUntil := func(what string, done func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !done(); {
			if time.Now().After(deadline) {
				t.Fatalf("%s: server got %d of %d records; client %+v", what, got.Load(), sent, cli.Stats())
			}
			rxOnce()
		}
	}
	rxUntil("without Flush", func() bool { return got.Load() == sent })
	if cli.Queue(makeRecord(buf, sent, 1000)) != nil {
		t.Fatalf("Queue still refused with the stream drained: %+v", cli.Stats())
	}
	sent++
	// Not flushed: Rx must not send it.
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); {
		rxOnce()
	}
	if g := got.Load(); g != sent-1 {
		t.Fatalf("server got %d records, want %d: Rx sent a record that was never flushed", g, sent-1)
	}
	if err := cli.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	rxUntil("after Flush", func() bool { return got.Load() == sent })
	if v := bad.Load(); v != nil {
		t.Fatal(v)
	}
	if st := cli.Stats(); st.TxSent != sent || st.TxDropped != 0 {
		t.Fatalf("client TxSent %d TxDropped %d, want %d and 0", st.TxSent, st.TxDropped, sent)
	}
}

// dropFirstARP loses the first ARP request its port sends.
type dropFirstARP struct {
	*memio.Port
	dropped atomic.Bool
}

func (d *dropFirstARP) TxFrame(frame []byte) bool {
	if len(frame) >= 22 && frame[12] == 0x08 && frame[13] == 0x06 && frame[21] == 1 && !d.dropped.Swap(true) {
		return true
	}
	return d.Port.TxFrame(frame)
}

// TestLostARPKeepsRTO: the client's first ARP request is lost, so its
// peer is resolved a second later; the SYN is made only then (New resolves
// before it connects), so the handshake's round trip is the wire's, not
// the ARP backoff: the RTO stays far below the 3 s that a SYN kept waiting
// for ARP inside netstack, with its first timestamp, would have set.
func TestLostARPKeepsRTO(t *testing.T) {
	pa, pb := memio.NewPair(memio.Options{})
	srv, err := NewOverFrameIO(serverConfig(), pa, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := startPoller(srv, echo(t, srv))
	defer func() { p.stop(); srv.Close() }()
	fio := &dropFirstARP{Port: pb}
	cli, err := NewOverFrameIO(clientConfig(), fio, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if !fio.dropped.Load() {
		t.Fatal("no ARP request was sent")
	}
	var info tcpip.TCPInfoOption
	if terr := cli.conn(0).ep.GetSockOpt(&info); terr != nil {
		t.Fatal(terr)
	}
	t.Logf("after a lost ARP request: RTT %v, RTO %v", info.RTT, info.RTO)
	if info.RTO >= 2*time.Second {
		t.Errorf("RTO %v: the ARP wait was taken for the handshake's round trip", info.RTO)
	}
	stream(t, cli, 64<<10, func(uint64) int { return 1000 }, 30*time.Second)
}

// conn returns b's connection i (stream.Layer.Conn).
func (b *Backend) conn(i int) *conn { return b.s.Conn(i).(*conn) }

// TestLingerCountsUnacked: records the engine took whose first byte the
// peer never acknowledged when Close's linger ran out are counted in
// TxDropped and not in TxSent, on either engine (the connection is then
// reset: RFC 9293 §3.10.4, ABORT drops what was not sent). The wire to the
// server dies after it acknowledged (and answered) the first records, so
// those stay sent and only the later ones are lost.
func TestLingerCountsUnacked(t *testing.T) { engines(t, testLingerCountsUnacked) }

// echoPair is an echo server (echo on its own poller) and a client with
// opts over a clean memio pair. stop stops the echo and closes the server
// (also at cleanup, with the client); the test closes the client when it
// wants to.
func echoPair(t *testing.T, opts Options) (srv, cli *Backend, pb *memio.Port, stop func()) {
	t.Helper()
	return echoPairFraming(t, opts, dgramio.FramingU16)
}

// echoPairFraming is echoPair with both ends in framing f.
func echoPairFraming(t *testing.T, opts Options, f dgramio.Framing) (srv, cli *Backend, pb *memio.Port, stop func()) {
	t.Helper()
	pa, pb := memio.NewPair(memio.Options{})
	sc, cc := serverConfig(), clientConfig()
	sc.Framing, cc.Framing = f, f
	srv, err := NewOverFrameIO(sc, pa, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := startPoller(srv, echo(t, srv))
	stop = func() { p.stop(); srv.Close() }
	cli, err = NewOverFrameIO(cc, pb, opts)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close(); stop() })
	return srv, cli, pb, stop
}

func testLingerCountsUnacked(t *testing.T) { lingerCountsUnacked(t, dgramio.FramingU16) }

// TestLingerCountsUnackedRaw: TestLingerCountsUnacked in raw framing
// (dgramio.FramingRaw), where a "record" is one QueueTo's append: the
// appends whose first byte the peer never acknowledged move from TxSent to
// TxDropped at Close, on either engine (RFC 9293 §3.10.4: the reset of
// ABORT drops them).
func TestLingerCountsUnackedRaw(t *testing.T) {
	engines(t, func(t *testing.T) { lingerCountsUnacked(t, dgramio.FramingRaw) })
}

// lingerCountsUnacked is TestLingerCountsUnacked's body in framing f: the
// first messages are echoed in full (counted in bytes, which both framings
// deliver alike), then the wire dies.
func lingerCountsUnacked(t *testing.T, f dgramio.Framing) {
	_, cli, pb, _ := echoPairFraming(t, Options{Linger: 50 * time.Millisecond}, f)
	const acked, lost, size = 5, 10, 100
	msg := make([]byte, size)
	for i := 0; i < acked; i++ {
		if cli.Queue(msg) != nil {
			t.Fatalf("Queue %d refused", i)
		}
	}
	if err := cli.Flush(); err != nil {
		t.Fatal(err)
	}
	pkts := make([]dgramio.Packet, 16)
	got := 0
	for deadline := time.Now().Add(20 * time.Second); got < acked*size; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d bytes echoed", got, acked*size)
		}
		n, _ := cli.Rx(pkts)
		for _, p := range pkts[:n] {
			got += len(p.Data)
		}
		if n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	pb.SetImpairment(memio.Impairment{Loss: 1})
	for i := 0; i < lost; i++ {
		if cli.Queue(msg) != nil {
			t.Fatalf("Queue %d refused", i)
		}
	}
	if err := cli.Flush(); err != nil {
		t.Fatal(err)
	}
	if s := cli.Stats(); s.TxSent != acked+lost {
		t.Fatalf("before Close: TxSent %d, want %d (taken by the engine)", s.TxSent, acked+lost)
	}
	cli.Close()
	if s := cli.Stats(); s.TxSent != acked || s.TxDropped != lost {
		t.Errorf("after Close: TxSent %d TxDropped %d, want %d and %d", s.TxSent, s.TxDropped, acked, lost)
	}
}

// TestPeerResetCountsUnacked: records the engine took whose first byte
// the peer never acknowledged when the peer resets the connection (RFC
// 9293 §3.10.7.3: a RST in window ends it; what was queued is lost) move
// from TxSent to TxDropped, on either engine. The client's frames are
// dropped after the first answers, so the server's Close finds its last
// answers unacknowledged and resets.
func TestPeerResetCountsUnacked(t *testing.T) { engines(t, testPeerResetCountsUnacked) }

func testPeerResetCountsUnacked(t *testing.T) {
	_, cli, pb, stop := echoPair(t, Options{})
	const acked, lost = 5, 10
	msg, pkts := make([]byte, 100), make([]dgramio.Packet, 16)
	for i := 0; i < acked; i++ {
		roundTrip(t, cli, msg, pkts)
	}
	pb.SetImpairment(memio.Impairment{Loss: 1})
	for i := 0; i < lost; i++ {
		if cli.Queue(msg) != nil {
			t.Fatalf("Queue %d refused", i)
		}
	}
	if err := cli.Flush(); err != nil {
		t.Fatal(err)
	}
	stop() // the server lingers, then resets what its peer never acknowledged
	for deadline := time.Now().Add(30 * time.Second); cli.Stats().Conns != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the connection did not end: %+v", cli.Stats())
		}
		if n, _ := cli.Rx(pkts); n == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if s := cli.Stats(); s.TxSent != acked || s.TxDropped != lost {
		t.Errorf("after the peer's reset: TxSent %d TxDropped %d, want %d and %d", s.TxSent, s.TxDropped, acked, lost)
	}
}

// TestLingerAcked: Close lingers until the records and the FIN are
// acknowledged: nothing is counted lost on a clean wire, on either engine.
func TestLingerAcked(t *testing.T) { engines(t, testLingerAcked) }

func testLingerAcked(t *testing.T) {
	_, cli, _, _ := setup(t, memio.Options{}, serverConfig(), clientConfig(), func(b *Backend) func(context.Context) bool { return sleepEcho(b) })
	msg := make([]byte, 100)
	for i := 0; i < 10; i++ {
		cli.Queue(msg)
	}
	if err := cli.Flush(); err != nil {
		t.Fatal(err)
	}
	cli.Close()
	if s := cli.Stats(); s.TxSent != 10 || s.TxDropped != 0 {
		t.Errorf("after Close: TxSent %d TxDropped %d, want 10 and 0", s.TxSent, s.TxDropped)
	}
}

// TestCloseCountsAnswersInFlight: a client that closes while its server
// still answers reads on after its FIN (RFC 9293 §3.6: FIN-WAIT-1/2 go on
// receiving) for the linger, and counts what it read and never delivered
// in "stream" "rx_closed"; the server counts what the client never
// acknowledged as dropped. Each end's sent records are the other end's
// delivered, closed or cut ones, on either engine.
func TestCloseCountsAnswersInFlight(t *testing.T) { engines(t, testCloseCountsAnswersInFlight) }

func testCloseCountsAnswersInFlight(t *testing.T) {
	srv, cli, _, stop := echoPair(t, Options{})
	msg := make([]byte, 100)
	for i := 0; i < 2000; i++ {
		for cli.Queue(msg) != nil {
			if err := cli.Flush(); err != nil {
				t.Fatal(err)
			}
			cli.Rx(make([]dgramio.Packet, 64)) // answers, delivered
		}
	}
	if err := cli.Flush(); err != nil {
		t.Fatal(err)
	}
	cli.Close()
	stop()
	cs, ss := cli.Stats(), srv.Stats()
	got := func(s dgramio.Stats) uint64 {
		closed, _ := s.Counter("stream", "rx_closed")
		return s.RxDelivered + closed + s.RxMalformed
	}
	if got(cs) != ss.TxSent {
		t.Errorf("answers: the server counts %d sent (%d dropped); the client %d delivered, %d in all",
			ss.TxSent, ss.TxDropped, cs.RxDelivered, got(cs))
	}
	if got(ss) != cs.TxSent {
		t.Errorf("requests: the client counts %d sent (%d dropped); the server %d delivered, %d in all",
			cs.TxSent, cs.TxDropped, ss.RxDelivered, got(ss))
	}
}

// TestWaitReturnsForDecodedRecords: records an Rx decoded and did not
// return (more than its batch) make Wait return at once, on both engines:
// no frame will come to wake it for them.
func TestWaitReturnsForDecodedRecords(t *testing.T) { engines(t, testWaitReturnsForDecodedRecords) }

func testWaitReturnsForDecodedRecords(t *testing.T) {
	accepted := make(chan struct{})
	// The server's loop accepts the client and stops: the test drives it.
	acceptOnly := func(b *Backend) func(context.Context) bool {
		return func(context.Context) bool {
			b.Flush()
			if b.s.Len() > 0 {
				close(accepted)
				return false
			}
			time.Sleep(100 * time.Microsecond)
			return true
		}
	}
	srv, cli, _, _ := setup(t, memio.Options{}, serverConfig(), clientConfig(), acceptOnly)
	<-accepted
	for _, s := range []string{"a", "b", "c"} {
		if cli.Queue([]byte(s)) != nil {
			t.Fatal("Queue refused")
		}
	}
	if err := cli.Flush(); err != nil {
		t.Fatal(err)
	}
	// Between the Rx calls the client's engine answers ACKs and window updates.
	got := socktest.WaitOneByOne(t, srv, 3, func() { cli.Flush() })
	if fmt.Sprint(got) != "[a b c]" {
		t.Fatalf("records %q", got)
	}
}

// sendStalls is b's count of send stalls (layer "stream" "send_stalls").
func sendStalls(b dgramio.Backend) uint64 {
	st := b.Stats()
	v, _ := st.Counter("stream", "send_stalls")
	return v
}
