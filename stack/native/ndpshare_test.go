package native

import (
	"context"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// TestNDPShareGroup: two IPv6 engines with one address, the queues of a
// group, share an ARPShare. Queue 1 solicits the peer (RFC 4861 §7.2.2),
// and the advertisement lands on queue 0, as a NIC's RSS puts ICMPv6 (no
// ports) on one queue: queue 0, which holds no entry for the target,
// learns nothing (§7.2.5: no entry, the advertisement is discarded), and
// queue 1 takes it through the share: its Wait in progress returns, the
// entry is REACHABLE, and its SYN leaves at once to the advertised MAC
// without another solicitation. A closed engine leaves the share.
func TestNDPShareGroup(t *testing.T) {
	clk := memio.NewFakeClock(time.Unix(1_000_000, 0))
	q0p, w0 := memio.NewPair(memio.Options{Clock: clk})
	q1p, w1 := memio.NewPair(memio.Options{Clock: clk})
	share := &ARPShare{}
	q0, err := New(q0p, Options{Addr6: addr6A, Clock: clk, ARPShare: share})
	if err != nil {
		t.Fatal(err)
	}
	q1, err := New(q1p, Options{Addr6: addr6A, Clock: clk, ARPShare: share})
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

	c, err := q1.Dial(netip.AddrPortFrom(addr6B, 7000), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := q1.Flush(); err != nil {
		t.Fatal(err)
	}
	isICMP6 := func(f []byte, typ uint8) bool {
		var h ip6Hdr
		return len(f) > ethLen && binary.BigEndian.Uint16(f[12:]) == etherIPv6 &&
			parseIPv6(f[ethLen:], &h) == ip6OK && h.proto == protoICMPv6 && f[ethLen+h.off] == typ
	}
	asked := 0
	w1.RxFrames(64, func(f []byte) {
		if isICMP6(f, icmp6NeighSol) {
			asked++
		}
	})
	if asked != 1 {
		t.Fatalf("queue 1 sent %d solicitations for the peer, want 1", asked)
	}

	waited := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		waited <- q1.Wait(ctx)
	}()
	// The advertisement reaches queue 0 (same address as queue 1).
	na := func(target ip6Addr) []byte {
		f := make([]byte, ethLen+ndpMsgLen)
		n := buildNA(f[ethLen:], target, addr6A.As16(), target, peerMAC, naFlagSolic|naFlagOver)
		putEth(f, [6]byte(q0p.MAC()), peerMAC, etherIPv6)
		return f[:ethLen+n]
	}
	w0.TxFrame(na(a6B))
	w0.Kick()
	if n := q0.Poll(64); n != 1 {
		t.Fatalf("queue 0 took %d frames, want the advertisement", n)
	}
	if q0.six.neigh.get(a6B) != nil {
		t.Fatal("queue 0, which solicited nothing, made an entry from the advertisement")
	}
	if err := <-waited; err != nil {
		t.Fatalf("queue 1's Wait: %v, want nil once the share has the advertisement", err)
	}
	q1.Poll(64)
	if err := q1.Flush(); err != nil {
		t.Fatal(err)
	}
	if en := q1.six.neigh.get(a6B); en == nil || en.state != neighReachable || en.mac != peerMAC {
		t.Fatalf("queue 1's entry %+v, want REACHABLE at the advertised MAC", en)
	}
	syn := false
	w1.RxFrames(64, func(f []byte) {
		var h ip6Hdr
		if [6]byte(f[0:6]) == peerMAC && binary.BigEndian.Uint16(f[12:]) == etherIPv6 &&
			parseIPv6(f[ethLen:], &h) == ip6OK && h.proto == protoTCP && f[ethLen+h.off+13]&flagSYN != 0 {
			syn = true
		}
		if isICMP6(f, icmp6NeighSol) {
			asked++
		}
	})
	if !syn || c.State() != SynSent || asked != 1 {
		t.Fatalf("queue 1: SYN to the peer's MAC %v (state %v), %d solicitations: the advertisement on queue 0 was not shared", syn, c.State(), asked)
	}
	if got := counterOf(t, q1, "ndp_na_shared"); got != 1 {
		t.Errorf("queue 1 ndp_na_shared %d, want 1", got)
	}
	if got := counterOf(t, q0, "ndp_na_shared"); got != 0 {
		t.Errorf("queue 0 ndp_na_shared %d, want 0", got)
	}

	// A closed engine leaves the share: a later advertisement is not
	// handed to it.
	q1.Close()
	w0.TxFrame(na(a6C))
	w0.Kick()
	q0.Poll(64)
	if q1.six.inbox.n != 0 || q1.inbox.pending.Load() {
		t.Error("a closed engine still receives the share's advertisements")
	}
}
