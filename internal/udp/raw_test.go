package udp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/arp"
	"github.com/dgramio/dgramio/internal/ndp"
)

var (
	ipA = netip.MustParseAddr("198.18.0.1")
	ipB = netip.MustParseAddr("198.18.0.2")
)

// family is one column of the tests that run over both families: the
// client's address a and the server's b.
type family struct {
	name string
	a, b netip.Addr
}

var families = []family{
	{"IPv4", ipA, ipB},
	{"IPv6", netip.MustParseAddr("2001:2::1"), netip.MustParseAddr("2001:2::2")},
}

// forFamilies runs fn as a subtest per family.
func forFamilies(t *testing.T, fn func(t *testing.T, f family)) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) { fn(t, f) })
	}
}

func clientCfg() dgramio.Config { return clientCfgFor(families[0]) }

func serverCfg() dgramio.Config { return serverCfgFor(families[0]) }

func clientCfgFor(f family) dgramio.Config {
	return dgramio.Config{Kind: dgramio.KindXDP, Iface: "memio", LocalIP: f.a, Dests: []netip.AddrPort{netip.AddrPortFrom(f.b, 5000)},
		Port: 5000, LocalPort: 40000, DstMAC: memio.DefaultMACB}
}

func serverCfgFor(f family) dgramio.Config {
	return dgramio.Config{Kind: dgramio.KindXDP, Iface: "memio", Role: dgramio.RoleServer, LocalIP: f.b, Port: 5000}
}

// pair returns a client on port A and a server on port B of a memio pair.
func pair(t *testing.T, o memio.Options, cc, sc dgramio.Config) (cl, sv *Raw, a, b *memio.Port) {
	t.Helper()
	a, b = memio.NewPair(o)
	var err error
	cl, err = NewRaw(cc, a, RawOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sv, err = NewRaw(sc, b, RawOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); sv.Close() })
	return cl, sv, a, b
}

func msg(i int, n int) []byte {
	p := make([]byte, n)
	for j := range p {
		p[j] = byte(i + j)
	}
	if n >= 4 {
		binary.BigEndian.PutUint32(p, uint32(i))
	}
	return p
}

