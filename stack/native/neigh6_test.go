package native

import (
	"testing"
)

func newNeigh(n int) *neigh6 {
	c := &neigh6{}
	c.init(n, defaultNeigh6Params())
	return c
}

func neighAddr(i byte) ip6Addr { return ip6Addr{0x20, 0x01, 0, 2, 14: 1, 15: i} }

// state returns a's state, neighFree when it has no entry.
func (c *neigh6) state(a ip6Addr) neighState {
	if en := c.get(a); en != nil {
		return en.state
	}
	return neighFree
}

// TestNeighResolution: resolving an unknown neighbour makes an INCOMPLETE
// entry and asks for it by multicast; it is asked again every
// RetransTimer up to MAX_MULTICAST_SOLICIT times, then removed as failed
// (RFC 4861 §7.2.2). A solicited advertisement makes it REACHABLE (§7.2.5).
func TestNeighResolution(t *testing.T) {
	c := newNeigh(8)
	p := c.p
	if _, r := c.resolve(a6B, 0); r != neighSolicit || c.state(a6B) != neighIncomplete {
		t.Fatalf("first resolve: %v %v", r, c.state(a6B))
	}
	if _, r := c.resolve(a6B, 1); r != neighPending {
		t.Fatalf("second resolve: %v", r)
	}
	var out []neighTx
	var failed int
	for i := 1; i < p.MaxMulticastSolicit; i++ {
		if at, _ := c.next(); at != int64(i)*p.RetransTimer {
			t.Fatalf("next %d", at)
		}
		out, failed = c.timers(int64(i)*p.RetransTimer-1, out[:0])
		if len(out) != 0 {
			t.Fatal("asked early")
		}
		out, failed = c.timers(int64(i)*p.RetransTimer, out[:0])
		if len(out) != 1 || !out[0].mcast || out[0].addr != a6B || failed != 0 {
			t.Fatalf("retransmission %d: %+v %d", i, out, failed)
		}
	}
	out, failed = c.timers(int64(p.MaxMulticastSolicit)*p.RetransTimer, out[:0])
	if len(out) != 0 || failed != 1 || c.state(a6B) != neighFree || c.failed != 1 {
		t.Fatalf("after %d solicitations: %+v failed %d state %v", p.MaxMulticastSolicit, out, failed, c.state(a6B))
	}

	c.resolve(a6B, 0)
	if !c.advert(&ndMsg{typ: icmp6NeighAdv, target: a6B, solicited: true, override: true, hasLL: true, ll: mac6B}, 5) {
		t.Fatal("the advertisement did not resolve the entry")
	}
	if mac, r := c.resolve(a6B, 6); r != neighHit || mac != mac6B || c.state(a6B) != neighReachable {
		t.Fatalf("after the advertisement: %v %x %v", r, mac, c.state(a6B))
	}
}

