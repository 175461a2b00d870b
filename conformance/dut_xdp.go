//go:build linux

package conformance

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/stack"
	"github.com/dgramio/dgramio/tcp"
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
	CapUDP: "stack.New registers no UDP (its datagrams reach netstack, which answers protocol unreachable)",
}

// New implements Factory.
func (xdpFactory) New(tb TB, s Setup) (DUT, error) {
	v, err := newVeth(s)
	if err != nil {
		return nil, fmt.Errorf("ours-xdp: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			v.close()
		}
	}()
	if err := v.dut.DelAddr(); err != nil {
		return nil, fmt.Errorf("ours-xdp: address off A: %w", err)
	}
	cfg := core.Config{Kind: core.KindTCPXDP, Role: core.RoleServer, Iface: v.dut.Iface, LocalIP: v.dut.Addr, Port: dutPort}
	cfg.XDP.Frames, cfg.XDP.RingSize = 512, 256
	var fio frameio.FrameIO
	var opts tcp.Options
	err = v.dut.Do(func() error {
		var err error
		fio, opts, err = tcp.OpenXDP(cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ours-xdp: %w", err)
	}
	if _, ok := fio.(frameio.Waiter); !ok {
		opts.Close()
		return nil, fmt.Errorf("ours-xdp: the AF_XDP FrameIO cannot Wait")
	}
	d, err := newOursDUT(fio, s, stack.Options{Addr: v.dut.Addr, PrefixLen: v.dut.Prefix.Bits(),
		Neighbors: map[netip.Addr]net.HardwareAddr{v.bench.Addr: v.bench.MAC}})
	if err != nil {
		opts.Close()
		return nil, fmt.Errorf("ours-xdp: %w", err)
	}
	d.info = Info{Name: "ours-xdp", Kind: KindOurs, MAC: v.dut.MAC, BenchMAC: v.bench.MAC,
		Addr: v.dut.Addr, BenchAddr: v.bench.Addr, Spare: v.spare, MTU: fio.MTU(), Lacks: xdpLacks}
	d.link = v.link
	d.closeWire = func() error {
		err := opts.Close()
		if cerr := v.close(); err == nil {
			err = cerr
		}
		return err
	}
	tb.Logf("ours-xdp: %s", fio.Stats().Mode)
	ok = true
	return d, nil
}
