// Package benchnet is the address policy of dgramio's tools and test
// hosts: they send only inside the benchmarking range of RFC 2544 or on
// loopback. The library itself has no such rule.
package benchnet

import (
	"net/netip"

	"github.com/dgramio/dgramio/internal/core"
)

// BenchNet is the only address range dgramio's tools and tests use
// (RFC 2544 benchmarking, 198.18.0.0/15).
var BenchNet = netip.MustParsePrefix("198.18.0.0/15")

// CheckBenchAddr refuses an address outside 198.18.0.0/15 and loopback
// with a *core.ConfigError naming field. The tools and test hosts call it:
// they never send anywhere else.
func CheckBenchAddr(field string, a netip.Addr) error {
	if a.IsLoopback() || BenchNet.Contains(a) {
		return nil
	}
	return &core.ConfigError{Field: field, Value: a, Reason: "test hosts and tools use only 198.18.0.0/15 (RFC 2544) or loopback"}
}
