package ndp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

var (
	addrA = netip.MustParseAddr("2001:2::1")
	addrB = netip.MustParseAddr("2001:2::2")
)

// handlers returns a Handler on each port of a memio pair: A for addrA,
// B for addrB.
func handlers(t testing.TB, cfg Config) (ha, hb *Handler, a, b *memio.Port) {
	t.Helper()
	a, b = memio.NewPair(memio.Options{})
	ca, cb := cfg, cfg
	ca.MAC, ca.Addr, ca.Iface = a.MAC(), addrA, "memio A"
	cb.MAC, cb.Addr, cb.Iface = b.MAC(), addrB, "memio B"
	var err error
	if ha, err = New(a, ca); err != nil {
		t.Fatal(err)
	}
	if hb, err = New(b, cb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return ha, hb, a, b
}

// frames takes every frame waiting on p.
func frames(p *memio.Port) [][]byte {
	var out [][]byte
	for p.RxFrames(64, func(f []byte) { out = append(out, append([]byte(nil), f...)) }) > 0 {
	}
	return out
}

// pump hands every frame waiting on p to h, and flushes h.
func pump(t *testing.T, h *Handler, p *memio.Port) {
	t.Helper()
	for _, f := range frames(p) {
		if !h.Handle(f) {
			t.Fatalf("not NDP: %x", f)
		}
	}
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
}

func counter(h *Handler, name string) uint64 {
	for _, c := range h.AppendLayers(nil) {
		if c.Name == name {
			return c.Value
		}
	}
	return 0
}

// TestResolveOverMemio: A resolves B with a multicast solicitation to B's
// solicited-node address (RFC 4861 §7.2.2); B answers with a solicited
// advertisement carrying its MAC (§7.2.4) and learns A from the
// solicitation's source link-layer option (§7.2.3, STALE); A's entry is
// REACHABLE (§7.2.5).
func TestResolveOverMemio(t *testing.T) {
	ha, hb, a, b := handlers(t, Config{})
	now := time.Now()
	if _, ok := ha.Query(addrB, now); ok {
		t.Fatal("resolved before asking")
	}
	if st, _ := ha.State(addrB); st != Incomplete {
		t.Fatalf("state %v, want INCOMPLETE", st)
	}
	ha.Flush()
	fs := frames(b)
	if len(fs) != 1 {
		t.Fatalf("%d frames, want one solicitation", len(fs))
	}
	m, r := ParseFrame(fs[0])
	if r != OK || m.Type != TypeNS || m.Target != addrB || m.Dst != SolicitedNode(addrB) ||
		m.EthDst != MulticastMAC(SolicitedNode(addrB)) || m.Src != addrA || !m.HasLL || m.LL != [6]byte(a.MAC()) {
		t.Fatalf("solicitation %v %+v", r, m)
	}
	if !hb.Handle(fs[0]) {
		t.Fatal("B did not take the solicitation")
	}
	hb.Flush()
	if st, ok := hb.State(addrA); !ok || st != Stale {
		t.Fatalf("B holds A as %v %v, want STALE", st, ok)
	}
	fa := frames(a)
	if len(fa) != 1 {
		t.Fatalf("%d frames back, want one advertisement", len(fa))
	}
	m, r = ParseFrame(fa[0])
	if r != OK || m.Type != TypeNA || m.Target != addrB || m.Dst != addrA || m.EthDst != [6]byte(a.MAC()) ||
		m.Flags != FlagSolicited|FlagOverride || m.LL != [6]byte(b.MAC()) {
		t.Fatalf("advertisement %v %+v", r, m)
	}
	ha.Handle(fa[0])
	var got [6]byte
	var gotErr error
	ha.Poll(now, func(addr netip.Addr, mac [6]byte, err error) { got, gotErr = mac, err })
	if gotErr != nil || got != [6]byte(b.MAC()) {
		t.Fatalf("resolved %v %v", got, gotErr)
	}
	if st, _ := ha.State(addrB); st != Reachable {
		t.Fatalf("A holds B as %v, want REACHABLE", st)
	}
	if counter(ha, CounterSolicitsOut) != 1 || counter(ha, CounterAdvertsIn) != 1 ||
		counter(hb, CounterSolicitsIn) != 1 || counter(hb, CounterAdvertsOut) != 1 || ha.Pending() != 0 {
		t.Fatalf("counters A %v B %v", ha.AppendLayers(nil), hb.AppendLayers(nil))
	}
}

// TestResolveTimeout: with nobody answering, a resolution sends
// MAX_MULTICAST_SOLICIT solicitations RetransTimer apart and fails
// (RFC 4861 §7.2.2, §7.3.3).
func TestResolveTimeout(t *testing.T) {
	ha, _, _, b := handlers(t, Config{Interval: time.Second, Retries: 3})
	now := time.Now()
	ha.Query(addrB, now)
	var failed error
	for i := 1; i <= 3; i++ {
		ha.Poll(now.Add(time.Duration(i)*time.Second), func(_ netip.Addr, _ [6]byte, err error) { failed = err })
	}
	ha.Flush()
	if n := len(frames(b)); n != 3 {
		t.Fatalf("%d solicitations, want 3", n)
	}
	var re *ResolveError
	if !errors.As(failed, &re) || !errors.Is(failed, ErrNoReply) || re.Requests != 3 {
		t.Fatalf("error %v", failed)
	}
	if _, ok := ha.State(addrB); ok || counter(ha, CounterTimeouts) != 1 {
		t.Fatal("failed resolution left an entry or was not counted")
	}
}

// TestResolveBlocking: Resolve drives the FrameIO itself while the peer's
// loop answers.
func TestResolveBlocking(t *testing.T) {
	ha, hb, _, b := handlers(t, Config{Interval: 20 * time.Millisecond})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			b.RxFrames(64, func(f []byte) { hb.Handle(f) })
			hb.Flush()
			time.Sleep(time.Millisecond)
		}
	}()
	defer func() { close(stop); <-done }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	mac, err := ha.Resolve(ctx, addrB, nil)
	if err != nil || mac != [6]byte(b.MAC()) {
		t.Fatalf("Resolve: %v %v", mac, err)
	}
}

