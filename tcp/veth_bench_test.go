package tcp_test

import (
	"context"
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
	ktcp "github.com/dgramio/dgramio/kernel/tcp"
	"github.com/dgramio/dgramio/tcp"
	"github.com/dgramio/dgramio/udp"
)

// BenchmarkVethRTT: one 100-byte message at a time, A to B and back, over
// a testhost veth pair, on three kinds side by side: xdp (raw UDP over
// AF_XDP), tcp (kernel TCP) and tcp-xdp (netstack over AF_XDP). Both ends
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
	for _, kind := range []core.Kind{core.KindXDP, core.KindTCP, core.KindTCPXDP} {
		b.Run(string(kind), func(b *testing.B) { vethRTT(b, kind, false) })
	}
	for _, kind := range []core.Kind{core.KindXDP, core.KindTCP, core.KindTCPXDP} {
		b.Run(string(kind)+"/wait", func(b *testing.B) { vethRTT(b, kind, true) })
	}
}

func addrOn(h *testhost.Host, last byte) netip.Addr {
	a := h.Addr.As4()
	a[3] = last
	return netip.AddrFrom4(a)
}

func open(b *testing.B, h *testhost.Host, cfg core.Config) core.Backend {
	b.Helper()
	var be core.Backend
	err := h.Do(func() error {
		var err error
		switch cfg.Kind {
		case core.KindXDP:
			be, err = udp.NewXDP(cfg)
		case core.KindTCP:
			be, err = ktcp.New(cfg)
		case core.KindTCPXDP:
			be, err = tcp.NewXDP(cfg)
		}
		return err
	})
	testutil.SkipIfNotSupported(b, err)
	return be
}

func vethRTT(b *testing.B, kind core.Kind, sleep bool) {
	p := hosttest.New(b, testhost.Options{})
	srvIP, cliIP := p.B.Addr, p.A.Addr
	if kind == core.KindTCPXDP { // addresses the kernels do not hold
		srvIP, cliIP = addrOn(p.B, 4), addrOn(p.A, 3)
	}
	base := core.Config{Kind: kind, Port: 5000, ConnectTimeout: 20 * time.Second}
	scfg := base
	scfg.Role, scfg.Iface, scfg.LocalIP = core.RoleServer, p.B.Iface, srvIP
	srv := open(b, p.B, scfg)
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // B: echo, spinning
		defer close(done)
		pkts := make([]core.Packet, 32)
		for ctx.Err() == nil {
			n, err := srv.Rx(pkts)
			if err != nil {
				var pe *core.PeerError
				if !errorsAs(err, &pe) {
					return
				}
			}
			for _, pk := range pkts[:n] {
				for !srv.QueueTo(pk.Data, pk.From) && ctx.Err() == nil {
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
	defer func() { cancel(); <-done }()

	ccfg := base
	ccfg.Iface, ccfg.LocalIP, ccfg.Dests = p.A.Iface, cliIP, []netip.Addr{srvIP}
	cli := open(b, p.A, ccfg)
	defer cli.Close()

	msg := make([]byte, 100)
	pkts := make([]core.Packet, 32)
	trip := func(i int) {
		binary.BigEndian.PutUint32(msg, uint32(i))
		for !cli.Queue(msg) {
			cli.Flush()
		}
		if err := cli.Flush(); err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			n, err := cli.Rx(pkts)
			if err != nil {
				b.Fatal(err)
			}
			if n > 0 {
				if binary.BigEndian.Uint32(pkts[0].Data) != uint32(i) {
					b.Fatalf("message %d came back as %d", i, binary.BigEndian.Uint32(pkts[0].Data))
				}
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("message %d: no answer within 10s", i)
			}
			if sleep {
				wctx, c := context.WithTimeout(context.Background(), 100*time.Millisecond)
				cli.Wait(wctx)
				c()
			}
		}
	}
	for i := 0; i < 1000; i++ { // warm up (ARP, windows, pools)
		trip(i)
	}
	before := cli.Stats()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		trip(i)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	after := cli.Stats()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(after.Syscalls-before.Syscalls)/float64(b.N), "syscalls/msg")
	if kind == core.KindTCPXDP {
		get := func(s core.Stats, l, n string) float64 { v, _ := s.Counter(l, n); return float64(v) }
		frames := get(after, "link", "tx_frames") - get(before, "link", "tx_frames") +
			get(after, "link", "rx_frames") - get(before, "link", "rx_frames")
		b.ReportMetric(frames/float64(b.N), "frames/msg")
	}
}

func errorsAs(err error, pe **core.PeerError) bool {
	e, ok := err.(*core.PeerError)
	if ok {
		*pe = e
	}
	return ok
}
