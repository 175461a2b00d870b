package udp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/arp"
	"github.com/dgramio/dgramio/internal/ndp"
)

// peerAt is the i-th of many clients: its address in 198.18.0.0/15 (not
// .0 or ipA/ipB), port and MAC, all distinct.
func peerAt(i int) (netip.AddrPort, [6]byte) {
	n := uint32(i) + 16
	ip := netip.AddrFrom4([4]byte{198, 18 + byte(n>>16), byte(n >> 8), byte(n)})
	var mac [6]byte
	mac[0] = 0x02 // locally administered
	binary.BigEndian.PutUint32(mac[2:], n)
	return netip.AddrPortFrom(ip, uint16(1024+i%60000)), mac
}

// counter returns the named counter of s, failing the test when missing.
func counter(t *testing.T, s dgramio.Stats, layer, name string) uint64 {
	t.Helper()
	v, ok := s.Counter(layer, name)
	if !ok {
		t.Fatalf("no counter %s.%s", layer, name)
	}
	return v
}

// TestTxQueueCountsMessages: Config.TxQueue counts messages, as on every
// kind (kernel udp holds TxQueue messages for all its Dests), so a client
// with more Dests than TxQueue still sends.
func TestTxQueueCountsMessages(t *testing.T) {
	a, _ := memio.NewPair(memio.Options{})
	cc := clientCfg()
	cc.Dests = []netip.AddrPort{netip.AddrPortFrom(ipB, 5000), netip.MustParseAddrPort("198.18.0.3:5000"), netip.MustParseAddrPort("198.18.0.4:5000")}
	cc.TxQueue = 2
	cl, err := NewRaw(cc, a, RawOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 2; i++ {
		if cl.Queue(msg(i, 10)) != nil {
			t.Fatalf("Queue %d refused with TxQueue 2 and 3 Dests", i)
		}
	}
	if cl.Queue(msg(2, 10)) != dgramio.ErrBackPressure {
		t.Fatal("a third message accepted with TxQueue 2")
	}
	if err := cl.Flush(); err != nil {
		t.Fatal(err)
	}
	s := cl.Stats()
	if s.TxQueued != 6 || s.TxSent != 6 || s.TxBackpressure != 3 {
		t.Fatalf("queued %d sent %d backpressure %d, want 6 6 3", s.TxQueued, s.TxSent, s.TxBackpressure)
	}
	if cl.Queue(msg(3, 10)) != nil {
		t.Fatal("Queue refused after Flush")
	}
}

// TestManyPeers: a server answers 100,000 clients, each from its own
// address, port and MAC, in Rx batches, with the default table of 65,536
// peers. Every answer goes to the MAC its request came from, none is
// refused; the table then holds the most recent peers and replaced the
// oldest.
func TestManyPeers(t *testing.T) {
	const clients = 100_000
	a, b := memio.NewPair(memio.Options{TxSlots: 512, RxSlots: 512})
	sv, err := NewRaw(serverCfg(), b, RawOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	pkts := make([]dgramio.Packet, 32)
	frame := make([]byte, 0, 128)
	var tmpl Template
	answered, wrong := 0, 0
	check := func(f []byte) {
		d, why := Parse(f, &Filter{})
		if why != OK {
			t.Fatalf("answer: %v", why)
		}
		i := int(binary.BigEndian.Uint32(d.Payload))
		to, mac := peerAt(i)
		if d.To != to || [6]byte(f[0:6]) != mac {
			wrong++
		}
		answered++
	}
	const round = 256
	for base := 0; base < clients; base += round {
		for i := base; i < base+round && i < clients; i++ {
			from, mac := peerAt(i)
			if err := tmpl.Reset(Endpoints{SrcMAC: mac[:], DstMAC: b.MAC(), Src: from, Dst: sv.src}); err != nil {
				t.Fatal(err)
			}
			if !a.TxFrame(tmpl.Append(frame[:0], msg(i, 8))) {
				t.Fatal("memio ring full")
			}
		}
		a.Kick()
		for {
			n, err := sv.Rx(pkts)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			for _, p := range pkts[:n] {
				if sv.QueueTo(p.Data, p.From) != nil {
					t.Fatalf("answer to %v refused", p.From)
				}
			}
			if err := sv.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		for a.RxFrames(64, check) > 0 {
		}
	}
	s := sv.Stats()
	if answered != clients || wrong != 0 || s.Lost() != 0 {
		t.Fatalf("%d of %d answered, %d to the wrong address or MAC, lost %d", answered, clients, wrong, s.Lost())
	}
	if v := counter(t, s, "raw", "peers_replaced"); v != clients-dgramio.DefaultPeers {
		t.Fatalf("peers_replaced %d, want %d", v, clients-dgramio.DefaultPeers)
	}
	// The most recent peers are kept; the oldest made room (no resolver:
	// refused, tx_unresolved).
	last, _ := peerAt(clients - 1)
	first, _ := peerAt(0)
	if sv.QueueTo(msg(0, 8), last) != nil || sv.QueueTo(msg(0, 8), first) != dgramio.ErrNoRoute {
		t.Fatal("the table did not keep the most recent peers")
	}
	if counter(t, sv.Stats(), "raw", "tx_unresolved") != 1 {
		t.Fatal("tx_unresolved")
	}
}

// TestPeerTableMemory measures the heap that 100,000 learnt peers take
// and holds it to the bound the package documents.
func TestPeerTableMemory(t *testing.T) {
	const peers = 100_000
	a, _ := memio.NewPair(memio.Options{})
	c := serverCfg()
	c.Peers = 1 << 17
	sv, err := NewRaw(c, a, RawOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < peers; i++ {
		from, mac := peerAt(i)
		sv.learn(from, mac)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / peers
	t.Logf("%.0f bytes per peer (%d peers)", per, peers)
	if len(sv.table.idx) != peers || per > 400 {
		t.Fatalf("%d peers, %.0f bytes each (documented: about 330)", len(sv.table.idx), per)
	}
	runtime.KeepAlive(sv)
}

// arpPair is a server and a client over memio that both own ARP, the
// server's handler asking with interval iv.
func arpPair(t *testing.T, iv time.Duration, retries int) (sv, cl *Raw, hs *arp.Handler) {
	t.Helper()
	sv, cl, o := neighbourPair(t, families[0], iv, retries)
	return sv, cl, o.ARP
}

// neighbourPair is arpPair for family f: both ends own ARP (IPv4) or NDP
// (IPv6); it returns the server's RawOptions (its handler).
func neighbourPair(t *testing.T, f family, iv time.Duration, retries int) (sv, cl *Raw, so RawOptions) {
	t.Helper()
	a, b := memio.NewPair(memio.Options{})
	if f.b.Is4() {
		hs, _ := arp.New(b, arp.Config{MAC: b.MAC(), Addr: f.b, Iface: "memio B", Interval: iv, Retries: retries})
		so.ARP = hs
	} else {
		hs, _ := ndp.New(b, ndp.Config{MAC: b.MAC(), Addr: f.b, Iface: "memio B", Interval: iv, Retries: retries})
		so.NDP = hs
	}
	co, _, _ := neighboursFor(t, a, f.a, "memio A")
	var err error
	sv, err = NewRaw(serverCfgFor(f), b, so)
	if err != nil {
		t.Fatal(err)
	}
	cl, err = NewRaw(clientCfgFor(f), a, co)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); sv.Close() })
	return sv, cl, so
}

// lookup returns what o's handler cached for addr.
func (o RawOptions) lookup(addr netip.Addr) ([6]byte, bool) {
	if o.ARP != nil {
		return o.ARP.Lookup(addr)
	}
	return o.NDP.Lookup(addr)
}

// TestQueueToResolvesWithoutBlocking: an answer to a peer never heard
// from is accepted at once and waits while ARP runs on the poll loop; the
// client's loop answers the request only when the test steps it, so a
// QueueTo that resolved before returning would find no reply and refuse.
// RFC 826 ("Packet Generation"): the request is broadcast, the reply
// gives the MAC; RFC 1122 2.3.2.2: packets to an address being resolved
// wait in a small queue, and what does not fit is dropped.
//
// Over IPv6 the same with a neighbour solicitation and advertisement
// (RFC 4861 §7.2.2: packets wait in a small queue during resolution).
func TestQueueToResolvesWithoutBlocking(t *testing.T) {
	forFamilies(t, testQueueToResolvesWithoutBlocking)
}

func testQueueToResolvesWithoutBlocking(t *testing.T, f family) {
	sv, cl, hs := neighbourPair(t, f, 2*time.Second, 3)
	ipA := f.a
	layer, out := "arp", "requests_out"
	if f.a.Is6() {
		layer, out = "ndp", "solicits_out"
	}
	to := netip.AddrPortFrom(ipA, 40000)
	for i := 0; i < waitPerPeer+1; i++ {
		if sv.QueueTo(msg(i, 20), to) != nil {
			t.Fatalf("QueueTo %d to a peer being resolved refused", i)
		}
	}
	if err := sv.Flush(); err != nil { // the request leaves
		t.Fatal(err)
	}
	s := sv.Stats()
	if counter(t, s, "raw", "tx_resolve_overflow") != 1 || s.TxDropped != 1 || s.TxSent != 0 {
		t.Fatalf("overflow %v, dropped %d, sent %d", s.Layers, s.TxDropped, s.TxSent)
	}
	// The client's loop runs once: it answers the ARP request.
	pkts := make([]dgramio.Packet, 8)
	if n, err := cl.Rx(pkts); n != 0 || err != nil {
		t.Fatalf("client Rx: %d %v", n, err)
	}
	// The server's loop: Rx takes the reply, Flush sends what waited.
	if _, err := sv.Rx(pkts); err != nil {
		t.Fatal(err)
	}
	if err := sv.Flush(); err != nil {
		t.Fatal(err)
	}
	got := rxAll(t, cl, waitPerPeer, func(p dgramio.Packet) {})
	s = sv.Stats()
	if got != waitPerPeer || s.TxSent != waitPerPeer || s.TxQueued != waitPerPeer+1 {
		t.Fatalf("client got %d, server sent %d of %d queued", got, s.TxSent, s.TxQueued)
	}
	if v, _ := s.Counter(layer, out); v != 1 {
		t.Fatalf("%d %s %s", v, layer, out)
	}
	if _, ok := hs.lookup(ipA); !ok {
		t.Fatal("server did not cache the reply")
	}
	// Now in the table: the next answer leaves at once.
	if sv.QueueTo(msg(9, 20), to) != nil || sv.Flush() != nil || rxAll(t, cl, 1, func(dgramio.Packet) {}) != 1 {
		t.Fatal("answer to a resolved peer")
	}
}

// TestQueueToResolveTimeout: answers to an address nobody answers for are
// dropped when ARP gives up (RFC 1122 2.3.2.1: bounded retransmission),
// counted in tx_resolve_timeout and TxDropped. The loop sleeps in Wait,
// which returns for the retransmissions.
//
// Over IPv6: MAX_MULTICAST_SOLICIT solicitations, then the resolution
// fails (RFC 4861 §7.3.3) and the queued packets are dropped.
func TestQueueToResolveTimeout(t *testing.T) { forFamilies(t, testQueueToResolveTimeout) }

func testQueueToResolveTimeout(t *testing.T, f family) {
	sv, _, _ := neighbourPair(t, f, 20*time.Millisecond, 2)
	layer, out, nobody := "arp", "requests_out", netip.MustParseAddr("198.18.0.9")
	if f.a.Is6() {
		layer, out, nobody = "ndp", "solicits_out", netip.MustParseAddr("2001:2::9")
	}
	to := netip.AddrPortFrom(nobody, 7)
	for i := 0; i < 3; i++ {
		if sv.QueueTo(msg(i, 20), to) != nil {
			t.Fatal("refused")
		}
	}
	pkts := make([]dgramio.Packet, 8)
	deadline := time.Now().Add(10 * time.Second)
	for counter(t, sv.Stats(), "raw", "tx_resolve_timeout") == 0 && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := sv.Wait(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		sv.Rx(pkts)
		sv.Flush()
	}
	s := sv.Stats()
	if counter(t, s, "raw", "tx_resolve_timeout") != 3 || s.TxDropped != 3 || s.Lost() != 3 {
		t.Fatalf("timeout %v, dropped %d, lost %d", s.Layers, s.TxDropped, s.Lost())
	}
	if v, _ := s.Counter(layer, out); v != 2 {
		t.Fatalf("%d %s %s, want 2", v, layer, out)
	}
	if len(sv.table.idx) != 0 || len(sv.wait.free) != sv.cfg.TxQueue {
		t.Fatal("the failed peer or its frames were kept")
	}
}

// TestQueueToBlockingResolver: a Resolver that blocks (the kernel's
// neighbour table) runs off the poll loop; QueueTo returns while it
// blocks, and its answer wakes the loop's Wait.
func TestQueueToBlockingResolver(t *testing.T) {
	a, b := memio.NewPair(memio.Options{})
	release := make(chan struct{})
	asked := make(chan netip.Addr, 1)
	resolve := func(ctx context.Context, addr netip.Addr) ([6]byte, error) {
		asked <- addr
		select {
		case <-release:
			return [6]byte(a.MAC()), nil
		case <-ctx.Done():
			return [6]byte{}, ctx.Err()
		}
	}
	sv, err := NewRaw(serverCfg(), b, RawOptions{Resolve: resolve})
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	cl, err := NewRaw(clientCfg(), a, RawOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	to := netip.AddrPortFrom(ipA, 40000)
	if sv.QueueTo(msg(1, 20), to) != nil {
		t.Fatal("QueueTo refused while resolving")
	}
	if got := <-asked; got != ipA {
		t.Fatalf("resolver asked for %v", got)
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sv.Wait(ctx); err != nil {
		t.Fatal("the resolution did not wake Wait:", err)
	}
	if err := sv.Flush(); err != nil {
		t.Fatal(err)
	}
	if rxAll(t, cl, 1, func(dgramio.Packet) {}) != 1 {
		t.Fatal("the answer did not arrive")
	}
}

// TestWaitingPeerHeardFrom: a frame from a peer being resolved gives it
// its MAC at once; what waited leaves with the next Flush, to that MAC.
func TestWaitingPeerHeardFrom(t *testing.T) {
	sv, cl, _ := arpPair(t, time.Hour, 3)
	to := netip.AddrPortFrom(ipA, 40000)
	sv.QueueTo(msg(1, 20), to)
	cl.Queue(msg(2, 20)) // the client sends first (it has DstMAC)
	cl.Flush()
	if rxAll(t, sv, 1, func(dgramio.Packet) {}) != 1 {
		t.Fatal("request lost")
	}
	sv.Flush()
	got := 0
	rxAll(t, cl, 1, func(p dgramio.Packet) {
		if binary.BigEndian.Uint32(p.Data) == 1 {
			got++
		}
	})
	if got != 1 || sv.Stats().TxSent != 1 {
		t.Fatal("the waiting answer did not leave")
	}
}

// slowWait is a FrameIO whose Wait looks at its context only every
// minute, as afxdp's looks between poll slices; Interrupt ends it.
type slowWait struct{ *memio.Port }

func (s slowWait) Wait(ctx context.Context) error {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Port.Wait(c); err != nil {
		return err
	}
	return ctx.Err()
}

// TestCloseEndsWaitAtOnce: Close from another goroutine ends a Wait in
// progress without waiting for the FrameIO's sleep to end.
func TestCloseEndsWaitAtOnce(t *testing.T) {
	a, _ := memio.NewPair(memio.Options{})
	cl, err := NewRaw(clientCfg(), slowWait{a}, RawOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cl.Wait(context.Background()) }()
	time.Sleep(10 * time.Millisecond) // let it sleep (either order is fine)
	closed := make(chan error, 1)
	go func() { closed <- cl.Close() }()
	for _, c := range []chan error{done, closed} {
		select {
		case err := <-c:
			if err != nil && !errors.Is(err, net.ErrClosed) {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not end Wait")
		}
	}
}

// BenchmarkServerPeers measures a server's Rx, QueueTo and Flush per
// datagram over memio with clients distinct peers sending in turn: 1 (the
// table's fast case), 65536 (all in the default table) and 100000 (more
// than it holds: every datagram replaces a peer).
func BenchmarkServerPeers(b *testing.B) {
	for _, clients := range []int{1, 1 << 16, 100_000} {
		b.Run(fmt.Sprintf("peers=%d", clients), func(b *testing.B) {
			a, p := memio.NewPair(memio.Options{TxSlots: 1024, RxSlots: 1024})
			sv, err := NewRaw(serverCfg(), p, RawOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer sv.Close()
			// The frames, made once.
			const batch = 32
			frames := make([][]byte, min(clients, 1<<16))
			var tmpl Template
			for i := range frames {
				from, mac := peerAt(i)
				tmpl.Reset(Endpoints{SrcMAC: mac[:], DstMAC: p.MAC(), Src: from, Dst: sv.src})
				frames[i] = tmpl.Append(nil, msg(i, 64))
			}
			if clients > len(frames) { // the rest differ in their port only
				extra := clients - len(frames)
				for i := 0; i < extra; i++ {
					f := append([]byte(nil), frames[i]...)
					binary.BigEndian.PutUint16(f[34:36], uint16(7+i))
					binary.BigEndian.PutUint16(f[40:42], 0) // no UDP checksum (RFC 768)
					frames = append(frames, f)
				}
			}
			pkts := make([]dgramio.Packet, batch)
			drop := func([]byte) {}
			next := 0
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; n < b.N; n += batch {
				for k := 0; k < batch; k++ {
					a.TxFrame(frames[next])
					if next++; next == len(frames) {
						next = 0
					}
				}
				a.Kick()
				k, _ := sv.Rx(pkts)
				for _, q := range pkts[:k] {
					sv.QueueTo(q.Data, q.From)
				}
				sv.Flush()
				a.RxFrames(batch, drop)
			}
			b.StopTimer()
			if s := sv.Stats(); s.Lost() != 0 || s.TxSent != s.RxDelivered {
				b.Fatalf("lost %d, sent %d of %d", s.Lost(), s.TxSent, s.RxDelivered)
			}
		})
	}
}

// TestCloseCountsUnsent: messages accepted and never flushed, or waiting
// for a resolution, are TxDropped at Close (raw.tx_unsent_at_close), so
// TxQueued = TxSent + TxDropped holds after Close too.
func TestCloseCountsUnsent(t *testing.T) {
	sv, cl, _ := arpPair(t, time.Hour, 3)
	cl.Queue(msg(1, 10)) // from the client: the server learns it
	cl.Flush()
	if rxAll(t, sv, 1, func(dgramio.Packet) {}) != 1 {
		t.Fatal("lost")
	}
	sv.QueueTo(msg(2, 10), netip.AddrPortFrom(ipA, 40000))                           // known: in a slot
	sv.QueueTo(msg(3, 10), netip.AddrPortFrom(netip.MustParseAddr("198.18.0.9"), 1)) // waiting
	sv.QueueTo(msg(4, 10), netip.AddrPortFrom(netip.MustParseAddr("198.18.0.9"), 1))
	if err := sv.Close(); err != nil {
		t.Fatal(err)
	}
	s := sv.Stats()
	if s.TxQueued != 3 || s.TxSent != 0 || s.TxDropped != 3 || counter(t, s, "raw", "tx_unsent_at_close") != 3 {
		t.Fatalf("queued %d sent %d dropped %d, %v", s.TxQueued, s.TxSent, s.TxDropped, s.Layers)
	}
}
