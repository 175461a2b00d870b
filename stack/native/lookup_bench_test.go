package native

import "testing"

// BenchmarkTupleLookup is the flow table's lookup of an IPv4 segment's
// tuple among 1024 connections, each lookup another connection's (so the
// one-entry memory misses and the map is searched, the cost of a run of
// segments from many flows), and "same" the memory's hit (a flow's run).
func BenchmarkTupleLookup(b *testing.B) {
	const n = 1024
	e := &Engine{table: make(map[tuple]int32, n), lastIdx: -1}
	ts := make([]tuple, n)
	for i := range ts {
		ts[i] = tuple{raddr: [4]byte{198, 18, byte(i >> 8), byte(i)}, lport: 80, rport: uint16(40000 + i)}
		e.table[ts[i]] = int32(i)
	}
	b.Run("many", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, ok := e.lookup(ts[i&(n-1)]); !ok {
				b.Fatal("miss")
			}
		}
	})
	b.Run("same", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, ok := e.lookup(ts[7]); !ok {
				b.Fatal("miss")
			}
		}
	})
}
