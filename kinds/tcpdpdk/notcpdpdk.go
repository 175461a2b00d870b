//go:build !dpdk

package tcpdpdk

import (
	"fmt"

	"github.com/dgramio/dgramio"
)

// Without the build tag dpdk (DPDK needs cgo and libdpdk) the kind is
// registered with a Driver that says so.
func init() {
	err := fmt.Errorf("kind %s: %w", dgramio.KindTCPDPDK, dgramio.ErrNoDPDK)
	dgramio.Register(dgramio.KindTCPDPDK, dgramio.Driver{
		Open:      func(dgramio.Config) (dgramio.Backend, error) { return nil, err },
		OpenGroup: func(dgramio.Config) (dgramio.QueueGroup, error) { return nil, err },
	})
}
