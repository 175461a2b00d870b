package conformance

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/stack/native"
)

// KindNative is the native engine (stack/native), run to completion on a
// poll loop.
const KindNative Kind = "native"

// Native is the Factory of the native engine over memio: native.New on one
// port of an in-memory pair, on a memio.FakeClock that only the bench
// moves, driven by a poll loop as a backend drives it. No privileges.
func Native() Factory { return nativeFactory{name: "native-memio"} }

// nativeFactory makes DUTs of the native engine over memio. wrap, when
// set, wraps the engine's FrameIO (the mutants).
type nativeFactory struct {
	name string
	wrap func(fio waitFrameIO) waitFrameIO
}

// Name implements Factory.
func (f nativeFactory) Name() string { return f.name }

// New implements Factory.
func (f nativeFactory) New(tb TB, s Setup) (DUT, error) {
	w := newMemWire(s)
	var fio waitFrameIO = w.a
	if f.wrap != nil {
		fio = f.wrap(w.a)
	}
	var addr6, bench6 netip.Addr
	if s.IPv6 {
		addr6, bench6 = memDUTAddr6, memBenchAddr6
	}
	d, err := newNativeDUT(fio, s, memDUTAddr, 24, memBenchAddr, addr6, bench6, w.b.MAC())
	if err != nil {
		w.close()
		return nil, err
	}
	d.info = Info{Name: f.name, Kind: KindNative, MAC: w.a.MAC(), BenchMAC: w.b.MAC(),
		Addr: memDUTAddr, BenchAddr: memBenchAddr, Spare: memSpareAddr, MTU: w.mtu, Lacks: nativeLacks}
	if s.IPv6 {
		d.info.Addr6, d.info.BenchAddr6, d.info.Spare6 = memDUTAddr6, memBenchAddr6, memSpareAddr6
	}
	d.link = memLink{w.b}
	d.closeWire, d.settle = w.close, w.settle
	return d, nil
}

var nativeLacks = map[Cap]string{
	CapUDP: "the native engine has no UDP sockets (it answers UDP with port unreachable)",
}

// newNativeDUT makes the engine on fio, on a fake clock only the bench
// moves, with bench (and bench6, when valid) as a static neighbour, and
// starts its poll loop. A valid addr6 turns IPv6 on (prefix /64). The
// caller fills in info, link, closeWire and settle; on error fio is the
// caller's to close.
func newNativeDUT(fio waitFrameIO, s Setup, addr netip.Addr, prefix int, bench, addr6, bench6 netip.Addr, benchMAC net.HardwareAddr) (*nativeDUT, error) {
	clk := memio.NewFakeClock(time.Unix(1_000_000, 0))
	nb := map[netip.Addr]net.HardwareAddr{bench: benchMAC}
	if bench6.IsValid() {
		nb[bench6] = benchMAC
	}
	o := native.Options{Addr: addr, PrefixLen: prefix, Addr6: addr6, Clock: clk, MinRTO: s.RTOMin,
		MaxConns: 64, SendBuf: 64 << 10, RecvBuf: 64 << 10,
		Neighbors: nb,
		// No DELAY state: a STALE neighbour is probed at its first use.
		ARPReachable: s.Neigh.Reachable, ARPTimeout: s.Neigh.Retrans,
		AlwaysSYNCookies: s.SYNCookies}
	e, err := native.New(fio, o)
	if err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	d := &nativeDUT{e: e, fio: fio, clk: clk, start: clk.Now()}
	d.startLoop()
	return d, nil
}

// nativeDUT is the native engine over a FrameIO. The engine is owned by
// one goroutine at a time: the poll loop and the socket calls take
// dutBase.mu.
type nativeDUT struct {
	e     *native.Engine
	fio   waitFrameIO
	clk   *memio.FakeClock
	start time.Time
	dutBase
}

var (
	_ DUT          = (*nativeDUT)(nil)
	_ Settler      = (*nativeDUT)(nil)
	_ AnswerWaiter = (*nativeDUT)(nil)
	_ Clock        = (*nativeDUT)(nil)
)

// startLoop runs Poll and Flush, and Wait when there is nothing to do.
func (d *nativeDUT) startLoop() {
	d.startPollLoop(func() (int, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		n := d.e.Poll(64)
		return n, d.e.Flush()
	}, d.fio.Wait)
}

// do runs f on the engine and flushes what it queued.
func (d *nativeDUT) do(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f()
	if err := d.e.Flush(); err != nil && d.err == nil {
		d.err = err
	}
}

// Clock implements DUT.
func (d *nativeDUT) Clock() Clock { return d }

// Now implements Clock.
func (d *nativeDUT) Now() time.Duration { return d.clk.Now().Sub(d.start) }

// Advance implements Clock: the clock moves and the timers due run (their
// frames leave before Advance returns).
func (d *nativeDUT) Advance(dur time.Duration) {
	d.clk.Advance(dur)
	d.do(func() { d.e.Poll(0) })
}

// AnswerWait implements AnswerWaiter: the engine answers within the poll
// loop's round, microseconds; a second covers a loaded machine.
func (d *nativeDUT) AnswerWait() time.Duration { return time.Second }

// Settle implements Settler: it waits until the engine took every frame
// the bench sent, then for one more round of the loop.
func (d *nativeDUT) Settle(wait time.Duration) {
	if d.settle != nil {
		d.settle(wait)
	} else {
		time.Sleep(2 * time.Millisecond)
	}
	d.do(func() { d.e.Poll(64) })
}

