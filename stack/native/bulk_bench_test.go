package native

import (
	"fmt"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// BenchmarkBulk is one connection between two engines over memio moving
// bytes one way as fast as the engines can, both driven from one
// goroutine as dgramio-bulk's poll loop drives one: the sender writes
// what its ring takes and flushes, the receiver polls, reads in place
// (Peek, Lend) and flushes its ACKs. MB/s is the engines' cost per byte
// of payload, the wire being a memory copy: the send and receive paths
// (segment build, checksums, copies, ACKs) of a bulk transfer, with the
// engine options dgramio-bulk's native rows use (MTU 1500), over both
// families (mtu=1500/dack=5ms/IPv4 and /IPv6).
func BenchmarkBulk(b *testing.B) {
	for _, dack := range []time.Duration{5 * time.Millisecond} {
		b.Run(fmt.Sprintf("mtu=1500/dack=%v", dack), func(b *testing.B) {
			forFamilies(b, func(b *testing.B, f family) { bulk(b, f, dack) })
		})
	}
}

// bulk is BenchmarkBulk's case with delayed ACKs of dack in the family f.
func bulk(b *testing.B, f family, dack time.Duration) {
	pa, pb := memio.NewPair(memio.Options{TxSlots: 1024, RxSlots: 1024})
	defer pa.Close()
	defer pb.Close()
	cli, srv, cc, sc := benchPair(b, f, pa, pb, Options{DelayedACK: dack, Congestion: NewReno}, 256)
	defer cli.Close()
	defer srv.Close()
	const chunk = 64 << 10
	src := randBytes(1, chunk)
	b.SetBytes(chunk)
	b.ReportAllocs()
	b.ResetTimer()
	var sent, got int64
	want := int64(b.N) * chunk
	for got < want {
		for sent < want {
			n := cc.Write(src[sent%chunk : min(int64(chunk), sent%chunk+want-sent)])
			if n == 0 {
				break
			}
			sent += int64(n)
		}
		cli.Poll(256)
		cli.Flush()
		srv.Poll(256)
		for {
			p := sc.Peek()
			if len(p) == 0 {
				break
			}
			got += int64(len(p))
			sc.Lend(len(p))
		}
		sc.Consume()
		srv.Flush()
	}
	b.StopTimer()
	b.ReportMetric(float64(counterOf(b, srv, "tcp_segments_out"))/float64(counterOf(b, cli, "tcp_segments_out")), "acks/seg")
}
