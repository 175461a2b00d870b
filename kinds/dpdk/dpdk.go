//go:build dpdk

package dpdk

import (
	"github.com/dgramio/dgramio"
	rawudp "github.com/dgramio/dgramio/internal/udp"
)

func init() {
	dgramio.Register(dgramio.KindDPDK, dgramio.Driver{Open: rawudp.NewDPDK, OpenGroup: rawudp.NewDPDKGroup})
}
