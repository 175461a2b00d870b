package netconn

import (
	"context"
	"net"
	"net/netip"
	"syscall"

	"gvisor.dev/gvisor/pkg/tcpip"
	ntcp "gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/dgramio/dgramio/internal/stack"
	"github.com/dgramio/dgramio/internal/tcp"
)

// Dial connects to address ("198.18.0.2:80" or "[2001:2::2]:80": an IP
// literal of the Service's family and a port; the userspace stack has no
// resolver) from an ephemeral port, as DialAddr.
func (s *Service) Dial(ctx context.Context, address string) (*Conn, error) {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "netconn dials IP literals only (no resolver on the userspace stack)", Addr: address}}
	}
	return s.DialAddr(ctx, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
}

// DialContext is Dial with the signature of net.Dialer.DialContext, for
// http.Transport.DialContext and the like. network must be "tcp", or
// "tcp4" ("tcp6") on a Service that serves that family.
func (s *Service) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch {
	case network == "tcp", network == "tcp4" && s.servesIPv4(), network == "tcp6" && s.servesIPv6():
	default:
		return nil, &net.OpError{Op: "dial", Net: network, Err: net.UnknownNetworkError(network)}
	}
	c, err := s.Dial(ctx, address)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// DialAddr connects to to. It returns when the handshake is done, or with
// the error that ended it: ECONNREFUSED (the peer reset the SYN),
// EHOSTUNREACH (no ARP or neighbour advertisement answer), ETIMEDOUT (no SYN-ACK after netstack's
// retransmissions), ctx's end (a deadline is a net.Error whose Timeout is
// true and that matches context.DeadlineExceeded, as net.Dialer's), a
// *ConnLimitError past Options.MaxConns, net.ErrClosed after Close. Without
// a deadline in ctx, Config.ConnectTimeout bounds the handshake. On
// tcp-xdp, to's port must be Config.Port.
func (s *Service) DialAddr(ctx context.Context, to netip.AddrPort) (*Conn, error) {
	raddr := net.TCPAddrFromAddrPort(to)
	fail := func(err error) (*Conn, error) {
		s.n.dialFailures.Add(1)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: raddr, Err: syscallError("connect", err)}
	}
	if a := to.Addr(); !a.IsValid() || a.Is4() && !s.servesIPv4() || !a.Is4() && !s.servesIPv6() {
		return fail(&net.AddrError{Err: "netconn dials addresses of its own families (Config.LocalIP's, and Options.LocalIP6's) only", Addr: to.String()})
	}
	if err := s.checkPort(to.Port(), "dial"); err != nil {
		return fail(err)
	}
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return fail(net.ErrClosed)
	case len(s.conns)+s.dialing >= s.opts.MaxConns:
		s.mu.Unlock()
		s.n.limitRefused.Add(1)
		return fail(&ConnLimitError{Op: "dial", Limit: s.opts.MaxConns, Peer: to})
	}
	s.dialing++
	s.mu.Unlock()
	var c *Conn
	var err error
	if s.nat != nil {
		c, err = s.nativeConnect(ctx, to)
	} else {
		c, err = s.connect(ctx, to)
	}
	s.mu.Lock()
	s.dialing--
	if err == nil && s.closed {
		err = net.ErrClosed
	}
	if err == nil {
		s.conns[c] = struct{}{}
	}
	last := s.lastLocked()
	s.mu.Unlock()
	if err != nil {
		if c != nil && c.nc != nil {
			s.nativeAbort(c.nc)
			close(c.done)
		} else if c != nil {
			c.ep.Abort()
			c.shut()
		}
		if last {
			s.Close()
		}
		return fail(err)
	}
	s.n.dials.Add(1)
	return c, nil
}

// connect runs the handshake. On error the Conn returned (if any) is for
// the caller to shut.
func (s *Service) connect(ctx context.Context, to netip.AddrPort) (*Conn, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.ConnectTimeout)
		defer cancel()
	}
	if err := ctx.Err(); err != nil {
		return nil, ctxError(err)
	}
	wq := new(waiter.Queue)
	ep, terr := s.st.NS.NewEndpoint(ntcp.ProtocolNumber, s.st.Proto(), wq)
	if terr != nil {
		return nil, tcp.GoError(terr)
	}
	c := newConn(s, ep, wq) // its write entry hears the handshake's end
	if err := s.tune.ApplyEndpoint(ep); err != nil {
		return c, err
	}
	full := tcpip.FullAddress{NIC: stack.NICID, Addr: stack.Addr(to.Addr()), Port: to.Port()}
	switch terr := ep.Connect(full); terr.(type) {
	case nil, *tcpip.ErrConnectStarted:
	default:
		return c, tcp.GoError(terr)
	}
	for connecting(ep) {
		select {
		case <-c.wrReady:
		case <-ctx.Done():
			return c, ctxError(ctx.Err())
		}
	}
	switch ntcp.EndpointState(ep.State()) {
	case ntcp.StateError, ntcp.StateClose:
		if terr := ep.LastError(); terr != nil {
			return c, tcp.GoError(terr)
		}
		return c, syscall.ECONNABORTED
	}
	c.setAddrs()
	return c, nil
}

// connecting reports whether ep's handshake is still going on.
func connecting(ep tcpip.Endpoint) bool {
	switch ntcp.EndpointState(ep.State()) {
	case ntcp.StateInitial, ntcp.StateBound, ntcp.StateConnecting, ntcp.StateSynSent, ntcp.StateSynRecv:
		return true
	}
	return false
}
