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

// TestARPShareGroup: two engines with one address, the queues of a group,
// share an ARPShare. Queue 1 asks for the peer (RFC 826), and the reply
// lands on queue 0, as a NIC's RSS puts ARP on one queue: queue 1 learns
// it through the share, its Wait in progress returns, and its SYN leaves
// at once to the peer's MAC, without another request or its timer.
func TestARPShareGroup(t *testing.T) {
	clk := memio.NewFakeClock(time.Unix(1_000_000, 0))
	q0p, w0 := memio.NewPair(memio.Options{Clock: clk})
	q1p, w1 := memio.NewPair(memio.Options{Clock: clk})
	share := &ARPShare{}
	q0, err := New(q0p, Options{Addr: addrA, Clock: clk, ARPShare: share})
	if err != nil {
		t.Fatal(err)
	}
	q1, err := New(q1p, Options{Addr: addrA, Clock: clk, ARPShare: share})
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
	peerMAC := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0b}

	c, err := q1.Dial(netip.AddrPortFrom(addrB, 7000), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := q1.Flush(); err != nil {
		t.Fatal(err)
	}
	var asked bool
	w1.RxFrames(64, func(f []byte) {
		m, err := arp.ParseARP(f)
		asked = asked || err == nil && m.Op == arp.OpRequest && m.TargetIP == addrB
	})
	if !asked {
		t.Fatal("queue 1 sent no ARP request for the peer")
	}

	waited := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		waited <- q1.Wait(ctx)
	}()
	// The reply reaches queue 0 (same MAC and address as queue 1).
	w0.TxFrame(arp.AppendReply(nil, peerMAC, addrB, q0p.MAC(), addrA))
	w0.Kick()
	if n := q0.Poll(64); n != 1 {
		t.Fatalf("queue 0 took %d frames, want the reply", n)
	}
	if err := <-waited; err != nil {
		t.Fatalf("queue 1's Wait: %v, want nil once the share has the reply", err)
	}
	q1.Poll(64)
	if err := q1.Flush(); err != nil {
		t.Fatal(err)
	}
	var syn bool
	w1.RxFrames(64, func(f []byte) {
		if len(f) >= ethLen+40 && [6]byte(f[0:6]) == [6]byte(peerMAC) &&
			binary.BigEndian.Uint16(f[12:]) == etherIPv4 && f[ethLen+9] == protoTCP &&
			f[ethLen+20+13]&flagSYN != 0 {
			syn = true
		}
	})
	if !syn || c.State() != SynSent {
		t.Fatalf("queue 1 sent no SYN to the peer's MAC (state %v): the reply on queue 0 was not shared", c.State())
	}
	if got := counterOf(t, q1, "arp_shared"); got != 1 {
		t.Errorf("queue 1 arp_shared %d, want 1", got)
	}
	if got := counterOf(t, q1, "arp_requests_sent"); got != 1 {
		t.Errorf("queue 1 sent %d ARP requests, want the one", got)
	}
	// A closed engine leaves the share: a later reply is not handed to it.
	q1.Close()
	w0.TxFrame(arp.AppendReply(nil, peerMAC, netip.MustParseAddr("198.18.0.9"), q0p.MAC(), addrA))
	w0.Kick()
	q0.Poll(64)
	if q1.inbox.pending.Load() {
		t.Error("a closed engine still receives the share's replies")
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
