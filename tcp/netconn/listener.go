package netconn

import (
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	ntcp "gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/dgramio/dgramio/internal/stack"
)

// Listener is a listening TCP endpoint of a Service: a net.Listener whose
// Accept returns *Conn (as net.Conn; AcceptConn returns the type).
// Closing it does not close the connections it accepted.
type Listener struct {
	s     *Service
	nls   []*nlistener // the native engine's side, one per queue; nil on netstack
	ep    tcpip.Endpoint
	wq    *waiter.Queue
	entry waiter.Entry
	ready notifier
	done  chan struct{}
	once  sync.Once
	addr  *net.TCPAddr
	dl    deadline
}

var _ net.Listener = (*Listener)(nil)

// Listen listens on port of the Service's address (and of
// Options.LocalIP6's: one Listener takes both families; its Addr is
// Config.LocalIP's), with Options.Backlog.
// On tcp-xdp the port must be Config.Port (the only one its XDP program
// hands to netstack); a port in use is EADDRINUSE. The Listener lives until
// its Close or the Service's.
func (s *Service) Listen(port uint16) (*Listener, error) {
	addr := &net.TCPAddr{IP: s.Addr(), Port: int(port)}
	fail := func(err error) (*Listener, error) {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Addr: addr, Err: syscallError("listen", err)}
	}
	if err := s.checkPort(port, "listen"); err != nil {
		return fail(err)
	}
	if s.isClosed() {
		return fail(net.ErrClosed)
	}
	if s.nat != nil {
		nls, err := s.nativeListen(port)
		if err != nil {
			return fail(err)
		}
		l := &Listener{s: s, nls: nls, done: make(chan struct{}), addr: addr}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			s.nativeCloseListener(nls)
			return fail(net.ErrClosed)
		}
		s.lns[l] = struct{}{}
		s.mu.Unlock()
		return l, nil
	}
	wq := new(waiter.Queue)
	ep, terr := s.st.NS.NewEndpoint(ntcp.ProtocolNumber, s.st.Proto(), wq)
	if terr != nil {
		return fail(streamError(terr))
	}
	l := &Listener{s: s, ep: ep, wq: wq, ready: make(notifier, 1), done: make(chan struct{}), addr: addr}
	l.entry.Init(l.ready, waiter.ReadableEvents|waiter.EventHUp|waiter.EventErr)
	wq.EventRegister(&l.entry)
	undo := func(err error) (*Listener, error) {
		wq.EventUnregister(&l.entry)
		ep.Close()
		return fail(err)
	}
	ep.SocketOptions().SetReuseAddress(true)
	if err := s.tune.ApplyEndpoint(ep); err != nil {
		return undo(err)
	}
	if terr := ep.Bind(tcpip.FullAddress{NIC: stack.NICID, Addr: stack.Addr(s.cfg.LocalIP), Port: port}); terr != nil {
		return undo(streamError(terr))
	}
	if terr := ep.Listen(s.opts.Backlog); terr != nil {
		return undo(streamError(terr))
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return undo(net.ErrClosed)
	}
	s.lns[l] = struct{}{}
	s.mu.Unlock()
	return l, nil
}

// Accept waits for a connection and returns it (a *Conn). Past
// Options.MaxConns it resets the connection and returns a *net.OpError
// wrapping a *ConnLimitError (Temporary: net/http's Server waits and
// accepts again); after Close, an error matching net.ErrClosed; past the
// deadline (SetDeadline), os.ErrDeadlineExceeded.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.AcceptConn()
	if err != nil {
		return nil, err
	}
	return c, nil
}

// AcceptConn is Accept returning the *Conn.
func (l *Listener) AcceptConn() (*Conn, error) {
	if l.nls != nil {
		return l.nativeAccept()
	}
	for {
		if l.closed() {
			return nil, l.opErr(net.ErrClosed)
		}
		dl, expired := l.dl.wait()
		if expired {
			return nil, l.opErr(os.ErrDeadlineExceeded)
		}
		var fa tcpip.FullAddress
		ep, wq, terr := l.ep.Accept(&fa)
		switch terr.(type) {
		case nil:
			return l.s.accepted(l, ep, wq, fa)
		case *tcpip.ErrWouldBlock:
		default:
			if l.closed() {
				return nil, l.opErr(net.ErrClosed)
			}
			return nil, l.opErr(streamError(terr))
		}
		select {
		case <-l.ready:
		case <-dl:
		case <-l.done:
			return nil, l.opErr(net.ErrClosed)
		}
	}
}

func (l *Listener) opErr(err error) error {
	return &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: syscallError("accept", err)}
}

// closed reports whether Close ran.
func (l *Listener) closed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// accepted turns an endpoint Accept returned into a Conn, or refuses it
// past MaxConns.
func (s *Service) accepted(l *Listener, ep tcpip.Endpoint, wq *waiter.Queue, fa tcpip.FullAddress) (*Conn, error) {
	peer := netip.AddrPortFrom(stack.AddrOf(fa.Addr), fa.Port)
	if err := s.tune.ApplyEndpoint(ep); err != nil {
		ep.Abort()
		ep.Close()
		return nil, l.opErr(err)
	}
	c := newConn(s, ep, wq)
	c.setAddrs()
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		ep.Abort()
		c.shut()
		return nil, l.opErr(net.ErrClosed)
	case len(s.conns)+s.dialing >= s.opts.MaxConns:
		s.mu.Unlock()
		s.n.limitRefused.Add(1)
		ep.Abort() // RST
		c.shut()
		return nil, l.opErr(&ConnLimitError{Op: "accept", Limit: s.opts.MaxConns, Peer: peer})
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.n.accepts.Add(1)
	return c, nil
}

// Close stops listening: blocked Accepts return net.ErrClosed, and
// connections not yet accepted are reset. Connections accepted before stay
// open. A second Close returns an error matching net.ErrClosed.
func (l *Listener) Close() error {
	if !l.shut() {
		return l.opErr(net.ErrClosed)
	}
	l.s.removeListener(l)
	return nil
}

// shut closes without telling the Service; false if closed already.
func (l *Listener) shut() bool {
	first := false
	l.once.Do(func() {
		first = true
		close(l.done)
		l.dl.stop()
		if l.nls != nil {
			l.s.nativeCloseListener(l.nls)
			return
		}
		l.wq.EventUnregister(&l.entry)
		l.ep.Close()
	})
	return first
}

// Addr returns the listening address (*net.TCPAddr).
func (l *Listener) Addr() net.Addr { return l.addr }

// SetDeadline sets the deadline of Accept (zero: none), as
// (*net.TCPListener).SetDeadline.
func (l *Listener) SetDeadline(t time.Time) error {
	if l.closed() {
		return l.opErr(net.ErrClosed)
	}
	l.dl.set(t)
	return nil
}

// Service returns the Service the listener belongs to.
func (l *Listener) Service() *Service { return l.s }
