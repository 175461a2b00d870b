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
func TestGroupDPDK(t *testing.T) {
	cpus := twoCPUs(t)
	p := groupPair(t, cpus)
	// The kernel under net_af_packet sees every frame: without the
	// address it drops them instead of answering ICMP port unreachable.
	if err := p.A.DelAddr(); err != nil {
		t.Fatal(err)
	}
	dpdkGroupSeq++
	srv := dgramio.Config{Kind: "dpdk", Role: dgramio.RoleServer, LocalIP: p.A.Addr, Port: 7000, Queues: 2, Poll: dgramio.PollYield,
		DPDK: dgramio.DPDKOptions{VDev: fmt.Sprintf("net_af_packet_g%d,iface=%s,qpairs=2", dpdkGroupSeq, p.A.Iface)}}
	cli := dgramio.Config{Kind: "udp", LocalIP: p.B.Addr, Dests: []netip.Addr{p.A.Addr}, Port: 7000,
		Queues: 16, Poll: dgramio.PollYield}
	runFlows(t, p.A, p.B, srv, cli, 200)
}

// TestGroupTCPDPDK: a tcp-dpdk server with two queues, a netstack on each
// (net_af_packet qpairs=2), serves sixteen kernel tcp connections.
func TestGroupTCPDPDK(t *testing.T) {
	cpus := twoCPUs(t)
	p := groupPair(t, cpus)
	if err := p.A.DelAddr(); err != nil {
		t.Fatal(err)
	}
	dpdkGroupSeq++
	srv := dgramio.Config{Kind: "tcp-dpdk", Role: dgramio.RoleServer, LocalIP: p.A.Addr, Port: 7000, Queues: 2, Poll: dgramio.PollYield,
		DPDK: dgramio.DPDKOptions{VDev: fmt.Sprintf("net_af_packet_g%d,iface=%s,qpairs=2", dpdkGroupSeq, p.A.Iface)}}
	cli := dgramio.Config{Kind: "tcp", LocalIP: p.B.Addr, Dests: []netip.Addr{p.A.Addr}, Port: 7000,
		Queues: 16, Poll: dgramio.PollYield}
	runFlows(t, p.A, p.B, srv, cli, 200)
}
