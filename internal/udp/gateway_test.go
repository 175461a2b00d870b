package udp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/arp"
)

// gatewaySent is a datagram frame the gateway received.
type gatewaySent struct {
	dstMAC net.HardwareAddr
	dstIP  netip.Addr
}

// runGateway plays a router at gw on port p until the test ends: it
// answers ARP for gw only (an off-link peer is not on the link to answer
// for itself) and reports every IPv4 frame it receives.
func runGateway(t *testing.T, p *memio.Port, gw netip.Addr) <-chan gatewaySent {
	t.Helper()
	opts, _, _ := neighboursFor(t, p, gw, "memio gateway")
	var h interface {
		Handle([]byte) bool
		Flush() error
	} = opts.ARP
	if opts.NDP != nil {
		h = opts.NDP
	}
	got := make(chan gatewaySent, 64)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			p.Wait(ctx)
			cancel()
			p.RxFrames(32, func(f []byte) {
				if h.Handle(f) || len(f) < EthernetLen+IPv6Len {
					return
				}
				var dst netip.Addr
				switch Ethernet(f).Type() {
				case EtherIPv4:
					dst, _ = netip.AddrFromSlice(f[EthernetLen+16 : EthernetLen+20])
				case EtherIPv6:
					dst = IPv6(f[EthernetLen:]).Dst()
				default:
					return
				}
				select {
				case got <- gatewaySent{append(net.HardwareAddr(nil), Ethernet(f).Dst()...), dst}:
				default:
				}
			})
			h.Flush()
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
	return got
}

// TestOffLinkPeerGoesToGateway: on a DPDK port without a kernel side (a PCI
// device), a peer outside LocalIP/DPDK.PrefixLen is reached through
// DPDK.Gateway: ARP asks for the gateway, not for the peer, and the
// datagrams carry the gateway's MAC with the peer's IP address (RFC 1122
// §3.3.1.1: a destination off the connected network goes to a gateway).
// The Dest of a client resolves so at construction, and a server's
// QueueTo to an off-link address never heard from does so on the poll
// loop (the asynchronous resolver).
//
// Over IPv6 the same holds with neighbour discovery (RFC 4861 §5.2: the
// next hop of an off-link destination is a router).
func TestOffLinkPeerGoesToGateway(t *testing.T) {
	forFamilies(t, testOffLinkPeerGoesToGateway)
}

func testOffLinkPeerGoesToGateway(t *testing.T, f family) {
	gw, far, prefix := netip.MustParseAddr("198.18.0.254"), netip.MustParseAddr("198.19.7.7"), 24
	if f.a.Is6() {
		gw, far, prefix = netip.MustParseAddr("2001:2::fe"), netip.MustParseAddr("2001:2:0:77::7"), 64
	}
	ipA := f.a
	cfg := dgramio.Config{Kind: dgramio.KindDPDK, LocalIP: ipA, Port: 5000, LocalPort: 40000,
		DPDK: dgramio.DPDKOptions{PCI: "0000:03:00.0", PrefixLen: prefix, Gateway: gw}}
	open := func(t *testing.T, c dgramio.Config) (*Raw, <-chan gatewaySent) {
		t.Helper()
		if _, err := c.Prepare(); err != nil {
			t.Fatalf("config: %v", err)
		}
		a, b := memio.NewPair(memio.Options{})
		got := runGateway(t, b, gw)
		o, _, _ := neighboursFor(t, a, ipA, "memio A")
		o.NextHop = gatewayNextHop(c)
		r, err := NewRaw(c, a, o)
		if err != nil {
			t.Fatalf("NewRaw: %v", err)
		}
		t.Cleanup(func() { r.Close() })
		return r, got
	}
	expect := func(t *testing.T, r *Raw, got <-chan gatewaySent, to netip.Addr) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		pkts := make([]dgramio.Packet, 8)
		for {
			r.Flush()
			select {
			case s := <-got:
				if s.dstIP != to || !bytes.Equal(s.dstMAC, memio.DefaultMACB) {
					t.Fatalf("datagram to %v went to MAC %v, want %v at the gateway's MAC %v", s.dstIP, s.dstMAC, to, memio.DefaultMACB)
				}
				return
			case <-deadline:
				t.Fatalf("no datagram to %v reached the gateway; stats %+v", to, r.Stats())
			case <-time.After(time.Millisecond):
			}
			if _, err := r.Rx(pkts); err != nil { // takes the ARP reply
				t.Fatal(err)
			}
		}
	}
	t.Run("dest", func(t *testing.T) {
		c := cfg
		c.Dests = []netip.AddrPort{netip.AddrPortFrom(far, c.Port)}
		r, got := open(t, c)
		if r.Queue([]byte("to the far peer")) != nil {
			t.Fatal("Queue refused")
		}
		expect(t, r, got, far)
	})
	t.Run("queue to", func(t *testing.T) {
		c := cfg
		c.Role = dgramio.RoleServer
		r, got := open(t, c)
		if r.QueueTo([]byte("answer"), netip.AddrPortFrom(far, 6000)) != nil {
			t.Fatal("QueueTo refused")
		}
		expect(t, r, got, far)
	})
}

// TestNoRouteHint: a Dest nobody answers ARP for, on a port with no next
// hop to ask (a PCI device without DPDK.PrefixLen), gets the settings to
// use if it is behind a router; with a next hop, or for another error, the
// error stays as it was.
func TestNoRouteHint(t *testing.T) {
	noReply := fmt.Errorf("udp: resolve destination 198.19.7.7: %w", &arp.ResolveError{Addr: netip.MustParseAddr("198.19.7.7")})
	if err := noRouteHint(noReply, nil); !errors.Is(err, arp.ErrNoReply) || !strings.Contains(err.Error(), "DPDK.Gateway") {
		t.Errorf("no next hop: %v, want the ARP error with a DPDK.Gateway hint", err)
	}
	hop := func(a netip.Addr) netip.Addr { return a }
	if err := noRouteHint(noReply, hop); err != noReply {
		t.Errorf("with a next hop: %v, want the error unchanged", err)
	}
	other := errors.New("other")
	if err := noRouteHint(other, nil); err != other {
		t.Errorf("other error: %v, want it unchanged", err)
	}
}
