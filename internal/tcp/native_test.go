package tcp

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/arp"
	"github.com/dgramio/dgramio/internal/testutil"
)

// nativeConfigs are serverConfig and clientConfig on the native engine.
func nativeConfigs() (srv, cli dgramio.Config) {
	srv, cli = serverConfig(), clientConfig()
	srv.TCP.Stack, cli.TCP.Stack = dgramio.TCPStackNative, dgramio.TCPStackNative
	return srv, cli
}

// TestNativeNoGoroutines: the native engine runs nothing behind the poll
// loop: runtime.NumGoroutine is the same before New and after Close, and
// New..Close of both ends (with traffic) starts none.
func TestNativeNoGoroutines(t *testing.T) {
	scfg, ccfg := nativeConfigs()
	pa, pb := memio.NewPair(memio.Options{})
	before := settledGoroutines(t)
	srv, err := NewOverFrameIO(scfg, pa, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := startPoller(srv, spinEcho(srv))
	cli, err := NewOverFrameIO(ccfg, pb, Options{})
	if err != nil {
		p.stop()
		srv.Close()
		t.Fatal(err)
	}
	// The poller is the test's one goroutine.
	if n := runtime.NumGoroutine(); n != before+1 {
		t.Errorf("goroutines with both backends open: %d, want %d (the test's poller only)", n, before+1)
	}
	msg, pkts := make([]byte, 100), make([]dgramio.Packet, 8)
	for i := 0; i < 100; i++ {
		roundTrip(t, cli, msg, pkts)
	}
	cli.Close()
	p.stop()
	srv.Close()
	// A leaked goroutine stays; one of the runtime's that runs now and
	// then (finalizers of earlier tests' files) comes and goes.
	if !testutil.Eventually(5*time.Second, func() bool { return runtime.NumGoroutine() == before }) {
		t.Errorf("goroutines after Close: %d, before New: %d", runtime.NumGoroutine(), before)
	}
}

// settledGoroutines returns runtime.NumGoroutine once it has not changed
// for 50 ms: the goroutines of earlier tests (netstack's, which stop
// asynchronously after its Close) have then ended and no longer move the
// count under a test that compares it.
func settledGoroutines(t *testing.T) int {
	t.Helper()
	n, since := runtime.NumGoroutine(), time.Now()
	if !testutil.Eventually(10*time.Second, func() bool {
		if m := runtime.NumGoroutine(); m != n {
			n, since = m, time.Now()
		}
		return time.Since(since) >= 50*time.Millisecond
	}) {
		t.Fatalf("the goroutine count did not settle within 10 s (now %d)", n)
	}
	return n
}

// TestNativeDelayedACKFrames: RFC 1122 §4.2.3.2. With delayed ACK (the
// native default under tcp-xdp), a request and its answer cost about two
// segments: the answer carries the ACK of the request, the next request
// the ACK of the answer. Without it, each side also sends a pure ACK.
func TestNativeDelayedACKFrames(t *testing.T) {
	for _, tc := range []struct {
		name     string
		delack   time.Duration
		min, max float64
	}{
		{"default", 0, 1.9, 2.2},
		{"off", -1, 2.9, 4.1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scfg, ccfg := nativeConfigs()
			scfg.TCP.DelayedACK, ccfg.TCP.DelayedACK = tc.delack, tc.delack
			srv, cli, _, _ := setup(t, memio.Options{}, scfg, ccfg, func(b *Backend) func(context.Context) bool { return spinEcho(b) })
			msg, pkts := make([]byte, 100), make([]dgramio.Packet, 8)
			for i := 0; i < 10; i++ {
				roundTrip(t, cli, msg, pkts)
			}
			seg := func() uint64 {
				cs, ss := cli.Stats(), srv.Stats()
				a, _ := cs.Counter("native", "tcp_segments_out")
				b, _ := ss.Counter("native", "tcp_segments_out")
				return a + b
			}
			const rounds = 500
			s0 := seg()
			for i := 0; i < rounds; i++ {
				roundTrip(t, cli, msg, pkts)
			}
			got := float64(seg()-s0) / rounds
			t.Logf("delayed ACK %v: %.2f segments per request/answer", TuningFromConfig(ccfg).DelayedACK, got)
			if got < tc.min || got > tc.max {
				t.Errorf("%.2f segments per request/answer, want %.1f..%.1f", got, tc.min, tc.max)
			}
		})
	}
}

