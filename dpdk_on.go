//go:build dpdk

package dgramio

import (
	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/tcp"
	"github.com/dgramio/dgramio/udp"
)

// dpdkKinds are the DPDK kinds of a build with the tag dpdk.
var dpdkKinds = map[core.Kind]kindEntry{
	core.KindDPDK:    {udp.NewDPDK, udp.NewDPDKGroup},
	core.KindTCPDPDK: {tcp.NewDPDK, tcp.NewDPDKGroup},
}
