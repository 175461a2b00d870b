package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"syscall"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/fdwait"
	"github.com/dgramio/dgramio/internal/stack"
	layer "github.com/dgramio/dgramio/internal/stream"
	"github.com/dgramio/dgramio/stack/native"
)

// nativeEngine is the native engine (package stack/native) under a Backend:
// the stream layer's Transport, run to completion on the poll loop. It has
// no goroutines: everything happens inside Rx, Flush, Wait, New and Close.
type nativeEngine struct {
	b   *Backend
	e   *native.Engine
	ln  *native.Listener
	irq stack.Interrupter // nil: the FrameIO cannot be interrupted
	wt  frameio.Waiter    // nil: the FrameIO cannot sleep (DPDK)
	// alarm interrupts the FrameIO's Wait when the engine's next timer is
	// due (with irq: a sleep then allocates nothing); made at the first
	// sleep, reused.
	alarm *time.Timer
	// now is the clock reading of the last Poll, which Push uses; fresh
	// says no Push came since that Poll.
	now   native.Tick
	fresh bool

	// closing makes nconn.Close half-close and keep the connection for
	// the linger (shutdown); lingering holds those connections.
	closing   bool
	lingering []*nconn
	// lost counts records taken by the engine whose first byte the peer
	// never acknowledged before Linger ran out (counted in TxDropped).
	lost uint64

	// slots finds the nconn of an engine connection (by Conn.Slot) for
	// Watch, which passes each to mark through took.
	slots []*nconn
	mark  func(layer.Conn)
	took  func(*native.Conn)
}

var _ layer.Transport = (*nativeEngine)(nil)

// NativeCongestion is the native engine's congestion control for c, a
// Tuning's (Config's default applied: TuningFromConfig): reno is
// native.NewReno, cubic native.CUBIC, bbr native.BBR.
func NativeCongestion(c dgramio.Congestion) native.Congestion {
	switch c {
	case dgramio.CongestionCubic:
		return native.CUBIC
	case dgramio.CongestionBBR:
		return native.BBR
	}
	return native.NewReno
}

// nativeOptions maps cfg and the Tuning onto the engine's options.
func nativeOptions(cfg dgramio.Config, t Tuning, opts Options) native.Options {
	o := native.Options{
		Addr:       cfg.LocalIP,
		PrefixLen:  opts.PrefixLen,
		Gateway:    opts.Gateway,
		Neighbors:  stack.OptionsFromConfig(cfg).Neighbors,
		Clock:      opts.NativeClock,
		SendBuf:    t.SendBuf,
		RecvBuf:    t.RecvBuf,
		MinRTO:     t.MinRTO,
		MaxRetries: t.MaxRetries,
		DelayedACK: t.DelayedACK,
		Nagle:      !t.NoDelay,
		NoSACK:     !t.SACK,
		Congestion: NativeCongestion(t.Congestion),
		SYNBacklog: listenBacklog,
		// Config.TCP.NoModerate: the window at RecvBuf from the start
		// (docs/memory.md).
		NoBufferTuning: !t.Moderate,
	}
	if opts.ARPShare != nil {
		o.ARPShare = &opts.ARPShare.nat // a reply on one queue is known to all
	}
	// Like the netstack backend, which sends to every peer on the link,
	// the engine then has no gateway: every address is on the link.
	o.AllOnLink = o.PrefixLen == 0
	if cfg.IPv6() { // an IPv6 engine: LocalIP is its Addr6, no IPv4 address
		o.Addr, o.Addr6 = netip.Addr{}, cfg.LocalIP
		o.PrefixLen, o.PrefixLen6 = 0, opts.PrefixLen
		o.Gateway, o.Gateway6 = netip.Addr{}, opts.Gateway
	}
	if o.MinRTO > native.DefaultMaxRTO {
		o.MaxRTO = o.MinRTO
	}
	if o.MaxConns = t.MaxConns; o.MaxConns == 0 {
		o.MaxConns = native.DefaultMaxConns
	}
	if max := len(cfg.Dests) + 1; cfg.Role == dgramio.RoleClient && max > o.MaxConns {
		o.MaxConns = max // a client holds one connection per destination
	}
	return o
}

