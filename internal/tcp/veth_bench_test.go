package tcp_test

import (
	"context"
	"encoding/binary"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	ktcp "github.com/dgramio/dgramio/internal/kernel/tcp"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/tcp"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
	"github.com/dgramio/dgramio/internal/udp"
	"github.com/dgramio/dgramio/stack/native"
)

// BenchmarkVethRTT: one 100-byte message at a time, A to B and back, over
// a testhost veth pair, on three kinds side by side: xdp (raw UDP over
// AF_XDP), tcp (kernel TCP) and tcp-xdp (its default engine, native, over
// AF_XDP). Both ends
// run in this process, each poll loop spinning (Rx and Flush, no Wait) on
// its own goroutine; in the "/wait" runs both loops sleep in Wait whenever
// Rx has nothing (the idle-friendly way to poll). It reports p50 and p99 of the round trips and, for
// the stream kinds, the frames each message cost. Run it alone on a quiet
// machine, as root:
//
//	go test -run '^$' -bench VethRTT -benchtime 20000x ./tcp
//
// Add -cpuprofile to see where the time goes.
func BenchmarkVethRTT(b *testing.B) {
	testutil.RequireRoot(b)
	for _, kind := range []dgramio.Kind{dgramio.KindXDP, dgramio.KindTCP, dgramio.KindTCPXDP} {
		b.Run(string(kind), func(b *testing.B) { vethRTT(b, kind, false) })
	}
	for _, kind := range []dgramio.Kind{dgramio.KindXDP, dgramio.KindTCP, dgramio.KindTCPXDP} {
		b.Run(string(kind)+"/wait", func(b *testing.B) { vethRTT(b, kind, true) })
	}
}

func open(b *testing.B, h *testhost.Host, cfg dgramio.Config) dgramio.Backend {
	b.Helper()
	var be dgramio.Backend
	err := h.Do(func() error {
		var err error
		switch cfg.Kind {
		case dgramio.KindXDP:
			be, err = udp.NewXDP(cfg)
		case dgramio.KindTCP:
			be, err = ktcp.New(cfg)
		case dgramio.KindTCPXDP:
			be, err = tcp.NewXDP(cfg)
		}
		return err
	})
	testutil.SkipIfNotSupported(b, err)
	return be
}

// vethPair opens a server of kind (on engine st, "" for the default) on B
// of a new testhost pair, starts its echo (startVethEcho, spinning or with
// sleep sleeping), and connects a client from A to it. Both backends close
// when b ends; stop ends the echo (call it before b ends to drive the
// server yourself).
func vethPair(b *testing.B, kind dgramio.Kind, st dgramio.TCPStack, sleep bool) (srv dgramio.Backend, cli *vethClient, stop func()) {
	p := hosttest.New(b, testhost.Options{})
	srvIP, cliIP := p.B.Addr, p.A.Addr
	if kind == dgramio.KindTCPXDP { // addresses the kernels do not hold
		srvIP, cliIP = peertest.Addr(p.B, 4), peertest.Addr(p.A, 3)
	}
	base := dgramio.Config{Kind: kind, Port: 5000, ConnectTimeout: 20 * time.Second}
	base.TCP.Stack = st
	scfg := base
	scfg.Role, scfg.Iface, scfg.LocalIP = dgramio.RoleServer, p.B.Iface, srvIP
	srv = open(b, p.B, scfg)
	b.Cleanup(func() { srv.Close() })
	stop = sync.OnceFunc(startVethEcho(srv, sleep))
	b.Cleanup(stop) // before the server closes

	ccfg := base
	ccfg.Iface, ccfg.LocalIP, ccfg.Dests = p.A.Iface, cliIP, []netip.AddrPort{netip.AddrPortFrom(srvIP, ccfg.Port)}
	cli = &vethClient{b: b, be: open(b, p.A, ccfg), sleep: sleep, msg: make([]byte, 100), pkts: make([]dgramio.Packet, 32)}
	b.Cleanup(func() { cli.be.Close() })
	return srv, cli, stop
}

func vethRTT(b *testing.B, kind dgramio.Kind, sleep bool) {
	_, cli, _ := vethPair(b, kind, "", sleep)
	for i := 0; i < 1000; i++ { // warm up (ARP, windows, pools)
		cli.trip(i)
	}
	before := cli.be.Stats()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		cli.trip(i)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	after := cli.be.Stats()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(after.Syscalls-before.Syscalls)/float64(b.N), "syscalls/msg")
	if kind == dgramio.KindTCPXDP {
		// The engine counts the frames: netstack's link endpoint (layer
		// "link") or the native engine.
		layer := "link"
		if _, ok := after.Counter(native.Layer, "tx_frames"); ok {
			layer = native.Layer
		}
		get := func(s dgramio.Stats, n string) float64 { v, _ := s.Counter(layer, n); return float64(v) }
		frames := get(after, "tx_frames") - get(before, "tx_frames") + get(after, "rx_frames") - get(before, "rx_frames")
		b.ReportMetric(frames/float64(b.N), "frames/msg")
	}
}

