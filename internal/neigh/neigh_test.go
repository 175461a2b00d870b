package neigh

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// testLink is a protocol for the tests. Its frames are 14 bytes of
// Ethernet header, a kind ('Q' request, 'A' answer) and a 4- or 16-byte
// address; an answer's MAC is the Ethernet source. It records what the
// Table asks it to send.
type testLink struct {
	t                 *Table
	solicited, probed []netip.Addr
	probeMAC          [][6]byte
	requests, probes  atomic.Uint64
	answers           int
	// NoReply's arguments
	noReplyAddr   netip.Addr
	noReplyReq    int
	noReplyWaited time.Duration
}

// v4 and v6 return the test addresses 198.18.0.n and 2001:2::n.
func v4(n byte) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 0, n}) }
func v6(n byte) netip.Addr { return netip.AddrFrom16([16]byte{0x20, 0x01, 0, 2, 15: n}) }

var (
	ip1, ip2, ip3, ip4 = v4(1), v4(2), v4(3), v4(4)
	ip61, ip62         = v6(1), v6(2)
	mac1, mac2         = [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}
	t0                 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

var errTestNoReply = errors.New("test: no reply")

func frame(kind byte, src [6]byte, addr netip.Addr) []byte {
	f := append(make([]byte, 0, 64), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	f = append(f, src[:]...)
	f = append(f, 0x88, 0xb5, kind)
	return append(f, addr.AsSlice()...)
}

func (l *testLink) Handle(f []byte) bool {
	if len(f) < 15 || f[12] != 0x88 || f[13] != 0xb5 {
		return false
	}
	addr, ok := netip.AddrFromSlice(f[15:])
	if f[14] == 'A' && ok {
		l.answers++
		l.t.Merge(addr, [6]byte(f[6:12]), true)
	}
	return true
}

func (l *testLink) Solicit(addr netip.Addr) {
	l.solicited = append(l.solicited, addr)
	l.t.Send(frame('Q', mac1, addr), &l.requests)
}

func (l *testLink) Probe(addr netip.Addr, mac [6]byte) {
	l.probed = append(l.probed, addr)
	l.probeMAC = append(l.probeMAC, mac)
	l.t.Send(frame('Q', mac1, addr), &l.probes)
}

func (l *testLink) NoReply(addr netip.Addr, requests int, waited time.Duration) error {
	l.noReplyAddr, l.noReplyReq, l.noReplyWaited = addr, requests, waited
	return errTestNoReply
}

// newTable returns a Table for cfg over port A of a memio pair, with its
// testLink, and port B.
func newTable(t *testing.T, cfg Config) (*Table, *testLink, *memio.Port) {
	t.Helper()
	a, b := memio.NewPair(memio.Options{})
	t.Cleanup(func() { a.Close(); b.Close() })
	l := &testLink{}
	cfg.Proto, cfg.Iface = "test", "memio A"
	l.t = New(a, cfg, l)
	return l.t, l, b
}

func value(t *Table, name string) uint64 { return t.Counter("test", name).Value }

func wantState(t *testing.T, tb *Table, addr netip.Addr, want State) {
	t.Helper()
	if st, ok := tb.State(addr); !ok || st != want {
		t.Fatalf("%v: state %v (present %v), want %v", addr, st, ok, want)
	}
}

// TestMergeRFC826: without NUD, a sender already in the cache always gets
// the MAC it sends from; a new one is added only when the packet was
// meant for us (RFC 826, "Packet Reception": the merge flag).
func TestMergeRFC826(t *testing.T) {
	tb, _, _ := newTable(t, Config{})
	tb.Merge(ip2, mac1, false)
	if _, ok := tb.Lookup(ip2); ok || value(tb, CounterLearned) != 0 {
		t.Fatal("a packet not for us added its sender")
	}
	tb.Merge(ip2, mac1, true)
	if mac, ok := tb.Lookup(ip2); !ok || mac != mac1 || value(tb, CounterLearned) != 1 {
		t.Fatalf("a packet for us: %v %v, learned %d", mac, ok, value(tb, CounterLearned))
	}
	tb.Merge(ip2, mac2, false)
	if mac, _ := tb.Lookup(ip2); mac != mac2 || value(tb, CounterLearned) != 1 {
		t.Fatalf("a known sender's new MAC: %v, learned %d", mac, value(tb, CounterLearned))
	}
	wantState(t, tb, ip2, Reachable) // no NUD: no states beyond the MAC
}

// TestEvictOldestLearnt: without NUD the full cache replaces the entry
// learnt longest ago; updates and uses do not change the order (RFC 1122
// §2.3.2.1 leaves the cache's management to the implementation; ours
// bounds it).
func TestEvictOldestLearnt(t *testing.T) {
	tb, _, _ := newTable(t, Config{CacheSize: 3})
	tb.Learn(ip1, mac1)
	tb.Learn(ip2, mac1)
	tb.Learn(ip3, mac1)
	tb.Merge(ip1, mac2, false) // an update
	tb.Query(ip1, t0)          // a use
	tb.Learn(ip4, mac1)
	if _, ok := tb.Lookup(ip1); ok || tb.Len() != 3 || value(tb, CounterEvicted) != 1 {
		t.Fatalf("ip1 present %v, %d entries, evicted %d", ok, tb.Len(), value(tb, CounterEvicted))
	}
}

// TestQueryRetransmitsAndGivesUp: a resolution sends Retries requests,
// Interval apart, no more than one per address at a time (RFC 1122
// §2.3.2.1: the rate of requests per destination is bounded), and then
// ends with Link.NoReply's error, counted in timeouts.
func TestQueryRetransmitsAndGivesUp(t *testing.T) {
	tb, l, _ := newTable(t, Config{Retries: 3, Interval: time.Second})
	if _, ok := tb.Query(ip2, t0); ok {
		t.Fatal("an unknown address resolved at once")
	}
	wantState(t, tb, ip2, Incomplete)
	tb.Query(ip2, t0.Add(time.Millisecond)) // in progress: no second request
	var ended []error
	done := func(addr netip.Addr, _ [6]byte, err error) { ended = append(ended, err) }
	for _, at := range []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2 * time.Second} {
		if n := tb.Poll(t0.Add(at), done); n != 1 {
			t.Fatalf("at %v: %d pending", at, n)
		}
	}
	if len(l.solicited) != 3 || len(ended) != 0 || value(tb, CounterTimeouts) != 0 {
		t.Fatalf("%d requests, %d ended", len(l.solicited), len(ended))
	}
	if n := tb.Poll(t0.Add(3*time.Second), done); n != 0 || len(ended) != 1 || ended[0] != errTestNoReply {
		t.Fatalf("after the last interval: %d pending, ended %v", n, ended)
	}
	if l.noReplyAddr != ip2 || l.noReplyReq != 3 || l.noReplyWaited != 3*time.Second || value(tb, CounterTimeouts) != 1 {
		t.Fatalf("NoReply(%v, %d, %v), timeouts %d", l.noReplyAddr, l.noReplyReq, l.noReplyWaited, value(tb, CounterTimeouts))
	}
	if _, ok := tb.State(ip2); ok || len(l.solicited) != 3 {
		t.Fatal("a failed resolution left state or sent more")
	}
	if err := tb.Flush(); err != nil || l.requests.Load() != 3 {
		t.Fatalf("flush %v, %d requests counted", err, l.requests.Load())
	}
}

// TestQueryEndsWhenAnswered: an answer merged into the cache ends the
// resolution at the next Poll, with the MAC.
func TestQueryEndsWhenAnswered(t *testing.T) {
	tb, _, _ := newTable(t, Config{})
	tb.Query(ip2, t0)
	tb.Merge(ip2, mac2, true)
	var got [6]byte
	if n := tb.Poll(t0, func(addr netip.Addr, mac [6]byte, err error) { got = mac }); n != 0 || got != mac2 {
		t.Fatalf("%d pending, MAC %v", n, got)
	}
	if mac, ok := tb.Query(ip2, t0); !ok || mac != mac2 {
		t.Fatal("the answer is not cached")
	}
}

// TestFamily: a Table resolves its family only.
func TestFamily(t *testing.T) {
	for _, c := range []struct {
		v6   bool
		good netip.Addr
		bad  []netip.Addr
	}{
		{false, ip2, []netip.Addr{ip62, netip.AddrFrom16(ip2.As16())}},
		{true, ip62, []netip.Addr{ip2, netip.AddrFrom16(ip2.As16())}},
	} {
		tb, l, _ := newTable(t, Config{IPv6: c.v6})
		for _, a := range c.bad {
			if _, ok := tb.Query(a, t0); ok || tb.Pending() != 0 {
				t.Fatalf("IPv6 %v: %v resolved", c.v6, a)
			}
			if _, err := tb.Resolve(context.Background(), a, nil); err == nil || !strings.Contains(err.Error(), "test: resolve") {
				t.Fatalf("IPv6 %v: Resolve(%v): %v", c.v6, a, err)
			}
		}
		tb.Query(c.good, t0)
		if tb.Pending() != 1 || len(l.solicited) != 1 {
			t.Fatalf("IPv6 %v: %v not resolved", c.v6, c.good)
		}
	}
}

// TestResolve: Resolve drives the FrameIO until the answer comes; the
// protocol's frames go to Link.Handle, others to other or, without it,
// into dropped_while_resolving (a loss).
func TestResolve(t *testing.T) {
	tb, l, b := newTable(t, Config{Interval: 20 * time.Millisecond, Retries: 500})
	// The peer answers after the first request's interval, and sends a
	// frame of another protocol before it.
	time.AfterFunc(30*time.Millisecond, func() {
		b.TxFrame(make([]byte, 60)) // not the protocol's
		b.TxFrame(frame('A', mac2, ip2))
		b.Kick()
	})
	mac, err := tb.Resolve(context.Background(), ip2, nil)
	if err != nil || mac != mac2 {
		t.Fatalf("Resolve: %v %v", mac, err)
	}
	if l.answers != 1 || value(tb, CounterDropped) != 1 || !tb.Counter("x", CounterDropped).Loss || tb.Pending() != 0 {
		t.Fatalf("answers %d, dropped %d, pending %d", l.answers, value(tb, CounterDropped), tb.Pending())
	}
	if mac, err := tb.Resolve(context.Background(), ip2, nil); err != nil || mac != mac2 {
		t.Fatal("a cached address was resolved again")
	}
}

// TestResolveEnds: Resolve returns NoReply's error after its requests,
// and ctx's error wrapped when ctx ends first; the query is gone either
// way.
func TestResolveEnds(t *testing.T) {
	tb, l, _ := newTable(t, Config{Interval: 5 * time.Millisecond, Retries: 2})
	if _, err := tb.Resolve(context.Background(), ip2, nil); err != errTestNoReply || len(l.solicited) != 2 {
		t.Fatalf("%v after %d requests", err, len(l.solicited))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tb.Resolve(ctx, ip3, nil); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "test: resolve 198.18.0.3 on memio A") {
		t.Fatalf("cancelled: %v", err)
	}
	if tb.Pending() != 0 {
		t.Fatal("a query outlived Resolve")
	}
}

// nudTable is a Table with NUD and round timers.
func nudTable(t *testing.T, cfg Config) (*Table, *testLink) {
	cfg.NUD, cfg.IPv6 = true, true
	cfg.Interval, cfg.Reachable, cfg.DelayFirstProbe, cfg.Probes = time.Second, 30*time.Second, 5*time.Second, 3
	tb, l, _ := newTable(t, cfg)
	return tb, l
}

// TestNUDLearnAndMerge: an unsolicited report makes a STALE entry (RFC
// 4861 §7.3.3, Learn); a solicitation's source link-layer address makes
// one STALE when new, and when its MAC changed, and leaves it alone when
// the MAC is the same (§7.2.3).
func TestNUDLearnAndMerge(t *testing.T) {
	tb, _ := nudTable(t, Config{})
	tb.Learn(ip61, mac1)
	wantState(t, tb, ip61, Stale)
	tb.Merge(ip62, mac1, true)
	wantState(t, tb, ip62, Stale)
	tb.Query(ip62, t0) // the query makes the probe timer start: DELAY
	tb.Merge(ip62, mac1, true)
	wantState(t, tb, ip62, Delay)
	tb.Merge(ip62, mac2, true)
	wantState(t, tb, ip62, Stale)
	if mac, _ := tb.Lookup(ip62); mac != mac2 || value(tb, CounterLearned) != 2 {
		t.Fatalf("MAC %v, learned %d", mac, value(tb, CounterLearned))
	}
}

// TestAdvertisedRFC4861: the rules of RFC 4861 §7.2.5 for an advertisement
// about target, by the entry it finds.
func TestAdvertisedRFC4861(t *testing.T) {
	type flags struct{ ll, solicited, override bool }
	for _, c := range []struct {
		name      string
		before    State // Incomplete: resolving, no entry; 255: nothing
		mac       [6]byte
		f         flags
		counted   bool
		want      State // 255: no entry
		wantMAC   [6]byte
		wantTimer bool // REACHABLE's timer restarted
	}{
		{"unknown target: nothing made", 255, mac2, flags{true, true, true}, false, 255, [6]byte{}, false},
		{"resolving, no link-layer option: nothing made", Incomplete, mac2, flags{false, true, true}, false, 255, [6]byte{}, false},
		{"resolving, solicited: REACHABLE", Incomplete, mac2, flags{true, true, false}, true, Reachable, mac2, true},
		{"resolving, unsolicited: STALE", Incomplete, mac2, flags{true, false, false}, true, Stale, mac2, false},
		{"REACHABLE, other MAC, no override: STALE, MAC kept", Reachable, mac2, flags{true, true, false}, true, Stale, mac1, false},
		{"STALE, other MAC, no override: unchanged", Stale, mac2, flags{true, true, false}, true, Stale, mac1, false},
		{"STALE, other MAC, override, unsolicited: STALE, new MAC", Stale, mac2, flags{true, false, true}, true, Stale, mac2, false},
		{"STALE, other MAC, override, solicited: REACHABLE, new MAC", Stale, mac2, flags{true, true, true}, true, Reachable, mac2, true},
		{"PROBE, same MAC, solicited: REACHABLE", Probe, mac1, flags{true, true, false}, true, Reachable, mac1, true},
		{"PROBE, no option, solicited: REACHABLE", Probe, mac2, flags{false, true, false}, true, Reachable, mac1, true},
		{"DELAY, same MAC, unsolicited: unchanged", Delay, mac1, flags{true, false, true}, true, Delay, mac1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb, _ := nudTable(t, Config{})
			switch c.before {
			case 255:
			case Incomplete:
				tb.Query(ip62, t0)
			case Reachable:
				tb.Learn(ip62, mac1)
				tb.Advertised(ip62, mac1, true, true, false, t0)
			case Stale:
				tb.Learn(ip62, mac1)
			case Delay:
				tb.Learn(ip62, mac1)
				tb.Query(ip62, t0)
			case Probe:
				tb.Learn(ip62, mac1)
				tb.Query(ip62, t0)
				tb.Poll(t0.Add(5*time.Second), nil)
			}
			if c.before != 255 {
				wantState(t, tb, ip62, c.before)
			}
			now := t0.Add(time.Minute)
			if got := tb.Advertised(ip62, c.mac, c.f.ll, c.f.solicited, c.f.override, now); got != c.counted {
				t.Fatalf("Advertised = %v", got)
			}
			if c.want == 255 {
				if _, ok := tb.Lookup(ip62); ok {
					t.Fatal("an entry was made")
				}
				return
			}
			wantState(t, tb, ip62, c.want)
			if mac, _ := tb.Lookup(ip62); mac != c.wantMAC {
				t.Fatalf("MAC %v, want %v", mac, c.wantMAC)
			}
			if c.wantTimer { // REACHABLE until now+Reachable, and not after
				tb.Query(ip62, now.Add(29*time.Second))
				wantState(t, tb, ip62, Reachable)
				tb.Query(ip62, now.Add(30*time.Second))
				wantState(t, tb, ip62, Delay)
			}
		})
	}
}