// TestNeighUnreachability: REACHABLE turns STALE after ReachableTime;
// used while STALE it goes to DELAY, then after DELAY_FIRST_PROBE_TIME to
// PROBE with a unicast solicitation, repeated up to MAX_UNICAST_SOLICIT
// times, then the entry is removed (RFC 4861 §7.3.3). Upper-layer
// confirmation brings it back to REACHABLE (§7.3.1).
func TestNeighUnreachability(t *testing.T) {
	c := newNeigh(8)
	p := c.p
	c.resolve(a6B, 0)
	c.advert(&ndMsg{target: a6B, solicited: true, hasLL: true, ll: mac6B}, 0)
	out, _ := c.timers(p.ReachableTime, nil)
	if len(out) != 0 || c.state(a6B) != neighStale {
		t.Fatalf("after ReachableTime: %v", c.state(a6B))
	}
	t0 := p.ReachableTime + 7
	if mac, r := c.resolve(a6B, t0); r != neighHit || mac != mac6B || c.state(a6B) != neighDelay {
		t.Fatalf("used while STALE: %v %v", r, c.state(a6B))
	}
	out, _ = c.timers(t0+p.DelayFirstProbe, out[:0])
	if len(out) != 1 || out[0].mcast || out[0].mac != mac6B || c.state(a6B) != neighProbe {
		t.Fatalf("after DELAY: %+v %v", out, c.state(a6B))
	}
	// Confirmation in PROBE: REACHABLE again.
	c.confirm(a6B, t0+p.DelayFirstProbe+1)
	if c.state(a6B) != neighReachable {
		t.Fatalf("confirmed: %v", c.state(a6B))
	}
	// Now unanswered probes.
	t1 := t0 + p.DelayFirstProbe + 1 + p.ReachableTime
	c.timers(t1, nil)
	c.resolve(a6B, t1)
	out, _ = c.timers(t1+p.DelayFirstProbe, out[:0])
	probes := len(out)
	var failed int
	for i := 1; i <= p.MaxUnicastSolicit; i++ {
		out, failed = c.timers(t1+p.DelayFirstProbe+int64(i)*p.RetransTimer, out[:0])
		probes += len(out)
	}
	if probes != p.MaxUnicastSolicit || failed != 1 || c.state(a6B) != neighFree {
		t.Fatalf("%d probes, failed %d, state %v", probes, failed, c.state(a6B))
	}
}

// TestNeighAdvertisement: the rules of RFC 4861 §7.2.5 (Appendix C) for
// an advertisement reaching an entry in each state.
func TestNeighAdvertisement(t *testing.T) {
	other := [6]byte{2, 0, 0, 0, 0, 0x0c}
	for _, c := range []struct {
		name     string
		from     neighState
		nd       ndMsg
		want     neighState
		wantMAC  [6]byte
		resolved bool
	}{
		{"INCOMPLETE, no link-layer address: ignored", neighIncomplete, ndMsg{solicited: true}, neighIncomplete, [6]byte{}, false},
		{"INCOMPLETE, solicited: REACHABLE", neighIncomplete, ndMsg{solicited: true, hasLL: true, ll: other}, neighReachable, other, true},
		{"INCOMPLETE, unsolicited: STALE", neighIncomplete, ndMsg{hasLL: true, ll: other}, neighStale, other, true},
		{"REACHABLE, O clear, other MAC: STALE, MAC kept", neighReachable, ndMsg{solicited: true, hasLL: true, ll: other}, neighStale, mac6B, false},
		{"STALE, O clear, other MAC: ignored", neighStale, ndMsg{solicited: true, hasLL: true, ll: other}, neighStale, mac6B, false},
		{"DELAY, O clear, same MAC, solicited: REACHABLE", neighDelay, ndMsg{solicited: true, hasLL: true, ll: mac6B}, neighReachable, mac6B, false},
		{"STALE, O set, other MAC, unsolicited: STALE, new MAC", neighStale, ndMsg{override: true, hasLL: true, ll: other}, neighStale, other, false},
		{"REACHABLE, O set, other MAC, unsolicited: STALE, new MAC", neighReachable, ndMsg{override: true, hasLL: true, ll: other}, neighStale, other, false},
		{"PROBE, O set, other MAC, solicited: REACHABLE, new MAC", neighProbe, ndMsg{solicited: true, override: true, hasLL: true, ll: other}, neighReachable, other, false},
		{"PROBE, no link-layer address, solicited: REACHABLE", neighProbe, ndMsg{solicited: true}, neighReachable, mac6B, false},
		{"REACHABLE, same MAC, unsolicited: unchanged", neighReachable, ndMsg{override: true, hasLL: true, ll: mac6B}, neighReachable, mac6B, false},
	} {
		n := newNeigh(4)
		n.resolve(a6B, 0)
		en := n.get(a6B)
		if c.from != neighIncomplete {
			en.mac, en.state, en.deadline = mac6B, c.from, 1e12
		}
		c.nd.typ, c.nd.target = icmp6NeighAdv, a6B
		if got := n.advert(&c.nd, 10); got != c.resolved {
			t.Errorf("%s: resolved %v", c.name, got)
		}
		if en.state != c.want || en.mac != c.wantMAC {
			t.Errorf("%s: %v %x, want %v %x", c.name, en.state, en.mac, c.want, c.wantMAC)
		}
	}
	// No entry: the advertisement is ignored (§7.2.5).
	n := newNeigh(4)
	n.advert(&ndMsg{typ: icmp6NeighAdv, target: a6B, solicited: true, hasLL: true, ll: mac6B}, 0)
	if n.get(a6B) != nil {
		t.Error("an unsolicited advertisement made an entry")
	}
}

