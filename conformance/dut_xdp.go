//go:build linux

package conformance

import (
	"fmt"
	"maps"
	"net"
	"net/netip"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/stack"
	"github.com/dgramio/dgramio/internal/tcp"
)

// OursXDP is the Factory of our stack on the tcp-xdp path: for each case a
// testhost pair as for Linux, and on A an AF_XDP socket with the TCP
// variant of the XDP program (tcp.OpenXDP, as the tcp-xdp kind opens it)
// under our stack, built and driven as for ours-memio (fake clock). A's
// kernel loses its address (tcp-xdp refuses an address the kernel holds);
// our stack has it. The program gives our stack ARP and every IPv4
// datagram to its address (any TCP port, ICMP, fragments, IP options), as
// a host receives them; frames to other addresses reach A's kernel, which
// drops them. Needs root and AF_XDP (Linux >= 5.9 for the bpf_link).
func OursXDP() Factory { return xdpFactory{} }

type xdpFactory struct{}

// Name implements Factory.
func (xdpFactory) Name() string { return "ours-xdp" }

// xdpLacks is what the tcp-xdp DUT cannot show.
var xdpLacks = map[Cap]string{
	CapUDP:        "stack.New registers no UDP (its datagrams reach netstack, which answers protocol unreachable)",
	CapSYNCookies: "netstack is not switched to cookies for every SYN here (its listen backlog decides when it uses them)",
}

// xdpLacksNow is xdpLacks, and CapIPv6 when netstack serves no IPv6
// (netstackLacks).
func xdpLacksNow() map[Cap]string {
	why, ok := netstackLacks()[CapIPv6]
	if !ok {
		return xdpLacks
	}
	m := maps.Clone(xdpLacks)
	m[CapIPv6] = why
	return m
}

// New implements Factory.
func (xdpFactory) New(tb TB, s Setup) (DUT, error) {
	v, fio, closeWire, err := openXDPWire("ours-xdp", dgramio.TCPStackNetstack, s)
	if err != nil {
		return nil, err
	}
	opts := stack.Options{Addr: v.dut.Addr, PrefixLen: v.dut.Prefix.Bits(),
		Neighbors: map[netip.Addr]net.HardwareAddr{v.bench.Addr: v.bench.MAC}}
	if s.IPv6 {
		opts = stack.Options{Addr: v.dut.Addr6, PrefixLen: v.dut.Prefix6.Bits(),
			Neighbors: map[netip.Addr]net.HardwareAddr{v.bench.Addr6: v.bench.MAC}}
	}
	d, err := newOursDUT(fio, s, opts)
	if err != nil {
		closeWire()
		return nil, fmt.Errorf("ours-xdp: %w", err)
	}
	d.info = Info{Name: "ours-xdp", Kind: KindOurs, MAC: v.dut.MAC, BenchMAC: v.bench.MAC,
		Addr: v.dut.Addr, BenchAddr: v.bench.Addr, Spare: v.spare, MTU: fio.MTU(), Lacks: xdpLacksNow()}
	if s.IPv6 {
		d.info.Addr6, d.info.BenchAddr6, d.info.Spare6 = v.dut.Addr6, v.bench.Addr6, v.spare6
	}
	d.link = v.link
	d.closeWire = closeWire
	tb.Logf("ours-xdp: %s", fio.Stats().Mode)
	return d, nil
}

// openXDPWire makes the pair for s, takes A's address off its kernel
// (tcp-xdp refuses an address the kernel holds) and opens on A the AF_XDP
// socket and XDP program of tcp.OpenXDP, as the tcp-xdp kind opens them.
// closeWire closes both and the pair; name prefixes the errors. On error
// nothing is left.
func openXDPWire(name string, engine dgramio.TCPStack, s Setup) (v *veth, fio waitFrameIO, closeWire func() error, err error) {
	v, err = newVeth(s)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	ok, pair := false, v // the error returns below zero v
	defer func() {
		if !ok {
			pair.close()
		}
	}()
	if err := v.dut.DelAddr(); err != nil {
		return nil, nil, nil, fmt.Errorf("%s: address off A: %w", name, err)
	}
	cfg := dgramio.Config{Kind: dgramio.KindTCPXDP, Role: dgramio.RoleServer, Iface: v.dut.Iface, LocalIP: v.dut.Addr, Port: dutPort}
	if s.IPv6 {
		// The program takes every IPv6 frame to the DUT's IPv6 address
		// and the solicitations for it (IPv4 then goes to A's kernel,
		// but for dutPort); A's kernel loses that address too.
		if err := v.dut.DelAddr6(); err != nil {
			return nil, nil, nil, fmt.Errorf("%s: IPv6 address off A: %w", name, err)
		}
		cfg.LocalIP = v.dut.Addr6
		cfg.TCP.Stack = engine
	}
	cfg.XDP.Frames, cfg.XDP.RingSize = 512, 256
	var f frameio.FrameIO
	var opts tcp.Options
	err = v.dut.Do(func() error {
		var err error
		f, opts, err = tcp.OpenXDP(cfg)
		return err
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	fio, isW := f.(waitFrameIO)
	if !isW {
		opts.Close()
		return nil, nil, nil, fmt.Errorf("%s: the AF_XDP FrameIO cannot Wait", name)
	}
	ok = true
	return v, fio, func() error {
		err := opts.Close()
		if cerr := v.close(); err == nil {
			err = cerr
		}
		return err
	}, nil
}
