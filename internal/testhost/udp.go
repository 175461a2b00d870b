//go:build linux

package testhost

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// ListenUDP opens a kernel UDP socket inside h's namespace, bound to
// h.Addr:port (port 0: an ephemeral one). It belongs to the namespace for
// its whole life and may be used from any goroutine; the caller closes it.
func (h *Host) ListenUDP(port uint16) (*net.UDPConn, error) {
	return listenIn(h, "udp", h.Addr, port, func(a netip.AddrPort) (*net.UDPConn, error) {
		return net.ListenUDP("udp4", net.UDPAddrFromAddrPort(a))
	})
}

// ListenUDP6 is ListenUDP on h.Addr6 (a Pair made with Options.IPv6).
func (h *Host) ListenUDP6(port uint16) (*net.UDPConn, error) {
	return listenIn(h, "udp", h.Addr6, port, func(a netip.AddrPort) (*net.UDPConn, error) {
		return net.ListenUDP("udp6", net.UDPAddrFromAddrPort(a))
	})
}

// ListenTCP opens a kernel TCP listener inside h's namespace, bound to
// h.Addr:port (port 0: an ephemeral one). It and the connections it
// accepts belong to the namespace and may be used from any goroutine; the
// caller closes it.
func (h *Host) ListenTCP(port uint16) (*net.TCPListener, error) {
	return listenIn(h, "tcp", h.Addr, port, func(a netip.AddrPort) (*net.TCPListener, error) {
		return net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(a))
	})
}

// ListenTCP6 is ListenTCP on h.Addr6 (a Pair made with Options.IPv6).
func (h *Host) ListenTCP6(port uint16) (*net.TCPListener, error) {
	return listenIn(h, "tcp", h.Addr6, port, func(a netip.AddrPort) (*net.TCPListener, error) {
		return net.ListenTCP("tcp6", net.TCPAddrFromAddrPort(a))
	})
}

// listenIn runs listen on addr:port on a thread inside h's namespace;
// proto names the socket in the error.
func listenIn[S any](h *Host, proto string, addr netip.Addr, port uint16, listen func(netip.AddrPort) (S, error)) (S, error) {
	var s S
	if !addr.IsValid() {
		return s, fmt.Errorf("testhost %s: listen %s: no address (IPv6 needs Options.IPv6)", h.Iface, proto)
	}
	ap := netip.AddrPortFrom(addr, port)
	err := h.Do(func() (err error) {
		s, err = listen(ap)
		return err
	})
	if err != nil {
		return s, fmt.Errorf("testhost %s: listen %s %s: %w", h.Iface, proto, ap, err)
	}
	return s, nil
}

// DialContext dials addr on network from inside h's namespace
// (net.Dialer.DialContext there): a kernel client of that namespace. The
// connection may be used from any goroutine; the caller closes it. It has
// the signature of http.Transport.DialContext.
func (h *Host) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := h.Do(func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// UDPRoundTrip sends msg from A to B and "re:"+msg back, through kernel UDP
// sockets made inside the namespaces for this call, and checks that each
// arrives whole, from the other host's address, within timeout. It returns
// how long the round trip took (the first one on a link includes ARP). It
// shows that the link carries traffic both ways: after a flap, a change of
// address or neighbour, through an XDP program that passes frames.
func (p *Pair) UDPRoundTrip(msg string, timeout time.Duration) (time.Duration, error) {
	return p.udpRoundTrip(msg, timeout, false)
}

// UDPRoundTrip6 is UDPRoundTrip over IPv6, between Addr6 of A and B (a
// Pair made with Options.IPv6). The first one on a link includes
// neighbour discovery.
func (p *Pair) UDPRoundTrip6(msg string, timeout time.Duration) (time.Duration, error) {
	return p.udpRoundTrip(msg, timeout, true)
}

func (p *Pair) udpRoundTrip(msg string, timeout time.Duration, v6 bool) (time.Duration, error) {
	listen, fromA := (*Host).ListenUDP, p.A.Addr
	if v6 {
		listen, fromA = (*Host).ListenUDP6, p.A.Addr6
	}
	a, err := listen(p.A, 0)
	if err != nil {
		return 0, err
	}
	defer a.Close()
	b, err := listen(p.B, 0)
	if err != nil {
		return 0, err
	}
	defer b.Close()
	to := b.LocalAddr().(*net.UDPAddr).AddrPort()
	deadline := time.Now().Add(timeout)
	a.SetDeadline(deadline)
	b.SetDeadline(deadline)
	start := time.Now()
	if _, err := a.WriteToUDPAddrPort([]byte(msg), to); err != nil {
		return 0, fmt.Errorf("send A→B: %w", err)
	}
	buf := make([]byte, 65536)
	n, from, err := b.ReadFromUDPAddrPort(buf)
	if err != nil {
		return 0, fmt.Errorf("receive on B: %w", err)
	}
	if string(buf[:n]) != msg || from.Addr() != fromA {
		return 0, fmt.Errorf("B got %d bytes %.40q from %s, want %d bytes %.40q from %s", n, buf[:n], from, len(msg), msg, fromA)
	}
	if _, err := b.WriteToUDPAddrPort([]byte("re:"+msg), from); err != nil {
		return 0, fmt.Errorf("send B→A: %w", err)
	}
	n, from, err = a.ReadFromUDPAddrPort(buf)
	if err != nil {
		return 0, fmt.Errorf("receive on A: %w", err)
	}
	if string(buf[:n]) != "re:"+msg || from != to {
		return 0, fmt.Errorf("A got %d bytes %.40q from %s, want %d bytes %.40q from %s", n, buf[:n], from, len(msg)+3, "re:"+msg, to)
	}
	return time.Since(start), nil
}
