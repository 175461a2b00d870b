//go:build linux

package conformance

import (
	"fmt"
	"net/netip"

	"github.com/dgramio/dgramio"
)

// NativeXDP is the Factory of the native engine on the tcp-xdp path: a
// testhost pair as for OursXDP, the AF_XDP socket and XDP program that
// tcp.OpenXDP opens for tcp-xdp, and the native engine on it (fake
// clock), driven as for native-memio. The program gives the engine ARP
// and every frame to its address (all TCP ports, ICMP, UDP), so the IP
// cases run here too. For an IPv6 case (Setup.IPv6) the program is opened
// as tcp-xdp over IPv6 opens it, with the DUT's IPv6 address: it gives the
// engine every IPv6 frame to that address and the neighbour solicitations
// for it. Needs root and AF_XDP (Linux >= 5.9 for the bpf_link).
func NativeXDP() Factory { return nativeXDPFactory{} }

type nativeXDPFactory struct{}

// Name implements Factory.
func (nativeXDPFactory) Name() string { return "native-xdp" }

// New implements Factory.
func (nativeXDPFactory) New(tb TB, s Setup) (DUT, error) {
	v, fio, closeWire, err := openXDPWire("native-xdp", dgramio.TCPStackNative, s)
	if err != nil {
		return nil, err
	}
	var addr6, bench6 netip.Addr
	if s.IPv6 {
		addr6, bench6 = v.dut.Addr6, v.bench.Addr6
	}
	d, err := newNativeDUT(fio, s, v.dut.Addr, v.dut.Prefix.Bits(), v.bench.Addr, addr6, bench6, v.bench.MAC)
	if err != nil {
		closeWire()
		return nil, fmt.Errorf("native-xdp: %w", err)
	}
	d.info = Info{Name: "native-xdp", Kind: KindNative, MAC: v.dut.MAC, BenchMAC: v.bench.MAC,
		Addr: v.dut.Addr, BenchAddr: v.bench.Addr, Spare: v.spare, MTU: fio.MTU(),
		Addr6: addr6, BenchAddr6: bench6, Lacks: nativeLacks}
	if s.IPv6 {
		d.info.Spare6 = v.spare6
	}
	d.link = v.link
	d.closeWire = closeWire
	tb.Logf("native-xdp: %s", fio.Stats().Mode)
	return d, nil
}
