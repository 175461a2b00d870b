//go:build !dpdk

package dgramio

import (
	"fmt"

	"github.com/dgramio/dgramio/internal/core"
)

// dpdkKinds are the DPDK kinds of a build without DPDK (it needs cgo,
// libdpdk and the build tag dpdk): both constructors return ErrNoDPDK.
var dpdkKinds = map[core.Kind]kindEntry{
	core.KindDPDK:    noDPDK(core.KindDPDK),
	core.KindTCPDPDK: noDPDK(core.KindTCPDPDK),
}

func noDPDK(kind core.Kind) kindEntry {
	err := fmt.Errorf("kind %s: %w", kind, core.ErrNoDPDK)
	return kindEntry{
		open:  func(core.Config) (core.Backend, error) { return nil, err },
		group: func(core.Config) (core.QueueGroup, error) { return nil, err },
	}
}
