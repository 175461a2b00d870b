//go:build !dpdk

package netconn

import (
	"fmt"

	"github.com/dgramio/dgramio/internal/core"
)

// OpenDPDK is the Opener of kind tcp-dpdk. This build has no DPDK (build
// tag dpdk): it returns core.ErrNoDPDK (which matches core.ErrNotSupported)
// wrapped with the kind.
func OpenDPDK(cfg core.Config) (Opened, error) {
	return Opened{}, fmt.Errorf("kind %s: %w", core.KindTCPDPDK, core.ErrNoDPDK)
}