// TestNUDUse: a use of a REACHABLE entry within ReachableTime leaves it;
// past it the entry is STALE, and a STALE entry used goes to DELAY (RFC
// 4861 §7.3.3), the MAC usable all along.
func TestNUDUse(t *testing.T) {
	tb, _ := nudTable(t, Config{})
	tb.Query(ip62, t0)
	tb.Advertised(ip62, mac2, true, true, false, t0)
	if mac, ok := tb.Query(ip62, t0.Add(29*time.Second)); !ok || mac != mac2 {
		t.Fatal("REACHABLE not usable")
	}
	wantState(t, tb, ip62, Reachable)
	if _, ok := tb.Query(ip62, t0.Add(31*time.Second)); !ok {
		t.Fatal("STALE not usable")
	}
	wantState(t, tb, ip62, Delay)
}

// TestNUDProbe: DELAY goes to PROBE after DELAY_FIRST_PROBE_TIME with a
// unicast probe to the cached MAC, PROBE probes again every RetransTimer,
// and after MAX_UNICAST_SOLICIT probes unanswered the entry is removed
// (RFC 4861 §7.3.3; the entry is deleted, as §7.3.3 allows). An answer
// in PROBE makes it REACHABLE (TestAdvertisedRFC4861).
func TestNUDProbe(t *testing.T) {
	tb, l := nudTable(t, Config{})
	tb.Learn(ip62, mac2)
	tb.Query(ip62, t0)
	tb.Poll(t0.Add(4*time.Second), nil)
	wantState(t, tb, ip62, Delay)
	for i := 0; i < 3; i++ {
		tb.Poll(t0.Add(time.Duration(5+i)*time.Second), nil)
		wantState(t, tb, ip62, Probe)
		tb.Poll(t0.Add(time.Duration(5+i)*time.Second+500*time.Millisecond), nil)
	}
	if len(l.probed) != 3 || l.probeMAC[0] != mac2 || l.probeMAC[2] != mac2 || l.probes.Load() != 3 {
		t.Fatalf("probes %v to %v", l.probed, l.probeMAC)
	}
	if _, ok := tb.Lookup(ip62); !ok {
		t.Fatal("removed before the last probe's time")
	}
	tb.Poll(t0.Add(8*time.Second), nil)
	if _, ok := tb.State(ip62); ok || value(tb, CounterProbeFailed) != 1 || len(l.solicited) != 0 {
		t.Fatalf("after unanswered probes: present %v, probe_failed %d", ok, value(tb, CounterProbeFailed))
	}
}