// rxAll polls b until want packets arrived or the deadline passes, calling
// fn on each (valid only during fn).
func rxAll(t *testing.T, b *Raw, want int, fn func(dgramio.Packet)) int {
	t.Helper()
	pkts := make([]dgramio.Packet, 32)
	got := 0
	deadline := time.Now().Add(10 * time.Second)
	for got < want && time.Now().Before(deadline) {
		n, err := b.Rx(pkts)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkts[:n] {
			fn(p)
		}
		got += n
		if n == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	return got
}

func TestEchoOverMemio(t *testing.T) { forFamilies(t, testEchoOverMemio) }

func testEchoOverMemio(t *testing.T, f family) {
	ipA, ipB := f.a, f.b
	cl, sv, a, _ := pair(t, memio.Options{}, clientCfgFor(f), serverCfgFor(f))
	const n = 1000
	seen := make([]bool, n)
	pkts := make([]dgramio.Packet, 32)
	echo := func() int { // the server echoes all it has
		total := 0
		for {
			k, err := sv.Rx(pkts)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pkts[:k] {
				if p.From != netip.AddrPortFrom(ipA, 40000) {
					t.Fatalf("from %v", p.From)
				}
				if sv.QueueTo(p.Data, p.From) != nil {
					t.Fatal("QueueTo refused")
				}
			}
			if err := sv.Flush(); err != nil {
				t.Fatal(err)
			}
			if k == 0 {
				return total
			}
			total += k
		}
	}
	collect := func() {
		for {
			k, err := cl.Rx(pkts)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pkts[:k] {
				i := int(binary.BigEndian.Uint32(p.Data))
				if i >= n || !bytes.Equal(p.Data, msg(i, 100)) || p.From != netip.AddrPortFrom(ipB, 5000) {
					t.Fatalf("echo %d wrong", i)
				}
				seen[i] = true
			}
			if k == 0 {
				return
			}
		}
	}
	for sent := 0; sent < n; {
		for k := 0; k < 50 && sent < n; k++ {
			if cl.Queue(msg(sent, 100)) != nil {
				t.Fatal("Queue refused below TxQueue")
			}
			sent++
		}
		if err := cl.Flush(); err != nil {
			t.Fatal(err)
		}
		echo()
		collect()
	}
	for i, s := range seen {
		if !s {
			t.Fatalf("message %d not echoed", i)
		}
	}
	cs, ss := cl.Stats(), sv.Stats()
	if cs.TxQueued != n || cs.TxSent != n || cs.TxBytes != 100*n || cs.RxDelivered != n || cs.RxBytes != 100*n ||
		ss.RxDelivered != n || ss.TxSent != n || cs.Lost() != 0 || ss.Lost() != 0 || cs.RxFiltered != 0 {
		t.Fatalf("client %+v\nserver %+v", cs, ss)
	}
	if cs.Kind != "xdp" || cs.Mode != "memio" {
		t.Fatalf("kind %q mode %q", cs.Kind, cs.Mode)
	}
	// Frames leave in batches of TxBatch: a kick per batch, none per frame.
	if v, _ := cs.Counter("frameio", "tx_frames"); v != n {
		t.Fatalf("frameio tx_frames %d", v)
	}
	for _, c := range a.Stats().Layers {
		if c.Name == "tx_runt" && c.Value != 0 {
			t.Fatal("runts left")
		}
	}
}

// TestPaddingOnTheWire: one-byte datagrams are 43-byte frames; what leaves
// through memio is at least 60 bytes and parses back to one byte.
func TestPaddingOnTheWire(t *testing.T) {
	var sizes []int
	var mu sync.Mutex
	o := memio.Options{Tap: func(d memio.Dir, f []byte) { mu.Lock(); sizes = append(sizes, len(f)); mu.Unlock() }}
	cl, sv, a, _ := pair(t, o, clientCfg(), serverCfg())
	for i := 0; i < 3; i++ {
		cl.Queue([]byte{byte(i)})
	}
	cl.Queue(nil)
	cl.Flush()
	got := rxAll(t, sv, 4, func(p dgramio.Packet) {
		if len(p.Data) > 1 {
			t.Fatalf("padding delivered as payload: %d bytes", len(p.Data))
		}
	})
	if got != 4 {
		t.Fatalf("%d of 4 arrived", got)
	}
	for _, s := range sizes {
		if s < 60 {
			t.Fatalf("a %d-byte frame left", s)
		}
	}
	for _, c := range a.Stats().Layers {
		if c.Name == "tx_runt" && c.Value != 0 {
			t.Fatal("memio counted runts")
		}
	}
}

func TestBackpressureAndOversize(t *testing.T) {
	cc := clientCfg()
	cc.TxQueue = 4
	cc.MaxDatagram = 200
	cl, _, _, _ := pair(t, memio.Options{}, cc, serverCfg())
	for i := 0; i < 4; i++ {
		if cl.Queue(msg(i, 10)) != nil {
			t.Fatalf("Queue %d refused", i)
		}
	}
	if cl.Queue(msg(4, 10)) != dgramio.ErrBackPressure {
		t.Fatal("fifth Queue accepted with TxQueue 4")
	}
	if cl.QueueTo(msg(4, 10), netip.AddrPortFrom(ipB, 5000)) != dgramio.ErrBackPressure {
		t.Fatal("QueueTo accepted beyond TxQueue")
	}
	if cl.Queue(make([]byte, 201)) != dgramio.ErrTooLarge {
		t.Fatal("oversized message accepted")
	}
	s := cl.Stats()
	if s.TxBackpressure != 2 || s.TxOversize != 1 || s.TxQueued != 4 {
		t.Fatalf("%+v", s)
	}
	if err := cl.Flush(); err != nil {
		t.Fatal(err)
	}
	if cl.Queue(make([]byte, 200)) != nil {
		t.Fatal("Queue refused after Flush")
	}
}

// TestFlushRingFull: a FrameIO ring smaller than a batch is kicked and
// retried, so nothing is dropped.
func TestFlushRingFull(t *testing.T) {
	cl, sv, _, _ := pair(t, memio.Options{TxSlots: 3, RxSlots: 1024}, clientCfg(), serverCfg())
	for i := 0; i < 100; i++ {
		cl.Queue(msg(i, 50))
	}
	if err := cl.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := rxAll(t, sv, 100, func(dgramio.Packet) {}); got != 100 {
		t.Fatalf("%d of 100 arrived", got)
	}
	s := cl.Stats()
	if s.TxDropped != 0 || s.TxSent != 100 {
		t.Fatalf("%+v", s)
	}
	if v, _ := s.Counter("raw", "tx_retried"); v == 0 {
		t.Fatal("no retries counted with a 3-slot ring")
	}
}

type refusing struct{ frameio.FrameIO }

func (refusing) TxFrame([]byte) bool { return false }

func TestFlushDropsWhenRingStaysFull(t *testing.T) {
	a, _ := memio.NewPair(memio.Options{})
	cl, err := NewRaw(clientCfg(), refusing{a}, RawOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cl.Queue(msg(1, 10))
	cl.Queue(msg(2, 10))
	if err := cl.Flush(); err != nil {
		t.Fatal(err)
	}
	if s := cl.Stats(); s.TxDropped != 2 || s.TxSent != 0 || s.Lost() != 2 {
		t.Fatalf("%+v", s)
	}
}

func TestFanOut(t *testing.T) {
	a, b := memio.NewPair(memio.Options{})
	cc := clientCfg()
	ipC := netip.MustParseAddr("198.18.0.3")
	cc.Dests = []netip.AddrPort{netip.AddrPortFrom(ipB, 5000), netip.AddrPortFrom(ipC, 5000)}
	cl, err := NewRaw(cc, a, RawOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cl.Queue(msg(1, 10))
	cl.Flush()
	var dsts []netip.Addr
	b.RxFrames(10, func(f []byte) {
		d, r := Parse(f, &Filter{})
		if r != OK {
			t.Fatal(r)
		}
		dsts = append(dsts, d.To.Addr())
	})
	if len(dsts) != 2 || dsts[0] != ipB || dsts[1] != ipC {
		t.Fatalf("to %v", dsts)
	}
	if s := cl.Stats(); s.TxQueued != 2 || s.TxSent != 2 {
		t.Fatalf("%+v", s)
	}
}

// TestRxVerdicts sends the server frames that are not its own or are
// damaged; each is counted in its class, none is delivered.
func TestRxVerdicts(t *testing.T) {
	_, sv, a, _ := pair(t, memio.Options{}, clientCfg(), serverCfg())
	mk := func(dstPort uint16, dst netip.Addr, payload int) []byte {
		tp, _ := NewTemplate(Endpoints{SrcMAC: memio.DefaultMACA, DstMAC: memio.DefaultMACB,
			Src: netip.AddrPortFrom(ipA, 1), Dst: netip.AddrPortFrom(dst, dstPort)})
		return tp.Append(nil, make([]byte, payload))
	}
	badSum := mk(5000, ipB, 100)
	badSum[60] ^= 1
	frag := mk(5000, ipB, 100)
	frag[20] |= 0x20
	fixIP(frag)
	arpReq := arp.AppendRequest(nil, memio.DefaultMACA, ipA, ipB)
	for _, f := range [][]byte{mk(5001, ipB, 10), mk(5000, ipA, 10), arpReq, badSum, frag, mk(5000, ipB, 10)} {
		a.TxFrame(f)
	}
	a.Kick()
	got := rxAll(t, sv, 1, func(p dgramio.Packet) {
		if len(p.Data) != 10 {
			t.Fatal("wrong packet delivered")
		}
	})
	if got != 1 {
		t.Fatalf("%d delivered", got)
	}
	s := sv.Stats()
	if s.RxFiltered != 3 || s.RxBadChecksum != 1 || s.RxMalformed != 1 || s.RxDelivered != 1 {
		t.Fatalf("%+v", s)
	}
	for name, want := range map[string]uint64{"other_port": 1, "other_addr": 1, "not_ipv4": 1, "bad_udp_checksum": 1, "fragment": 1} {
		if v, _ := s.Counter("udp", name); v != want {
			t.Fatalf("udp %s = %d, want %d", name, v, want)
		}
	}
}

func TestRxTruncated(t *testing.T) {
	sc := serverCfg()
	sc.MaxDatagram = 50
	_, sv, a, _ := pair(t, memio.Options{}, clientCfg(), sc)
	tp, _ := NewTemplate(Endpoints{SrcMAC: memio.DefaultMACA, DstMAC: memio.DefaultMACB,
		Src: netip.AddrPortFrom(ipA, 1), Dst: netip.AddrPortFrom(ipB, 5000)})
	a.TxFrame(tp.Append(nil, make([]byte, 51)))
	a.TxFrame(tp.Append(nil, make([]byte, 50)))
	a.Kick()
	if got := rxAll(t, sv, 1, func(p dgramio.Packet) {}); got != 1 {
		t.Fatalf("%d delivered", got)
	}
	if s := sv.Stats(); s.RxTruncated != 1 || s.Lost() != 1 {
		t.Fatalf("%+v", s)
	}
}

// TestImpairedAccounting: through loss, corruption and duplication every
// frame that reached the server is either delivered or in exactly one
// counter, and every frame sent either reached it or is in memio's loss
// counters.
func TestImpairedAccounting(t *testing.T) {
	seed := memio.Seed(t)
	imp := memio.Impairment{Loss: 0.05, Corrupt: 0.1, Duplicate: 0.05, Reorder: 0.05}
	cl, sv, a, b := pair(t, memio.Options{Seed: seed, AtoB: imp, RxSlots: 4096}, clientCfg(), serverCfg())
	const n = 3000
	for i := 0; i < n; i++ {
		if cl.Queue(msg(i, 100)) != nil {
			cl.Flush()
			i--
		}
	}
	cl.Flush()
	a.Kick() // releases a frame memio held back for reordering
	pkts := make([]dgramio.Packet, 32)
	for {
		// memio has no delay here: everything is on the wire already.
		if k, _ := sv.Rx(pkts); k == 0 {
			break
		}
	}
	ss, ms := sv.Stats(), b.Stats()
	var lost, dup uint64
	for _, c := range ms.Layers {
		switch c.Name {
		case "impair_lost", "rx_ring_full":
			lost += c.Value
		case "impair_duplicated":
			dup = c.Value
		}
	}
	if ms.RxFrames != ss.RxDelivered+ss.RxFiltered+ss.RxMalformed+ss.RxBadChecksum+ss.RxTruncated {
		t.Fatalf("frames in %d != delivered %d + filtered %d + malformed %d + checksum %d",
			ms.RxFrames, ss.RxDelivered, ss.RxFiltered, ss.RxMalformed, ss.RxBadChecksum)
	}
	if n+dup != ms.RxFrames+lost {
		t.Fatalf("sent %d + dup %d != arrived %d + lost %d", n, dup, ms.RxFrames, lost)
	}
	if ss.RxBadChecksum == 0 || lost == 0 {
		t.Fatalf("impairment did nothing: %+v", ss)
	}
}

// TestLearnsPeerMAC: the server has no resolver; it answers with the MAC
// the client's frame came from, and refuses an address never heard from.
func TestLearnsPeerMAC(t *testing.T) {
	cl, sv, _, _ := pair(t, memio.Options{}, clientCfg(), serverCfg())
	if sv.QueueTo(msg(0, 10), netip.AddrPortFrom(ipA, 40000)) != dgramio.ErrNoRoute {
		t.Fatal("QueueTo to an unknown peer without resolver accepted")
	}
	ss := sv.Stats()
	if v, _ := ss.Counter("raw", "tx_unresolved"); v != 1 {
		t.Fatal("tx_unresolved not counted")
	}
	cl.Queue(msg(1, 10))
	cl.Flush()
	rxAll(t, sv, 1, func(p dgramio.Packet) {
		if sv.QueueTo(p.Data, p.From) != nil {
			t.Fatal("answer refused")
		}
	})
	sv.Flush()
	if rxAll(t, cl, 1, func(dgramio.Packet) {}) != 1 {
		t.Fatal("answer did not arrive")
	}
}

func TestRxDataValidUntilNextRx(t *testing.T) {
	cl, sv, _, _ := pair(t, memio.Options{}, clientCfg(), serverCfg())
	cl.Queue(msg(1, 100))
	cl.Queue(msg(2, 100))
	cl.Flush()
	pkts := make([]dgramio.Packet, 1)
	n, _ := sv.Rx(pkts)
	if n != 1 {
		t.Fatal(n)
	}
	first := pkts[0].Data
	// memio has already poisoned the frame; our copy is intact.
	if !bytes.Equal(first, msg(1, 100)) {
		t.Fatal("Data does not survive the frame's return to the FrameIO")
	}
	if cap(first) != len(first) {
		t.Fatal("Data has spare capacity into the next buffer")
	}
}

func TestZeroAllocsPerMessage(t *testing.T) {
	cl, sv, _, _ := pair(t, memio.Options{}, clientCfg(), serverCfg())
	p := msg(1, 100)
	pkts := make([]dgramio.Packet, 32)
	round := func() {
		for i := 0; i < 16; i++ {
			cl.Queue(p)
		}
		cl.Flush()
		n, _ := sv.Rx(pkts)
		for _, q := range pkts[:n] {
			sv.QueueTo(q.Data, q.From)
		}
		sv.Flush()
		cl.Rx(pkts)
	}
	round() // the server learns the client here (one allocation, once)
	if allocs := testing.AllocsPerRun(200, round); allocs != 0 {
		t.Fatalf("%v allocations per round of 16 echoes", allocs)
	}
	if s := cl.Stats(); s.RxDelivered != 202*16 /* AllocsPerRun warms up once */ {
		t.Fatalf("echoes %d", s.RxDelivered)
	}
}

func TestWaitAndClose(t *testing.T) {
	cl, sv, a, _ := pair(t, memio.Options{}, clientCfg(), serverCfg())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	if err := sv.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("idle Wait: %v", err)
	}
	cancel()
	done := make(chan error, 1)
	go func() { done <- sv.Wait(context.Background()) }()
	cl.Queue(msg(1, 10))
	cl.Flush()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not wake")
	}
	rxAll(t, sv, 1, func(dgramio.Packet) {})

	// Close wakes a Wait in progress, with and without a cancellable ctx.
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	go func() { done <- sv.Wait(wctx) }()
	go func() { done <- cl.Wait(context.Background()) }()
	time.Sleep(10 * time.Millisecond)
	closed := false
	sv.opts.OnClose = func() error { closed = true; return nil }
	if err := sv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		select {
		case err := <-done:
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("Wait after Close: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not end Wait")
		}
	}
	if !closed {
		t.Fatal("OnClose not called")
	}
	if cl.Queue(msg(1, 1)) != dgramio.ErrClosed || cl.QueueTo(msg(1, 1), netip.AddrPortFrom(ipB, 5000)) != dgramio.ErrClosed {
		t.Fatal("Queue after Close")
	}
	if err := cl.Flush(); !errors.Is(err, net.ErrClosed) {
		t.Fatal(err)
	}
	if _, err := cl.Rx(make([]dgramio.Packet, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatal(err)
	}
	if err := cl.Wait(context.Background()); !errors.Is(err, net.ErrClosed) {
		t.Fatal(err)
	}
	if err := cl.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if a.TxFrame(make([]byte, 60)) {
		t.Fatal("the FrameIO was not closed")
	}
}

type noWait struct{ frameio.FrameIO }

func TestWaitNotSupported(t *testing.T) {
	a, _ := memio.NewPair(memio.Options{})
	cl, err := NewRaw(clientCfg(), noWait{a}, RawOptions{Mode: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.Wait(context.Background()); !errors.Is(err, dgramio.ErrNotSupported) {
		t.Fatalf("Wait: %v", err)
	}
	if cl.Stats().Mode != "plain" {
		t.Fatal("mode")
	}
}

// TestCloseDuringRx closes from another goroutine while the loop polls:
// the loop sees net.ErrClosed, never a crash (run with -race).
func TestCloseDuringRx(t *testing.T) {
	for i := 0; i < 20; i++ {
		cl, sv, _, _ := pair(t, memio.Options{}, clientCfg(), serverCfg())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			pkts := make([]dgramio.Packet, 8)
			for {
				cl.Queue(msg(1, 10))
				cl.Flush()
				if _, err := sv.Rx(pkts); err != nil {
					if !errors.Is(err, net.ErrClosed) {
						t.Error(err)
					}
					return
				}
			}
		}()
		time.Sleep(time.Millisecond)
		sv.Close()
		wg.Wait()
	}
}

func TestNewRawRefuses(t *testing.T) {
	cases := []struct {
		name  string
		cfg   func() dgramio.Config
		field string
	}{
		{"oversized MaxDatagram", func() dgramio.Config { c := clientCfg(); c.MaxDatagram = 1473; return c }, "MaxDatagram"},
		// IPv6's fixed header is 40 bytes: 1452 fit a 1500-byte MTU.
		{"oversized MaxDatagram over IPv6", func() dgramio.Config { c := clientCfgFor(families[1]); c.MaxDatagram = 1453; return c }, "MaxDatagram"},
		{"unspecified LocalIP", func() dgramio.Config { c := clientCfg(); c.LocalIP = netip.IPv6Unspecified(); return c }, "LocalIP"},
		{"no LocalIP", func() dgramio.Config { c := clientCfg(); c.LocalIP = netip.Addr{}; return c }, "LocalIP"},
		{"bad DstMAC", func() dgramio.Config { c := clientCfg(); c.DstMAC = net.HardwareAddr{1, 2}; return c }, "DstMAC"},
		{"no way to resolve", func() dgramio.Config { c := clientCfg(); c.DstMAC = nil; return c }, "DstMAC"},
	}
	for _, c := range cases {
		a, _ := memio.NewPair(memio.Options{})
		_, err := NewRaw(c.cfg(), a, RawOptions{})
		var ce *dgramio.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: %v", c.name, err)
		}
		if a.TxFrame(make([]byte, 60)) {
			t.Errorf("%s: the FrameIO was left open", c.name)
		}
	}
	// 1452 bytes over IPv6 fit; an ARP handler does not serve IPv6.
	a6, _ := memio.NewPair(memio.Options{})
	r6, err := NewRaw(clientCfgFor(families[1]), a6, RawOptions{})
	if err != nil || r6.slot != 62+1452 {
		t.Fatalf("IPv6 client with the default MaxDatagram: %v", err)
	}
	r6.Close()
	a6, _ = memio.NewPair(memio.Options{})
	h, _ := arp.New(a6, arp.Config{MAC: a6.MAC(), Addr: ipA})
	if _, err := NewRaw(clientCfgFor(families[1]), a6, RawOptions{ARP: h}); err == nil {
		t.Fatal("ARP accepted for an IPv6 Config")
	}
	// A jumbo MTU takes a jumbo MaxDatagram.
	a, _ := memio.NewPair(memio.Options{MTU: 9000})
	c := clientCfg()
	c.MaxDatagram = 8972
	r, err := NewRaw(c, a, RawOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
}

// TestOwnARP: neither side knows the other's MAC; the client resolves the
// server through arp/ (IPv4) or ndp/ (IPv6) while the server's poll loop
// answers, and the server's answer goes to the learnt MAC. The counters
// show both ways: RFC 826's request and reply, RFC 4861 §7.2.2-§7.2.4's
// solicitation and advertisement.
func TestOwnARP(t *testing.T) { forFamilies(t, testOwnNeighbours) }

// neighboursFor returns RawOptions owning ARP or NDP on p for addr, the
// handler's layer, and its counters of a resolution made (out, in) and
// answered (in, out).
func neighboursFor(t *testing.T, p *memio.Port, addr netip.Addr, iface string) (RawOptions, string, [4]string) {
	t.Helper()
	if addr.Is4() {
		h, err := arp.New(p, arp.Config{MAC: p.MAC(), Addr: addr, Iface: iface, Interval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return RawOptions{ARP: h}, "arp", [4]string{"requests_out", "replies_in", "requests_in", "replies_out"}
	}
	h, err := ndp.New(p, ndp.Config{MAC: p.MAC(), Addr: addr, Iface: iface, Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return RawOptions{NDP: h}, "ndp", [4]string{"solicits_out", "adverts_in", "solicits_in", "adverts_out"}
}

func testOwnNeighbours(t *testing.T, f family) {
	a, b := memio.NewPair(memio.Options{})
	oa, layer, names := neighboursFor(t, a, f.a, "memio A")
	ob, _, _ := neighboursFor(t, b, f.b, "memio B")
	sv, err := NewRaw(serverCfgFor(f), b, ob)
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	stop := serveEcho(t, sv)
	defer stop()
	cc := clientCfgFor(f)
	cc.DstMAC = nil
	cl, err := NewRaw(cc, a, oa)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < 10; i++ {
		cl.Queue(msg(i, 20))
	}
	cl.Flush()
	got := rxAll(t, cl, 10, func(dgramio.Packet) {})
	stop()
	if got != 10 {
		t.Fatalf("%d of 10 echoes", got)
	}
	cs := cl.Stats()
	wantLayer(t, cs, layer, names[0], names[1])
	if v, _ := cs.Counter(layer, names[1]); v != 1 {
		t.Fatalf("client got %d %s %s, want 1", v, layer, names[1])
	}
	wantLayer(t, sv.Stats(), layer, names[2], names[3])
	// The server learnt the client from the request meant for it.
	var m [6]byte
	var ok bool
	if ob.ARP != nil {
		m, ok = ob.ARP.Lookup(f.a)
	} else {
		m, ok = ob.NDP.Lookup(f.a)
	}
	if !ok || !bytes.Equal(m[:], a.MAC()) {
		t.Fatal("server did not learn the client from its request")
	}
}

// serveEcho runs b's poll loop on a goroutine of its own: every datagram
// goes back to its sender; an error of Rx or Flush, or an answer QueueTo
// refuses, fails the test. The returned stop ends the loop and waits for
// it (calling it again does nothing); call it before closing b.
func serveEcho(t *testing.T, b dgramio.Backend) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pkts := make([]dgramio.Packet, 32)
		for {
			select {
			case <-done:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			b.Wait(ctx)
			cancel()
			n, err := b.Rx(pkts)
			if err != nil {
				t.Errorf("server Rx: %v", err)
				return
			}
			for _, q := range pkts[:n] {
				if b.QueueTo(q.Data, q.From) != nil {
					t.Errorf("answer to %v refused", q.From)
				}
			}
			if err := b.Flush(); err != nil {
				t.Errorf("server Flush: %v", err)
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// wantARP fails the test unless each named counter of arp/ in s is at
// least 1: "requests_out", "replies_in" where it resolved a peer;
// "requests_in", "replies_out" where it answered one.
func wantARP(t *testing.T, s dgramio.Stats, names ...string) {
	t.Helper()
	wantLayer(t, s, "arp", names...)
}

// wantLayer fails the test unless each named counter of layer in s is at
// least 1.
func wantLayer(t *testing.T, s dgramio.Stats, layer string, names ...string) {
	t.Helper()
	for _, name := range names {
		if v, _ := s.Counter(layer, name); v < 1 {
			t.Fatalf("%s %s is 0: %v", layer, name, s.Layers)
		}
	}
}