// open starts the engine over fio and listens or connects. On error the
// caller shuts the Backend down (shutdown copes with a nil engine).
func (n *nativeEngine) open(fio frameio.FrameIO) error {
	b := n.b
	n.irq, _ = fio.(stack.Interrupter)
	n.wt, _ = fio.(frameio.Waiter)
	n.took = n.readable
	if err := b.tune.ValidateFor(dgramio.TCPStackNative); err != nil {
		return err
	}
	e, err := native.New(fio, nativeOptions(b.cfg, b.tune, b.opts))
	if err != nil {
		return fmt.Errorf("tcp: native engine: %w", err)
	}
	n.e = e
	if b.cfg.Role == dgramio.RoleServer {
		ln, err := n.e.Listen(b.cfg.Port, listenBacklog)
		if err != nil {
			return fmt.Errorf("tcp: listen %s:%d: %w", b.cfg.LocalIP, b.cfg.Port, nativeGoErr(err))
		}
		n.ln = ln
		return nil
	}
	return n.connectAll()
}

// Poll implements layer.Transport: frames in, timers due. It reads the
// engine's clock, once, and the Push that follows takes the same reading,
// so each Rx and Flush of the Backend reads the clock once (Wait reads it
// once too, in sleep). It reports false when no frame came, the engine is
// idle (Engine.Idle) and no connection waits to be accepted; the next
// Push (a later Flush's) then reads the clock itself.
func (n *nativeEngine) Poll() bool {
	n.now = n.e.Tick()
	total := 0
	for total < pollBudget {
		got := n.e.PollAt(n.now, n.b.cfg.RxBatch)
		total += got
		if got < n.b.cfg.RxBatch {
			break
		}
	}
	busy := total > 0 || !n.e.Idle() || n.ln != nil && n.ln.Pending() > 0
	n.fresh = busy
	return busy
}

// Push implements layer.Transport: the timers due and the segments due at
// the time the Poll before it read (its own reading when no Poll came
// between two Pushes: a Flush after an Rx), one kick.
func (n *nativeEngine) Push() error {
	if !n.fresh {
		n.now = n.e.Tick()
	}
	n.fresh = false
	return n.e.FlushAt(n.now)
}

// Accept implements layer.Transport.
func (n *nativeEngine) Accept(add func(layer.Conn, netip.AddrPort)) {
	if n.ln == nil || n.ln.Pending() == 0 {
		return
	}
	for {
		c, ok := n.ln.Accept()
		if !ok {
			return
		}
		add(n.hold(c), c.Peer())
	}
}

// Watch implements layer.Transport: the connections the engine named
// readable (native.Engine.TakeReadable) since the last call.
func (n *nativeEngine) Watch(mark func(layer.Conn)) {
	n.mark = mark
	n.e.TakeReadable(n.took)
}

func (n *nativeEngine) readable(c *native.Conn) {
	if i := c.Slot(); i < len(n.slots) && n.slots[i] != nil {
		n.mark(n.slots[i])
	}
}

// hold makes the nconn of c, a connection the engine gave the Backend.
func (n *nativeEngine) hold(c *native.Conn) *nconn {
	nc := &nconn{n: n, c: c}
	nc.sent.SetFraming(n.b.cfg.Framing)
	i := c.Slot()
	if i >= len(n.slots) {
		n.slots = append(n.slots, make([]*nconn, i+1-len(n.slots))...)
	}
	n.slots[i] = nc
	return nc
}

// let forgets c before the engine reuses its slot.
func (n *nativeEngine) let(c *nconn) {
	c.gone = true
	if i := c.c.Slot(); n.slots[i] == c {
		n.slots[i] = nil
	}
}

// interrupt ends a Wait in progress, where the FrameIO can.
func (n *nativeEngine) interrupt() {
	if n.irq != nil {
		n.irq.Interrupt()
	}
}

