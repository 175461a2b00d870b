package native

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
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