// TestAnswersLinkLocalAndDAD: a solicitation for our link-local address is
// answered from it; one from the unspecified address (duplicate address
// detection) is answered to all-nodes with Solicited clear (RFC 4861
// §7.2.4); one for another address is ignored.
func TestAnswersLinkLocalAndDAD(t *testing.T) {
	ha, hb, a, b := handlers(t, Config{})
	ll := hb.LinkLocal()
	if ll != LinkLocal([6]byte(b.MAC())) || !ll.IsLinkLocalUnicast() {
		t.Fatalf("link-local %v", ll)
	}
	// A asks for B's link-local address: its solicitation comes from A's.
	ha.Query(ll, time.Now())
	ha.Flush()
	pump(t, hb, b)
	fa := frames(a)
	m, r := ParseFrame(fa[0])
	if r != OK || m.Target != ll || m.Src != ll || m.Dst != ha.LinkLocal() {
		t.Fatalf("answer for the link-local address: %v %+v", r, m)
	}
	// DAD: from ::, no source link-layer option.
	dad := ns(t, netip.IPv6Unspecified(), SolicitedNode(addrB), addrB, false)
	if !hb.Handle(dad) {
		t.Fatal("DAD solicitation not taken")
	}
	hb.Flush()
	fa = frames(a)
	m, r = ParseFrame(fa[0])
	if r != OK || m.Dst != AllNodes || m.EthDst != MulticastMAC(AllNodes) || m.Flags != FlagOverride {
		t.Fatalf("DAD answer %v %+v", r, m)
	}
	other := ns(t, addrA, SolicitedNode(netip.MustParseAddr("2001:2::9")), netip.MustParseAddr("2001:2::9"), true)
	hb.Handle(other)
	hb.Flush()
	if len(frames(a)) != 0 || counter(hb, CounterIgnored) != 1 {
		t.Fatal("a solicitation for another address was answered")
	}
}

// ns builds a solicitation frame from src to dst for target, with or
// without a source link-layer address option (macA).
func ns(t *testing.T, src, dst, target netip.Addr, ll bool) []byte {
	t.Helper()
	var msg []byte
	msg = append(msg, TypeNS, 0, 0, 0, 0, 0, 0, 0)
	tg := target.As16()
	msg = append(msg, tg[:]...)
	if ll {
		msg = append(msg, OptSrcLL, 1, 2, 0, 0, 0, 0, 0xa)
	}
	return appendFrame(nil, MulticastMAC(dst), [6]byte{2, 0, 0, 0, 0, 0xa}, src, dst, msg)
}

