package tcp

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/dgramio/dgramio/frameio/pcapio"
	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
	"github.com/dgramio/dgramio/internal/wire"
)

// xdpAddr is the address netstack takes on h's subnet: .3 (or .4 for B),
// which the kernel does not hold (see NewXDP).
func xdpAddr(h *testhost.Host, last byte) netip.Addr {
	a := h.Addr.As4()
	a[3] = last
	return netip.AddrFrom4(a)
}

// openXDP opens tcp-xdp inside h's namespace; closed at cleanup.
func openXDP(t *testing.T, h *testhost.Host, cfg core.Config) (core.Backend, error) {
	t.Helper()
	cfg.Kind = core.KindTCPXDP
	cfg.Iface = h.Iface
	if cfg.TCP.Stack == "" {
		cfg.TCP.Stack = testStack
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 20 * time.Second
	}
	var b core.Backend
	err := h.Do(func() error {
		var err error
		b, err = NewXDP(cfg)
		return err
	})
	if err == nil {
		t.Cleanup(func() { b.Close() })
	}
	return b, err
}

// xdpClean checks that h's interface carries no XDP program.
func xdpClean(t *testing.T, h *testhost.Host) {
	t.Helper()
	l, err := h.Link()
	if err != nil {
		t.Fatal(err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached {
		t.Errorf("XDP program left on %s", h.Iface)
	}
}

// kernelEcho listens on addr inside h and echoes the byte stream of every
// connection (records and all) until the listener closes.
func kernelEcho(t *testing.T, h *testhost.Host, addr netip.AddrPort) (net.Listener, *sync.WaitGroup) {
	t.Helper()
	var ln net.Listener
	if err := h.Do(func() error {
		var err error
		ln, err = net.Listen("tcp4", addr.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	return ln, &wg
}

// roundTrips sends n numbered records of size bytes from b, keeping at most
// window in flight, and checks each comes back in order. It sleeps in
// Wait when there is nothing to read, or, on a kind that cannot wait
// (tcp-dpdk), polls again after 20 µs.
func roundTrips(t *testing.T, b core.Backend, n, size, window int) {
	t.Helper()
	payload := make([]byte, size)
	pkts := make([]core.Packet, 64)
	sent, got := 0, 0
	for deadline := time.Now().Add(120 * time.Second); got < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records back; stats %+v", got, n, b.Stats())
		}
		for sent < n && sent-got < window {
			binary.BigEndian.PutUint32(payload, uint32(sent))
			if !b.Queue(payload) {
				break
			}
			sent++
		}
		if err := b.Flush(); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		k, err := b.Rx(pkts)
		if err != nil {
			t.Fatalf("Rx: %v", err)
		}
		for _, pk := range pkts[:k] {
			if len(pk.Data) != size || binary.BigEndian.Uint32(pk.Data) != uint32(got) {
				t.Fatalf("record %d: %d bytes, seq %d", got, len(pk.Data), binary.BigEndian.Uint32(pk.Data))
			}
			got++
		}
		if k == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			err := b.Wait(ctx)
			timedOut := ctx.Err() != nil
			cancel()
			switch {
			case errors.Is(err, core.ErrNotSupported):
				time.Sleep(20 * time.Microsecond)
			case err != nil && !timedOut:
				t.Fatalf("Wait: %v", err)
			}
		}
	}
}

// TestXDPClientKernelServer: tcp-xdp on A connects to a kernel TCP echo
// server on B; 10k records come back in order; after Close the interface
// has no program left and the kernel side saw the connection end.
func TestXDPClientKernelServer(t *testing.T) { engines(t, testXDPClientKernelServer) }

func testXDPClientKernelServer(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	ln, wg := kernelEcho(t, p.B, netip.AddrPortFrom(p.B.Addr, 5000))
	defer ln.Close()
	b, err := openXDP(t, p.A, core.Config{LocalIP: xdpAddr(p.A, 3), Dests: []netip.Addr{p.B.Addr}, Port: 5000})
	testutil.SkipIfNotSupported(t, err)
	roundTrips(t, b, 10000, 100, 64)
	s := b.Stats()
	tx, rx := FramesPerRecord(s)
	t.Logf("mode %q: frames per record tx %.2f rx %.2f; syscalls %d", s.Mode, tx, rx, s.Syscalls)
	if s.TxSent != 10000 || s.RxDelivered != 10000 || s.Resets != 0 {
		t.Fatalf("TxSent %d RxDelivered %d Resets %d", s.TxSent, s.RxDelivered, s.Resets)
	}
	if v, _ := s.Counter(engineLayer(), "arp_requests_sent"); v == 0 {
		t.Errorf("netstack resolved B without ARP?")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Stats after Close: the same set, with what the socket's Close found
	// left, as frames (TCP's losses are records).
	after := b.Stats()
	if after.TxSent != s.TxSent || after.RxDelivered != s.RxDelivered {
		t.Errorf("after Close: TxSent %d RxDelivered %d, want %d and %d", after.TxSent, after.RxDelivered, s.TxSent, s.RxDelivered)
	}
	for _, name := range []string{"tx_unsent_at_close", "rx_unread_at_close", "rx_dropped"} {
		if _, ok := after.Counter("xsk", name); !ok {
			t.Errorf("after Close: no xsk %s in %+v", name, after.Layers)
		}
	}
	if n := after.Lost(); n != 0 {
		t.Errorf("after Close: Lost() %d; no record was lost", n)
	}
	ln.Close()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done: // the kernel's side saw our FIN and ended
	case <-time.After(10 * time.Second):
		t.Fatal("kernel echo connection still open 10s after Close")
	}
	xdpClean(t, p.A)
}

// TestXDPPcap: with Config.Pcap set, tcp-xdp writes every frame it sends
// and receives to <Pcap>-tx.pcap and <Pcap>-rx.pcap (the capture's Close
// flushes them): our SYN and data in one, the kernel's SYN-ACK and echoes
// in the other; and the mode says so.
func TestXDPPcap(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	ln, wg := kernelEcho(t, p.B, netip.AddrPortFrom(p.B.Addr, 5000))
	defer ln.Close()
	prefix := filepath.Join(t.TempDir(), "cap")
	b, err := openXDP(t, p.A, core.Config{LocalIP: xdpAddr(p.A, 3), Dests: []netip.Addr{p.B.Addr}, Port: 5000, Pcap: prefix})
	testutil.SkipIfNotSupported(t, err)
	if m := b.Stats().Mode; !strings.HasSuffix(m, " +pcap") {
		t.Errorf("mode %q does not say +pcap", m)
	}
	roundTrips(t, b, 100, 100, 16)
	st := b.Stats()
	txFrames, _ := st.Counter("link", "tx_frames")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ln.Close()
	wg.Wait()
	count := func(path string, match func(*layers.TCP) bool) (all, matched int) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r, err := pcapgo.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for {
			data, _, err := r.ReadPacketData()
			if err == io.EOF {
				return all, matched
			}
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			all++
			pk := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
			if tcp, ok := pk.Layer(layers.LayerTypeTCP).(*layers.TCP); ok && match(tcp) {
				matched++
			}
		}
	}
	txAll, syn := count(prefix+pcapio.TxSuffix, func(tc *layers.TCP) bool { return tc.SYN && !tc.ACK })
	_, txData := count(prefix+pcapio.TxSuffix, func(tc *layers.TCP) bool { return len(tc.Payload) > 0 })
	_, synack := count(prefix+pcapio.RxSuffix, func(tc *layers.TCP) bool { return tc.SYN && tc.ACK })
	_, rxData := count(prefix+pcapio.RxSuffix, func(tc *layers.TCP) bool { return len(tc.Payload) > 0 })
	t.Logf("tx file: %d frames (%d with data, %d SYN); rx file: %d SYN-ACK, %d with data; link tx_frames %d", txAll, txData, syn, synack, rxData, txFrames)
	if syn != 1 || synack != 1 || txData == 0 || rxData == 0 || uint64(txAll) < txFrames {
		t.Errorf("captures incomplete: tx %d frames (%d SYN, %d data), rx %d SYN-ACK, %d data; link sent %d before Close", txAll, syn, txData, synack, rxData, txFrames)
	}
	xdpClean(t, p.A)
}

// TestXDPPinsProcess: with Config.CPUs, tcp-xdp binds the process's
// threads to CPUs[0] while it is open (netstack's goroutines must run on
// the poller's CPU), and Close gives them the allowed CPUs back.
func TestXDPPinsProcess(t *testing.T) {
	testutil.RequireRoot(t)
	allowed, err := cpu.Allowed()
	if err != nil {
		testutil.Skip(t, "cannot read this process's CPU affinity: "+err.Error())
	}
	c := allowed[len(allowed)-1]
	p := hosttest.New(t, testhost.Options{})
	ln, wg := kernelEcho(t, p.B, netip.AddrPortFrom(p.B.Addr, 5000))
	defer ln.Close()
	b, err := openXDP(t, p.A, core.Config{LocalIP: xdpAddr(p.A, 3), Dests: []netip.Addr{p.B.Addr}, Port: 5000, CPUs: []int{c}})
	testutil.SkipIfNotSupported(t, err)
	roundTrips(t, b, 100, 100, 16)
	for tid, l := range threadCPUs(t) {
		if !slices.Equal(l, []int{c}) {
			t.Errorf("while open: thread %d on %v, want [%d]", tid, l, c)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for tid, l := range threadCPUs(t) {
		if !slices.Equal(l, allowed) {
			t.Errorf("after Close: thread %d on %v, want %v", tid, l, allowed)
		}
	}
	ln.Close()
	wg.Wait()
}

// TestXDPServerKernelClient: a kernel TCP client on B connects to tcp-xdp
// serving on A and sends 10k records; the server echoes each to its sender.
func TestXDPServerKernelClient(t *testing.T) { engines(t, testXDPServerKernelClient) }

func testXDPServerKernelClient(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	addr := xdpAddr(p.A, 3)
	b, err := openXDP(t, p.A, core.Config{Role: core.RoleServer, LocalIP: addr, Port: 5000})
	testutil.SkipIfNotSupported(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	var loop sync.WaitGroup
	loop.Add(1)
	go func() {
		defer loop.Done()
		pkts := make([]core.Packet, 64)
		for ctx.Err() == nil {
			k, err := b.Rx(pkts)
			if err != nil && !isPeer(err) {
				return
			}
			for _, pk := range pkts[:k] {
				for !b.QueueTo(pk.Data, pk.From) && ctx.Err() == nil {
					b.Flush()
				}
			}
			b.Flush()
			if k == 0 {
				wctx, c := context.WithTimeout(ctx, 100*time.Millisecond)
				b.Wait(wctx)
				c()
			}
		}
	}()
	defer func() { cancel(); loop.Wait() }()

	var c net.Conn
	if err := p.B.Do(func() error {
		var err error
		c, err = net.DialTimeout("tcp4", netip.AddrPortFrom(addr, 5000).String(), 20*time.Second)
		return err
	}); err != nil {
		t.Fatalf("kernel client connect: %v", err)
	}
	defer c.Close()
	const n = 10000
	errc := make(chan error, 1)
	go func() {
		rec := make([]byte, HeaderLen+100)
		for i := 0; i < n; i++ {
			binary.BigEndian.PutUint16(rec, 100)
			binary.BigEndian.PutUint32(rec[HeaderLen:], uint32(i))
			if _, err := c.Write(rec); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	c.SetReadDeadline(time.Now().Add(120 * time.Second))
	in := make([]byte, HeaderLen+100)
	for i := 0; i < n; i++ {
		if _, err := io.ReadFull(c, in); err != nil {
			t.Fatalf("record %d back: %v", i, err)
		}
		if l := binary.BigEndian.Uint16(in); l != 100 || binary.BigEndian.Uint32(in[HeaderLen:]) != uint32(i) {
			t.Fatalf("record %d back: length %d seq %d", i, l, binary.BigEndian.Uint32(in[HeaderLen:]))
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	c.Close()
	for deadline := time.Now().Add(10 * time.Second); b.Stats().PeerCloses != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the kernel client's close was not seen: %+v", b.Stats())
		}
	}
	cancel()
	loop.Wait()
	s := b.Stats()
	if s.Accepts != 1 || s.RxDelivered != n || s.TxSent != n || s.Resets != 0 {
		t.Fatalf("Accepts %d RxDelivered %d TxSent %d Resets %d", s.Accepts, s.RxDelivered, s.TxSent, s.Resets)
	}
	// B's kernel found .3 by ARP, and only netstack could answer.
	if v, _ := s.Counter(engineLayer(), "arp_replies_sent"); v == 0 {
		t.Errorf("netstack answered no ARP")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	xdpClean(t, p.A)
}

// TestXDPRefusesKernelAddress: LocalIP held by the kernel's interface is
// refused (ConfigError on LocalIP) before anything is attached.
func TestXDPRefusesKernelAddress(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	_, err := openXDP(t, p.A, core.Config{Role: core.RoleServer, LocalIP: p.A.Addr, Port: 5000})
	var ce *core.ConfigError
	if !errors.As(err, &ce) || ce.Field != "LocalIP" {
		t.Fatalf("%v, want a *core.ConfigError on LocalIP", err)
	}
	xdpClean(t, p.A)
}

// BenchmarkVethOneWay splits one message's trip over veth, tcp-xdp client
// on A to tcp-xdp server on B, into its parts, all driven from this one
// goroutine so that no other poll loop competes for the CPU:
//
//   - send-µs: the client's Flush: netstack's Write (segment built,
//     checksummed, copied into the TX ring) and the kick (sendto).
//   - wire-µs: from the kick's return until the server's Poll finds the
//     frame in its RX ring.
//   - recv-µs: from that Poll until Rx returns the record: netstack's IP
//     and TCP input, the hand-off to its processor goroutine (which also
//     sends the ACK), and the read into the record decoder.
//
// Run as root: go test -run '^$' -bench VethOneWay ./tcp
func BenchmarkVethOneWay(b *testing.B) {
	testutil.RequireRoot(b)
	p := hosttest.New(b, testhost.Options{})
	var srv, cli *Backend
	if err := p.B.Do(func() error {
		be, err := NewXDP(core.Config{Kind: core.KindTCPXDP, Role: core.RoleServer, Iface: p.B.Iface, LocalIP: xdpAddr(p.B, 4), Port: 5000})
		if err == nil {
			srv = be.(*Backend)
		}
		return err
	}); err != nil {
		testutil.SkipIfNotSupported(b, err)
	}
	defer srv.Close()
	pl := startPoller(srv, spinEcho(srv))
	if err := p.A.Do(func() error {
		be, err := NewXDP(core.Config{Kind: core.KindTCPXDP, Iface: p.A.Iface, LocalIP: xdpAddr(p.A, 3),
			Dests: []netip.Addr{xdpAddr(p.B, 4)}, Port: 5000, ConnectTimeout: 20 * time.Second})
		if err == nil {
			cli = be.(*Backend)
		}
		return err
	}); err != nil {
		pl.stop()
		b.Fatal(err)
	}
	defer cli.Close()
	msg := make([]byte, 100)
	pkts := make([]core.Packet, 8)
	for i := 0; i < 200; i++ {
		roundTrip(b, cli, msg, pkts)
	}
	pl.stop() // from here the server is driven by this goroutine
	var send, wire, recv []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cli.Queue(msg)
		t0 := time.Now()
		if err := cli.Flush(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		for srv.st.EP.Poll(32) == 0 {
		}
		t2 := time.Now()
		runtime.Gosched() // as drive does after delivering
		for {
			n, err := srv.Rx(pkts)
			if err != nil {
				b.Fatal(err)
			}
			if n > 0 {
				break
			}
		}
		t3 := time.Now()
		send, wire, recv = append(send, t1.Sub(t0)), append(wire, t2.Sub(t1)), append(recv, t3.Sub(t2))
		srv.Flush() // the ACK
		for k := 0; k < 20; k++ {
			cli.Rx(pkts)
		}
	}
	b.StopTimer()
	for _, s := range []struct {
		name string
		d    []time.Duration
	}{{"send-µs", send}, {"wire-µs", wire}, {"recv-µs", recv}} {
		slices.Sort(s.d)
		b.ReportMetric(float64(s.d[len(s.d)/2].Nanoseconds())/1e3, s.name)
	}
}

// TestXDPOverLossyWire: tcp-xdp on A to a kernel TCP echo server on B
// through a seeded lossy wire (1% loss, duplication, reordering and
// corruption each way, 100 µs delay): 3000 records of 1400 bytes come back
// whole and in order; netstack's checksums catch the corrupted frames.
func TestXDPOverLossyWire(t *testing.T) { engines(t, testXDPOverLossyWire) }

func testXDPOverLossyWire(t *testing.T) {
	testutil.RequireRoot(t)
	w := wire.NewT(t, wire.Options{Loss: 0.01, Dup: 0.01, Reorder: 0.01, Corrupt: 0.01, Delay: 100 * time.Microsecond})
	ln, wg := kernelEcho(t, w.B, netip.AddrPortFrom(w.B.Addr, 5000))
	defer ln.Close()
	b, err := openXDP(t, w.A, core.Config{LocalIP: xdpAddr(w.A, 3), Dests: []netip.Addr{w.B.Addr}, Port: 5000})
	testutil.SkipIfNotSupported(t, err)
	roundTrips(t, b, 3000, 1400, 256)
	s := b.Stats()
	retr, _ := s.Counter(engineLayer(), "tcp_retransmits")
	csum, _ := s.Counter(engineLayer(), "tcp_checksum_errors")
	ipbad, _ := s.Counter(engineLayer(), "ip_malformed")
	t.Logf("retransmits %d, TCP checksum errors %d, IP malformed %d; stats %+v", retr, csum, ipbad, s)
	if retr == 0 {
		t.Errorf("no retransmission through a 1%% lossy wire")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ln.Close()
	wg.Wait()
	xdpClean(t, w.A)
}

// TestXDPServerManyKernelClients: three kernel TCP clients on B, one
// tcp-xdp server on A; each gets back exactly its own records.
func TestXDPServerManyKernelClients(t *testing.T) { engines(t, testXDPServerManyKernelClients) }

func testXDPServerManyKernelClients(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	addr := xdpAddr(p.A, 3)
	b, err := openXDP(t, p.A, core.Config{Role: core.RoleServer, LocalIP: addr, Port: 5000})
	testutil.SkipIfNotSupported(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var loop sync.WaitGroup
	loop.Add(1)
	go func() {
		defer loop.Done()
		f := echo(t, b.(*Backend))
		for ctx.Err() == nil && f(ctx) {
		}
	}()
	defer func() { cancel(); loop.Wait() }()
	const clients, n = 3, 1000
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for k := 0; k < clients; k++ {
		var c net.Conn
		if err := p.B.Do(func() error {
			var err error
			c, err = net.DialTimeout("tcp4", netip.AddrPortFrom(addr, 5000).String(), 20*time.Second)
			return err
		}); err != nil {
			t.Fatalf("client %d: %v", k, err)
		}
		defer c.Close()
		wg.Add(1)
		go func(k int, c net.Conn) {
			defer wg.Done()
			go func() {
				rec := make([]byte, HeaderLen+8)
				for i := 0; i < n; i++ {
					binary.BigEndian.PutUint16(rec, 8)
					binary.BigEndian.PutUint32(rec[HeaderLen:], uint32(k))
					binary.BigEndian.PutUint32(rec[HeaderLen+4:], uint32(i))
					if _, err := c.Write(rec); err != nil {
						return
					}
				}
			}()
			c.SetReadDeadline(time.Now().Add(60 * time.Second))
			in := make([]byte, HeaderLen+8)
			for i := 0; i < n; i++ {
				if _, err := io.ReadFull(c, in); err != nil {
					errs <- err
					return
				}
				if binary.BigEndian.Uint32(in[HeaderLen:]) != uint32(k) || binary.BigEndian.Uint32(in[HeaderLen+4:]) != uint32(i) {
					errs <- errors.New("a record came back to the wrong client or out of order")
					return
				}
			}
		}(k, c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if s := b.Stats(); s.Accepts != clients || s.Conns != clients || s.RxDelivered != clients*n {
		t.Fatalf("server stats %+v", s)
	}
}