// sleep sleeps on the FrameIO until a frame may be there, the engine's
// next timer is due, or ctx is done (ctx.Err()). The engine is read under
// the Backend's guard only (Stats may run meanwhile), so sleep reads the
// next timer first and then sleeps on the FrameIO alone.
func (n *nativeEngine) sleep(ctx context.Context, next time.Time, armed bool) error {
	if n.wt == nil {
		return dgramio.NotSupported("Wait on "+string(n.b.cfg.Kind)+" over this device", "", "the device cannot sleep on its queue: poll Rx", nil)
	}
	if armed && n.b.opts.NativeClock == nil {
		d := time.Until(next)
		if d <= 0 {
			return nil
		}
		if n.irq != nil {
			if n.alarm == nil {
				n.alarm = time.AfterFunc(d, n.irq.Interrupt)
			} else {
				n.alarm.Reset(d)
			}
			err := n.wt.Wait(ctx)
			n.alarm.Stop()
			return fdwait.Cause(ctx, err)
		}
		c, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return fdwait.Cause(ctx, n.wt.Wait(c)) // nil when the timer is due
	}
	return fdwait.Cause(ctx, n.wt.Wait(ctx))
}

// nap is sleep for the poll loops of New and Close, which own the engine.
func (n *nativeEngine) nap(ctx context.Context) error {
	at, ok := n.e.NextTimer()
	return napOr(ctx, n.sleep(ctx, at, ok))
}

// connectAll dials every destination and drives the engine until each is
// established, one fails, or ConnectTimeout passes.
func (n *nativeEngine) connectAll() error {
	b := n.b
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ConnectTimeout)
	defer cancel()
	pending := make([]*nconn, 0, len(b.cfg.Dests))
	for _, d := range b.cfg.Dests {
		peer := d
		c, err := n.dial(peer)
		if err != nil {
			return err
		}
		nc := n.hold(c)
		b.s.Add(nc, peer) // released by shutdown on error
		pending = append(pending, nc)
	}
	for len(pending) > 0 {
		n.Poll()
		if err := n.Push(); err != nil {
			return fmt.Errorf("tcp: connect: %w", err)
		}
		left := pending[:0]
		for _, c := range pending {
			if err := c.c.Err(); err != nil {
				return fmt.Errorf("tcp: connect %s: %w", c.c.Peer(), nativeGoErr(err))
			}
			if c.c.State() == native.SynSent || c.c.State() == native.SynReceived {
				left = append(left, c)
			}
		}
		if pending = left; len(pending) == 0 {
			break
		}
		if err := n.nap(ctx); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("tcp: connect %s: no answer within %v (ConnectTimeout): %w", pending[0].c.Peer(), b.cfg.ConnectTimeout, syscall.ETIMEDOUT)
			}
			return fmt.Errorf("tcp: connect %s: %w", pending[0].c.Peer(), err)
		}
	}
	return nil
}

// dial opens one connection to peer from Config.LocalPort, from the first
// free port of Options.SourcePorts, or from an ephemeral port.
func (n *nativeEngine) dial(peer netip.AddrPort) (*native.Conn, error) {
	b := n.b
	if b.cfg.LocalPort != 0 || b.opts.SourcePorts == nil {
		c, err := n.e.Dial(peer, b.cfg.LocalPort)
		if err != nil {
			return nil, fmt.Errorf("tcp: connect %s: %w", peer, nativeGoErr(err))
		}
		return c, nil
	}
	ports := b.opts.SourcePorts(peer)
	for _, p := range ports {
		c, err := n.e.Dial(peer, p)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, native.ErrPortInUse) {
			return nil, fmt.Errorf("tcp: connect %s from port %d: %w", peer, p, nativeGoErr(err))
		}
	}
	return nil, fmt.Errorf("tcp: connect %s: none of the %d source ports chosen for this queue is free: %w", peer, len(ports), syscall.EADDRINUSE)
}

// shutdown closes the connections in order (FIN after what was written)
// and drives the engine for up to linger so that the FINs and what they
// follow are acknowledged; what is still unacknowledged then is reset,
// its records counted lost. The poll loop must not run.
func (n *nativeEngine) shutdown(linger time.Duration) {
	n.closing = true
	if n.e == nil { // New failed before the engine
		n.b.s.Close()
		return
	}
	n.b.s.Close() // nconn.Close: FIN, kept in lingering
	if n.ln != nil {
		n.ln.Close()
	}
	deadline := time.Now().Add(linger)
	for len(n.lingering) > 0 && !n.allDone() && time.Now().Before(deadline) {
		n.Poll()
		n.Push()
		ctx, cancel := context.WithTimeout(context.Background(), min(time.Until(deadline), 5*time.Millisecond))
		_ = n.nap(ctx)
		cancel()
	}
	for _, c := range n.lingering {
		n.lost += c.unacked()
		n.let(c)
		if c.done() {
			c.c.Close()
		} else {
			c.c.Abort()
		}
	}
	n.lingering = nil
	n.e.Flush()
	n.e.Close()
	if n.alarm != nil {
		n.alarm.Stop()
	}
}