// Counters implements DUT: the engine's counters under the common names.
func (d *nativeDUT) Counters() (map[string]uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return nil, fmt.Errorf("poll loop: %w", d.err)
	}
	v := func(n string) uint64 { x, _ := d.e.Counter(n); return x }
	return map[string]uint64{
		CounterIPHeaderErrors:   v("ip_bad_checksum") + v("ip_bad_version") + v("ip_bad_length"),
		CounterIPDeliveredLocal: v("ip_delivered"),
		CounterICMPEchoReplies:  v("icmp_echo_replies"),
		CounterTCPChecksumErr:   v("tcp_checksum_errors"),
		CounterTCPResetsSent:    v("tcp_resets_sent"),
		CounterTCPRetransmits:   v("tcp_retransmits"),
		CounterTCPFastRetrans:   v("tcp_fast_retransmits"),
		CounterTCPTimeouts:      v("tcp_timeouts"),
		CounterTCPPassiveOpens:  v("tcp_passive_opens"),
		CounterTCPActiveOpens:   v("tcp_active_opens"),
		CounterTCPSegmentsIn:    v("tcp_segments_in"),
		CounterARPRepliesSent:   v("arp_replies_sent"),
		CounterARPRequestsSent:  v("arp_requests_sent"),
	}, nil
}

// Close implements DUT.
func (d *nativeDUT) Close() error {
	return d.close(func() {
		d.mu.Lock()
		d.e.Close()
		d.mu.Unlock()
	})
}

// Listen implements DUT.
func (d *nativeDUT) Listen(port uint16, o SockOpts) (Listener, error) {
	l, err := openSocket(d, o, func() (*native.Listener, error) { return d.e.Listen(port, 16) })
	if err != nil {
		return nil, fmt.Errorf("native: listen %d: %w", port, err)
	}
	return &nativeListener{d: d, l: l}, nil
}

// Connect implements DUT.
func (d *nativeDUT) Connect(to netip.AddrPort, o SockOpts) (Conn, error) {
	c, err := openSocket(d, o, func() (*native.Conn, error) { return d.e.Dial(to, 0) })
	if err != nil {
		return nil, fmt.Errorf("native: connect %v: %w", to, err)
	}
	return &nativeConn{d: d, c: c}, nil
}

// openSocket runs open on d's engine (under its lock) and applies o to
// the listener or connection it made.
func openSocket[S sockOpter](d *nativeDUT, o SockOpts, open func() (S, error)) (S, error) {
	var s S
	var err error
	d.do(func() {
		if s, err = open(); err == nil {
			applySockOpts(s, o)
		}
	})
	return s, err
}

// sockOpter is what the engine's listeners and connections take of
// SockOpts.
type sockOpter interface {
	SetRecvBuf(n int)
	SetKeepalive(idle, interval time.Duration, count int)
}

// applySockOpts sets o's receive buffer and keepalive on s, those o sets.
func applySockOpts(s sockOpter, o SockOpts) {
	if o.RecvBuf > 0 {
		s.SetRecvBuf(o.RecvBuf)
	}
	if k := o.KeepAlive; k != nil {
		s.SetKeepalive(k.Idle, k.Interval, k.Count)
	}
}

// ListenUDP implements DUT: the engine has no UDP sockets.
func (d *nativeDUT) ListenUDP(uint16) (UDPConn, error) {
	return nil, dgramio.NotSupported("UDP sockets on the native engine", "", "it has TCP and ICMP only", nil)
}

// waitFor calls try under the engine's lock until it reports done, up to
// wait (real time), sleeping between tries; false when it never did.
func (d *nativeDUT) waitFor(wait time.Duration, try func() bool) bool {
	deadline := time.Now().Add(wait)
	for {
		var ok bool
		d.do(func() { ok = try() })
		if ok {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Microsecond)
	}
}

type nativeListener struct {
	d *nativeDUT
	l *native.Listener
}

// Accept implements Listener.
func (l *nativeListener) Accept(wait time.Duration) (Conn, error) {
	var c *native.Conn
	if !l.d.waitFor(wait, func() bool { c, _ = l.l.Accept(); return c != nil }) {
		return nil, ErrWouldBlock
	}
	return &nativeConn{d: l.d, c: c}, nil
}

// Close implements Listener.
func (l *nativeListener) Close() error { l.d.do(l.l.Close); return nil }

type nativeConn struct {
	d      *nativeDUT
	c      *native.Conn
	closed bool
}

// nativeErr maps the engine's errors to the suite's.
func nativeErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF):
		return io.EOF
	case errors.Is(err, native.ErrReset), errors.Is(err, native.ErrRefused), errors.Is(err, native.ErrAborted):
		return ErrReset
	case errors.Is(err, native.ErrTimedOut):
		return ErrTimedOut
	}
	return fmt.Errorf("native: %w", err)
}

// Write implements Conn.
func (c *nativeConn) Write(p []byte) (int, error) {
	var n int
	var err error
	c.d.do(func() {
		if c.closed {
			err = net.ErrClosed
			return
		}
		n = c.c.Write(p)
		if n == 0 && len(p) > 0 {
			err = nativeErr(c.c.Err())
			if err == nil {
				err = ErrWouldBlock
			}
		}
	})
	return n, err
}

// Read implements Conn.
func (c *nativeConn) Read(p []byte, wait time.Duration) (int, error) {
	var n int
	var err error
	if !c.d.waitFor(wait, func() bool {
		if c.closed {
			err = net.ErrClosed
			return true
		}
		n, err = c.c.Read(p)
		return n > 0 || err != nil
	}) {
		return 0, ErrWouldBlock
	}
	return n, nativeErr(err)
}

// Shutdown implements Conn.
func (c *nativeConn) Shutdown() error {
	c.d.do(func() {
		if !c.closed {
			c.c.CloseWrite()
		}
	})
	return nil
}

// Close implements Conn.
func (c *nativeConn) Close() error {
	c.d.do(func() {
		if !c.closed {
			c.closed = true
			c.c.Close()
		}
	})
	return nil
}
