package netconn

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
	"github.com/dgramio/dgramio/internal/wire"
)

// TestNetTestConnOverXDP runs x/net/nettest's conformance test for
// net.Conn between a kernel TCP client in B and a tcp-xdp Service on A, on
// each engine: c1 is the kernel's end, c2 the Service's.
func TestNetTestConnOverXDP(t *testing.T) {
	testutil.RequireRoot(t)
	forEngines(t, func(t *testing.T, stk dgramio.TCPStack) {
		p := hosttest.New(t, testhost.Options{})
		addr := peertest.Addr(p.A, 3)
		s := openVeth(t, p.A, onEngine(stk, dgramio.Config{LocalIP: addr, Port: testPort}), Options{})
		ln := listen(t, s, testPort)
		dial := peertest.Dialer(p.B)
		nettest.TestConn(t, acceptDialPipe(ln, func(ctx context.Context) (net.Conn, error) {
			return dial(ctx, "tcp4", fmt.Sprintf("%s:%d", addr, testPort))
		}))
	})
}

// TestHTTPBodiesOverXDP: over veth, on each engine, an unchanged net/http
// Server on a tcp-xdp Service answers a kernel http.Client in B, and an
// http.Client dialling through the Service (Service.DialContext) is
// answered by a kernel net/http Server in B, with bodies of 0 B to 16 MiB
// each way on keep-alive connections.
func TestHTTPBodiesOverXDP(t *testing.T) {
	testutil.RequireRoot(t)
	forEngines(t, func(t *testing.T, stk dgramio.TCPStack) {
		p := hosttest.New(t, testhost.Options{})
		addr := peertest.Addr(p.A, 3)
		s := openVeth(t, p.A, onEngine(stk, dgramio.Config{LocalIP: addr, Port: 8080}), Options{})
		ln := listen(t, s, 8080)
		srv := &http.Server{Handler: echoBody}
		go srv.Serve(ln)
		defer srv.Close()
		tr := &http.Transport{DialContext: peertest.Dialer(p.B)}
		defer tr.CloseIdleConnections()
		exchangeBodies(t, &http.Client{Timeout: time.Minute, Transport: tr}, fmt.Sprintf("http://%s:8080", addr))
		if st := s.Stats(); st.Accepts != 1 {
			t.Errorf("keep-alive: %d connections accepted, want 1", st.Accepts)
		}

		kln := peertest.Listen(t, p.B, netip.AddrPortFrom(p.B.Addr, 8080))
		ksrv := &http.Server{Handler: echoBody}
		go ksrv.Serve(kln)
		defer ksrv.Close()
		tr2 := &http.Transport{DialContext: s.DialContext}
		defer tr2.CloseIdleConnections()
		exchangeBodies(t, &http.Client{Timeout: time.Minute, Transport: tr2}, fmt.Sprintf("http://%s:8080", p.B.Addr))
		if v := counter(s.Stats(), "netconn", "dials"); v != 1 {
			t.Errorf("keep-alive: %d dials, want 1", v)
		}
	})
}

// copyWireImpairment is the lossy wire of TestCopyLossyWire, as
// internal/faulttest's: loss, duplication, reordering and corruption both
// ways.
var copyWireImpairment = wire.Options{
	Loss:    0.01,
	Dup:     0.01,
	Reorder: 0.05,
	Corrupt: 0.001,
	Delay:   200 * time.Microsecond,
	Jitter:  100 * time.Microsecond,
}

