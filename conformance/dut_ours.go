package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/faketime"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	nstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	ntcp "gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/stack"
	"github.com/dgramio/dgramio/internal/tcp"
)

// Addresses of the in-memory DUT (RFC 2544's benchmarking range).
var (
	memDUTAddr   = netip.MustParseAddr("198.18.0.1")
	memBenchAddr = netip.MustParseAddr("198.18.0.2")
	memSpareAddr = netip.MustParseAddr("198.18.0.3")

	// Their IPv6 counterparts, from RFC 5180's benchmarking range.
	memDUTAddr6   = netip.MustParseAddr("2001:2:0:ff::1")
	memBenchAddr6 = netip.MustParseAddr("2001:2:0:ff::2")
	memSpareAddr6 = netip.MustParseAddr("2001:2:0:ff::3")
)

// Ours is the Factory of our stack over memio: stack.New on one port of an
// in-memory pair, tuned with tcp.TuningFromConfig as the tcp-xdp kind is,
// driven by a poll loop as a backend drives it, on a fake clock
// (faketime.ManualClock) that only the bench moves. No privileges needed.
func Ours() Factory { return &oursFactory{name: "ours-memio"} }

// oursFactory makes DUTs of our stack over memio. wrap, when set, wraps the
// DUT's FrameIO (the mutants).
type oursFactory struct {
	name string
	wrap func(fio frameio.FrameIO) frameio.FrameIO
}

// Name implements Factory.
func (f *oursFactory) Name() string { return f.name }

// waitFrameIO is what a DUT's poll loop needs of its FrameIO: frames and
// Wait.
type waitFrameIO interface {
	frameio.FrameIO
	frameio.Waiter
}

// New implements Factory.
func (f *oursFactory) New(tb TB, s Setup) (DUT, error) {
	w := newMemWire(s)
	var fio frameio.FrameIO = w.a
	if f.wrap != nil {
		fio = f.wrap(w.a)
		if _, ok := fio.(frameio.Waiter); !ok {
			w.close()
			return nil, fmt.Errorf("ours: the wrapped FrameIO cannot Wait")
		}
	}
	opts := stack.Options{Addr: memDUTAddr, PrefixLen: 24,
		Neighbors: map[netip.Addr]net.HardwareAddr{memBenchAddr: w.b.MAC()}}
	if s.IPv6 {
		// netstack as stack.New builds it serves one family: an IPv6
		// case gets an IPv6 stack.
		opts = stack.Options{Addr: memDUTAddr6, PrefixLen: 64,
			Neighbors: map[netip.Addr]net.HardwareAddr{memBenchAddr6: w.b.MAC()}}
	}
	d, err := newOursDUT(fio, s, opts)
	if err != nil {
		w.close()
		return nil, err
	}
	d.info = Info{Name: f.name, Kind: KindOurs, MAC: w.a.MAC(), BenchMAC: w.b.MAC(),
		Addr: memDUTAddr, BenchAddr: memBenchAddr, Spare: memSpareAddr, MTU: w.mtu, Lacks: netstackLacks()}
	if s.IPv6 {
		d.info.Addr6, d.info.BenchAddr6, d.info.Spare6 = memDUTAddr6, memBenchAddr6, memSpareAddr6
	}
	d.link = memLink{w.b}
	d.answer = 2 * time.Second
	d.closeWire, d.settle = w.close, w.settle
	return d, nil
}

// memWire is the wire of a memio DUT: a memio pair, a the DUT's end and
// b the bench's, with MTU mtu.
type memWire struct {
	a, b *memio.Port
	mtu  int
}

// newMemWire makes the memio pair for s (MTU s.MTU, memio's default when
// zero).
func newMemWire(s Setup) memWire {
	mtu := s.MTU
	if mtu == 0 {
		mtu = memio.DefaultMTU
	}
	a, b := memio.NewPair(memio.Options{MTU: mtu})
	return memWire{a: a, b: b, mtu: mtu}
}

// close closes both ends (a memio DUT's closeWire).
func (w memWire) close() error { return errors.Join(w.a.Close(), w.b.Close()) }

