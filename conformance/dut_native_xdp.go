//go:build linux

package conformance

import (
	"fmt"

	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/tcp"
)

// NativeXDP is the Factory of the native engine on the tcp-xdp path: a
// testhost pair as for OursXDP, the AF_XDP socket and XDP program that
// tcp.OpenXDP opens for tcp-xdp, and the native engine on it (fake
// clock), driven as for native-memio. The program gives the engine ARP
// and every frame to its address (all TCP ports, ICMP, UDP), so the IP
// cases run here too. Needs root and AF_XDP (Linux >= 5.9 for the bpf_link).
func NativeXDP() Factory { return nativeXDPFactory{} }

type nativeXDPFactory struct{}

// Name implements Factory.
func (nativeXDPFactory) Name() string { return "native-xdp" }

// New implements Factory.
func (nativeXDPFactory) New(tb TB, s Setup) (DUT, error) {
	v, err := newVeth(s)
	if err != nil {
		return nil, fmt.Errorf("native-xdp: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			v.close()
		}
	}()
	if err := v.dut.DelAddr(); err != nil {
		return nil, fmt.Errorf("native-xdp: address off A: %w", err)
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
		return nil, fmt.Errorf("native-xdp: %w", err)
	}
	wfio, isW := fio.(nativeFrameIO)
	if !isW {
		opts.Close()
		return nil, fmt.Errorf("native-xdp: the AF_XDP FrameIO cannot Wait")
	}
	d, err := newNativeDUT(wfio, s, v.dut.Addr, v.dut.Prefix.Bits(), v.bench.Addr, v.bench.MAC)
	if err != nil {
		opts.Close()
		return nil, fmt.Errorf("native-xdp: %w", err)
	}
	d.info = Info{Name: "native-xdp", Kind: KindNative, MAC: v.dut.MAC, BenchMAC: v.bench.MAC,
		Addr: v.dut.Addr, BenchAddr: v.bench.Addr, Spare: v.spare, MTU: fio.MTU(),
		Lacks: map[Cap]string{CapUDP: nativeLacks[CapUDP]}}
	d.link = v.link
	d.closeWire = func() error {
		err := opts.Close()
		if cerr := v.close(); err == nil {
			err = cerr
		}
		return err
	}
	tb.Logf("native-xdp: %s", fio.Stats().Mode)
	ok = true
	return d, nil
}
