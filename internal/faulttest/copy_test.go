package faulttest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/tcp"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testutil"
	"github.com/dgramio/dgramio/internal/wire"
	"github.com/dgramio/dgramio/stack/native"
	"github.com/dgramio/dgramio/tcp/netconn"
)

// The io.Copy echo over the lossy wire: how much each engine carries, and
// the wire of the report that found the stall.
const (
	copyBytes     = 64 << 20
	copySoakBytes = 256 << 20
	// copyStall fails the run when no echoed byte arrives for that long.
	copyStall = time.Minute
)

var copyImpairment = wire.Options{
	Loss:    0.01,
	Dup:     0.01,
	Reorder: 0.05,
	Corrupt: 0.001,
	Delay:   200 * time.Microsecond,
	Jitter:  100 * time.Microsecond,
}

// TestFaultCopyWire serves the plainest Go stream echo, io.Copy(c, c) on
// each accepted connection, over the seeded lossy wire of internal/wire
// (1% loss, 1% duplication, 5% reordering, 0.1% corruption, both
// directions), once on kernel tcp (net.Listen) and once on tcp-xdp
// (netconn.Listen, on its default engine; tcp-dpdk instead with -tags
// dpdk), and on the native engine on a poll loop of its own over tcp-xdp's
// AF_XDP socket (nativeCopyServe), twice: with the congestion control
// Config's default gives it (the host's, as the kernel echo has it:
// dgramio.TCPTuning.Congestion), and with NewReno, the loss-based
// control, whatever the host's. A kernel TCP client on the other host
// writes 64 MiB (SOAK=1, as make soak sets it: 256 MiB) of seeded bytes
// while it reads the echo back, and checks it byte for byte. The echo
// reads nothing ahead: while its Write is blocked, it does not read, its
// receive window closes, and the client's data and ACKs meet a zero
// window, which RFC 9293 §3.10.7.4 says must still have its ACKs
// processed. The run fails when no echoed byte arrives for a minute.
func TestFaultCopyWire(t *testing.T) {
	testutil.RequireRoot(t)
	total := int64(copyBytes)
	if os.Getenv("SOAK") == "1" {
		total = copySoakBytes
	}
	kinds := names(dgramio.KindTCP)
	for _, k := range testKinds { // tcp-xdp; tcp-dpdk with -tags dpdk
		if isStream(k) && dgramio.Kind(k) != dgramio.KindTCP {
			kinds = append(kinds, k)
		}
		if dgramio.Kind(k) == dgramio.KindTCPXDP {
			kinds = append(kinds, nativeCopyKind, nativeRenoCopyKind)
		}
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) { copyWire(t, kind, total) })
	}
}

func copyWire(t *testing.T, kind string, total int64) {
	w := wire.NewT(t, copyImpairment)
	var ln net.Listener
	var stopNative func() string
	served := make(chan error, 1)
	var addr netip.Addr
	if kind == nativeCopyKind || kind == nativeRenoCopyKind {
		addr = addrFor(string(dgramio.KindTCPXDP), w.B)
		var cc dgramio.Congestion // Config's default
		if kind == nativeRenoCopyKind {
			cc = dgramio.CongestionReno
		}
		stopNative = nativeCopyServe(t, w.B, addr, cc)
		served <- nil
	} else {
		addr = addrFor(kind, w.B)
		ln = copyListener(t, kind, w.B, addr)
		go func() { served <- copyServe(ln) }()
	}

	c, err := dialTCP(w.A, netip.AddrPortFrom(addr, port), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seed := w.Seed()
	var echoed atomic.Int64
	start := time.Now()
	wrote := make(chan error, 1)
	go func() {
		_, err := io.CopyN(c, &seeded{rng: rand.New(rand.NewPCG(seed, 0xc0b1))}, total)
		wrote <- err
	}()
	read := make(chan error, 1)
	go func() { read <- verifyEcho(c, seed, total, &echoed) }()
	last, lastAt := int64(0), time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case err := <-wrote:
			if err != nil {
				t.Fatalf("client write: %v after %d bytes echoed (replay: WIRE_SEED=%d)", err, echoed.Load(), seed)
			}
			wrote = nil
		case err := <-read:
			if err != nil {
				t.Fatalf("client read: %v (replay: WIRE_SEED=%d)", err, seed)
			}
			done = true
		case <-tick.C:
			if n := echoed.Load(); n != last {
				last, lastAt = n, time.Now()
			} else if time.Since(lastAt) > copyStall {
				if l, ok := ln.(*netconn.Listener); ok {
					t.Logf("echo counters: %s", allCounters(l.Service().Stats()))
				}
				if stopNative != nil {
					t.Logf("echo counters: %s", stopNative())
				}
				t.Logf("client: %s", clientTCPInfo(c))
				t.Logf("last TCP segments A→B (client to echo):\n%s", w.Trace(wire.AtoB))
				t.Logf("last TCP segments B→A (echo to client):\n%s", w.Trace(wire.BtoA))
				t.Fatalf("%s: no echoed byte for %v after %d of %d bytes (replay: WIRE_SEED=%d)",
					kind, copyStall, n, total, seed)
			}
		}
	}
	elapsed := time.Since(start)
	if l, ok := ln.(*netconn.Listener); ok {
		st := l.Service().Stats()
		engine := "netstack" // the Service's engine's counter layer
		if strings.HasPrefix(st.Mode, "native") {
			engine = native.Layer
		}
		t.Logf("echo (%s): link acks_salvaged %d; %s tcp_retransmits %d, tcp_timeouts %d", st.Mode,
			counterOf(st, "link", "acks_salvaged"), engine, counterOf(st, engine, "tcp_retransmits"),
			counterOf(st, engine, "tcp_timeouts"))
	}
	c.Close()
	if stopNative != nil {
		t.Logf("echo: %s", stopNative())
	} else {
		ln.Close()
	}
	<-served
	ab, ba := w.Stats(wire.AtoB), w.Stats(wire.BtoA)
	t.Logf("%s: %d MiB echoed byte-exact in %v (%.1f MiB/s each way), seed %d", kind, total>>20,
		elapsed.Round(time.Millisecond), float64(total)/(1<<20)/elapsed.Seconds(), seed)
	t.Logf("wire A→B: %v", ab)
	t.Logf("wire B→A: %v", ba)
	if ab.Dropped == 0 || ab.Duplicated == 0 || ab.Reordered == 0 || ba.Dropped == 0 {
		t.Errorf("the wire did not impair the stream (A→B %v; B→A %v): the test tested nothing", ab, ba)
	}
}