// settle waits, up to wait, until the DUT's end took every frame the
// bench's sent (a memio DUT's settle).
func (w memWire) settle(wait time.Duration) {
	deadline := time.Now().Add(wait)
	for w.a.Stats().RxFrames < w.b.Stats().TxFrames && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
}

// newOursDUT builds our stack on fio as the tcp-* kinds do (stack.New,
// tcp.Tuning of s applied) on a fake clock, and starts its poll loop. The
// caller fills in the transport's part (info, link, closeWire, settle,
// answer). On error nothing is left but fio, which the caller closes.
func newOursDUT(fio frameio.FrameIO, s Setup, opts stack.Options) (*oursDUT, error) {
	clk := faketime.NewManualClock()
	opts.Clock = clk
	st, err := stack.New(fio, opts)
	if err != nil {
		return nil, fmt.Errorf("ours: %w", err)
	}
	cfg := dgramio.Config{Kind: dgramio.KindTCPXDP}
	cfg.TCP.Stack = dgramio.TCPStackNetstack
	cfg.TCP.MinRTO = s.RTOMin
	tune := tcp.TuningFromConfig(cfg)
	if err := tune.Apply(st.NS); err != nil {
		st.Close()
		return nil, fmt.Errorf("ours: tuning: %w", err)
	}
	if err := setNUD(st.NS, proto(opts.Addr), s.Neigh); err != nil {
		st.Close()
		return nil, err
	}
	d := &oursDUT{st: st, clk: clk, start: clk.NowMonotonic(), tune: tune, answer: DefaultAnswer, proto: proto(opts.Addr)}
	d.startLoop()
	return d, nil
}

// proto is netstack's network protocol of a's family.
func proto(a netip.Addr) tcpip.NetworkProtocolNumber {
	if a.Is4() {
		return ipv4.ProtocolNumber
	}
	return ipv6.ProtocolNumber
}

// setNUD sets the timers of t that are not zero on netstack's
// neighbour cache for p (IPv4: ARP; IPv6: NDP).
func setNUD(ns *nstack.Stack, p tcpip.NetworkProtocolNumber, t NeighTimes) error {
	if t == (NeighTimes{}) {
		return nil
	}
	c, terr := ns.NUDConfigurations(stack.NICID, p)
	if terr != nil {
		return fmt.Errorf("ours: NUD configuration: %s", terr)
	}
	if t.Reachable > 0 {
		c.BaseReachableTime = t.Reachable
	}
	if t.DelayFirstProbe > 0 {
		c.DelayFirstProbeTime = t.DelayFirstProbe
	}
	if t.Retrans > 0 {
		c.RetransmitTimer = t.Retrans
	}
	if terr := ns.SetNUDConfigurations(stack.NICID, p, c); terr != nil {
		return fmt.Errorf("ours: NUD configuration: %s", terr)
	}
	return nil
}

// oursDUT is our stack over a FrameIO (memio, or AF_XDP on a veth), on a
// fake clock.
type oursDUT struct {
	st    *stack.Stack
	clk   *faketime.ManualClock
	start tcpip.MonotonicTime
	tune  tcp.Tuning
	dutBase
	answer time.Duration // AnswerWait
	// proto is the stack's one network protocol (IPv4, or IPv6 for an
	// IPv6 case).
	proto tcpip.NetworkProtocolNumber
}

var (
	_ DUT     = (*oursDUT)(nil)
	_ Settler = (*oursDUT)(nil)
	_ Clock   = (*oursDUT)(nil)

	_ AnswerWaiter = (*oursDUT)(nil)

	_ Listener = (*nsListener)(nil)
	_ Conn     = (*nsConn)(nil)
	_ Link     = memLink{}
)

// startLoop runs the poll loop a backend's Rx/Flush/Wait would: deliver
// frames, kick what netstack wrote, sleep when idle.
func (d *oursDUT) startLoop() {
	d.startPollLoop(func() (int, error) {
		n := d.st.EP.Poll(64)
		return n, d.st.EP.Flush()
	}, d.st.EP.Sleep)
}

