//go:build dpdk

package dgramio

import (
	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/tcp"
	"github.com/dgramio/dgramio/udp"
)

// dpdkOpener returns the DPDK kinds of a build with the tag dpdk.
func dpdkOpener(kind string) (openFunc, bool) {
	switch kind {
	case core.KindDPDK:
		return udp.NewDPDK, true
	case core.KindTCPDPDK:
		return tcp.NewDPDK, true
	}
	return nil, false
}

func init() {
	dpdkGroups = func(kind string) (groupOpenFunc, bool) {
		switch kind {
		case core.KindDPDK:
			return udp.NewDPDKGroup, true
		case core.KindTCPDPDK:
			return tcp.NewDPDKGroup, true
		}
		return nil, false
	}
}
