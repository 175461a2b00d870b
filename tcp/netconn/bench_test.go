package netconn

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// pingPong sends n messages of size bytes on c, one at a time, and returns
// each round trip.
func pingPong(tb testing.TB, c net.Conn, n, size int) []time.Duration {
	tb.Helper()
	out := make([]byte, size)
	in := make([]byte, size)
	rtts := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if _, err := c.Write(out); err != nil {
			tb.Fatalf("write %d: %v", i, err)
		}
		if _, err := io.ReadFull(c, in); err != nil {
			tb.Fatalf("read %d: %v", i, err)
		}
		rtts = append(rtts, time.Since(start))
	}
	return rtts
}

// quantile returns the q-quantile (0..1) of d, which it sorts.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[int(q*float64(len(d)-1))]
}

// benchRTT times b.N 100-byte ping-pongs on c, after warm untimed ones,
// and reports p50 and p99 in µs as benchmark metrics.
func benchRTT(b *testing.B, c net.Conn, warm int) {
	pingPong(b, c, warm, 100)
	b.ResetTimer()
	rtts := pingPong(b, c, b.N, 100)
	b.StopTimer()
	p50, p99 := quantile(rtts, 0.5), quantile(rtts, 0.99)
	b.ReportMetric(float64(p50.Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(p99.Nanoseconds())/1e3, "p99-µs")
}

// BenchmarkRTT: a 100-byte echo between two Services over memio, one
// message in flight, for each poller mode: what sleeping costs against
// spinning (both pollers in the same mode). Over memio a sleeping poller
// waits in memio's Wait, a channel; over veth (BenchmarkVethRTT) it is
// poll(2) on the AF_XDP socket.
func BenchmarkRTT(b *testing.B) {
	for _, mode := range []PollMode{PollSpin, PollAdaptive, PollSleep} {
		for _, stk := range engines {
			b.Run(string(stk)+"/"+mode.String(), func(b *testing.B) {
				p := newPair(b, memio.Options{}, Options{Poll: mode}, onEngine(stk))
				ln, err := p.B.Listen(testPort)
				if err != nil {
					b.Fatal(err)
				}
				defer ln.Close()
				peertest.ServeEcho(ln)
				benchRTT(b, dialB(b, p.A), 100)
			})
		}
	}
}

// BenchmarkVethRTT: a 100-byte echo served over tcp-xdp on A, a kernel TCP
// client in B, one message in flight, on each engine (native, the
// default, and netstack) for each poller mode (and spinning pinned to a
// CPU); "kernel" is the same echo on A's kernel TCP for comparison. p50 and p99 are reported as metrics: the difference between
// spin and sleep is what sleeping when idle costs per exchange.
func BenchmarkVethRTT(b *testing.B) {
	testutil.RequireRoot(b)
	type benchCase struct {
		name string
		stk  dgramio.TCPStack
		o    Options
		cpus []int
	}
	cases := []benchCase{{"kernel", "", Options{}, nil}}
	for _, stk := range engines {
		cases = append(cases,
			benchCase{string(stk) + "/spin", stk, Options{Poll: PollSpin}, nil},
			benchCase{string(stk) + "/spin-pinned", stk, Options{Poll: PollSpin}, []int{lastCPU()}},
			benchCase{string(stk) + "/adaptive", stk, Options{Poll: PollAdaptive}, nil},
			benchCase{string(stk) + "/sleep", stk, Options{Poll: PollSleep}, nil})
	}
	// The native poller asleep in the FrameIO's Wait (poll(2)) instead of
	// the Go netpoller.
	cases = append(cases,
		benchCase{"native-wait/adaptive", dgramio.TCPStackNative, Options{Poll: PollAdaptive, Open: openWait}, nil},
		benchCase{"native-wait/sleep", dgramio.TCPStackNative, Options{Poll: PollSleep, Open: openWait}, nil})
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			p := hosttest.New(b, testhost.Options{})
			var ln net.Listener
			var target string
			if tc.name == "kernel" {
				ln = peertest.Listen(b, p.A, netip.AddrPortFrom(p.A.Addr, testPort))
				target = ln.Addr().String()
			} else {
				addr := peertest.Addr(p.A, 3)
				s := openVeth(b, p.A, onEngine(tc.stk, dgramio.Config{LocalIP: addr, Port: testPort, CPUs: tc.cpus}), tc.o)
				l := listen(b, s, testPort)
				ln, target = l, fmt.Sprintf("%s:%d", addr, testPort)
			}
			defer ln.Close()
			peertest.ServeEcho(ln)
			c, err := peertest.Dialer(p.B)(context.Background(), "tcp4", target)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			benchRTT(b, c, 200)
		})
	}
}

// lastCPU is the highest CPU the process may run on.
func lastCPU() int {
	cpus, err := cpu.Allowed()
	if err != nil || len(cpus) == 0 {
		return 0
	}
	return cpus[len(cpus)-1]
}

// BenchmarkVethBulk: one connection from a kernel TCP client in B writes
// 64 MiB per op to a server on A that reads it with io.Copy(io.Discard,
// c) (on the kernel's TCP, and over tcp-xdp on each engine), and the same
// back out: the server writes 64 MiB that the client discards. Reported
// as Gbit/s each way.
func BenchmarkVethBulk(b *testing.B) {
	testutil.RequireRoot(b)
	const chunk = 64 << 20
	for _, stk := range append([]dgramio.TCPStack{""}, engines...) {
		name := string(stk)
		if stk == "" {
			name = "kernel"
		}
		b.Run(name, func(b *testing.B) {
			p := hosttest.New(b, testhost.Options{})
			var ln net.Listener
			var target string
			if stk == "" {
				ln = peertest.Listen(b, p.A, netip.AddrPortFrom(p.A.Addr, testPort))
				target = ln.Addr().String()
			} else {
				addr := peertest.Addr(p.A, 3)
				s := openVeth(b, p.A, onEngine(stk, dgramio.Config{LocalIP: addr, Port: testPort}), Options{})
				ln, target = listen(b, s, testPort), fmt.Sprintf("%s:%d", addr, testPort)
			}
			defer ln.Close()
			// The server: 'r' reads chunk bytes into io.Discard and
			// answers one byte; 'w' writes chunk bytes.
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				cmd := make([]byte, 1)
				out := make([]byte, 256<<10)
				for {
					if _, err := io.ReadFull(c, cmd); err != nil {
						return
					}
					if cmd[0] == 'r' {
						if _, err := io.CopyN(io.Discard, c, chunk); err != nil {
							return
						}
						c.Write(cmd)
						continue
					}
					for n := 0; n < chunk; n += len(out) {
						if _, err := c.Write(out); err != nil {
							return
						}
					}
				}
			}()
			c, err := peertest.Dialer(p.B)(context.Background(), "tcp4", target)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, 256<<10)
			var in, out time.Duration
			b.SetBytes(2 * chunk)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				c.Write([]byte{'r'})
				for n := 0; n < chunk; n += len(buf) {
					if _, err := c.Write(buf); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := io.ReadFull(c, buf[:1]); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				c.Write([]byte{'w'})
				if _, err := io.CopyN(io.Discard, c, chunk); err != nil {
					b.Fatal(err)
				}
				in, out = in+t1.Sub(t0), out+time.Since(t1)
			}
			b.ReportMetric(float64(b.N)*chunk*8/in.Seconds()/1e9, "in-Gbit/s")
			b.ReportMetric(float64(b.N)*chunk*8/out.Seconds()/1e9, "out-Gbit/s")
		})
	}
}
