// Package tcp registers kind "tcp" with dgramio.New and dgramio.NewGroup:
// kernel TCP sockets driven by epoll, messages as records or raw bytes.
// Import it for its effect:
//
//	import _ "github.com/dgramio/dgramio/kinds/tcp"
package tcp

import (
	"github.com/dgramio/dgramio"
	ktcp "github.com/dgramio/dgramio/internal/kernel/tcp"
)

func init() {
	dgramio.Register(dgramio.KindTCP, dgramio.Driver{Open: ktcp.New, OpenGroup: ktcp.NewGroup})
}
