package arp

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
)

var (
	ipA = netip.MustParseAddr("198.18.0.1")
	ipB = netip.MustParseAddr("198.18.0.2")
	ipC = netip.MustParseAddr("198.18.0.3")
)

func TestAppendAndParse(t *testing.T) {
	req := AppendRequest(nil, memio.DefaultMACA, ipA, ipB)
	if len(req) != 60 {
		t.Fatalf("request is %d bytes, want 60 (padded)", len(req))
	}
	m, err := ParseARP(req)
	if err != nil {
		t.Fatal(err)
	}
	if m.Op != OpRequest || m.SenderIP != ipA || m.TargetIP != ipB ||
		!bytes.Equal(m.SenderMAC[:], memio.DefaultMACA) || !bytes.Equal(m.EthDst[:], Broadcast) ||
		!bytes.Equal(m.EthSrc[:], memio.DefaultMACA) || m.TargetMAC != [6]byte{} {
		t.Fatalf("request parsed as %+v", m)
	}
	rep := AppendReply(nil, memio.DefaultMACB, ipB, memio.DefaultMACA, ipA)
	m, err = ParseARP(rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep) != 60 || m.Op != OpReply || m.SenderIP != ipB || m.TargetIP != ipA ||
		!bytes.Equal(m.SenderMAC[:], memio.DefaultMACB) || !bytes.Equal(m.TargetMAC[:], memio.DefaultMACA) ||
		!bytes.Equal(m.EthDst[:], memio.DefaultMACA) {
		t.Fatalf("reply parsed as %+v", m)
	}
	buf := make([]byte, 0, 60)
	if a := testing.AllocsPerRun(100, func() {
		if _, err := ParseARP(AppendReply(buf[:0], memio.DefaultMACB, ipB, memio.DefaultMACA, ipA)); err != nil {
			panic(err)
		}
	}); a != 0 {
		t.Fatalf("%v allocations per build+parse", a)
	}
}

// TestGopacketAgrees decodes our frames with gopacket as an independent
// check.
func TestGopacketAgrees(t *testing.T) {
	for _, f := range [][]byte{
		AppendRequest(nil, memio.DefaultMACA, ipA, ipB),
		AppendReply(nil, memio.DefaultMACB, ipB, memio.DefaultMACA, ipA),
	} {
		p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		if el := p.ErrorLayer(); el != nil {
			t.Fatal(el.Error())
		}
		a, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP)
		if !ok {
			t.Fatal("gopacket found no ARP layer")
		}
		m, _ := ParseARP(f)
		if a.AddrType != layers.LinkTypeEthernet || a.Protocol != layers.EthernetTypeIPv4 || a.HwAddressSize != 6 ||
			a.ProtAddressSize != 4 || a.Operation != m.Op || !bytes.Equal(a.SourceHwAddress, m.SenderMAC[:]) ||
			!bytes.Equal(a.SourceProtAddress, m.SenderIP.AsSlice()) || !bytes.Equal(a.DstHwAddress, m.TargetMAC[:]) ||
			!bytes.Equal(a.DstProtAddress, m.TargetIP.AsSlice()) {
			t.Fatalf("gopacket reads %+v", a)
		}
	}
}