// oursLacks is what our stack over memio cannot do.
var oursLacks = map[Cap]string{
	CapUDP:        "stack.New registers no UDP (dgramio's datagram kinds run udp/ on their raw paths, without a socket layer)",
	CapSYNCookies: "netstack is not switched to cookies for every SYN here (its listen backlog decides when it uses them)",
}

var (
	netstackV6Once sync.Once
	netstackV6Err  error
)

// netstackLacks is oursLacks, and CapIPv6 when stack.New refuses an IPv6
// address (asked once, on a memio pair): then netstack as the tcp-* kinds
// build it serves no IPv6, and the IPv6 cases say so.
func netstackLacks() map[Cap]string {
	netstackV6Once.Do(func() {
		a, b := memio.NewPair(memio.Options{})
		defer a.Close()
		defer b.Close()
		st, err := stack.New(a, stack.Options{Addr: memDUTAddr6, PrefixLen: 64})
		if err != nil {
			netstackV6Err = err
			return
		}
		st.Close()
	})
	if netstackV6Err == nil {
		return oursLacks
	}
	m := maps.Clone(oursLacks)
	m[CapIPv6] = "not served: stack.New refuses an IPv6 address (" + netstackV6Err.Error() + ")"
	return m
}

// Clock implements DUT: the DUT itself is its clock.
func (d *oursDUT) Clock() Clock { return d }

// Now implements Clock.
func (d *oursDUT) Now() time.Duration { return d.clk.NowMonotonic().Sub(d.start) }

// Advance implements Clock: the manual clock moves, netstack's timers that
// fall due run (their frames are written before Advance returns).
func (d *oursDUT) Advance(dur time.Duration) { d.clk.Advance(dur) }

// AnswerWait implements AnswerWaiter. Over memio: netstack answers a
// frame within microseconds on its processor goroutines, and two seconds
// cover a loaded machine many times over.
func (d *oursDUT) AnswerWait() time.Duration { return d.answer }

// Settle implements Settler: it waits until the DUT took every frame the
// bench sent (as far as the transport can tell), then gives netstack's
// processors a moment.
func (d *oursDUT) Settle(wait time.Duration) {
	if d.settle != nil {
		d.settle(wait)
	}
	for i := 0; i < 10; i++ {
		runtime.Gosched()
	}
	time.Sleep(2 * time.Millisecond)
}

// Counters implements DUT: netstack's counters under the common names.
func (d *oursDUT) Counters() (map[string]uint64, error) {
	if err := d.loopErr(); err != nil {
		return nil, fmt.Errorf("poll loop: %w", err)
	}
	s := d.st.NS.Stats()
	m := map[string]uint64{
		CounterIPHeaderErrors:   s.IP.MalformedPacketsReceived.Value(),
		CounterIPDeliveredLocal: s.IP.PacketsDelivered.Value(),
		CounterICMPEchoReplies:  s.ICMP.V4.PacketsSent.EchoReply.Value(),
		CounterTCPChecksumErr:   s.TCP.ChecksumErrors.Value(),
		CounterTCPResetsSent:    s.TCP.ResetsSent.Value(),
		CounterTCPRetransmits:   s.TCP.Retransmits.Value(),
		CounterTCPFastRetrans:   s.TCP.FastRetransmit.Value(),
		CounterTCPTimeouts:      s.TCP.Timeouts.Value(),
		CounterTCPPassiveOpens:  s.TCP.PassiveConnectionOpenings.Value(),
		CounterTCPActiveOpens:   s.TCP.ActiveConnectionOpenings.Value(),
		CounterTCPSegmentsIn:    s.TCP.ValidSegmentsReceived.Value(),
		CounterARPRepliesSent:   s.ARP.OutgoingRepliesSent.Value(),
		CounterARPRequestsSent:  s.ARP.OutgoingRequestsSent.Value(),
	}
	// The stack's own summary (stack.AppendCounters) must agree with
	// what we read: the suite checks the counters the backend reports.
	for _, c := range d.st.AppendCounters(nil) {
		if c.Layer == "netstack" && c.Name == "tcp_checksum_errors" && c.Value != m[CounterTCPChecksumErr] {
			return nil, fmt.Errorf("stack reports tcp_checksum_errors %d, netstack %d", c.Value, m[CounterTCPChecksumErr])
		}
	}
	return m, nil
}