// TestAdvertisementRules: RFC 4861 §7.2.5 on an entry that exists: an
// advertisement without Override and with another MAC only makes a
// REACHABLE entry STALE; with Override it changes the MAC; Solicited
// makes it REACHABLE; an unsolicited one with a new MAC makes it STALE; an
// advertisement about an address we know nothing of creates nothing; one
// of our own address is a duplicate.
func TestAdvertisementRules(t *testing.T) {
	h, _, _, _ := handlers(t, Config{})
	peer := netip.MustParseAddr("2001:2::7")
	old, nw := [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}
	na := func(target netip.Addr, mac [6]byte, flags uint8) []byte {
		return AppendNA(nil, mac, target, addrA, [6]byte(h.cfg.MAC), flags)
	}
	reach := func() {
		h.Learn(peer, old)
		h.Handle(na(peer, old, FlagSolicited))
	}
	cases := []struct {
		name    string
		frame   []byte
		state   State
		mac     [6]byte
		present bool
	}{
		{"solicited, same MAC", na(peer, old, FlagSolicited), Reachable, old, true},
		{"no override, other MAC", na(peer, nw, FlagSolicited), Stale, old, true},
		{"override, other MAC, solicited", na(peer, nw, FlagSolicited|FlagOverride), Reachable, nw, true},
		{"override, other MAC, unsolicited", na(peer, nw, FlagOverride), Stale, nw, true},
		{"unsolicited, same MAC", na(peer, old, 0), Reachable, old, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reach()
			if st, _ := h.State(peer); st != Reachable {
				t.Fatalf("set-up: %v", st)
			}
			h.Handle(c.frame)
			st, ok := h.State(peer)
			mac, _ := h.Lookup(peer)
			if ok != c.present || st != c.state || mac != c.mac {
				t.Fatalf("state %v mac %v, want %v %v", st, mac, c.state, c.mac)
			}
		})
	}
	stranger := netip.MustParseAddr("2001:2::8")
	h.Handle(na(stranger, nw, FlagOverride))
	if _, ok := h.State(stranger); ok {
		t.Fatal("an advertisement created an entry nobody asked for")
	}
	h.Handle(na(addrA, nw, FlagOverride))
	if counter(h, CounterDupAddr) != 1 {
		t.Fatal("our own address advertised by another was not counted")
	}
}

// TestStaleDelayProbe: RFC 4861 §7.3.3: a REACHABLE entry past
// ReachableTime is STALE; used, it goes to DELAY; after
// DELAY_FIRST_PROBE_TIME, to PROBE with a unicast solicitation to the
// cached MAC; unanswered MAX_UNICAST_SOLICIT times, it is removed. An
// answer in PROBE makes it REACHABLE again.
func TestStaleDelayProbe(t *testing.T) {
	ha, hb, a, b := handlers(t, Config{Reachable: 30 * time.Second, DelayFirstProbe: 5 * time.Second, Interval: time.Second, Probes: 3})
	t0 := time.Now()
	ha.Learn(addrB, [6]byte(b.MAC()))
	ha.Handle(AppendNA(nil, [6]byte(b.MAC()), addrB, addrA, [6]byte(ha.cfg.MAC), FlagSolicited))
	if st, _ := ha.State(addrB); st != Reachable {
		t.Fatalf("state %v", st)
	}
	// Past ReachableTime (counted from the real clock at Handle).
	if _, ok := ha.Query(addrB, t0.Add(40*time.Second)); !ok {
		t.Fatal("a STALE entry is usable")
	}
	if st, _ := ha.State(addrB); st != Delay {
		t.Fatalf("state %v, want DELAY", st)
	}
	ha.Poll(t0.Add(44*time.Second), nil)
	if st, _ := ha.State(addrB); st != Delay {
		t.Fatalf("probed before DELAY_FIRST_PROBE_TIME: %v", st)
	}
	ha.Poll(t0.Add(46*time.Second), nil)
	ha.Flush()
	fs := frames(b)
	if st, _ := ha.State(addrB); st != Probe || len(fs) != 1 {
		t.Fatalf("state %v, %d frames", st, len(fs))
	}
	m, r := ParseFrame(fs[0])
	if r != OK || m.Type != TypeNS || m.Dst != addrB || m.EthDst != [6]byte(b.MAC()) {
		t.Fatalf("probe %v %+v: want a unicast solicitation", r, m)
	}
	// B answers the probe: REACHABLE again.
	hb.Handle(fs[0])
	hb.Flush()
	for _, f := range frames(a) {
		ha.Handle(f)
	}
	if st, _ := ha.State(addrB); st != Reachable {
		t.Fatalf("answered probe left %v", st)
	}
	// Now unanswered: DELAY, then 3 probes, then gone.
	ha.Query(addrB, time.Now().Add(time.Minute))
	base := time.Now().Add(time.Minute + 5*time.Second)
	for i := 0; i < 4; i++ {
		ha.Poll(base.Add(time.Duration(i)*time.Second), nil)
	}
	ha.Flush()
	if _, ok := ha.State(addrB); ok || counter(ha, CounterProbeFailed) != 1 || counter(ha, CounterProbesOut) != 4 {
		t.Fatalf("after unanswered probes: present %v, probe_failed %d, probes %d", ok, counter(ha, CounterProbeFailed), counter(ha, CounterProbesOut))
	}
}

