package netconn

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"

	"github.com/dgramio/dgramio/stack/native"
)

// ring is a byte ring of one producer and one consumer on two goroutines:
// tail counts the bytes produced, head those consumed, each stored by its
// side alone (atomically, so that the other sees the bytes before the
// index). Its size is a power of two.
type ring struct {
	buf  []byte
	mask uint64
	head atomic.Uint64
	_    [56]byte // head and tail on lines of their own
	tail atomic.Uint64
	_    [56]byte
	// limit bounds the bytes held (SetWriteBuffer); 0: the ring's size.
	limit atomic.Int64
}

func newRing(n int) ring {
	return ring{buf: make([]byte, n), mask: uint64(n - 1)}
}

// len returns the bytes held.
func (r *ring) len() int { return int(r.tail.Load() - r.head.Load()) }

// writable returns the free bytes after the tail that lie contiguous
// (producer).
func (r *ring) writable() []byte {
	t := r.tail.Load()
	size := uint64(len(r.buf))
	if l := r.limit.Load(); l > 0 && uint64(l) < size {
		size = uint64(l)
	}
	used := t - r.head.Load()
	if used >= size {
		return nil
	}
	at := t & r.mask
	n := min(size-used, uint64(len(r.buf))-at)
	return r.buf[at : at+n : at+n]
}

// produced publishes k bytes written into writable's slice (producer).
func (r *ring) produced(k int) { r.tail.Store(r.tail.Load() + uint64(k)) }

// readable returns the bytes at the head that lie contiguous (consumer).
func (r *ring) readable() []byte {
	h := r.head.Load()
	n := r.tail.Load() - h
	at := h & r.mask
	n = min(n, uint64(len(r.buf))-at)
	return r.buf[at : at+n : at+n]
}

// consumed frees k bytes of readable's slice (consumer).
func (r *ring) consumed(k int) { r.head.Store(r.head.Load() + uint64(k)) }

// drop frees every byte held (consumer).
func (r *ring) drop() { r.head.Store(r.tail.Load()) }

// Ends of a connection's receiving side (nconn.end).
const (
	endFIN   = 1
	endError = 2
)

// nconn is a Conn's native side: the rings, the flags that say who waits,
// and the engine connection, which only the poller touches.
type nconn struct {
	n    *nativeSvc
	ec   *native.Conn // the poller's; nil once released
	next *nconn       // in nativeSvc.work
	peer netip.AddrPort
	port uint16

	// flagged: in the work list (or about to be), until the poller takes it.
	flagged atomic.Bool
	// The poller's own.
	inActive, wrShutDone bool

	rx, tx             ring
	rdParked, wrParked atomic.Bool
	rdCh, wrCh         chan struct{} // capacity 1: "look again"
	// rxFull: the poller left bytes in the engine for want of room in rx;
	// the reader that makes room hands the connection back.
	rxFull atomic.Bool
	// end (endFIN, endError) follows every byte received before it in rx;
	// endErr is stored before it.
	end    atomic.Uint32
	endErr error
	// wrEnd: what was written will not be sent (the connection failed or
	// stopped sending); wrErr is stored before it.
	wrEnd atomic.Bool
	wrErr error

	rdShut, wrShutAsked, closeAsked atomic.Bool

	dialDone chan struct{}
	dialErr  error
}

func newNconn(n *nativeSvc, ec *native.Conn) *nconn {
	return &nconn{n: n, ec: ec, peer: ec.Peer(), port: ec.LocalPort(),
		rx: newRing(rxRing), tx: newRing(txRing),
		rdCh: make(chan struct{}, 1), wrCh: make(chan struct{}, 1)}
}

// flag hands c to the poller (once until it takes it), waking it if it
// sleeps.
func (c *nconn) flag() {
	if !c.flagged.CompareAndSwap(false, true) {
		return
	}
	n := c.n
	for {
		old := n.work.Load()
		c.next = old
		if n.work.CompareAndSwap(old, c) {
			break
		}
	}
	n.wake()
}

