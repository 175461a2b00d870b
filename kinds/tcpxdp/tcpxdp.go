// Package tcpxdp registers kind "tcp-xdp" with dgramio.New and dgramio.NewGroup:
// the userspace TCP (native engine or gVisor netstack) over AF_XDP.
// Import it for its effect:
//
//	import _ "github.com/dgramio/dgramio/kinds/tcpxdp"
package tcpxdp

import (
	"github.com/dgramio/dgramio"
	utcp "github.com/dgramio/dgramio/internal/tcp"
)

func init() {
	dgramio.Register(dgramio.KindTCPXDP, dgramio.Driver{Open: utcp.NewXDP, OpenGroup: utcp.NewXDPGroup})
}
