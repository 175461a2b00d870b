//go:build dgramio_debug

package udp

import (
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
)

// TestRxDataPoisonedInDebug: in dgramio_debug builds the previous Rx's
// data is overwritten by the next Rx, so code that keeps it fails.
func TestRxDataPoisonedInDebug(t *testing.T) {
	cl, sv, _, _ := pair(t, memio.Options{}, clientCfg(), serverCfg())
	cl.Queue(msg(1, 100))
	cl.Flush()
	pkts := make([]dgramio.Packet, 4)
	if n, _ := sv.Rx(pkts); n != 1 {
		t.Fatal(n)
	}
	kept := pkts[0].Data
	sv.Rx(pkts)
	for _, b := range kept {
		if b != 0xDB {
			t.Fatal("data of the previous Rx not poisoned")
		}
	}
}