// setEnd records the end of the receiving side (poller): io.EOF or the
// engine's error, which ends the sending side too.
func (c *nconn) setEnd(err error) {
	if err == io.EOF {
		c.end.Store(endFIN)
		return
	}
	c.endErr = nativeErrno(err)
	c.end.Store(endError)
	c.setWrEnd(err)
	if c.wrParked.Load() {
		signal(c.wrCh)
	}
}

// setWrEnd records that nothing more is sent (poller): err is the
// engine's, nil for a connection that stopped sending (EPIPE).
func (c *nconn) setWrEnd(err error) {
	if c.wrEnd.Load() {
		return
	}
	if err == nil || errors.Is(err, native.ErrReset) && c.end.Load() == endFIN {
		// Linux: EPIPE once the peer stopped sending, its RST in
		// CLOSE-WAIT included (tcp_reset).
		c.wrErr = syscall.EPIPE
	} else {
		c.wrErr = nativeErrno(err)
	}
	c.wrEnd.Store(true)
}

// closedEngine notes that the engine connection is gone (poller): a
// reader or writer still waiting learns it.
func (c *nconn) closedEngine() {
	if c.end.Load() == 0 {
		c.endErr = syscall.ECONNABORTED
		c.end.Store(endError)
	}
	c.setWrEnd(native.ErrAborted)
	c.kickRead()
	signal(c.wrCh)
}

// newNativeConn wraps nc in a Conn.
func newNativeConn(s *Service, nc *nconn) *Conn {
	c := &Conn{s: s, nc: nc, done: make(chan struct{}),
		laddr: &net.TCPAddr{IP: s.addrFor(nc.peer.Addr()), Port: int(nc.port)},
		raddr: net.TCPAddrFromAddrPort(nc.peer)}
	// A deadline's change or expiry wakes the parked Read or Write
	// through its own channel.
	c.rdDL.kick, c.wrDL.kick = nc.rdCh, nc.wrCh
	c.rdDL.wake = nc.kickLead // a Read that leads waits on rf, not rdCh
	return c
}

