//go:build linux

package conformance

import (
	"fmt"
	"net/netip"
)

// nativeXDPLacks is what the native engine on the tcp-xdp path cannot show.
var nativeXDPLacks = map[Cap]string{
	CapUDP:  nativeLacks[CapUDP],
	CapIPv6: "not served yet on this path: tcp.OpenXDP does not steer IPv6 to the AF_XDP socket (the XDP program's SetHost6 is not called), so IPv6 reaches A's kernel",
}

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
	v, fio, closeWire, err := openXDPWire("native-xdp", s)
	if err != nil {
		return nil, err
	}
	d, err := newNativeDUT(fio, s, v.dut.Addr, v.dut.Prefix.Bits(), v.bench.Addr, netip.Addr{}, netip.Addr{}, v.bench.MAC)
	if err != nil {
		closeWire()
		return nil, fmt.Errorf("native-xdp: %w", err)
	}
	d.info = Info{Name: "native-xdp", Kind: KindNative, MAC: v.dut.MAC, BenchMAC: v.bench.MAC,
		Addr: v.dut.Addr, BenchAddr: v.bench.Addr, Spare: v.spare, MTU: fio.MTU(),
		Lacks: nativeXDPLacks}
	d.link = v.link
	d.closeWire = closeWire
	tb.Logf("native-xdp: %s", fio.Stats().Mode)
	return d, nil
}
