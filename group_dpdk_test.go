//go:build dpdk

package dgramio_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/dgramio/dgramio"
)

var dpdkGroupSeq int

// TestGroupDPDK: a dpdk server with two queues (one port, two queue pairs
// on net_af_packet qpairs=2, which a PACKET_FANOUT hash feeds: veth has no
// combined channels for net_af_xdp) echoes sixteen kernel udp flows; the
// hash spreads them, so the server's queues are not pinned to CPUs here.
// The fanout moves a frame to the other queue while its own ring is full
// (PACKET_FANOUT_FLAG_ROLLOVER): each ring has room for every frame the
// clients keep in flight (16 × 32, and the echoes the socket sees leave),
// and runFlows checks that none rolled over.
func TestGroupDPDK(t *testing.T) { dpdkGroupFlows(t, "dpdk", "udp") }

// TestGroupTCPDPDK: a tcp-dpdk server with two queues, a netstack on each
// (net_af_packet qpairs=2), serves sixteen kernel tcp connections.
func TestGroupTCPDPDK(t *testing.T) { dpdkGroupFlows(t, "tcp-dpdk", "tcp") }

// dpdkGroupFlows runs a server of kind with two queues on a net_af_packet
// vdev (qpairs=2) on A against sixteen flows of a cli client on B.
func dpdkGroupFlows(t *testing.T, kind, cli dgramio.Kind) {
	cpus := twoCPUs(t)
	p := groupPair(t, cpus)
	// The kernel under net_af_packet sees every frame: without the
	// address it drops them instead of answering them itself (ICMP port
	// unreachable, RSTs).
	if err := p.A.DelAddr(); err != nil {
		t.Fatal(err)
	}
	dpdkGroupSeq++
	srv := dgramio.Config{Kind: kind, Role: dgramio.RoleServer, LocalIP: p.A.Addr, Port: 7000, Queues: 2, Poll: dgramio.PollYield,
		DPDK: dgramio.DPDKOptions{VDev: fmt.Sprintf("net_af_packet_g%d,iface=%s,qpairs=2,framecnt=4096", dpdkGroupSeq, p.A.Iface)}}
	cc := dgramio.Config{Kind: cli, LocalIP: p.B.Addr, Dests: []netip.AddrPort{netip.AddrPortFrom(p.A.Addr, 7000)}, Port: 7000,
		Queues: 16, Poll: dgramio.PollYield}
	runFlows(t, p.A, p.B, srv, cc, 200)
}
