package native

import (
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// BenchmarkNativeHandoff6 is BenchmarkNativeHandoff's "one-loop" over
// IPv6: one 100-byte request and its answer between two IPv6 engines
// over memio, both driven from one goroutine.
func BenchmarkNativeHandoff6(b *testing.B) {
	pa, pb := memio.NewPair(memio.Options{})
	defer pa.Close()
	defer pb.Close()
	o := Options{DelayedACK: 5 * time.Millisecond}
	o.Addr6 = addr6A
	cli, err := New(pa, o)
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	o.Addr6 = addr6B
	srv, err := New(pb, o)
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	l, _ := srv.Listen(7000, 0)
	cc, _ := cli.Dial(netip.AddrPortFrom(addr6B, 7000), 0)
	var sc *Conn
	for deadline := time.Now().Add(10 * time.Second); sc == nil || cc.State() != Established; {
		cli.Poll(64)
		srv.Poll(64)
		cli.Flush()
		srv.Flush()
		if sc == nil {
			sc, _ = l.Accept()
		}
		if time.Now().After(deadline) {
			b.Fatal("no handshake")
		}
	}
	req, buf := make([]byte, 100), make([]byte, 256)
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		cc.Write(req)
		cli.Flush()
		pollRead(srv, sc, buf, 100)
		sc.Write(buf[:100])
		srv.Flush()
		pollRead(cli, cc, buf, 100)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	report(b, lat)
}