// TestCopyLossyWire: io.Copy(c, c), the plainest Go echo, on a
// netconn Listener of the native engine (tcp-xdp) behind the lossy wire
// of internal/wire; a kernel client writes 64 MiB of seeded bytes (SOAK=1:
// 256 MiB) while it reads the echo back and checks it byte for byte. The
// echo reads nothing ahead: while its Write blocks, its window closes
// (RFC 9293 §3.10.7.4: the ACKs of a zero window are still taken).
func TestCopyLossyWire(t *testing.T) {
	testutil.RequireRoot(t)
	total := int64(64 << 20)
	if os.Getenv("SOAK") == "1" {
		total = 256 << 20
	}
	if testing.Short() {
		total = 8 << 20
	}
	w := wire.NewT(t, copyWireImpairment)
	a4 := w.B.Addr.As4()
	a4[3] += 10
	addr := netip.AddrFrom4(a4)
	s := openVeth(t, w.B, onEngine(dgramio.TCPStackNative, dgramio.Config{LocalIP: addr, Port: testPort}), Options{})
	ln := listen(t, s, testPort)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := w.A.DialContext(ctx, "tcp4", netip.AddrPortFrom(addr, testPort).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seed := w.Seed()
	start := time.Now()
	wrote := make(chan error, 1)
	go func() {
		_, err := io.CopyN(c, &seededReader{rng: rand.New(rand.NewPCG(seed, 7))}, total)
		wrote <- err
	}()
	c.SetReadDeadline(time.Now().Add(10 * time.Minute))
	want := &seededReader{rng: rand.New(rand.NewPCG(seed, 7))}
	got, exp := make([]byte, 64<<10), make([]byte, 64<<10)
	for n := int64(0); n < total; {
		m, err := c.Read(got[:min(int64(len(got)), total-n)])
		want.Read(exp[:m])
		if !bytes.Equal(got[:m], exp[:m]) {
			t.Fatalf("the echo differs in the %d bytes from offset %d (replay: WIRE_SEED=%d)", m, n, seed)
		}
		n += int64(m)
		if err != nil && n < total {
			t.Fatalf("after %d bytes: %v (replay: WIRE_SEED=%d)\necho counters: %v", n, err, seed, s.Stats().Layers)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatalf("client write: %v", err)
	}
	el := time.Since(start)
	ab, ba := w.Stats(wire.AtoB), w.Stats(wire.BtoA)
	t.Logf("%d MiB echoed byte-exact in %v (%.1f MiB/s each way), seed %d; wire A→B %v; B→A %v",
		total>>20, el.Round(time.Millisecond), float64(total)/(1<<20)/el.Seconds(), seed, ab, ba)
	if ab.Dropped == 0 || ba.Dropped == 0 || ab.Reordered == 0 {
		t.Errorf("the wire did not impair the stream (A→B %v; B→A %v)", ab, ba)
	}
}

// seededReader is an endless reader of the bytes of rng.
type seededReader struct {
	rng *rand.Rand
	v   uint64
	n   int
}

func (s *seededReader) Read(b []byte) (int, error) {
	for i := range b {
		if s.n == 0 {
			s.v, s.n = s.rng.Uint64(), 8
		}
		b[i] = byte(s.v)
		s.v >>= 8
		s.n--
	}
	return len(b), nil
}

// waitFIO hides the PollFD of the FrameIO it wraps: the native poller
// then sleeps in the FrameIO's Wait, ended by Interrupt.
type waitFIO struct {
	frameio.FrameIO
}

func (w waitFIO) Wait(ctx context.Context) error { return w.FrameIO.(frameio.Waiter).Wait(ctx) }
func (w waitFIO) Interrupt()                     { w.FrameIO.(interface{ Interrupt() }).Interrupt() }

// openWait is OpenXDP with the socket's fd hidden (waitFIO).
func openWait(cfg dgramio.Config) (Opened, error) {
	to, err := OpenXDP(cfg)
	if err != nil {
		return to, err
	}
	if to.Close == nil {
		to.Close = to.FIO.Close
	}
	to.FIO = waitFIO{to.FIO}
	return to, nil
}

// TestSleepOverXDP: on tcp-xdp the native poller sleeps in the Go
// netpoller on the AF_XDP socket (afxdp.XSK.PollFD); with the fd hidden it
// sleeps in the FrameIO's Wait. Either way nettest.TestConn passes with a
// kernel peer in B, and an idle poller makes no rounds.
func TestSleepOverXDP(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tc := range []struct {
		name    string
		open    Opener
		netpoll bool
	}{{"netpoll", nil, true}, {"wait", openWait, false}} {
		t.Run(tc.name, func(t *testing.T) {
			p := hosttest.New(t, testhost.Options{})
			addr := peertest.Addr(p.A, 3)
			s := openVeth(t, p.A, dgramio.Config{LocalIP: addr, Port: testPort}, Options{Open: tc.open})
			if got := s.nat != nil && s.nat.pf != nil; got != tc.netpoll {
				t.Fatalf("sleeps in the netpoller: %v, want %v", got, tc.netpoll)
			}
			ln := listen(t, s, testPort)
			dial := peertest.Dialer(p.B)
			nettest.TestConn(t, acceptDialPipe(ln, func(ctx context.Context) (net.Conn, error) {
				return dial(ctx, "tcp4", fmt.Sprintf("%s:%d", addr, testPort))
			}))
			time.Sleep(100 * time.Millisecond)
			before := counter(s.Stats(), "netconn", "poll_rounds")
			time.Sleep(200 * time.Millisecond)
			if d := counter(s.Stats(), "netconn", "poll_rounds") - before; d > 100 {
				t.Errorf("an idle poller made %d rounds in 200ms", d)
			}
		})
	}
}
