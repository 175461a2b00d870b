package ndp

import (
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// benchHandler returns a Handler for addrA on one port of a memio pair,
// and the other port.
func benchHandler(b *testing.B, cfg Config) (*Handler, *memio.Port) {
	pa, pb := memio.NewPair(memio.Options{})
	b.Cleanup(func() { pa.Close(); pb.Close() })
	cfg.MAC, cfg.Addr, cfg.Iface = pa.MAC(), addrA, "memio A"
	h, err := New(pa, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return h, pb
}

// BenchmarkHandleSolicitation answers a solicitation for our address from
// a neighbour cached already: parse, check its MAC, advertise into the TX
// ring.
func BenchmarkHandleSolicitation(b *testing.B) {
	ha, pb := benchHandler(b, Config{})
	f := AppendNS(nil, [6]byte(pb.MAC()), addrB, addrA, nil)
	ha.Learn(addrB, [6]byte(pb.MAC()))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ha.Handle(f)
		if i%32 == 31 {
			ha.Flush()
			pb.RxFrames(64, func([]byte) {})
		}
	}
}

// BenchmarkQueryHit is the resolver's question for a cached, REACHABLE
// address.
func BenchmarkQueryHit(b *testing.B) {
	ha, pb := benchHandler(b, Config{Reachable: time.Hour})
	mac := [6]byte(pb.MAC())
	ha.Learn(addrB, mac)
	f := AppendNA(nil, mac, addrB, addrA, [6]byte(ha.cfg.MAC), FlagSolicited|FlagOverride)
	ha.Handle(f)
	now := time.Now()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, ok := ha.Query(addrB, now); !ok {
			b.Fatal("miss")
		}
	}
}
