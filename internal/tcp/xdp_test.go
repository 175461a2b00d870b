package tcp

import (
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/pcapio"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
	"github.com/dgramio/dgramio/internal/wire"
)

// openXDP opens tcp-xdp inside h's namespace; closed at cleanup.
func openXDP(t *testing.T, h *testhost.Host, cfg dgramio.Config) (dgramio.Backend, error) {
	t.Helper()
	cfg.Kind = dgramio.KindTCPXDP
	cfg.Iface = h.Iface
	if cfg.TCP.Stack == "" {
		cfg.TCP.Stack = testStack
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 20 * time.Second
	}
	var b dgramio.Backend
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

// xdpServer opens a tcp-xdp server on A of a new pair, at A's .3 port
// 5000 (addr), which it returns with the pair; it skips (fails in CI)
// where AF_XDP is not supported.
func xdpServer(t *testing.T) (p *testhost.Pair, b dgramio.Backend, addr netip.AddrPort) {
	t.Helper()
	testutil.RequireRoot(t)
	p = hosttest.New(t, testhost.Options{})
	addr = netip.AddrPortFrom(peertest.Addr(p.A, 3), 5000)
	b, err := openXDP(t, p.A, dgramio.Config{Role: dgramio.RoleServer, LocalIP: addr.Addr(), Port: addr.Port()})
	testutil.SkipIfNotSupported(t, err)
	return p, b, addr
}

// TestXDPClientKernelServer: tcp-xdp on A connects to a kernel TCP echo
// server on B; 10k records come back in order; after Close the interface
// has no program left and the kernel side saw the connection end.
func TestXDPClientKernelServer(t *testing.T) { engines(t, testXDPClientKernelServer) }

func testXDPClientKernelServer(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	ln, wait := peertest.Echo(t, p.B, netip.AddrPortFrom(p.B.Addr, 5000))
	b, err := openXDP(t, p.A, dgramio.Config{LocalIP: peertest.Addr(p.A, 3), Dests: []netip.AddrPort{netip.AddrPortFrom(p.B.Addr, 5000)}, Port: 5000})
	testutil.SkipIfNotSupported(t, err)
	s := echoedRecords(t, b, 10000)
	tx, rx := FramesPerRecord(s)
	t.Logf("mode %q: frames per record tx %.2f rx %.2f; syscalls %d", s.Mode, tx, rx, s.Syscalls)
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
	peertest.Ended(t, ln, wait) // the kernel's side saw our FIN
	peertest.Clean(t, p.A)
}

// TestXDPPcap: with Config.Pcap set, tcp-xdp writes every frame it sends
// and receives to <Pcap>-tx.pcap and <Pcap>-rx.pcap (the capture's Close
// flushes them): our SYN and data in one, the kernel's SYN-ACK and echoes
// in the other; and the mode says so.
func TestXDPPcap(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	ln, wait := peertest.Echo(t, p.B, netip.AddrPortFrom(p.B.Addr, 5000))
	prefix := filepath.Join(t.TempDir(), "cap")
	b, err := openXDP(t, p.A, dgramio.Config{LocalIP: peertest.Addr(p.A, 3), Dests: []netip.AddrPort{netip.AddrPortFrom(p.B.Addr, 5000)}, Port: 5000, Pcap: prefix})
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
	peertest.Ended(t, ln, wait)
	count := func(path string, match func(*layers.TCP) bool) (all, matched int) {
		recs, err := pcapio.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			pk := gopacket.NewPacket(r.Frame, layers.LayerTypeEthernet, gopacket.Default)
			if tcp, ok := pk.Layer(layers.LayerTypeTCP).(*layers.TCP); ok && match(tcp) {
				matched++
			}
		}
		return len(recs), matched
	}
	txAll, syn := count(prefix+pcapio.TxSuffix, func(tc *layers.TCP) bool { return tc.SYN && !tc.ACK })
	_, txData := count(prefix+pcapio.TxSuffix, func(tc *layers.TCP) bool { return len(tc.Payload) > 0 })
	_, synack := count(prefix+pcapio.RxSuffix, func(tc *layers.TCP) bool { return tc.SYN && tc.ACK })
	_, rxData := count(prefix+pcapio.RxSuffix, func(tc *layers.TCP) bool { return len(tc.Payload) > 0 })
	t.Logf("tx file: %d frames (%d with data, %d SYN); rx file: %d SYN-ACK, %d with data; link tx_frames %d", txAll, txData, syn, synack, rxData, txFrames)
	if syn != 1 || synack != 1 || txData == 0 || rxData == 0 || uint64(txAll) < txFrames {
		t.Errorf("captures incomplete: tx %d frames (%d SYN, %d data), rx %d SYN-ACK, %d data; link sent %d before Close", txAll, syn, txData, synack, rxData, txFrames)
	}
	peertest.Clean(t, p.A)
}

