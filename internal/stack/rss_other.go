//go:build !linux

package stack

import "github.com/dgramio/dgramio"

// ReadRSS returns an error matching dgramio.ErrNotSupported: the RSS key and
// indirection table are read with ETHTOOL_GRSSH, which exists only on
// Linux (3.16 and later).
func ReadRSS(iface string) (RSS, error) {
	return RSS{}, dgramio.NotSupported("RSS key and indirection table (ETHTOOL_GRSSH) on "+iface, "3.16", "ethtool exists only on Linux", nil)
}
