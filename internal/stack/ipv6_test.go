package stack

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
)

// TestNewIPv6: a Stack for an IPv6 address runs IPv6 (its endpoints are
// opened with IPv6's protocol number), holds the address with prefix 128
// by default, takes static IPv6 neighbours, and refuses an IPv4 one.
func TestNewIPv6(t *testing.T) {
	a, _ := memio.NewPair(memio.Options{})
	defer a.Close()
	me := netip.MustParseAddr("2001:2::1")
	s, err := New(a, Options{Addr: me, Neighbors: map[netip.Addr]net.HardwareAddr{
		netip.MustParseAddr("2001:2::2"): memio.DefaultMACB}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Proto() != ipv6.ProtocolNumber {
		t.Fatalf("protocol %d", s.Proto())
	}
	var global, linkLocal bool
	for _, pa := range s.NS.AllAddresses()[NICID] {
		a := AddrOf(pa.AddressWithPrefix.Address)
		global = global || a == me && pa.AddressWithPrefix.PrefixLen == 128
		linkLocal = linkLocal || a.IsLinkLocalUnicast()
	}
	if !global || !linkLocal {
		t.Fatalf("NIC addresses %v: want %v/128 and a link-local one", s.NS.AllAddresses()[NICID], me)
	}
	b, _ := memio.NewPair(memio.Options{})
	defer b.Close()
	_, err = New(b, Options{Addr: me, Neighbors: map[netip.Addr]net.HardwareAddr{
		netip.MustParseAddr("198.18.0.2"): memio.DefaultMACB}})
	var ce *dgramio.ConfigError
	if !errors.As(err, &ce) || ce.Field != "DstMAC" {
		t.Fatalf("an IPv4 neighbour on an IPv6 stack: %v", err)
	}
}

// TestAddrRoundTrip: Addr and AddrOf convert both families, an
// IPv4-mapped address being IPv4.
func TestAddrRoundTrip(t *testing.T) {
	for _, s := range []string{"198.18.0.1", "2001:2::1", "::ffff:198.18.0.1"} {
		a := netip.MustParseAddr(s)
		if got := AddrOf(Addr(a)); got != a.Unmap() {
			t.Errorf("%v -> %v", a, got)
		}
	}
	if Addr(netip.MustParseAddr("::ffff:198.18.0.1")).Len() != 4 {
		t.Error("a mapped address is not IPv4")
	}
	if (&Stack{Addr: netip.MustParseAddr("198.18.0.1")}).Proto() != ipv4.ProtocolNumber {
		t.Error("IPv4 protocol")
	}
}

// TestUnackedIPv6: an IPv6 flow the Endpoint never saw is "cannot tell",
// never a panic (unacked6_test.go follows one).
func TestUnackedIPv6(t *testing.T) {
	a, _ := memio.NewPair(memio.Options{})
	defer a.Close()
	e := NewEndpoint(a)
	if _, ok := e.Unacked(netip.MustParseAddrPort("[2001:2::1]:80"), netip.MustParseAddrPort("[2001:2::2]:4000"), 10); ok {
		t.Fatal("an IPv6 flow never seen answered")
	}
	if p := SourcePorts(RSS{}, netip.MustParseAddr("2001:2::1"), netip.MustParseAddrPort("[2001:2::2]:80"), 0, 2, 0, 3); len(p) != 3 {
		t.Fatalf("source ports for an IPv6 peer: %v", p)
	}
}
