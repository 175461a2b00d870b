//go:build !linux

package udp

import "github.com/dgramio/dgramio"

// NewXDP returns an error matching dgramio.ErrNotSupported: AF_XDP exists
// only on Linux.
func NewXDP(cfg dgramio.Config) (dgramio.Backend, error) {
	return nil, dgramio.NotSupported("kind xdp (AF_XDP)", "5.9", "AF_XDP exists only on Linux", nil)
}
