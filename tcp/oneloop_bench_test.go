package tcp

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/core"
)

// BenchmarkOneLoop is one 100-byte record and its answer between a native
// client and a native server over memio, both driven from this goroutine:
// Queue and Flush, the server's Rx until the record is out, QueueTo and
// Flush, the client's Rx until the answer is out. No poll loop, scheduler
// or kernel takes part: it is the cost of our own code on one round trip
// (four passes through the stream layer and the engine), the part of
// VethSteps that is not the kick, plus memio's (a lock and a copy per
// frame, and the poisoning of each buffer it takes back). Profile it with
// -cpuprofile and pprof's -ignore memio:
//
//	go test -run '^$' -bench OneLoop -cpuprofile cpu.out ./tcp
func BenchmarkOneLoop(b *testing.B) {
	testStack = core.TCPStackNative
	defer func() { testStack = core.TCPStackNetstack }()
	pa, pb := memio.NewPair(memio.Options{})
	srv, err := NewOverFrameIO(serverConfig(), pa, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	// The client's New waits for ARP and the handshake: the server's poll
	// loop runs on a goroutine of its own until then.
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		pkts := make([]core.Packet, 8)
		for !stop.Load() {
			srv.Rx(pkts)
			srv.Flush()
			time.Sleep(50 * time.Microsecond)
		}
	}()
	cli, err := NewOverFrameIO(clientConfig(), pb, Options{})
	stop.Store(true)
	<-done
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	msg := make([]byte, 100)
	pkts := make([]core.Packet, 8)
	one := func(be *Backend) core.Packet {
		for deadline := time.Now().Add(10 * time.Second); ; {
			n, err := be.Rx(pkts)
			if err != nil {
				b.Fatal(err)
			}
			if n > 0 {
				return pkts[0]
			}
			if time.Now().After(deadline) {
				b.Fatal("no record within 10 s")
			}
		}
	}
	trip := func() {
		if !cli.Queue(msg) {
			b.Fatal("the client's Queue refused a record")
		}
		if err := cli.Flush(); err != nil {
			b.Fatal(err)
		}
		in := one(srv)
		if !srv.QueueTo(in.Data, in.From) {
			b.Fatal("the server's QueueTo refused the answer")
		}
		if err := srv.Flush(); err != nil {
			b.Fatal(err)
		}
		one(cli)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		trip()
	}
}