// Close implements DUT: the poll loop stops, then netstack, then the
// transport.
func (d *oursDUT) Close() error { return d.close(d.st.Close) }

func (d *oursDUT) newEndpoint(o SockOpts) (tcpip.Endpoint, *waiter.Queue, error) {
	wq := new(waiter.Queue)
	ep, terr := d.st.NS.NewEndpoint(ntcp.ProtocolNumber, d.proto, wq)
	if terr != nil {
		return nil, nil, fmt.Errorf("ours: endpoint: %w", tcp.GoError(terr))
	}
	if err := d.tune.ApplyEndpoint(ep); err != nil {
		ep.Close()
		return nil, nil, fmt.Errorf("ours: tuning: %w", err)
	}
	if err := setOpts(ep, o); err != nil {
		ep.Close()
		return nil, nil, err
	}
	return ep, wq, nil
}

func setOpts(ep tcpip.Endpoint, o SockOpts) error {
	if o.RecvBuf > 0 {
		ep.SocketOptions().SetReceiveBufferSize(int64(o.RecvBuf), true)
	}
	if k := o.KeepAlive; k != nil {
		ep.SocketOptions().SetKeepAlive(true)
		idle, intvl := tcpip.KeepaliveIdleOption(k.Idle), tcpip.KeepaliveIntervalOption(k.Interval)
		if err := ep.SetSockOpt(&idle); err != nil {
			return fmt.Errorf("ours: keepalive idle: %w", tcp.GoError(err))
		}
		if err := ep.SetSockOpt(&intvl); err != nil {
			return fmt.Errorf("ours: keepalive interval: %w", tcp.GoError(err))
		}
		if err := ep.SetSockOptInt(tcpip.KeepaliveCountOption, k.Count); err != nil {
			return fmt.Errorf("ours: keepalive count: %w", tcp.GoError(err))
		}
	}
	return nil
}

func (d *oursDUT) full(a netip.Addr, port uint16) tcpip.FullAddress {
	if a.Is6() {
		return tcpip.FullAddress{NIC: stack.NICID, Addr: tcpip.AddrFrom16(a.As16()), Port: port}
	}
	return tcpip.FullAddress{NIC: stack.NICID, Addr: tcpip.AddrFrom4(a.As4()), Port: port}
}

// Listen implements DUT.
func (d *oursDUT) Listen(port uint16, o SockOpts) (Listener, error) {
	ep, wq, err := d.newEndpoint(o)
	if err != nil {
		return nil, err
	}
	at := d.info.Addr
	if o.IPv6 {
		at = d.info.Addr6
	}
	if terr := ep.Bind(d.full(at, port)); terr != nil {
		ep.Close()
		return nil, fmt.Errorf("ours: bind %d: %w", port, tcp.GoError(terr))
	}
	if terr := ep.Listen(16); terr != nil {
		ep.Close()
		return nil, fmt.Errorf("ours: listen: %w", tcp.GoError(terr))
	}
	return &nsListener{d: d, ep: ep, wq: wq}, nil
}

// Connect implements DUT.
func (d *oursDUT) Connect(to netip.AddrPort, o SockOpts) (Conn, error) {
	ep, wq, err := d.newEndpoint(o)
	if err != nil {
		return nil, err
	}
	switch terr := ep.Connect(d.full(to.Addr(), to.Port())); terr.(type) {
	case nil, *tcpip.ErrConnectStarted:
	default:
		ep.Close()
		return nil, fmt.Errorf("ours: connect %v: %w", to, tcp.GoError(terr))
	}
	return &nsConn{ep: ep, wq: wq}, nil
}

// ListenUDP implements DUT: our stack has no UDP.
func (d *oursDUT) ListenUDP(uint16) (UDPConn, error) {
	return nil, dgramio.NotSupported("UDP sockets on our stack", "", "stack.New registers TCP and ICMP only", nil)
}

// memLink is the bench's memio port.
type memLink struct{ p *memio.Port }