// TestNUDEvictsLeastUsed: with NUD the full cache replaces the entry used
// longest ago.
func TestNUDEvictsLeastUsed(t *testing.T) {
	tb, _ := nudTable(t, Config{CacheSize: 2})
	tb.Learn(ip61, mac1)
	tb.Learn(ip62, mac2)
	tb.Query(ip61, t0)
	three := v6(3)
	tb.Learn(three, mac1)
	if _, ok := tb.Lookup(ip62); ok || tb.Len() != 2 || value(tb, CounterEvicted) != 1 {
		t.Fatalf("2001:2::2 present %v, %d entries", ok, tb.Len())
	}
}

// TestKernelTable: with Config.Kernel, a resolution the kernel's table
// answers sends no request, and the entry is STALE (to be verified when
// used, RFC 4861 §7.3.3).
func TestKernelTable(t *testing.T) {
	tb, l := nudTable(t, Config{Kernel: func(a netip.Addr) ([6]byte, bool) { return mac2, a == ip62 }})
	if mac, ok := tb.Query(ip62, t0); !ok || mac != mac2 || len(l.solicited) != 0 || value(tb, CounterKernelHits) != 1 {
		t.Fatalf("kernel hit: %v %v, %d requests", mac, ok, len(l.solicited))
	}
	wantState(t, tb, ip62, Stale)
	if _, ok := tb.Query(ip61, t0); ok || len(l.solicited) != 1 {
		t.Fatal("a kernel miss sent no request")
	}
}