// TestXDPPinsProcess: with Config.CPUs, tcp-xdp binds the process's
// threads to CPUs[0] while it is open (netstack's goroutines must run on
// the poller's CPU), and Close gives them their affinity back.
func TestXDPPinsProcess(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	pinsProcess(t, p, func(cpus []int) (dgramio.Backend, error) {
		return openXDP(t, p.A, dgramio.Config{LocalIP: peertest.Addr(p.A, 3), Dests: []netip.AddrPort{netip.AddrPortFrom(p.B.Addr, 5000)}, Port: 5000, CPUs: cpus})
	})
	peertest.Clean(t, p.A)
}

// TestXDPNativePinsPoller: with Config.CPUs, tcp-xdp on the native engine
// pins the calling thread to CPUs[0], as the raw kinds do, and no other
// thread of the process; Close on that thread unpins it.
func TestXDPNativePinsPoller(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	pinsPoller(t, p.A, func(cpus []int) (dgramio.Backend, error) {
		cfg := dgramio.Config{Kind: dgramio.KindTCPXDP, Role: dgramio.RoleServer, Iface: p.A.Iface,
			LocalIP: peertest.Addr(p.A, 3), Port: 5000, CPUs: cpus}
		cfg.TCP.Stack = dgramio.TCPStackNative
		return NewXDP(cfg)
	})
}

// TestXDPServerKernelClient: a kernel TCP client on B connects to tcp-xdp
// serving on A and sends 10k records; the server echoes each to its sender.
func TestXDPServerKernelClient(t *testing.T) { engines(t, testXDPServerKernelClient) }

func testXDPServerKernelClient(t *testing.T) {
	p, b, addr := xdpServer(t)
	s := serveKernelClient(t, b, p.B, addr, 10000)
	// B's kernel found .3 by ARP, and only netstack could answer.
	if v, _ := s.Counter(engineLayer(), "arp_replies_sent"); v == 0 {
		t.Errorf("netstack answered no ARP")
	}
	peertest.CloseClean(t, b, p.A)
}

// TestXDPRefusesKernelAddress: LocalIP held by the kernel's interface is
// refused (ConfigError on LocalIP) before anything is attached.
func TestXDPRefusesKernelAddress(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	_, err := openXDP(t, p.A, dgramio.Config{Role: dgramio.RoleServer, LocalIP: p.A.Addr, Port: 5000})
	var ce *dgramio.ConfigError
	if !errors.As(err, &ce) || ce.Field != "LocalIP" {
		t.Fatalf("%v, want a *dgramio.ConfigError on LocalIP", err)
	}
	peertest.Clean(t, p.A)
}

// TestXDPOverLossyWire: tcp-xdp on A to a kernel TCP echo server on B
// through a seeded lossy wire (1% loss, duplication, reordering and
// corruption each way, 100 µs delay): 3000 records of 1400 bytes come back
// whole and in order; netstack's checksums catch the corrupted frames.
func TestXDPOverLossyWire(t *testing.T) { engines(t, testXDPOverLossyWire) }

func testXDPOverLossyWire(t *testing.T) {
	testutil.RequireRoot(t)
	w := wire.NewT(t, wire.Options{Loss: 0.01, Dup: 0.01, Reorder: 0.01, Corrupt: 0.01, Delay: 100 * time.Microsecond})
	ln, wait := peertest.Echo(t, w.B, netip.AddrPortFrom(w.B.Addr, 5000))
	b, err := openXDP(t, w.A, dgramio.Config{LocalIP: peertest.Addr(w.A, 3), Dests: []netip.AddrPort{netip.AddrPortFrom(w.B.Addr, 5000)}, Port: 5000})
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
	peertest.Ended(t, ln, wait)
	peertest.Clean(t, w.A)
}

// TestXDPServerManyKernelClients: three kernel TCP clients on B, one
// tcp-xdp server on A; each gets back exactly its own records.
func TestXDPServerManyKernelClients(t *testing.T) { engines(t, testXDPServerManyKernelClients) }

func testXDPServerManyKernelClients(t *testing.T) {
	p, b, addr := xdpServer(t)
	pl := startPoller(b.(*Backend), echo(t, b.(*Backend)))
	defer pl.stop()
	const clients, n = 3, 1000
	var wg sync.WaitGroup
	errs := make([]error, clients)
	for k := range clients {
		c := peertest.Dial(t, p.B, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = peertest.Records(c, uint32(k), n, 8, 60*time.Second)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); s.Accepts != clients || s.Conns != clients || s.RxDelivered != clients*n {
		t.Fatalf("server stats %+v", s)
	}
}
