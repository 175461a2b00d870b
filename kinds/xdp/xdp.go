// Package xdp registers kind "xdp" with dgramio.New and dgramio.NewGroup:
// raw Ethernet/IPv4/UDP frames over an AF_XDP socket.
// Import it for its effect:
//
//	import _ "github.com/dgramio/dgramio/kinds/xdp"
package xdp

import (
	"github.com/dgramio/dgramio"
	rawudp "github.com/dgramio/dgramio/internal/udp"
)

func init() {
	dgramio.Register(dgramio.KindXDP, dgramio.Driver{Open: rawudp.NewXDP, OpenGroup: rawudp.NewXDPGroup})
}