// copyListener listens on port of addr on h: a kernel listener, or a
// netconn one on tcp-xdp (closed with the listener).
func copyListener(t *testing.T, kind string, h *testhost.Host, addr netip.Addr) net.Listener {
	t.Helper()
	var ln net.Listener
	err := h.Do(func() error {
		var err error
		if dgramio.Kind(kind) == dgramio.KindTCP {
			ln, err = net.Listen("tcp4", netip.AddrPortFrom(addr, port).String())
			return err
		}
		ln, err = netconn.Listen(dgramio.Config{Kind: dgramio.Kind(kind), Iface: h.Iface, LocalIP: addr, Port: port,
			Pcap: os.Getenv("COPY_PCAP")})
		return err
	})
	testutil.SkipIfNotSupported(t, err)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// copyServe accepts until ln closes and echoes each connection with
// io.Copy(c, c), as any Go server would.
func copyServe(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			io.Copy(c, c)
		}()
	}
}

// seeded is an endless reader of bytes drawn from rng.
type seeded struct {
	rng *rand.Rand
	v   uint64
	n   int // bytes of v not yet used
}

func (s *seeded) Read(b []byte) (int, error) {
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

// verifyEcho reads total bytes from c and compares them with the stream
// of seed, counting what arrived in echoed.
func verifyEcho(c net.Conn, seed uint64, total int64, echoed *atomic.Int64) error {
	want := &seeded{rng: rand.New(rand.NewPCG(seed, 0xc0b1))}
	got, exp := make([]byte, 64<<10), make([]byte, 64<<10)
	var n int64
	for n < total {
		m, err := c.Read(got[:min(int64(len(got)), total-n)])
		want.Read(exp[:m])
		if !bytes.Equal(got[:m], exp[:m]) {
			return fmt.Errorf("echo differs in the %d bytes from offset %d", m, n)
		}
		n += int64(m)
		echoed.Store(n)
		if err != nil && n < total {
			return fmt.Errorf("after %d bytes: %w", n, err)
		}
	}
	return nil
}

// nativeCopyKind names the io.Copy echo run on the native engine itself
// with Config's default congestion control (the host's where the engine
// implements it, as the kernel client's is: BBR on some hosts),
// nativeRenoCopyKind the same with NewReno whatever the host's.
const (
	nativeCopyKind     = "tcp-xdp+native"
	nativeRenoCopyKind = "tcp-xdp+native+reno"
)

// nativeCopyServe runs the io.Copy echo on the native engine (stack/native)
// over the AF_XDP socket and XDP program of tcp-xdp (tcp.OpenXDP), on a poll
// loop of its own: each connection reads a chunk only once the one before
// it was written whole, as io.Copy does, so a blocked write closes the
// echo's receive window. The engine runs cc, or with "" Config's default
// for tcp-xdp's native engine (the host's: tcp.TuningFromConfig). stop
// ends the loop, releases everything and returns the engine's counters;
// it may be called more than once.
func nativeCopyServe(t *testing.T, h *testhost.Host, addr netip.Addr, cc dgramio.Congestion) (stop func() string) {
	t.Helper()
	cfg := dgramio.Config{Kind: dgramio.KindTCPXDP, Role: dgramio.RoleServer, Iface: h.Iface, LocalIP: addr, Port: port}
	cfg.TCP.Congestion = cc
	ncc := tcp.NativeCongestion(tcp.TuningFromConfig(cfg).Congestion)
	t.Logf("native echo: congestion control %s", ncc)
	var fio frameio.FrameIO
	var opts tcp.Options
	err := h.Do(func() error {
		var err error
		fio, opts, err = tcp.OpenXDP(cfg)
		return err
	})
	testutil.SkipIfNotSupported(t, err)
	if err != nil {
		t.Fatal(err)
	}
	e, err := native.New(fio, native.Options{Addr: addr, AllOnLink: true, SendBuf: 1 << 20, RecvBuf: 1 << 20, Congestion: ncc})
	if err != nil {
		opts.Close()
		t.Fatal(err)
	}
	l, err := e.Listen(port, 16)
	if err != nil {
		e.Close()
		opts.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		type echo struct {
			c      *native.Conn
			buf    []byte
			n, off int
		}
		var conns []*echo
		for ctx.Err() == nil {
			e.Poll(256)
			for c, ok := l.Accept(); ok; c, ok = l.Accept() {
				conns = append(conns, &echo{c: c, buf: make([]byte, 32<<10)})
			}
			kept := conns[:0]
			for _, x := range conns {
				if x.off == x.n {
					k, err := x.c.Read(x.buf)
					if err != nil { // the client's FIN, or the end
						x.c.Close()
						continue
					}
					x.n, x.off = k, 0
				}
				if x.off < x.n {
					x.off += x.c.Write(x.buf[x.off:x.n])
				}
				kept = append(kept, x)
			}
			conns = kept
			if err := e.Flush(); err != nil {
				t.Errorf("native echo: Flush: %v", err)
				return
			}
			wctx, wcancel := context.WithTimeout(ctx, time.Millisecond)
			_ = e.Wait(wctx)
			wcancel()
		}
	}()
	var once sync.Once
	var counters string
	stop = func() string {
		once.Do(func() {
			cancel()
			<-done
			var b strings.Builder
			for _, c := range e.AppendCounters(nil) {
				if c.Value != 0 {
					fmt.Fprintf(&b, "%s.%s %d; ", c.Layer, c.Name, c.Value)
				}
			}
			counters = b.String()
			e.Close()
			opts.Close()
		})
		return counters
	}
	t.Cleanup(func() { stop() })
	return stop
}

// clientTCPInfo is the kernel client's view of a stalled connection
// (TCP_INFO): whether it waits on an RTO, probes a zero window, or has
// nothing to send, for the report of a stall.
func clientTCPInfo(c net.Conn) string {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return "no TCP_INFO (not a socket)"
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return "no TCP_INFO: " + err.Error()
	}
	var ti *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		ti, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		return fmt.Sprintf("no TCP_INFO: %v %v", err, gerr)
	}
	return fmt.Sprintf("state %d ca_state %d rto %d us backoff %d probes %d retransmits %d unacked %d lost %d "+
		"snd_wnd %d snd_cwnd %d rcv_space %d notsent %d last_data_sent %d ms last_data_recv %d ms last_ack_recv %d ms "+
		"total_retrans %d bytes_acked %d bytes_received %d",
		ti.State, ti.Ca_state, ti.Rto, ti.Backoff, ti.Probes, ti.Retransmits, ti.Unacked, ti.Lost,
		ti.Snd_wnd, ti.Snd_cwnd, ti.Rcv_space, ti.Notsent_bytes, ti.Last_data_sent, ti.Last_data_recv, ti.Last_ack_recv,
		ti.Total_retrans, ti.Bytes_acked, ti.Bytes_received)
}

// TestClientTCPInfo: the stall report reads a live connection's state
// (1, ESTABLISHED) and says why when it cannot.
func TestClientTCPInfo(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := clientTCPInfo(c); !strings.HasPrefix(got, "state 1 ") {
		t.Fatalf("clientTCPInfo = %q, want an established connection's", got)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := clientTCPInfo(a); !strings.HasPrefix(got, "no TCP_INFO") {
		t.Fatalf("clientTCPInfo of a pipe = %q", got)
	}
}
