package netconn

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// helloServer is net/http's server with a constant answer (the body of
// httpxdp's "hello"), unchanged otherwise.
func helloServer(ln net.Listener) *http.Server {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello, from net/http\n")
	})}
	go srv.Serve(ln)
	return srv
}

// rawHTTP is a client of one keep-alive connection that writes a fixed GET
// and reads the answer into a buffer it reuses (as wrk does): the client's
// own cost per request is two system calls and no allocation.
type rawHTTP struct {
	c   net.Conn
	buf []byte
}

var getReq = []byte("GET / HTTP/1.1\r\nHost: bench\r\n\r\n")

// do sends one request and reads its whole answer (headers and
// Content-Length bytes).
func (r *rawHTTP) do() error {
	if _, err := r.c.Write(getReq); err != nil {
		return err
	}
	have := 0
	for {
		k, err := r.c.Read(r.buf[have:])
		if err != nil {
			return err
		}
		have += k
		h := bytes.Index(r.buf[:have], []byte("\r\n\r\n"))
		if h < 0 {
			if have == len(r.buf) {
				return fmt.Errorf("answer headers past %d bytes", have)
			}
			continue
		}
		cl := -1
		const key = "\r\nContent-Length: "
		if i := bytes.Index(r.buf[:h+2], []byte(key)); i >= 0 {
			j := i + len(key)
			e := bytes.IndexByte(r.buf[j:h+2], '\r')
			if e >= 0 {
				cl, _ = strconv.Atoi(string(r.buf[j : j+e]))
			}
		}
		if cl < 0 {
			return fmt.Errorf("no Content-Length in %q", r.buf[:h])
		}
		for have < h+4+cl {
			k, err := r.c.Read(r.buf[have:])
			if err != nil {
				return err
			}
			have += k
		}
		if have != h+4+cl {
			return fmt.Errorf("%d bytes past the answer", have-h-4-cl)
		}
		return nil
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchHTTP times b.N requests spread over the clients cls, one in
// flight on each, and reports per request: the process's CPU time (server
// and clients), and, when s is a Service, the segments the engine sent
// and received, the poller's rounds and sleeps, and the Writes that sent
// inline (the poller asleep: it was not woken for them).
func benchHTTP(b *testing.B, cls []*rawHTTP, s *Service) {
	run := func(n int) {
		var wg sync.WaitGroup
		var next atomic.Int64
		errs := make(chan error, len(cls))
		for _, cl := range cls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(n) {
					if err := cl.do(); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
	}
	run(200 * len(cls))
	type snap struct{ out, in, rounds, sleeps, inline uint64 }
	take := func() snap {
		if s == nil {
			return snap{}
		}
		st := s.Stats()
		return snap{counter(st, "native", "tcp_segments_out"), counter(st, "native", "tcp_segments_in"),
			counter(st, "netconn", "poll_rounds"), counter(st, "netconn", "sleeps"), counter(st, "netconn", "inline_sends")}
	}
	before := take()
	cpu0 := cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
	b.StopTimer()
	cpu := cpuTime() - cpu0
	after := take()
	per := func(a, z uint64) float64 { return float64(z-a) / float64(b.N) }
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/req")
	if s != nil {
		b.ReportMetric(per(before.out, after.out), "segs-out/req")
		b.ReportMetric(per(before.in, after.in), "segs-in/req")
		b.ReportMetric(per(before.rounds, after.rounds), "rounds/req")
		b.ReportMetric(per(before.sleeps, after.sleeps), "sleeps/req")
		b.ReportMetric(per(before.inline, after.inline), "inline/req")
	}
}

// BenchmarkHTTP: net/http "hello" on the native engine over memio, one
// request in flight from a client on a second Service (raw requests, no
// http.Client): what one request costs in CPU, allocations, segments and
// poller rounds, for the adaptive and the sleeping poller.
func BenchmarkHTTP(b *testing.B) {
	for _, mode := range []PollMode{PollAdaptive, PollSleep} {
		b.Run(mode.String(), func(b *testing.B) {
			p := newPair(b, memio.Options{}, Options{Poll: mode}, onEngine(dgramio.TCPStackNative))
			ln, err := p.B.Listen(testPort)
			if err != nil {
				b.Fatal(err)
			}
			srv := helloServer(ln)
			defer srv.Close()
			benchHTTP(b, []*rawHTTP{{c: dialB(b, p.A), buf: make([]byte, 4096)}}, p.B)
		})
	}
}

// BenchmarkVethHTTP: net/http "hello" served on A's kernel TCP and on
// tcp-xdp (native engine, adaptive poller, in the Go netpoller), kernel
// TCP clients in B on 1 and 4 keep-alive connections, one request in
// flight on each (wrk's shape). ns/op is the wall time per request;
// cpu-µs/req the whole process's (server and clients: compare the
// kernel and native cases); segs-out/req the frames of the answers.
func BenchmarkVethHTTP(b *testing.B) {
	testutil.RequireRoot(b)
	for _, conns := range []int{1, 4} {
		for _, name := range []string{"kernel", "native"} {
			b.Run(fmt.Sprintf("%s/conns=%d", name, conns), func(b *testing.B) {
				p := hosttest.New(b, testhost.Options{})
				var ln net.Listener
				var s *Service
				var target string
				if name == "kernel" {
					ln = peertest.Listen(b, p.A, netip.AddrPortFrom(p.A.Addr, testPort))
					target = ln.Addr().String()
				} else {
					addr := peertest.Addr(p.A, 3)
					s = openVeth(b, p.A, onEngine(dgramio.TCPStackNative, dgramio.Config{LocalIP: addr, Port: testPort}), Options{})
					ln, target = listen(b, s, testPort), fmt.Sprintf("%s:%d", addr, testPort)
				}
				srv := helloServer(ln)
				defer srv.Close()
				var cls []*rawHTTP
				for i := 0; i < conns; i++ {
					c, err := peertest.Dialer(p.B)(context.Background(), "tcp4", target)
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					cls = append(cls, &rawHTTP{c: c, buf: make([]byte, 4096)})
				}
				benchHTTP(b, cls, s)
			})
		}
	}
}
