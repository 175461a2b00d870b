package netconn

import (
	"net/netip"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/stack/native"
)

// A Service has one address, Config.LocalIP, and so one family: an IPv6
// LocalIP runs the native engine with it as Options.Addr6 and no IPv4
// address (the engine counts IPv4 and ARP frames in rx_family_off), as
// internal/tcp's tcp-xdp and tcp-dpdk do; Options.PrefixLen is then the
// IPv6 prefix (0: every peer on the link, resolved by neighbour
// discovery). Listen serves LocalIP (and the engine answers neighbour
// discovery for its link-local address too); Dial and DialContext take
// addresses of the Service's family, "tcp" or the family's "tcp4"/"tcp6".

// v6Engine makes eo, built for an IPv4 Config, the options of an IPv6 one
// when cfg is IPv6: LocalIP as Addr6, the prefix as PrefixLen6, no IPv4
// address. An IPv4 cfg leaves eo as it is.
func v6Engine(eo *native.Options, cfg dgramio.Config) {
	if !cfg.IPv6() {
		return
	}
	eo.Addr, eo.Addr6 = netip.Addr{}, cfg.LocalIP
	eo.PrefixLen, eo.PrefixLen6 = 0, eo.PrefixLen
}