// TestCacheBounded: the cache never holds more than CacheSize entries;
// the one used longest ago goes.
func TestCacheBounded(t *testing.T) {
	h, _, _, _ := handlers(t, Config{CacheSize: 4})
	for i := 0; i < 10; i++ {
		h.Learn(netip.AddrFrom16([16]byte{0x20, 0x01, 0, 2, 15: byte(i + 10)}), [6]byte{2, 0, 0, 0, 0, byte(i)})
	}
	if h.Len() != 4 || counter(h, CounterEvicted) != 6 {
		t.Fatalf("%d entries, %d evicted", h.Len(), counter(h, CounterEvicted))
	}
	if _, ok := h.Lookup(netip.AddrFrom16([16]byte{0x20, 0x01, 0, 2, 15: 19})); !ok {
		t.Fatal("the newest entry was evicted")
	}
}

// TestKernelTable: with Config.Kernel, a resolution the kernel's table
// answers sends no solicitation.
func TestKernelTable(t *testing.T) {
	mac := [6]byte{2, 0, 0, 0, 0, 0x42}
	h, _, _, b := handlers(t, Config{Kernel: func(a netip.Addr) ([6]byte, bool) { return mac, a == addrB }})
	if got, ok := h.Query(addrB, time.Now()); !ok || got != mac {
		t.Fatalf("Query %v %v", got, ok)
	}
	h.Flush()
	if len(frames(b)) != 0 || counter(h, CounterKernelHits) != 1 {
		t.Fatal("solicited an address the kernel knew")
	}
}

// TestParseRejects: the validity checks of RFC 4861 §7.1.1 and §7.1.2,
// each counted by its reason.
func TestParseRejects(t *testing.T) {
	good := func() []byte { return ns(t, addrA, SolicitedNode(addrB), addrB, true) }
	fix := func(f []byte) []byte { // recompute the ICMPv6 checksum
		pl := int(binary.BigEndian.Uint16(f[18:20]))
		m := f[54 : 54+pl]
		binary.BigEndian.PutUint16(m[2:4], 0)
		s, d := [16]byte(f[22:38]), [16]byte(f[38:54])
		binary.BigEndian.PutUint16(m[2:4], ^foldSum(pseudoSum(&s, &d, len(m)), m))
		return f
	}
	cases := []struct {
		name string
		f    func() []byte
		want Reason
	}{
		{"good", good, OK},
		{"not IPv6", func() []byte { f := good(); f[12] = 0x08; f[13] = 0; return f }, NotNDP},
		{"echo request", func() []byte { f := good(); f[54] = 128; return fix(f) }, NotNDP},
		{"hop limit 254", func() []byte { f := good(); f[21] = 254; return f }, BadHopLimit},
		{"checksum", func() []byte { f := good(); f[60] ^= 1; return f }, BadChecksum},
		{"code 1", func() []byte { f := good(); f[55] = 1; return fix(f) }, BadCode},
		{"short", func() []byte { f := good(); binary.BigEndian.PutUint16(f[18:20], 20); return f }, Short},
		{"length beyond frame", func() []byte { f := good(); binary.BigEndian.PutUint16(f[18:20], 40); return f }, Short},
		{"multicast target", func() []byte { f := good(); f[62] = 0xff; return fix(f) }, TargetMulticast},
		{"option length 0", func() []byte { f := good(); f[79] = 0; return fix(f) }, BadOptionLength},
		{"LL option of 16 bytes", func() []byte {
			f := good()
			f = append(f, make([]byte, 8)...)
			binary.BigEndian.PutUint16(f[18:20], 40)
			f[79] = 2
			return fix(f)
		}, BadLLOption},
		{"DAD to a unicast address", func() []byte { return ns(t, netip.IPv6Unspecified(), addrB, addrB, false) }, DADBadDest},
		{"DAD with source LL", func() []byte { return ns(t, netip.IPv6Unspecified(), SolicitedNode(addrB), addrB, true) }, DADWithSrcLL},
		{"solicited advertisement to multicast", func() []byte {
			return AppendNA(nil, [6]byte{2, 0, 0, 0, 0, 0xa}, addrA, AllNodes, MulticastMAC(AllNodes), FlagSolicited)
		}, SolicitedToMulticast},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := c.f()
			orig := append([]byte(nil), f...)
			if _, r := ParseFrame(f); r != c.want {
				t.Fatalf("ParseFrame = %v, want %v", r, c.want)
			}
			if !bytes.Equal(f, orig) {
				t.Fatal("ParseFrame modified the frame")
			}
			h, _, _, _ := handlers(t, Config{})
			taken := h.Handle(f)
			if taken != (c.want != NotNDP) {
				t.Fatalf("Handle took %v", taken)
			}
			if c.want != OK && c.want != NotNDP && counter(h, "malformed_"+c.want.String()) != 1 {
				t.Fatalf("not counted as malformed_%v", c.want)
			}
		})
	}
}