// allDone reports whether every lingering connection is acknowledged.
func (n *nativeEngine) allDone() bool {
	for _, c := range n.lingering {
		if !c.done() {
			return false
		}
	}
	return true
}

// nconn is one connection of the native engine: the layer.Conn.
//
// It follows the records it wrote (sent, forgetting those whose first
// byte the peer acknowledged), so that Close can count what Linger did
// not get through.
type nconn struct {
	layer.Hook
	n *nativeEngine
	c *native.Conn
	// gone is set once Close or Abort released c (the engine reuses its
	// slot): c is never touched again, Read and Write report abortErr.
	gone bool

	sent layer.Sent
}

var (
	_ layer.Conn       = (*nconn)(nil)
	_ layer.HalfCloser = (*nconn)(nil)
	_ layer.Lender     = (*nconn)(nil)
	_ layer.Stager     = (*nconn)(nil)
	_ layer.Unacker    = (*nconn)(nil)
)

// Write implements layer.Conn.
func (c *nconn) Write(p []byte) (int, error) {
	if c.gone {
		return 0, abortErr
	}
	c.sent.Release() // the engine's Write releases what was staged
	k := c.c.Write(p)
	if k == 0 && len(p) > 0 {
		if err := c.c.Err(); err != nil {
			return 0, nativePeerError(err)
		}
		return 0, nil
	}
	c.sent.Wrote(p[:k])
	c.sent.Forget(uint64(c.c.Buffered()))
	return k, nil
}

// Room implements layer.Stager: the layer stages its records in the
// engine's send ring.
func (c *nconn) Room() int {
	if c.gone {
		return 0
	}
	return c.c.Room()
}

// Stage implements layer.Stager.
func (c *nconn) Stage(head, body []byte) bool {
	if c.gone || !c.c.Stage(head, body) {
		return false
	}
	c.sent.Stage(len(body))
	return true
}

// Release implements layer.Stager.
func (c *nconn) Release() {
	if !c.gone {
		c.c.Release()
		c.sent.Release()
		c.sent.Forget(uint64(c.c.Buffered()))
	}
}

// Unstage implements layer.Stager.
func (c *nconn) Unstage() {
	if !c.gone {
		c.c.Unstage()
		c.sent.Unstage()
	}
}

// unacked is the number of records written whose first byte the peer has
// not acknowledged.
func (c *nconn) unacked() uint64 {
	return uint64(c.sent.Unacked(uint64(c.c.Buffered())))
}

// UnackedRecords implements layer.Unacker for a connection that ended
// with an error (a reset, a timeout): the records written whose first
// byte the peer never acknowledged, which the layer then moves from
// TxSent to TxDropped. A live connection reports none and not ended: the
// Backend's Close lingers on those itself and counts what is left
// (shutdown).
func (c *nconn) UnackedRecords() (int, bool) {
	if c.gone {
		return 0, true
	}
	if c.c.Err() == nil {
		return 0, false
	}
	return int(c.unacked()), true
}

// done reports whether the connection's FIN and everything before it are
// acknowledged, or it ended.
func (c *nconn) done() bool {
	switch c.c.State() {
	case native.FinWait2, native.TimeWait, native.Closed:
		return true
	}
	return c.c.Err() != nil
}

// Read implements layer.Conn.
func (c *nconn) Read(p []byte) (int, error) {
	if c.gone {
		return 0, abortErr
	}
	k, err := c.c.Read(p)
	if err == nil || err == io.EOF {
		return k, err
	}
	return k, nativePeerError(err)
}