// Send implements Link.
func (l memLink) Send(frame []byte) error {
	if !l.p.TxFrame(frame) {
		return errors.New("memio: TX ring full")
	}
	return l.p.Kick()
}

// Recv implements Link.
func (l memLink) Recv(wait time.Duration) ([]byte, error) {
	deadline := time.Now().Add(wait)
	for {
		var out []byte
		l.p.RxFrames(1, func(f []byte) { out = append([]byte(nil), f...) })
		if out != nil {
			return out, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), left)
		err := l.p.Wait(ctx)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
	}
}

// untilReady calls try until it returns something other than
// ErrWouldBlock, waiting between tries for one of mask's events on wq, up
// to wait (real time) in all; ErrWouldBlock when none came in time. The
// entry is registered before the first try, so that an event between a
// try and the wait is not lost.
func untilReady(wq *waiter.Queue, mask waiter.EventMask, wait time.Duration, try func() error) error {
	e, ch := waiter.NewChannelEntry(mask)
	wq.EventRegister(&e)
	defer wq.EventUnregister(&e)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		if err := try(); err != ErrWouldBlock {
			return err
		}
		select {
		case <-ch:
		case <-t.C:
			return ErrWouldBlock
		}
	}
}

type nsListener struct {
	d  *oursDUT
	ep tcpip.Endpoint
	wq *waiter.Queue
}

// Accept implements Listener.
func (l *nsListener) Accept(wait time.Duration) (Conn, error) {
	var c Conn
	err := untilReady(l.wq, waiter.ReadableEvents, wait, func() error {
		ep, wq, terr := l.ep.Accept(nil)
		switch terr.(type) {
		case nil:
		case *tcpip.ErrWouldBlock:
			return ErrWouldBlock
		default:
			return fmt.Errorf("ours: accept: %w", tcp.GoError(terr))
		}
		if err := l.d.tune.ApplyEndpoint(ep); err != nil {
			ep.Close()
			return err
		}
		c = &nsConn{ep: ep, wq: wq}
		return nil
	})
	return c, err
}

// Close implements Listener.
func (l *nsListener) Close() error { l.ep.Close(); return nil }

type nsConn struct {
	ep tcpip.Endpoint
	wq *waiter.Queue
	rd bytes.Reader
}

// nsErr maps a netstack error to the suite's.
func nsErr(op string, terr tcpip.Error) error {
	switch terr.(type) {
	case *tcpip.ErrWouldBlock, *tcpip.ErrNotConnected, *tcpip.ErrConnectStarted, *tcpip.ErrAlreadyConnecting:
		return ErrWouldBlock
	case *tcpip.ErrClosedForReceive:
		return io.EOF
	case *tcpip.ErrConnectionReset, *tcpip.ErrConnectionAborted, *tcpip.ErrConnectionRefused:
		return ErrReset
	case *tcpip.ErrTimeout:
		return ErrTimedOut
	}
	return fmt.Errorf("ours: %s: %w", op, tcp.GoError(terr))
}

// Write implements Conn.
func (c *nsConn) Write(p []byte) (int, error) {
	c.rd.Reset(p)
	n, terr := c.ep.Write(&c.rd, tcpip.WriteOptions{})
	if terr != nil {
		return int(n), nsErr("write", terr)
	}
	return int(n), nil
}

// Read implements Conn.
func (c *nsConn) Read(p []byte, wait time.Duration) (int, error) {
	n := 0
	err := untilReady(c.wq, waiter.ReadableEvents|waiter.EventHUp|waiter.EventErr, wait, func() error {
		w := tcpip.SliceWriter(p)
		res, terr := c.ep.Read(&w, tcpip.ReadOptions{})
		if terr != nil {
			return nsErr("read", terr)
		}
		n = res.Count
		return nil
	})
	return n, err
}

// Shutdown implements Conn.
func (c *nsConn) Shutdown() error {
	if terr := c.ep.Shutdown(tcpip.ShutdownWrite); terr != nil {
		return nsErr("shutdown", terr)
	}
	return nil
}

// Close implements Conn.
func (c *nsConn) Close() error { c.ep.Close(); return nil }
