// Package benchnet is the address policy of dgramio's tools and test
// hosts: they send only inside the benchmarking ranges of RFC 2544
// (IPv4) and RFC 5180 (IPv6) or on loopback. The library itself has no such rule.
package benchnet

import (
	"net/netip"

	"github.com/dgramio/dgramio"
)

// BenchNet is the only address range dgramio's tools and tests use
// (RFC 2544 benchmarking, 198.18.0.0/15).
var BenchNet = netip.MustParsePrefix("198.18.0.0/15")

// BenchNet6 is the IPv6 range dgramio's tools and tests use (RFC 5180
// §5.2 benchmarking, 2001:2::/48).
var BenchNet6 = netip.MustParsePrefix("2001:2::/48")

// CheckBenchAddr refuses an address outside 198.18.0.0/15, 2001:2::/48
// and loopback (127.0.0.0/8, ::1) with a *dgramio.ConfigError naming field;
// an IPv4-mapped address is judged as the IPv4 address it maps. The tools
// and test hosts call it: they never send anywhere else.
func CheckBenchAddr(field string, a netip.Addr) error {
	if u := a.Unmap(); u.IsLoopback() || BenchNet.Contains(u) || (a.Zone() == "" && BenchNet6.Contains(u)) {
		return nil
	}
	return &dgramio.ConfigError{Field: field, Value: a, Reason: "test hosts and tools use only 198.18.0.0/15 (RFC 2544), 2001:2::/48 (RFC 5180) or loopback"}
}