// TestTuningPerEngine: a knob one engine cannot honour is a
// *dgramio.ConfigError naming it, never ignored.
func TestTuningPerEngine(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stack dgramio.TCPStack
		set   func(*dgramio.Config)
		field string
	}{
		{"RACK on native", dgramio.TCPStackNative, func(c *dgramio.Config) { c.TCP.RACK = true }, "TCP.RACK"},
		{"DelayedACK on netstack", dgramio.TCPStackNetstack, func(c *dgramio.Config) { c.TCP.DelayedACK = time.Millisecond }, "TCP.DelayedACK"},
		{"MaxConns on netstack", dgramio.TCPStackNetstack, func(c *dgramio.Config) { c.TCP.MaxConns = 10 }, "TCP.MaxConns"},
		{"DelayedACK above MinRTO", dgramio.TCPStackNative, func(c *dgramio.Config) {
			c.TCP.DelayedACK, c.TCP.MinRTO = 30*time.Millisecond, 20*time.Millisecond
		}, "TCP.DelayedACK"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := clientConfig()
			cfg.TCP.Stack = tc.stack
			tc.set(&cfg)
			pa, pb := memio.NewPair(memio.Options{})
			defer pb.Close()
			_, err := NewOverFrameIO(cfg, pa, Options{})
			var ce *dgramio.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("NewOverFrameIO = %v, want a ConfigError on %s", err, tc.field)
			}
		})
	}
	// The native engine's default delayed ACK, below MinRTO; none on
	// netstack.
	cfg := clientConfig()
	if d := TuningFromConfig(cfg).DelayedACK; d != 0 {
		t.Errorf("netstack DelayedACK %v", d)
	}
	cfg.TCP.Stack = dgramio.TCPStackNative
	if d := TuningFromConfig(cfg).DelayedACK; d != DefaultDelayedACK {
		t.Errorf("native DelayedACK %v, want %v", d, DefaultDelayedACK)
	}
}

// countingClock is the system clock, counting its reads (from the one
// goroutine of the backend that owns it).
type countingClock struct{ reads int }

func (c *countingClock) Now() time.Time { c.reads++; return time.Now() }

