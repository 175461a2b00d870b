package netconn

import (
	"context"
	"net"
	"net/netip"

	"github.com/dgramio/dgramio"
)

// Listen opens a Service for cfg (New, default Options) and listens on
// cfg.LocalIP:cfg.Port. The Service belongs to the Listener and the
// connections it accepts: it is closed (and the XDP program detached) when
// the Listener and every one of those connections are closed; that last
// Close waits up to Options.Linger for the FINs. Use New and
// Service.Listen to share one Service among several listeners and dials,
// or to set Options.
//
// This is what puts an existing net/http server on the bypass path:
//
//	ln, err := netconn.Listen(dgramio.Config{Kind: "tcp-xdp", Iface: "eth1",
//		LocalIP: netip.MustParseAddr("198.18.0.3"), Port: 8080})
//	if err != nil {
//		log.Fatal(err)
//	}
//	log.Fatal(http.Serve(ln, handler))
//
// Call it on a thread inside the interface's network namespace (as New).
func Listen(cfg dgramio.Config) (net.Listener, error) {
	s, err := New(cfg, Options{})
	if err != nil {
		return nil, err
	}
	l, err := s.Listen(cfg.Port)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.mu.Lock()
	s.auto = true
	s.mu.Unlock()
	return l, nil
}

// Dial opens a Service for cfg (New, default Options) and connects to
// address (an IP literal with a port) as Service.Dial does. The Service
// belongs to the connection: closing the Conn closes it, waiting up to
// Options.Linger for the FIN. A Service holds the interface's queue (one
// AF_XDP socket), so Dial opens one connection per Service: for several,
// use New and Service.Dial. When cfg.Port is zero it is taken from
// address.
func Dial(ctx context.Context, cfg dgramio.Config, address string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "netconn dials IP literals only (no resolver on the userspace stack)", Addr: address}}
	}
	if cfg.Port == 0 {
		cfg.Port = ap.Port()
	}
	s, err := New(cfg, Options{})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.auto = true
	s.mu.Unlock()
	c, err := s.Dial(ctx, address)
	if err != nil {
		// DialAddr closed the automatic Service when it failed.
		s.Close()
		return nil, err
	}
	return c, nil
}
