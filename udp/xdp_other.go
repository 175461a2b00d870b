//go:build !linux

package udp

import "github.com/dgramio/dgramio/internal/core"

// NewXDP returns an error matching core.ErrNotSupported: AF_XDP exists
// only on Linux.
func NewXDP(cfg core.Config) (core.Backend, error) {
	return nil, core.NotSupported("kind xdp (AF_XDP)", "5.9", "AF_XDP exists only on Linux", nil)
}
