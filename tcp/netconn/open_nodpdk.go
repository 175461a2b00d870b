//go:build !dpdk

package netconn

import (
	"fmt"

	"github.com/dgramio/dgramio"
)

// OpenDPDK is the Opener of kind tcp-dpdk. This build has no DPDK (build
// tag dpdk): it returns dgramio.ErrNoDPDK (which matches dgramio.ErrNotSupported)
// wrapped with the kind.
func OpenDPDK(cfg dgramio.Config) (Opened, error) {
	return Opened{}, fmt.Errorf("kind %s: %w", dgramio.KindTCPDPDK, dgramio.ErrNoDPDK)
}
