package netconn

import (
	"net"
	"net/netip"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/tcp"
	"github.com/dgramio/dgramio/stack/native"
)

// A Service has Config.LocalIP's family: an IPv6 LocalIP runs the native
// engine with it as Options.Addr6 and no IPv4 address (the engine counts
// IPv4 and ARP frames in rx_family_off), as internal/tcp's tcp-xdp and
// tcp-dpdk do; Options.PrefixLen is then the IPv6 prefix (0: every peer
// on the link, resolved by neighbour discovery). An IPv4 LocalIP with
// Options.LocalIP6 (the native engine only) gives the engine both
// addresses, and the Service serves both families. Listen serves the
// Service's addresses (and the engine answers neighbour discovery for its
// link-local address too); Dial and DialContext take addresses of the
// Service's families, "tcp" or a served family's "tcp4"/"tcp6".

// v6Engine makes eo, built for an IPv4 Config, the options of an IPv6 one
// when cfg is IPv6: LocalIP as Addr6, the prefix as PrefixLen6, no IPv4
// address; with opts.LocalIP6 it adds that as Addr6. An IPv4 cfg alone
// leaves eo as it is.
func v6Engine(eo *native.Options, cfg dgramio.Config, opts Options) {
	if cfg.IPv6() {
		eo.Addr, eo.Addr6 = netip.Addr{}, cfg.LocalIP
		eo.PrefixLen, eo.PrefixLen6 = 0, eo.PrefixLen
		return
	}
	eo.Addr6 = opts.LocalIP6
}

// checkDual checks Options.LocalIP6 against cfg (prepared, its engine
// resolved): an IPv6 unicast address without a zone, beside an IPv4
// LocalIP, on the native engine.
func checkDual(cfg dgramio.Config, opts Options) error {
	a := opts.LocalIP6
	if !a.IsValid() {
		return nil
	}
	bad := func(why string) error {
		return &dgramio.ConfigError{Field: "netconn.Options.LocalIP6", Value: a, Reason: why}
	}
	switch {
	case !a.Is6() || a.Is4In6() || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() || a.IsLinkLocalUnicast() || a.IsLoopback():
		return bad("want a global IPv6 unicast address without a zone")
	case !cfg.LocalIP.Is4():
		return bad("LocalIP6 is the IPv6 address beside an IPv4 Config.LocalIP")
	case cfg.TCP.Stack != dgramio.TCPStackNative:
		return bad("a Service of both families runs on the native engine (Config.TCP.Stack native)")
	}
	return nil
}

// openXDPDual is OpenXDP for a Service of both families: the XDP program
// hands the engine the frames to LocalIP and to addr6.
func openXDPDual(cfg dgramio.Config, addr6 netip.Addr) (Opened, error) {
	fio, to, err := tcp.OpenXDPDual(cfg, addr6)
	if err != nil {
		return Opened{}, err
	}
	return Opened{FIO: fio, Mode: to.Mode, Close: to.Close}, nil
}

// servesIPv4 and servesIPv6 report whether the Service has an address of
// that family.
func (s *Service) servesIPv4() bool { return s.cfg.LocalIP.Is4() }
func (s *Service) servesIPv6() bool { return !s.cfg.LocalIP.Is4() || s.opts.LocalIP6.IsValid() }

// addrFor is the Service's address towards peer: its IPv6 one for an IPv6
// peer on a Service of both families, Config.LocalIP otherwise.
func (s *Service) addrFor(peer netip.Addr) net.IP {
	if s.opts.LocalIP6.IsValid() && !peer.Unmap().Is4() {
		return net.IP(s.opts.LocalIP6.AsSlice())
	}
	return s.Addr()
}

// Addr6 returns the Service's IPv6 address: Options.LocalIP6 on a Service
// of both families, Config.LocalIP on an IPv6 one, nil on an IPv4 one.
func (s *Service) Addr6() net.IP {
	switch {
	case s.opts.LocalIP6.IsValid():
		return net.IP(s.opts.LocalIP6.AsSlice())
	case !s.cfg.LocalIP.Is4():
		return s.Addr()
	}
	return nil
}
