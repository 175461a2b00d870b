// Package udp registers kind "udp" with dgramio.New and dgramio.NewGroup:
// kernel UDP sockets, sendmmsg(2) and recvmmsg(2) in batches.
// Import it for its effect:
//
//	import _ "github.com/dgramio/dgramio/kinds/udp"
package udp

import (
	"github.com/dgramio/dgramio"
	kudp "github.com/dgramio/dgramio/internal/kernel/udp"
)

func init() {
	dgramio.Register(dgramio.KindUDP, dgramio.Driver{Open: kudp.New, OpenGroup: kudp.NewGroup})
}
