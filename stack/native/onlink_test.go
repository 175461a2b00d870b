package native

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/arp"
)

// TestAllOnLink: with Options.AllOnLink every address is on the link (RFC
// 1122 §3.3.1.1's "local" case for every destination, as a host without a
// router), so peers outside PrefixLen are reached at their own MAC; without
// it, a peer outside the prefix and with no gateway is unreachable.
func TestAllOnLink(t *testing.T) {
	far := netip.MustParseAddr("198.19.0.2") // outside addrA's default /24
	for _, all := range []bool{false, true} {
		clk := memio.NewFakeClock(time.Unix(1_000_000, 0))
		pa, pb := memio.NewPair(memio.Options{Clock: clk})
		a, err := New(pa, Options{Addr: addrA, Clock: clk, AllOnLink: all})
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(pb, Options{Addr: far, Clock: clk, AllOnLink: true})
		if err != nil {
			t.Fatal(err)
		}
		w := &world{t: t, clk: clk, pa: pa, pb: pb, a: a, b: b, budget: 64}
		t.Cleanup(func() { a.Close(); b.Close(); pa.Close(); pb.Close() })
		l, err := b.Listen(7000, 0)
		if err != nil {
			t.Fatal(err)
		}
		ca, err := a.Dial(netip.AddrPortFrom(far, 7000), 0)
		if !all {
			if !errors.Is(err, ErrHostUnreachable) {
				t.Fatalf("Dial off-link without a gateway: %v, want ErrHostUnreachable", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var cb *Conn
		w.until(10*time.Second, "handshake across the prefix", func() bool {
			if cb == nil {
				cb, _ = l.Accept()
			}
			return cb != nil && ca.State() == Established
		})
		if got := cb.Peer(); got.Addr() != addrA {
			t.Fatalf("the server's peer is %v, want %v", got, addrA)
		}
	}
}

// TestNeighbourShareGroup: two engines with one address, the queues of a
// group, share an ARPShare. Queue 1 asks for the peer (IPv4: an ARP
// request, RFC 826; IPv6: a neighbour solicitation, RFC 4861 §7.2.2), and
// the answer lands on queue 0, as a NIC's RSS puts ARP and ICMPv6 (no
// ports) on one queue: queue 1 learns it through the share, its Wait in
// progress returns, and its SYN leaves at once to the peer's MAC, without
// another request or its timer. Over IPv6 queue 0, which holds no entry
// for the target, learns nothing (§7.2.5: no entry, the advertisement is
// discarded) and queue 1's entry is REACHABLE. A closed engine leaves the
// share.
func TestNeighbourShareGroup(t *testing.T) {
	isICMP6 := func(f []byte, typ uint8) bool {
		var h ip6Hdr
		return len(f) > ethLen && binary.BigEndian.Uint16(f[12:]) == etherIPv6 &&
			parseIPv6(f[ethLen:], &h) == ip6OK && h.proto == protoICMPv6 && f[ethLen+h.off] == typ
	}
	for _, c := range []struct {
		name string
		f    family
		// asks tells a request or solicitation for the peer.
		asks func(f []byte) bool
		// answer is the peer's reply or advertisement for target, to
		// queue 0.
		answer func(q0p *memio.Port, peerMAC [6]byte, target netip.Addr) []byte
		// syn tells a SYN to peerMAC.
		syn func(f []byte, peerMAC [6]byte) bool
		// shared is the counter of answers taken through the share.
		shared string
		// check holds the family's own checks once queue 1 resolved.
		check func(t *testing.T, q0, q1 *Engine, peerMAC [6]byte)
		// pending tells whether a closed engine still got an answer.
		pending func(q1 *Engine) bool
		// later is the target of the answer after queue 1 closed.
		later netip.Addr
	}{{
		name: "ARP", f: families[0],
		asks: func(f []byte) bool {
			m, err := arp.ParseARP(f)
			return err == nil && m.Op == arp.OpRequest && m.TargetIP == addrB
		},
		answer: func(q0p *memio.Port, peerMAC [6]byte, target netip.Addr) []byte {
			return arp.AppendReply(nil, net.HardwareAddr(peerMAC[:]), target, q0p.MAC(), addrA)
		},
		syn: func(f []byte, peerMAC [6]byte) bool {
			return len(f) >= ethLen+40 && [6]byte(f[0:6]) == peerMAC &&
				binary.BigEndian.Uint16(f[12:]) == etherIPv4 && f[ethLen+9] == protoTCP &&
				f[ethLen+20+13]&flagSYN != 0
		},
		shared: "arp_shared",
		check: func(t *testing.T, _, q1 *Engine, _ [6]byte) {
			if got := counterOf(t, q1, "arp_requests_sent"); got != 1 {
				t.Errorf("queue 1 sent %d ARP requests, want the one", got)
			}
		},
		pending: func(q1 *Engine) bool { return q1.inbox.pending.Load() },
		later:   netip.MustParseAddr("198.18.0.9"),
	}, {
		name: "NDP", f: families[1],
		asks: func(f []byte) bool { return isICMP6(f, icmp6NeighSol) },
		answer: func(q0p *memio.Port, peerMAC [6]byte, target netip.Addr) []byte {
			f := make([]byte, ethLen+ndpMsgLen)
			n := buildNA(f[ethLen:], target.As16(), addr6A.As16(), target.As16(), peerMAC, naFlagSolic|naFlagOver)
			putEth(f, [6]byte(q0p.MAC()), peerMAC, etherIPv6)
			return f[:ethLen+n]
		},
		syn: func(f []byte, peerMAC [6]byte) bool {
			var h ip6Hdr
			return [6]byte(f[0:6]) == peerMAC && binary.BigEndian.Uint16(f[12:]) == etherIPv6 &&
				parseIPv6(f[ethLen:], &h) == ip6OK && h.proto == protoTCP && f[ethLen+h.off+13]&flagSYN != 0
		},
		shared: "ndp_na_shared",
		check: func(t *testing.T, q0, q1 *Engine, peerMAC [6]byte) {
			if q0.six.neigh.get(a6B) != nil {
				t.Fatal("queue 0, which solicited nothing, made an entry from the advertisement")
			}
			if en := q1.six.neigh.get(a6B); en == nil || en.state != neighReachable || en.mac != peerMAC {
				t.Fatalf("queue 1's entry %+v, want REACHABLE at the advertised MAC", en)
			}
			if got := counterOf(t, q0, "ndp_na_shared"); got != 0 {
				t.Errorf("queue 0 ndp_na_shared %d, want 0", got)
			}
		},
		pending: func(q1 *Engine) bool { return q1.six.inbox.n != 0 || q1.inbox.pending.Load() },
		later:   netip.AddrFrom16(a6C),
	}} {
		t.Run(c.name, func(t *testing.T) {
			clk := memio.NewFakeClock(time.Unix(1_000_000, 0))
			q0p, w0 := memio.NewPair(memio.Options{Clock: clk})
			q1p, w1 := memio.NewPair(memio.Options{Clock: clk})
			share := &ARPShare{}
			q0, err := New(q0p, c.f.with(Options{Clock: clk, ARPShare: share}, c.f.a))
			if err != nil {
				t.Fatal(err)
			}
			q1, err := New(q1p, c.f.with(Options{Clock: clk, ARPShare: share}, c.f.a))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				q0.Close()
				q1.Close()
				q0p.Close()
				q1p.Close()
				w0.Close()
				w1.Close()
			})
			peerMAC := [6]byte{0x02, 0, 0, 0, 0, 0x0b}

			conn, err := q1.Dial(netip.AddrPortFrom(c.f.b, 7000), 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := q1.Flush(); err != nil {
				t.Fatal(err)
			}
			asked := 0
			w1.RxFrames(64, func(f []byte) {
				if c.asks(f) {
					asked++
				}
			})
			if asked != 1 {
				t.Fatalf("queue 1 sent %d requests for the peer, want 1", asked)
			}

			waited := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				waited <- q1.Wait(ctx)
			}()
			// The answer reaches queue 0 (same address as queue 1).
			w0.TxFrame(c.answer(q0p, peerMAC, c.f.b))
			w0.Kick()
			if n := q0.Poll(64); n != 1 {
				t.Fatalf("queue 0 took %d frames, want the answer", n)
			}
			if err := <-waited; err != nil {
				t.Fatalf("queue 1's Wait: %v, want nil once the share has the answer", err)
			}
			q1.Poll(64)
			if err := q1.Flush(); err != nil {
				t.Fatal(err)
			}
			c.check(t, q0, q1, peerMAC)
			syn := false
			w1.RxFrames(64, func(f []byte) {
				syn = syn || c.syn(f, peerMAC)
				if c.asks(f) {
					asked++
				}
			})
			if !syn || conn.State() != SynSent || asked != 1 {
				t.Fatalf("queue 1: SYN to the peer's MAC %v (state %v), %d requests: the answer on queue 0 was not shared", syn, conn.State(), asked)
			}
			if got := counterOf(t, q1, c.shared); got != 1 {
				t.Errorf("queue 1 %s %d, want 1", c.shared, got)
			}

			// A closed engine leaves the share: a later answer is not
			// handed to it.
			q1.Close()
			w0.TxFrame(c.answer(q0p, peerMAC, c.later))
			w0.Kick()
			q0.Poll(64)
			if c.pending(q1) {
				t.Error("a closed engine still receives the share's answers")
			}
		})
	}
}

// TestARPTableReusesFailedEntries: a neighbour that never answered (RFC
// 826 request, ARPRetries times) leaves its slot of the bounded ARP table
// reusable: more unanswered neighbours than the table holds (256) are
// each still asked for, rather than a full table failing every later
// connection at once without a request.
func TestARPTableReusesFailedEntries(t *testing.T) {
	clk := memio.NewFakeClock(time.Unix(1_000_000, 0))
	pa, pb := memio.NewPair(memio.Options{Clock: clk})
	t.Cleanup(func() { pa.Close(); pb.Close() })
	e, err := New(pa, Options{Addr: addrA, PrefixLen: 16, Clock: clk, ARPRetries: 1, ARPTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const n = 300 // more than the table's 256
	for i := range n {
		peer := netip.AddrFrom4([4]byte{198, 18, byte(1 + i/250), byte(1 + i%250)})
		c, err := e.Dial(netip.AddrPortFrom(peer, 7000), 0)
		if err != nil {
			t.Fatalf("Dial %d (%v): %v", i, peer, err)
		}
		e.Flush()
		clk.Advance(2 * time.Millisecond)
		e.Poll(64)
		e.Flush()
		pb.RxFrames(64, func([]byte) {}) // nobody answers
		if !errors.Is(c.Err(), ErrHostUnreachable) {
			t.Fatalf("Dial %d: %v, want ErrHostUnreachable after the unanswered request", i, c.Err())
		}
		c.Abort()
	}
	if got := counterOf(t, e, "arp_requests_sent"); got != n {
		t.Errorf("%d ARP requests for %d unanswered neighbours, want one each", got, n)
	}
	if e.arp.asking != 0 {
		t.Errorf("%d entries still asking after every request failed", e.arp.asking)
	}
}
