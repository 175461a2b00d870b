//go:build dpdk

package tcpdpdk

import (
	"github.com/dgramio/dgramio"
	utcp "github.com/dgramio/dgramio/internal/tcp"
)

func init() {
	dgramio.Register(dgramio.KindTCPDPDK, dgramio.Driver{Open: utcp.NewDPDK, OpenGroup: utcp.NewDPDKGroup})
}