func TestParseErrors(t *testing.T) {
	good := func() []byte { return AppendRequest(nil, memio.DefaultMACA, ipA, ipB) }
	cases := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"short", good()[:13], ErrNotARP},
		{"IPv4", func() []byte { f := good(); f[13] = 0x00; return f }(), ErrNotARP},
		{"ARP too short", good()[:14+27], ErrMalformed},
		{"unpadded 42 is fine", good()[:42], nil},
		{"hardware type 6", func() []byte { f := good(); f[15] = 6; return f }(), ErrMalformed},
		{"protocol IPv6", func() []byte { f := good(); f[16], f[17] = 0x86, 0xdd; return f }(), ErrMalformed},
		{"hlen 8", func() []byte { f := good(); f[18] = 8; return f }(), ErrMalformed},
		{"plen 16", func() []byte { f := good(); f[19] = 16; return f }(), ErrMalformed},
		{"op 3 (RARP)", func() []byte { f := good(); f[21] = 3; return f }(), ErrMalformed},
	}
	for _, c := range cases {
		if _, err := ParseARP(c.frame); err != c.want {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// FuzzParseARP: no panic, no change to the frame, and what parses matches
// the bytes at RFC 826's offsets and builds back to the same ARP payload.
func FuzzParseARP(f *testing.F) {
	f.Add(AppendRequest(nil, memio.DefaultMACA, ipA, ipB))
	f.Add(AppendReply(nil, memio.DefaultMACB, ipB, memio.DefaultMACA, ipA))
	f.Add(AppendRequest(nil, memio.DefaultMACA, ipA, ipB)[:42])
	f.Add([]byte{})
	f.Add(make([]byte, 60))
	f.Fuzz(func(t *testing.T, frame []byte) {
		orig := append([]byte(nil), frame...)
		m, err := ParseARP(frame)
		if !bytes.Equal(frame, orig) {
			t.Fatal("ParseARP modified the frame")
		}
		if err != nil {
			if err != ErrNotARP && err != ErrMalformed {
				t.Fatalf("error %v", err)
			}
			if err == ErrMalformed && Packet(frame[14:]).IsValid() {
				t.Fatal("malformed but valid")
			}
			return
		}
		if !Packet(frame[14:]).IsValid() || len(frame) < 42 {
			t.Fatal("parsed an invalid packet")
		}
		if m.Op != OpRequest && m.Op != OpReply {
			t.Fatalf("op %d", m.Op)
		}
		var rebuilt []byte
		if m.Op == OpRequest {
			rebuilt = AppendRequest(nil, m.SenderMAC[:], m.SenderIP, m.TargetIP)
			copy(rebuilt[14+18:14+24], m.TargetMAC[:]) // requests may carry anything there
		} else {
			rebuilt = AppendReply(nil, m.SenderMAC[:], m.SenderIP, m.TargetMAC[:], m.TargetIP)
		}
		if !bytes.Equal(rebuilt[14:42], frame[14:42]) {
			t.Fatalf("rebuilt %x, frame %x", rebuilt[14:42], frame[14:42])
		}
	})
}

// responder drives h over port p in a goroutine until stop is closed.
func responder(t *testing.T, p *memio.Port, h *Handler) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			p.Wait(ctx)
			cancel()
			p.RxFrames(64, func(f []byte) { h.Handle(f) })
			if err := h.Flush(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

func newHandler(t testing.TB, p *memio.Port, addr netip.Addr) *Handler {
	t.Helper()
	h, err := New(p, Config{MAC: p.MAC(), Addr: addr, Iface: "memio" + p.String()[6:], Interval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// count returns the handler's counter name (layer "arp").
func count(h *Handler, name string) uint64 {
	s := dgramio.Stats{Layers: h.AppendLayers(nil)}
	v, _ := s.Counter("arp", name)
	return v
}

func TestResolveBothWays(t *testing.T) {
	for _, dir := range []string{"A asks B", "B asks A"} {
		t.Run(dir, func(t *testing.T) {
			a, b := memio.NewPair(memio.Options{})
			asker, answerer := a, b
			askIP, answerIP := ipA, ipB
			if dir == "B asks A" {
				asker, answerer, askIP, answerIP = b, a, ipB, ipA
			}
			hq := newHandler(t, asker, askIP)
			hr := newHandler(t, answerer, answerIP)
			stop := responder(t, answerer, hr)
			defer stop()
			mac, err := hq.Resolve(context.Background(), answerIP, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(mac[:], answerer.MAC()) {
				t.Fatalf("resolved %x, want %v", mac, answerer.MAC())
			}
			stop()
			if count(hq, CounterRequestsOut) < 1 || count(hq, CounterRepliesIn) != 1 ||
				count(hr, CounterRequestsIn) < 1 || count(hr, CounterRepliesOut) < 1 {
				t.Fatalf("counters: asker %v answerer %v", hq.AppendLayers(nil), hr.AppendLayers(nil))
			}
			// The answerer learned the asker from a request meant for it.
			if m, ok := hr.Lookup(askIP); !ok || !bytes.Equal(m[:], asker.MAC()) {
				t.Fatal("answerer did not learn the asker")
			}
			// A second resolve is answered from the cache: no new request.
			before := count(hq, CounterRequestsOut)
			if _, err := hq.Resolve(context.Background(), answerIP, nil); err != nil || count(hq, CounterRequestsOut) != before {
				t.Fatalf("cached resolve: %v, requests %d -> %d", err, before, count(hq, CounterRequestsOut))
			}
			// Every ARP frame that left was padded.
			for _, p := range []*memio.Port{a, b} {
				for _, c := range p.Stats().Layers {
					if c.Name == "tx_runt" && c.Value != 0 {
						t.Fatalf("%v sent %d frames under 60 bytes", p, c.Value)
					}
				}
			}
		})
	}
}

func TestIgnoreOtherAddresses(t *testing.T) {
	a, b := memio.NewPair(memio.Options{})
	hb := newHandler(t, b, ipB)
	a.TxFrame(AppendRequest(nil, a.MAC(), ipA, ipC)) // who has .3?
	a.TxFrame(AppendReply(nil, a.MAC(), ipA, memio.DefaultMACB, ipC))
	a.TxFrame([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x08, 0x06, 0, 1}) // truncated ARP
	a.Kick()
	n := 0
	b.RxFrames(10, func(f []byte) {
		if !hb.Handle(f) {
			t.Fatal("ARP frame not taken")
		}
		n++
	})
	if err := hb.Flush(); err != nil {
		t.Fatal(err)
	}
	if n != 3 || count(hb, CounterIgnored) != 2 || count(hb, CounterMalformed) != 1 || count(hb, CounterRepliesOut) != 0 {
		t.Fatalf("delivered %d, counters %v", n, hb.AppendLayers(nil))
	}
	if got := a.RxFrames(10, func([]byte) {}); got != 0 {
		t.Fatalf("B answered a request for another address (%d frames)", got)
	}
	if _, ok := hb.Lookup(ipA); ok {
		t.Fatal("learned a sender from frames not meant for us")
	}
	if hb.Handle(make([]byte, 60)) {
		t.Fatal("took a non-ARP frame")
	}
}

func TestResolveTimeout(t *testing.T) {
	a, _ := memio.NewPair(memio.Options{})
	h, _ := New(a, Config{MAC: a.MAC(), Addr: ipA, Iface: "veth-test", Retries: 3, Interval: 20 * time.Millisecond})
	start := time.Now()
	_, err := h.Resolve(context.Background(), ipC, nil)
	var re *ResolveError
	if !errors.As(err, &re) || !errors.Is(err, ErrNoReply) {
		t.Fatalf("error %v", err)
	}
	if re.Addr != ipC || re.Iface != "veth-test" || re.Requests != 3 {
		t.Fatalf("%+v", re)
	}
	if msg := err.Error(); !strings.Contains(msg, "198.18.0.3") || !strings.Contains(msg, "veth-test") {
		t.Fatalf("message %q does not name the address and interface", msg)
	}
	if time.Since(start) < 60*time.Millisecond {
		t.Fatal("gave up before three intervals")
	}
	if count(h, CounterRequestsOut) != 3 || count(h, CounterTimeouts) != 1 {
		t.Fatal(h.AppendLayers(nil))
	}
}

func TestResolveContextCancelled(t *testing.T) {
	a, _ := memio.NewPair(memio.Options{})
	h, _ := New(a, Config{MAC: a.MAC(), Addr: ipA, Iface: "x", Interval: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := h.Resolve(ctx, ipB, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v", err)
	}
}

// TestResolveRetriesThroughLoss loses half the frames both ways; with
// enough retries resolution gets through.
func TestResolveRetriesThroughLoss(t *testing.T) {
	seed := memio.Seed(t)
	loss := memio.Impairment{Loss: 0.5}
	a, b := memio.NewPair(memio.Options{Seed: seed, AtoB: loss, BtoA: loss})
	hq, _ := New(a, Config{MAC: a.MAC(), Addr: ipA, Iface: "x", Retries: 40, Interval: 20 * time.Millisecond})
	hr := newHandler(t, b, ipB)
	stop := responder(t, b, hr)
	defer stop()
	if _, err := hq.Resolve(context.Background(), ipB, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("requests sent: %d", count(hq, CounterRequestsOut))
}

func TestResolveHandsOverOtherFrames(t *testing.T) {
	a, b := memio.NewPair(memio.Options{})
	h, _ := New(a, Config{MAC: a.MAC(), Addr: ipA, Iface: "x", Retries: 1, Interval: 20 * time.Millisecond})
	data := make([]byte, 60)
	data[12] = 0x08 // IPv4
	b.TxFrame(data)
	b.TxFrame(data)
	b.Kick()
	var other int
	h.Resolve(context.Background(), ipB, func([]byte) { other++ })
	if other != 2 {
		t.Fatalf("other got %d frames", other)
	}
	b.TxFrame(data)
	b.Kick()
	h.Resolve(context.Background(), ipB, nil)
	if count(h, CounterDropped) != 1 {
		t.Fatal("frame dropped while resolving not counted")
	}
	for _, c := range h.AppendLayers(nil) {
		if c.Loss != (c.Name == CounterDropped) || c.Layer != "arp" {
			t.Fatalf("counter %+v", c)
		}
	}
}

func TestCacheBound(t *testing.T) {
	a, _ := memio.NewPair(memio.Options{})
	h, _ := New(a, Config{MAC: a.MAC(), Addr: ipA, CacheSize: 2})
	addrs := []netip.Addr{ipB, ipC, netip.MustParseAddr("198.18.0.4")}
	for i, ip := range addrs {
		h.Learn(ip, [6]byte{2, 0, 0, 0, 0, byte(i)})
	}
	if _, ok := h.Lookup(ipB); ok {
		t.Fatal("oldest entry kept beyond the bound")
	}
	for i, ip := range addrs[1:] {
		if m, ok := h.Lookup(ip); !ok || m[5] != byte(i+1) {
			t.Fatalf("%v: %v %v", ip, m, ok)
		}
	}
	// A known sender is refreshed by any ARP frame (RFC 826).
	a2, b2 := memio.NewPair(memio.Options{})
	h2, _ := New(b2, Config{MAC: b2.MAC(), Addr: ipB})
	h2.Learn(ipA, [6]byte{2, 9, 9, 9, 9, 9})
	a2.TxFrame(AppendRequest(nil, a2.MAC(), ipA, ipC))
	a2.Kick()
	b2.RxFrames(1, func(f []byte) { h2.Handle(f) })
	if m, _ := h2.Lookup(ipA); !bytes.Equal(m[:], a2.MAC()) {
		t.Fatal("known sender not refreshed")
	}
}

func TestNewRejects(t *testing.T) {
	a, _ := memio.NewPair(memio.Options{})
	if _, err := New(a, Config{MAC: net.HardwareAddr{1}, Addr: ipA}); err == nil {
		t.Error("bad MAC accepted")
	}
	if _, err := New(a, Config{MAC: a.MAC()}); err == nil {
		t.Error("no address accepted")
	}
}

// TestQueryPollNeverBlock: Query sends one request and returns at once;
// the answer comes back through Handle and Poll reports it. Nobody drives
// the answerer in between, so a call that waited for the reply would
// never see one. The time is given, not read: no sleeps.
func TestQueryPollNeverBlock(t *testing.T) {
	a, b := memio.NewPair(memio.Options{})
	hq := newHandler(t, a, ipA)
	hr := newHandler(t, b, ipB)
	now := time.Unix(1000, 0)
	if _, ok := hq.Query(ipB, now); ok {
		t.Fatal("Query answered from an empty cache")
	}
	if _, ok := hq.Query(ipB, now); ok || hq.Pending() != 1 {
		t.Fatalf("second Query: pending %d", hq.Pending())
	}
	if err := hq.Flush(); err != nil {
		t.Fatal(err)
	}
	if count(hq, CounterRequestsOut) != 1 {
		t.Fatal("a query in progress sent a second request")
	}
	if hq.Poll(now, func(netip.Addr, [6]byte, error) { t.Fatal("ended before a reply") }) != 1 {
		t.Fatal("query lost")
	}
	// The answerer's poll loop runs once: it answers.
	b.RxFrames(64, func(f []byte) { hr.Handle(f) })
	hr.Flush()
	a.RxFrames(64, func(f []byte) { hq.Handle(f) })
	var got [6]byte
	ended := 0
	left := hq.Poll(now, func(addr netip.Addr, mac [6]byte, err error) {
		if addr != ipB || err != nil {
			t.Fatalf("%v: %v", addr, err)
		}
		got, ended = mac, ended+1
	})
	if left != 0 || ended != 1 || !bytes.Equal(got[:], b.MAC()) {
		t.Fatalf("left %d, ended %d, mac %x", left, ended, got)
	}
	if mac, ok := hq.Query(ipB, now); !ok || mac != got {
		t.Fatal("resolved address not cached")
	}
}

// TestQueryGivesUp: without answers, Poll sends Retries requests Interval
// apart and then reports a *ResolveError, counted in timeouts (RFC 1122
// 2.3.2.1: retransmissions of a request are rate-limited and bounded).
func TestQueryGivesUp(t *testing.T) {
	a, _ := memio.NewPair(memio.Options{})
	h, _ := New(a, Config{MAC: a.MAC(), Addr: ipA, Iface: "veth-test", Retries: 2, Interval: time.Second})
	now := time.Unix(1000, 0)
	h.Query(ipC, now)
	var errs []error
	done := func(_ netip.Addr, _ [6]byte, err error) { errs = append(errs, err) }
	for _, dt := range []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond} {
		if h.Poll(now.Add(dt), done) != 1 || len(errs) != 0 {
			t.Fatalf("at +%v: ended early %v", dt, errs)
		}
	}
	if n := count(h, CounterRequestsOut); n != 2 {
		t.Fatalf("%d requests sent, want 2", n)
	}
	if h.Poll(now.Add(2*time.Second), done) != 0 || len(errs) != 1 {
		t.Fatalf("did not give up after 2 intervals: %v", errs)
	}
	var re *ResolveError
	if !errors.As(errs[0], &re) || re.Addr != ipC || re.Requests != 2 || re.Waited != 2*time.Second {
		t.Fatalf("%v", errs[0])
	}
	if count(h, CounterTimeouts) != 1 || count(h, CounterRequestsOut) != 2 {
		t.Fatal(h.AppendLayers(nil))
	}
}

// BenchmarkHandleRequest answers a request for our address: parse, learn
// (the sender is cached already), reply into the TX ring.
func BenchmarkHandleRequest(b *testing.B) {
	pa, pb := memio.NewPair(memio.Options{})
	defer pa.Close()
	defer pb.Close()
	h := newHandler(b, pa, ipA)
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
	h := newHandler(b, pa, ipA)
	h.Learn(ipB, [6]byte(pb.MAC()))
	now := time.Now()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, ok := h.Query(ipB, now); !ok {
			b.Fatal("miss")
		}
	}
}