// startVethEcho runs srv's poll loop on a goroutine of its own, echoing
// every message, spinning or, with sleep, sleeping in Wait when Rx has
// nothing. The returned stop ends it and waits for it.
func startVethEcho(srv dgramio.Backend, sleep bool) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		pkts := make([]dgramio.Packet, 32)
		for ctx.Err() == nil {
			n, err := srv.Rx(pkts)
			if err != nil {
				var pe *dgramio.PeerError
				if !errorsAs(err, &pe) {
					return
				}
			}
			for _, pk := range pkts[:n] {
				for srv.QueueTo(pk.Data, pk.From) != nil && ctx.Err() == nil {
					srv.Flush()
				}
			}
			if n > 0 {
				srv.Flush()
			} else if sleep {
				wctx, c := context.WithTimeout(ctx, 100*time.Millisecond)
				srv.Wait(wctx)
				c()
			}
		}
	}()
	return func() { cancel(); <-done }
}

// vethClient is vethRTT's client: one numbered message in flight.
type vethClient struct {
	b     *testing.B
	be    dgramio.Backend
	sleep bool // sleep in Wait for the answer, instead of spinning
	msg   []byte
	pkts  []dgramio.Packet
}

// trip sends message i and waits up to 10 s for it to come back.
func (c *vethClient) trip(i int) {
	binary.BigEndian.PutUint32(c.msg, uint32(i))
	for c.be.Queue(c.msg) != nil {
		c.be.Flush()
	}
	if err := c.be.Flush(); err != nil {
		c.b.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, err := c.be.Rx(c.pkts)
		if err != nil {
			c.b.Fatal(err)
		}
		if n > 0 {
			if got := binary.BigEndian.Uint32(c.pkts[0].Data); got != uint32(i) {
				c.b.Fatalf("message %d came back as %d", i, got)
			}
			return
		}
		if time.Now().After(deadline) {
			c.b.Fatalf("message %d: no answer within 10s", i)
		}
		if c.sleep {
			wctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			c.be.Wait(wctx)
			cancel()
		}
	}
}

func errorsAs(err error, pe **dgramio.PeerError) bool {
	e, ok := err.(*dgramio.PeerError)
	if ok {
		*pe = e
	}
	return ok
}

// BenchmarkVethSteps splits one 100-byte round trip over a testhost veth
// pair into its four steps, both ends driven from this one goroutine so
// that nothing else competes for the CPU and no poll loop spins between
// them:
//
//   - send-µs: the client's Queue and Flush: the frame built and kicked
//     (sendto, in which the kernel also carries the frame over the veth
//     and runs the peer's XDP program).
//   - recv-µs: the server's Rx calls until the message comes out: Ethernet
//     to record (for netstack, the processor goroutine's hand-off too).
//   - answer-µs: the server's QueueTo and Flush.
//   - back-µs: the client's Rx calls until the answer comes out.
//
// It runs kind xdp (raw UDP over AF_XDP) beside tcp-xdp on each engine, so
// that what the userspace TCP adds to each step shows. Run as root:
//
//	go test -run '^$' -bench VethSteps -benchtime 20000x ./tcp
func BenchmarkVethSteps(b *testing.B) {
	testutil.RequireRoot(b)
	for _, c := range []struct {
		name  string
		kind  dgramio.Kind
		stack dgramio.TCPStack
	}{
		{"xdp", dgramio.KindXDP, ""},
		{"tcp-xdp+native", dgramio.KindTCPXDP, dgramio.TCPStackNative},
		{"tcp-xdp+netstack", dgramio.KindTCPXDP, dgramio.TCPStackNetstack},
	} {
		b.Run(c.name, func(b *testing.B) { vethSteps(b, c.kind, c.stack) })
	}
}

func vethSteps(b *testing.B, kind dgramio.Kind, st dgramio.TCPStack) {
	srv, cli, stop := vethPair(b, kind, st, false) // the echo for the warm-up
	for i := 0; i < 1000; i++ {
		cli.trip(i)
	}
	stop() // from here this goroutine drives the server too
	steps := make([][]time.Duration, 4)
	for i := range steps {
		steps[i] = make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if cli.be.Queue(cli.msg) != nil {
			b.Fatal("the client's Queue refused one message")
		}
		if err := cli.be.Flush(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		in := rxOne(b, srv, cli.pkts)
		t2 := time.Now()
		if srv.QueueTo(in.Data, in.From) != nil {
			b.Fatal("the server's QueueTo refused the answer")
		}
		if err := srv.Flush(); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		rxOne(b, cli.be, cli.pkts)
		t4 := time.Now()
		for k, d := range []time.Duration{t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3)} {
			steps[k] = append(steps[k], d)
		}
	}
	b.StopTimer()
	for k, name := range []string{"send-µs", "recv-µs", "answer-µs", "back-µs"} {
		slices.Sort(steps[k])
		b.ReportMetric(float64(steps[k][len(steps[k])/2].Nanoseconds())/1e3, name)
	}
}

// rxOne calls be.Rx until it returns a message (within 10 s) and returns
// the first; its Data is valid until the next Rx.
func rxOne(b *testing.B, be dgramio.Backend, pkts []dgramio.Packet) dgramio.Packet {
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, err := be.Rx(pkts)
		if err != nil {
			b.Fatal(err)
		}
		if n > 0 {
			return pkts[0]
		}
		if time.Now().After(deadline) {
			b.Fatal("no message within 10s")
		}
	}
}
