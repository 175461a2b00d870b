package tcp_test

import (
	"flag"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/tcp"
	"github.com/dgramio/dgramio/internal/udp"
)

var oneLoopEvict = flag.Int("oneloop.evict", 0,
	"BenchmarkOneLoop: KiB of memory written between two passes (0: none), so that each pass starts with the caches cold, as after a kick")

// BenchmarkOneLoop is one 100-byte message and its answer between a client
// and a server over memio, both driven from this goroutine, in four
// passes: the client's Queue and Flush (send), the server's Rx until the
// message is out (recv), its QueueTo and Flush (answer), the client's Rx
// (back). No poll loop, scheduler or kernel takes part: it is the cost of
// our own code on one round trip, the part of VethSteps that is not the
// kick, plus memio's (a lock and a copy per frame, and the poisoning of
// each buffer it takes back). It runs kind xdp's raw UDP path beside
// tcp-xdp's native engine (stream layer and TCP/IP) and reports rt-ns, the
// four passes' time (the mean), and rt-p50-ns, their median.
//
// Profile it with -cpuprofile and pprof's -ignore memio; count its
// instructions and cache lines with callgrind, which collects inside the
// four passes only:
//
//	go test -run '^$' -bench OneLoop -cpuprofile cpu.out ./tcp
//	go test -c -o oneloop.test ./tcp
//	GOGC=off GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --cache-sim=yes \
//	  --toggle-collect='*oneLoop).pass' ./oneloop.test -test.run '^$' \
//	  -test.bench 'OneLoop/tcp-xdp' -test.benchtime 20000x
//
// ('OneLoop/^xdp$' for the raw path alone: "xdp" matches both. GOGC=off
// because a collection under valgrind's slowness would put its write
// barriers inside the passes; asyncpreemptoff because callgrind trips on
// the preemption signal.) internal/tools/hotcode counts the hot code
// lines of such a profile, written with --dump-instr=yes.
//
// With -oneloop.evict=256 each pass starts after 256 KiB were written
// (not timed, not collected): the cache misses then count the lines a
// pass touches, code (I1) and data (D1).
func BenchmarkOneLoop(b *testing.B) {
	b.Run("xdp", func(b *testing.B) {
		srv, cli := rawPair(b)
		runOneLoop(b, srv, cli)
	})
	b.Run("tcp-xdp+native", func(b *testing.B) {
		srv, cli := nativePair(b, dgramio.FramingU16)
		runOneLoop(b, srv, cli)
	})
	// The server in raw framing (Config.FramingRaw): it takes the
	// client's record as the bytes that came and appends them back.
	b.Run("tcp-xdp+native+raw", func(b *testing.B) {
		srv, cli := nativePair(b, dgramio.FramingRaw)
		runOneLoop(b, srv, cli)
	})
}

// rawPair is a client and a server of kind xdp's raw UDP path over memio.
func rawPair(b *testing.B) (srv, cli dgramio.Backend) {
	srvIP, cliIP := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	pa, pb := memio.NewPair(memio.Options{})
	sc := dgramio.Config{Kind: dgramio.KindXDP, Role: dgramio.RoleServer, Iface: "memio", LocalIP: srvIP, Port: 5000}
	cc := dgramio.Config{Kind: dgramio.KindXDP, Role: dgramio.RoleClient, Iface: "memio", LocalIP: cliIP,
		Dests: []netip.AddrPort{netip.AddrPortFrom(srvIP, 5000)}, Port: 5000, LocalPort: 40000, DstMAC: memio.DefaultMACA}
	s, err := udp.NewRaw(sc, pa, udp.RawOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	c, err := udp.NewRaw(cc, pb, udp.RawOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return s, c
}

// nativePair is a client and a server of tcp-xdp's native engine over
// memio, connected; the server's framing is framing.
func nativePair(b *testing.B, framing dgramio.Framing) (srv, cli dgramio.Backend) {
	srvIP, cliIP := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	sc := dgramio.Config{Kind: dgramio.KindTCPXDP, Role: dgramio.RoleServer, Iface: "memio", LocalIP: srvIP, Port: 5000}
	cc := dgramio.Config{Kind: dgramio.KindTCPXDP, Role: dgramio.RoleClient, Iface: "memio", LocalIP: cliIP,
		Dests: []netip.AddrPort{netip.AddrPortFrom(srvIP, 5000)}, Port: 5000, ConnectTimeout: 20 * time.Second}
	sc.TCP.Stack, cc.TCP.Stack = dgramio.TCPStackNative, dgramio.TCPStackNative
	sc.Framing = framing
	pa, pb := memio.NewPair(memio.Options{})
	srv, err := tcp.NewOverFrameIO(sc, pa, tcp.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	// The client's New waits for ARP and the handshake: the server's poll
	// loop runs on a goroutine of its own until then.
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		pkts := make([]dgramio.Packet, 8)
		for !stop.Load() {
			srv.Rx(pkts)
			srv.Flush()
			time.Sleep(50 * time.Microsecond)
		}
	}()
	cli, err = tcp.NewOverFrameIO(cc, pb, tcp.Options{})
	stop.Store(true)
	<-done
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cli.Close() })
	return srv, cli
}

// oneLoop is BenchmarkOneLoop's round trip.
type oneLoop struct {
	b        *testing.B
	srv, cli dgramio.Backend
	msg      []byte
	pkts     []dgramio.Packet
	in       dgramio.Packet // the message the server took
	evict    []byte
}

func runOneLoop(b *testing.B, srv, cli dgramio.Backend) {
	l := &oneLoop{b: b, srv: srv, cli: cli, msg: make([]byte, 100), pkts: make([]dgramio.Packet, 8),
		evict: make([]byte, *oneLoopEvict<<10)}
	steps := []func(){l.send, l.recv, l.answer, l.back}
	var spent time.Duration
	// The round trips' times in 10 ns buckets (the last: 100 µs and
	// more), for rt-p50-ns, which a descheduled round trip does not move
	// as it moves the mean.
	var hist [10001]int32
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var rt time.Duration
		for _, step := range steps {
			for i := 0; i < len(l.evict); i += 64 {
				l.evict[i]++
			}
			t0 := time.Now()
			l.pass(step)
			rt += time.Since(t0)
		}
		spent += rt
		hist[min(int(rt/10), len(hist)-1)]++
	}
	b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N), "rt-ns")
	half, k := int32((b.N+1)/2), 0
	for n := int32(0); k < len(hist); k++ {
		if n += hist[k]; n >= half {
			break
		}
	}
	b.ReportMetric(float64(k*10), "rt-p50-ns")
}

// pass runs one step: the function callgrind collects in.
//
//go:noinline
func (l *oneLoop) pass(step func()) { step() }

func (l *oneLoop) send() {
	if l.cli.Queue(l.msg) != nil {
		l.b.Fatal("the client's Queue refused a message")
	}
	if err := l.cli.Flush(); err != nil {
		l.b.Fatal(err)
	}
}

func (l *oneLoop) recv() { l.in = rxOne(l.b, l.srv, l.pkts) }

func (l *oneLoop) answer() {
	if l.srv.QueueTo(l.in.Data, l.in.From) != nil {
		l.b.Fatal("the server's QueueTo refused the answer")
	}
	if err := l.srv.Flush(); err != nil {
		l.b.Fatal(err)
	}
}

func (l *oneLoop) back() { rxOne(l.b, l.cli, l.pkts) }