// Peek implements layer.Lender: the layer hands out the records at the
// front of the engine's receive ring in place.
func (c *nconn) Peek() []byte {
	if c.gone {
		return nil
	}
	return c.c.Peek()
}

// Lend implements layer.Lender.
func (c *nconn) Lend(n int) { c.c.Lend(n) }

// Consume implements layer.Lender.
func (c *nconn) Consume() {
	if !c.gone {
		c.c.Consume()
	}
}

// Readable implements layer.Conn.
func (c *nconn) Readable() bool { return c.gone || c.c.Readable() }

// Writable implements layer.Conn.
func (c *nconn) Writable() bool { return !c.gone && c.c.Writable() }

// Ended implements layer.Ender: the engine's error once the connection
// ended otherwise than in order (a reset), without reading.
func (c *nconn) Ended() error {
	if c.gone {
		return nil
	}
	if err := c.c.Err(); err != nil {
		return nativePeerError(err)
	}
	return nil
}

// SetReading implements layer.Conn: the engine has no readiness to sleep
// on; Wait asks the layer.
func (c *nconn) SetReading(bool) {}

// Close implements layer.Conn: FIN after what was written; the engine
// finishes the close. During the Backend's Close the connection is kept
// for the linger instead.
func (c *nconn) Close() {
	if c.gone {
		return
	}
	if c.n.closing {
		c.c.CloseWrite()
		c.n.lingering = append(c.n.lingering, c)
		return
	}
	c.n.let(c)
	c.c.Close()
}

// CloseWrite implements layer.HalfCloser: FIN after what was written,
// for Close's linger (layer.Layer.Linger), which reads on until the peer
// closes too.
func (c *nconn) CloseWrite() error {
	if c.gone {
		return abortErr
	}
	c.c.CloseWrite()
	return nil
}

// Abort implements layer.Conn.
func (c *nconn) Abort() {
	if !c.gone {
		c.n.let(c)
		c.c.Abort()
	}
}

// abortErr is what a connection released by Abort reports.
var abortErr error = &dgramio.PeerError{Reset: true, Err: nativeGoErr(native.ErrAborted)}

// nativeGoErr maps the engine's connection errors onto the errnos the
// netstack backend and kind tcp report, keeping the engine's error in the
// chain (errors.Is matches both).
func nativeGoErr(err error) error {
	for _, m := range nativeErrnos {
		if errors.Is(err, m.err) {
			return fmt.Errorf("%w (%w)", m.errno, err)
		}
	}
	return err
}

// nativeErrnos is nativeGoErr's table: each engine error and its errno.
var nativeErrnos = [...]struct {
	err   error
	errno syscall.Errno
}{
	{native.ErrReset, syscall.ECONNRESET},
	{native.ErrRefused, syscall.ECONNREFUSED},
	{native.ErrTimedOut, syscall.ETIMEDOUT},
	{native.ErrHostUnreachable, syscall.EHOSTUNREACH},
	{native.ErrAborted, syscall.ECONNABORTED},
	{native.ErrPortInUse, syscall.EADDRINUSE},
	{native.ErrTableFull, syscall.EADDRNOTAVAIL},
}

// nativePeerError is the stream's end for an engine error: always both
// directions (the engine reports an orderly FIN as io.EOF).
func nativePeerError(err error) error {
	return &dgramio.PeerError{Reset: true, Err: nativeGoErr(err)}
}

// checkGroup6 refuses an IPv6 client with several queues on netstack:
// its queues' stacks share ARP replies (ARPShare taps ARP frames), not
// neighbour advertisements, so an advertisement that answers one queue's
// solicitation and reaches another is lost. The native engines share
// both (native.ARPShare), and pick source ports by the IPv6 tuple's RSS
// hash (stack.SourcePorts).
func checkGroup6(cfg dgramio.Config) error {
	if cfg.IPv6() && cfg.Role == dgramio.RoleClient && cfg.Queues > 1 && cfg.TCP.Stack == dgramio.TCPStackNetstack {
		return &dgramio.ConfigError{Field: "Queues", Value: cfg.Queues, Reason: "an IPv6 client of tcp-xdp or tcp-dpdk on netstack runs on one queue: its queues do not share neighbour advertisements (the native engine's do)"}
	}
	return nil
}