// TestSendCountsTxFull: a frame the TX ring refuses is counted in
// tx_full, not in the protocol's counter.
func TestSendCountsTxFull(t *testing.T) {
	tb, _, _ := newTable(t, Config{})
	var sent atomic.Uint64
	for i := 0; i < 10000 && value(tb, CounterTxFull) == 0; i++ {
		tb.Send(make([]byte, 60), &sent)
	}
	if value(tb, CounterTxFull) != 1 || sent.Load() == 0 {
		t.Fatalf("tx_full %d, sent %d", value(tb, CounterTxFull), sent.Load())
	}
	if c := tb.Counter("l", "no such"); c.Value != 0 || c.Loss || c.Layer != "l" {
		t.Fatalf("unknown counter %+v", c)
	}
}

type wordsA struct{}

func (wordsA) Words() (error, string) { return errTestNoReply, "a: %s on %s, %d in %v" }

type wordsB struct{}

func (wordsB) Words() (error, string) { return context.DeadlineExceeded, "b" }

// TestResolveError: a ResolveError reads its protocol's words, matches
// its sentinel, and protocols' errors are of distinct types.
func TestResolveError(t *testing.T) {
	var err error = &ResolveError[wordsA]{Addr: ip2, Iface: "veth0", Requests: 3, Waited: 3001500 * time.Microsecond}
	if err.Error() != "a: 198.18.0.2 on veth0, 3 in 3.002s" || !errors.Is(err, errTestNoReply) {
		t.Fatalf("%q", err)
	}
	var b *ResolveError[wordsB]
	if errors.As(err, &b) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("protocols' errors mixed")
	}
}
