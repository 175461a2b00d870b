package arp

import (
	"net"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// BenchmarkHandleRequest answers a request for our address: parse, learn
// (the sender is cached already), reply into the TX ring.
func BenchmarkHandleRequest(b *testing.B) {
	pa, pb := memio.NewPair(memio.Options{})
	defer pa.Close()
	defer pb.Close()
	h, err := New(pa, Config{MAC: pa.MAC(), Addr: ipA, Iface: "memio A"})
	if err != nil {
		b.Fatal(err)
	}
	req := AppendRequest(nil, pb.MAC(), ipB, ipA)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		h.Handle(req)
		if i%32 == 31 {
			h.Flush()
			pb.RxFrames(64, func([]byte) {})
		}
	}
}

// BenchmarkQueryHit is the resolver's question for a cached address.
func BenchmarkQueryHit(b *testing.B) {
	pa, pb := memio.NewPair(memio.Options{})
	defer pa.Close()
	defer pb.Close()
	h, err := New(pa, Config{MAC: pa.MAC(), Addr: ipA, Iface: "memio A"})
	if err != nil {
		b.Fatal(err)
	}
	h.Learn(ipB, [6]byte(net.HardwareAddr(pb.MAC())))
	now := time.Now()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, ok := h.Query(ipB, now); !ok {
			b.Fatal("miss")
		}
	}
}