func foldSum(acc uint64, b []byte) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		acc += uint64(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		acc += uint64(b[len(b)-1]) << 8
	}
	for acc > 0xffff {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}

// TestCountersNamed: every counter has a distinct name; only
// dropped_while_resolving is a loss.
func TestCountersNamed(t *testing.T) {
	h, _, _, _ := handlers(t, Config{})
	seen := map[string]bool{}
	for _, c := range h.AppendLayers(nil) {
		if c.Layer != "ndp" || seen[c.Name] || c.Loss != (c.Name == CounterDropped) {
			t.Fatalf("counter %+v", c)
		}
		seen[c.Name] = true
	}
}

// FuzzParseFrame: ParseFrame must not panic or modify its input, and a
// message it accepts rebuilds to one that parses the same.
func FuzzParseFrame(f *testing.F) {
	f.Add(AppendNS(nil, [6]byte{2, 0, 0, 0, 0, 1}, addrA, addrB, nil))
	f.Add(AppendNA(nil, [6]byte{2, 0, 0, 0, 0, 2}, addrB, addrA, [6]byte{2, 0, 0, 0, 0, 1}, FlagSolicited|FlagOverride))
	f.Add([]byte{})
	port, _ := memio.NewPair(memio.Options{})
	h, err := New(port, Config{MAC: port.MAC(), Addr: addrB})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		h.Handle(frame) // no panic on any input
		frames(port)
		orig := append([]byte(nil), frame...)
		m, r := ParseFrame(frame)
		if !bytes.Equal(frame, orig) {
			t.Fatal("modified")
		}
		if r >= numReasons {
			t.Fatalf("reason %d", r)
		}
		if r != OK || !m.HasLL {
			return
		}
		var re []byte
		if m.Type == TypeNA {
			re = AppendNA(nil, m.LL, m.Target, m.Dst, m.EthDst, m.Flags)
		} else if !m.Src.IsUnspecified() {
			re = AppendNS(nil, m.LL, m.Src, m.Target, nil)
		} else {
			return
		}
		m2, r2 := ParseFrame(re)
		if r2 != OK || m2.Target != m.Target || m2.LL != m.LL || m2.Flags != m.Flags {
			t.Fatalf("rebuilt: %v %+v", r2, m2)
		}
	})
}

// BenchmarkHandleSolicitation answers a solicitation for our address from
// a neighbour cached already: parse, check its MAC, advertise into the TX
// ring.
func BenchmarkHandleSolicitation(b *testing.B) {
	ha, _, _, pb := handlers(b, Config{})
	f := AppendNS(nil, [6]byte(pb.MAC()), addrB, addrA, nil)
	ha.Learn(addrB, [6]byte(pb.MAC()))
	b.ReportAllocs()
	for i := range b.N {
		if i%32 == 0 { // the answers leave, and the TX ring never fills
			ha.Flush()
			pb.RxFrames(64, func([]byte) {})
		}
		ha.Handle(f)
	}
}

// BenchmarkQueryHit is the resolver's question for a cached, REACHABLE
// address.
func BenchmarkQueryHit(b *testing.B) {
	ha, _, _, pb := handlers(b, Config{Reachable: time.Hour})
	mac := [6]byte(pb.MAC())
	ha.Learn(addrB, mac)
	ha.Handle(AppendNA(nil, mac, addrB, addrA, [6]byte(ha.cfg.MAC), FlagSolicited|FlagOverride))
	now := time.Now()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, ok := ha.Query(addrB, now); !ok {
			b.Fatal("miss")
		}
	}
}