// TestNeighSolicitation: a solicitation with a source link-layer address
// makes or updates its source's entry as STALE (RFC 4861 §7.2.3); the
// same MAC leaves a REACHABLE entry alone; an INCOMPLETE entry is
// resolved by it.
func TestNeighSolicitation(t *testing.T) {
	c := newNeigh(4)
	if c.solicited(a6B, mac6B, 0) || c.state(a6B) != neighStale {
		t.Fatalf("new: %v", c.state(a6B))
	}
	c.confirm(a6B, 1)
	c.solicited(a6B, mac6B, 2)
	if c.state(a6B) != neighReachable {
		t.Fatalf("same MAC: %v", c.state(a6B))
	}
	c.solicited(a6B, mac6A, 3)
	if en := c.get(a6B); en.state != neighStale || en.mac != mac6A {
		t.Fatalf("other MAC: %v %x", en.state, en.mac)
	}
	c.resolve(a6A, 4)
	if !c.solicited(a6A, mac6A, 5) || c.state(a6A) != neighStale {
		t.Fatalf("INCOMPLETE: %v", c.state(a6A))
	}
}

// TestNeighEviction: the cache holds n entries; a new one evicts the
// least recently used STALE entry first, never a referenced or static
// one; with every entry held, resolution reports neighFull.
func TestNeighEviction(t *testing.T) {
	c := newNeigh(3)
	c.solicited(neighAddr(1), mac6B, 1) // STALE, used at 1
	c.solicited(neighAddr(2), mac6B, 2) // STALE, used at 2
	c.setStatic(neighAddr(3), mac6B, 3)
	c.ref(neighAddr(1))
	if _, r := c.resolve(neighAddr(4), 10); r != neighSolicit {
		t.Fatalf("resolve in a full cache: %v", r)
	}
	if c.get(neighAddr(2)) != nil || c.get(neighAddr(1)) == nil || c.get(neighAddr(3)) == nil || c.evicted != 1 {
		t.Fatal("evicted the wrong entry")
	}
	c.ref(neighAddr(4))
	if _, r := c.resolve(neighAddr(5), 11); r != neighFull {
		t.Fatalf("every entry held: %v", r)
	}
	c.unref(neighAddr(1))
	if _, r := c.resolve(neighAddr(5), 12); r != neighSolicit || c.get(neighAddr(1)) != nil {
		t.Fatalf("after unref: %v", r)
	}
	// Static entries never change with what arrives.
	c.advert(&ndMsg{target: neighAddr(3), override: true, solicited: true, hasLL: true, ll: mac6A}, 13)
	c.solicited(neighAddr(3), mac6A, 13)
	if mac, r := c.resolve(neighAddr(3), 14); r != neighHit || mac != mac6B {
		t.Errorf("static entry: %v %x", r, mac)
	}
}

// TestNeighAllocs: resolving a known neighbour and running the timers
// allocate nothing.
func TestNeighAllocs(t *testing.T) {
	c := newNeigh(64)
	for i := range 64 {
		c.solicited(neighAddr(byte(i)), mac6B, 0)
	}
	out := make([]neighTx, 0, 64)
	now := int64(0)
	if n := testing.AllocsPerRun(100, func() {
		now += 1e6
		c.resolve(neighAddr(byte(now%64)), now)
		out, _ = c.timers(now, out[:0])
	}); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
