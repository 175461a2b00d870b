package tcp_test

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/tcp"
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
	srvIP, cliIP := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	sc := core.Config{Kind: core.KindTCPXDP, Role: core.RoleServer, Iface: "memio", LocalIP: srvIP, Port: 5000}
	cc := core.Config{Kind: core.KindTCPXDP, Role: core.RoleClient, Iface: "memio", LocalIP: cliIP,
		Dests: []netip.Addr{srvIP}, Port: 5000, ConnectTimeout: 20 * time.Second}
	sc.TCP.Stack, cc.TCP.Stack = core.TCPStackNative, core.TCPStackNative
	pa, pb := memio.NewPair(memio.Options{})
	srv, err := tcp.NewOverFrameIO(sc, pa, tcp.Options{})
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
	cli, err := tcp.NewOverFrameIO(cc, pb, tcp.Options{})
	stop.Store(true)
	<-done
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	msg := make([]byte, 100)
	pkts := make([]core.Packet, 8)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !cli.Queue(msg) {
			b.Fatal("the client's Queue refused a record")
		}
		if err := cli.Flush(); err != nil {
			b.Fatal(err)
		}
		in := rxOne(b, srv, pkts)
		if !srv.QueueTo(in.Data, in.From) {
			b.Fatal("the server's QueueTo refused the answer")
		}
		if err := srv.Flush(); err != nil {
			b.Fatal(err)
		}
		rxOne(b, cli, pkts)
	}
}