// TestNativeClockOncePerCall: each Rx and each Flush of the Backend reads
// the engine's clock once, however many engine calls it makes (Poll's
// batches, then the flush).
func TestNativeClockOncePerCall(t *testing.T) {
	scfg, ccfg := nativeConfigs()
	pa, pb := memio.NewPair(memio.Options{})
	srv, err := NewOverFrameIO(scfg, pa, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := startPoller(srv, spinEcho(srv))
	defer func() { p.stop(); srv.Close() }()
	clk := &countingClock{}
	cli, err := NewOverFrameIO(ccfg, pb, Options{NativeClock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	msg, pkts := make([]byte, 100), make([]dgramio.Packet, 8)
	for i := 0; i < 20; i++ {
		roundTrip(t, cli, msg, pkts)
	}
	for i := 0; i < 20; i++ {
		cli.Queue(msg)
		clk.reads = 0
		if err := cli.Flush(); err != nil {
			t.Fatal(err)
		}
		if clk.reads != 1 {
			t.Fatalf("Flush read the clock %d times, want 1", clk.reads)
		}
		for got := 0; got == 0; {
			clk.reads = 0
			n, err := cli.Rx(pkts)
			if err != nil {
				t.Fatal(err)
			}
			if clk.reads != 1 {
				t.Fatalf("Rx read the clock %d times, want 1", clk.reads)
			}
			got = n
		}
	}
}

// TestNativeARPShare: a group's ARPShare reaches every queue's engine
// (native.Options.ARPShare, the one share of the group), so that an ARP
// reply learnt on one queue is known to all (native's TestNeighbourShareGroup
// shows the sharing itself).
func TestNativeARPShare(t *testing.T) {
	_, ccfg := nativeConfigs()
	var share ARPShare
	tu := TuningFromConfig(ccfg)
	if got := nativeOptions(ccfg, tu, Options{ARPShare: &share}).ARPShare; got != &share.nat {
		t.Fatalf("the queue's engine shares ARP through %p, want the group's %p", got, &share.nat)
	}
	if got := nativeOptions(ccfg, tu, Options{}).ARPShare; got != nil {
		t.Errorf("a single backend's engine has an ARPShare %p", got)
	}
}

// router is the far end of a memio pair acting as a host's gateway: it
// answers ARP for its own address only and records what asks and what
// is sent to it.
type router struct {
	ip  netip.Addr
	mac net.HardwareAddr

	mu      sync.Mutex
	asked   []netip.Addr // ARP targets requested
	synMACs []string     // Ethernet destinations of TCP segments
}

func (r *router) serve(ctx context.Context, p *memio.Port) {
	for ctx.Err() == nil {
		p.RxFrames(8, func(f []byte) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if arp.IsARP(f) {
				m, err := arp.ParseARP(f)
				if err != nil || m.Op != arp.OpRequest {
					return
				}
				r.asked = append(r.asked, m.TargetIP)
				if m.TargetIP == r.ip {
					p.TxFrame(arp.AppendReply(nil, r.mac, r.ip, m.SenderMAC[:], m.SenderIP))
					p.Kick()
				}
				return
			}
			if len(f) >= 34 && f[12] == 0x08 && f[13] == 0x00 && f[23] == 6 {
				r.synMACs = append(r.synMACs, net.HardwareAddr(f[0:6]).String())
			}
		})
		wctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		p.Wait(wctx)
		cancel()
	}
}

// TestNativeGatewayRFC1122Sec3_3_1: with a prefix and a gateway (what
// tcp-dpdk passes from Config.DPDK on a PCI port, which has no kernel
// routes), a peer off the link is reached through the gateway: the engine
// ARPs for the gateway, never for the peer, and its SYNs carry the
// gateway's MAC (RFC 1122 §3.3.1.1, the local/remote decision).
func TestNativeGatewayRFC1122Sec3_3_1(t *testing.T) {
	_, ccfg := nativeConfigs()
	peer := netip.MustParseAddr("198.19.7.7")
	ccfg.Dests, ccfg.ConnectTimeout = []netip.AddrPort{netip.AddrPortFrom(peer, ccfg.Port)}, time.Second
	r := &router{ip: netip.MustParseAddr("198.18.0.254"), mac: net.HardwareAddr{0x02, 0, 0, 0, 0, 0xfe}}
	pa, pb := memio.NewPair(memio.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.serve(ctx, pa) }()
	defer func() { cancel(); <-done }()

	// Nothing answers the SYNs, so the connect runs out; what it sent is the test.
	b, err := NewOverFrameIO(ccfg, pb, Options{PrefixLen: 24, Gateway: r.ip})
	if err == nil {
		b.Close()
		t.Fatal("connect to a peer nothing answers for succeeded")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.asked {
		if a != r.ip {
			t.Errorf("ARP asked for %v; an off-link peer's next hop is the gateway %v", a, r.ip)
		}
	}
	if len(r.asked) == 0 || len(r.synMACs) == 0 {
		t.Fatalf("ARP requests %v, TCP segments to %v: want the gateway resolved and SYNs sent to it", r.asked, r.synMACs)
	}
	for _, m := range r.synMACs {
		if m != r.mac.String() {
			t.Errorf("a SYN went to %s, want the gateway's %s", m, r.mac)
		}
	}
}

// TestNativeMaxConns: Config.TCP.MaxConns bounds the server engine's
// table. With room for one connection, a second client completes its
// handshake on a SYN cookie (RFC 4987 §3.6: the table has no slot for
// it) and is not served, counted in tcp_conn_table_full, until the first
// client leaves; its retransmission then finds the slot.
func TestNativeMaxConns(t *testing.T) {
	h, bs := newHub(2, memio.Options{})
	scfg := serverConfig()
	scfg.TCP.Stack, scfg.TCP.MaxConns = dgramio.TCPStackNative, 1
	srv, err := NewOverFrameIO(scfg, h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p := startPoller(srv, echo(t, srv))
	defer p.stop()
	clis := make([]*Backend, 2)
	for i := range clis {
		cfg := clientConfig()
		cfg.TCP.Stack = dgramio.TCPStackNative
		cfg.LocalIP = netip.AddrFrom4([4]byte{198, 18, 0, byte(10 + i)})
		if clis[i], err = NewOverFrameIO(cfg, bs[i], Options{}); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		defer clis[i].Close()
	}
	pkts := make([]dgramio.Packet, 8)
	answered := func(c *Backend, d time.Duration) bool {
		for end := time.Now().Add(d); time.Now().Before(end); {
			c.Flush()
			if n, _ := c.Rx(pkts); n > 0 {
				return true
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			c.Wait(ctx)
			cancel()
		}
		return false
	}
	if clis[0].Queue([]byte("first")) != nil || !answered(clis[0], 20*time.Second) {
		t.Fatal("the first client was not answered")
	}
	if clis[1].Queue([]byte("second")) != nil {
		t.Fatal("Queue refused")
	}
	if answered(clis[1], 300*time.Millisecond) {
		t.Fatal("the second client was answered with a table of one connection")
	}
	st := srv.Stats()
	if full, _ := st.Counter("native", "tcp_conn_table_full"); full == 0 {
		t.Fatal("tcp_conn_table_full 0: the refusal was not counted")
	}
	clis[0].Close()
	if !answered(clis[1], 20*time.Second) {
		t.Fatalf("the second client was not answered after the first left: server %+v", srv.Stats().Layers)
	}
}