// nativeRead is Read on the native engine: it copies out of the receive
// ring, and parks only when the ring is empty.
func (c *Conn) nativeRead(b []byte) (int, error) {
	nc := c.nc
	for {
		if c.closed() {
			return 0, c.opErr("read", net.ErrClosed)
		}
		if c.rdDL.passed() {
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		if nc.rdShut.Load() {
			return 0, io.EOF
		}
		end := nc.end.Load() // before the bytes: every byte before the end is in rx
		if p := nc.rx.readable(); len(p) > 0 {
			k := copy(b, p)
			nc.rx.consumed(k)
			if k < len(b) { // the ring wrapped
				if p := nc.rx.readable(); len(p) > 0 {
					m := copy(b[k:], p)
					nc.rx.consumed(m)
					k += m
				}
			}
			if nc.rxFull.Load() && nc.rxFull.CompareAndSwap(true, false) {
				nc.flag()
			}
			return k, nil
		}
		switch end {
		case endFIN:
			return 0, io.EOF
		case endError:
			return 0, c.opErr("read", nc.endErr)
		}
		dl, expired := c.rdDL.wait()
		if expired {
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		nc.rdParked.Store(true)
		if nc.rx.len() == 0 && nc.end.Load() == 0 && !nc.rdShut.Load() && !nc.n.lead(nc, c) {
			select {
			case <-nc.rdCh:
			case <-dl:
			case <-c.done:
			}
		}
		nc.rdParked.Store(false)
	}
}

// nativeWrite is Write on the native engine: it copies into the send
// ring and sends them itself if the poller sleeps (sendInline), or hands
// the connection to the poller; it parks only while the ring is full.
func (c *Conn) nativeWrite(b []byte) (int, error) {
	nc := c.nc
	n := 0
	for {
		if c.closed() {
			return n, c.opErr("write", net.ErrClosed)
		}
		if nc.wrShutAsked.Load() {
			return n, c.opErr("write", syscall.EPIPE)
		}
		if nc.wrEnd.Load() {
			return n, c.opErr("write", nc.wrErr)
		}
		if c.wrDL.passed() {
			return n, c.opErr("write", os.ErrDeadlineExceeded)
		}
		for n < len(b) {
			w := nc.tx.writable()
			if len(w) == 0 {
				break
			}
			k := copy(w, b[n:])
			nc.tx.produced(k)
			n += k
		}
		// The poller asleep, send from here (as a kernel socket's write
		// does); otherwise hand the bytes over.
		if !nc.n.sendInline(nc) {
			nc.flag()
		}
		if n == len(b) {
			return n, nil
		}
		dl, expired := c.wrDL.wait()
		if expired {
			return n, c.opErr("write", os.ErrDeadlineExceeded)
		}
		nc.wrParked.Store(true)
		if len(nc.tx.writable()) == 0 && !nc.wrEnd.Load() {
			select {
			case <-nc.wrCh:
			case <-dl:
			case <-c.done:
			}
		}
		nc.wrParked.Store(false)
	}
}

// nativeShut hands the close to the poller: FIN once the bytes written
// are in the engine (RST if received bytes are left unread).
func (c *Conn) nativeShut() {
	nc := c.nc
	nc.closeAsked.Store(true)
	nc.kickLead() // c.done is closed
	nc.flag()
	c.rdDL.stop()
	c.wrDL.stop()
}

// nativeCloseWrite: FIN after the bytes written.
func (c *Conn) nativeCloseWrite() error {
	if c.closed() {
		return c.opErr("close", net.ErrClosed)
	}
	c.nc.wrShutAsked.Store(true)
	c.nc.flag()
	return nil
}

// nativeCloseRead: Reads return io.EOF; what arrives is discarded.
func (c *Conn) nativeCloseRead() error {
	if c.closed() {
		return c.opErr("close", net.ErrClosed)
	}
	c.nc.rdShut.Store(true)
	c.nc.rx.drop()
	c.nc.kickRead()
	c.nc.flag()
	return nil
}

// nativeSetBuffer: the receive window (SetRecvBuf, on the poller) or the
// bytes Write queues before it blocks (the send ring's limit).
func (c *Conn) nativeSetBuffer(which string, bytes int) {
	nc := c.nc
	if which == "write" {
		nc.tx.limit.Store(int64(max(bytes, 1)))
		return
	}
	nc.n.do(func() {
		if nc.ec != nil {
			nc.ec.SetRecvBuf(bytes)
		}
	})
}

// Listen, Accept and Dial of the native engine.

// nlistener is a Listener's native side on one queue: the engine's
// listener (the poller's) and the queue of connections the poller
// accepted, ch, which the Listener's queues share; queued counts this
// queue's connections in it, at most room, so that no poller ever blocks
// on ch.
type nlistener struct {
	el     *native.Listener
	ch     chan *nconn
	queued atomic.Int64
	room   int64
}

// nativeListen opens port on every queue's engine.
func (s *Service) nativeListen(port uint16) ([]*nlistener, error) {
	ch := make(chan *nconn, s.opts.Backlog*len(s.nats))
	var nls []*nlistener
	for _, n := range s.nats {
		var nl *nlistener
		var err error
		if !n.do(func() {
			el, lerr := n.e.Listen(port, s.opts.Backlog)
			if lerr != nil {
				err = nativeErrno(lerr)
				return
			}
			nl = &nlistener{el: el, ch: ch, room: int64(s.opts.Backlog)}
			n.lns = append(n.lns, nl)
			n.nlns.Add(1)
		}) {
			err = net.ErrClosed
		}
		if err != nil {
			s.nativeCloseListener(nls)
			return nil, err
		}
		nls = append(nls, nl)
	}
	return nls, nil
}

// nativeCloseListener closes the engine listeners of nls, one per queue
// (the connections not accepted yet are reset).
func (s *Service) nativeCloseListener(nls []*nlistener) {
	for i, nl := range nls {
		n := s.nats[i]
		n.do(func() {
			for i, x := range n.lns {
				if x == nl {
					n.lns = append(n.lns[:i], n.lns[i+1:]...)
					n.nlns.Add(-1)
					nl.el.Close()
					break
				}
			}
		})
	}
	if len(nls) == 0 {
		return
	}
	// What the pollers queued before their listener closed (do waited
	// for each: nothing joins ch from now on).
	for {
		select {
		case c := <-nls[0].ch:
			s.nativeAbort(c)
		default:
			return
		}
	}
}

// nativeAccept waits for a connection of l, from any queue.
func (l *Listener) nativeAccept() (*Conn, error) {
	for {
		if l.closed() {
			return nil, l.opErr(net.ErrClosed)
		}
		dl, expired := l.dl.wait()
		if expired {
			return nil, l.opErr(os.ErrDeadlineExceeded)
		}
		select {
		case nc := <-l.nls[0].ch:
			l.nls[nc.n.q].queued.Add(-1)
			return l.s.acceptedNative(l, nc)
		case <-dl:
		case <-l.done:
			return nil, l.opErr(net.ErrClosed)
		}
	}
}

// acceptedNative turns nc into a Conn, or refuses it past MaxConns.
func (s *Service) acceptedNative(l *Listener, nc *nconn) (*Conn, error) {
	c := newNativeConn(s, nc)
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		s.nativeAbort(nc)
		close(c.done)
		return nil, l.opErr(net.ErrClosed)
	case len(s.conns)+s.dialing >= s.opts.MaxConns:
		s.mu.Unlock()
		s.n.limitRefused.Add(1)
		s.nativeAbort(nc)
		close(c.done)
		return nil, l.opErr(&ConnLimitError{Op: "accept", Limit: s.opts.MaxConns, Peer: nc.peer})
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.n.accepts.Add(1)
	return c, nil
}

// nativeAbort resets nc (RST) on the poller.
func (s *Service) nativeAbort(nc *nconn) {
	n := nc.n
	n.post(func() {
		if ec := n.let(nc); ec != nil {
			ec.Abort()
			nc.closedEngine()
		}
	})
}

// nativeConnect runs the handshake on the engine (ctx bounds it, as
// connect).
func (s *Service) nativeConnect(ctx context.Context, to netip.AddrPort) (*Conn, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.ConnectTimeout)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return nil, ctxError(err)
	}
	n := s.dialQueue()
	var nc *nconn
	var err error
	if !n.do(func() {
		ec, derr := n.dialFrom(to)
		if derr != nil {
			err = nativeErrno(derr)
			return
		}
		nc = n.hold(ec)
		nc.dialDone = make(chan struct{})
		n.dialing = append(n.dialing, nc)
	}) {
		return nil, net.ErrClosed
	}
	if err != nil {
		return nil, err
	}
	select {
	case <-nc.dialDone:
	case <-ctx.Done():
		n.do(func() {
			for i, x := range n.dialing {
				if x == nc {
					n.dialing = append(n.dialing[:i], n.dialing[i+1:]...)
					close(nc.dialDone)
					break
				}
			}
			if ec := n.let(nc); ec != nil {
				ec.Abort()
			}
		})
		return nil, ctxError(ctx.Err())
	}
	if nc.dialErr == nil && n.stop.Load() {
		nc.dialErr = net.ErrClosed
	}
	if nc.dialErr != nil {
		n.post(func() {
			if ec := n.let(nc); ec != nil {
				ec.Close()
			}
		})
		return nil, nc.dialErr
	}
	return newNativeConn(s, nc), nil
}
