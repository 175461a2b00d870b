//go:build dpdk

package faulttest

import "github.com/dgramio/dgramio/internal/core"

// testKinds are the kinds this build tests: with tag dpdk, the DPDK kinds
// only (the others ran in the build without the tag).
var testKinds = []string{core.KindDPDK, core.KindTCPDPDK}

// xdpKinds are the kinds over AF_XDP whose XDP program a crash may leave
// behind: DPDK's default device is a net_af_xdp vdev.
var xdpKinds = []string{core.KindDPDK, core.KindTCPDPDK}

// ringKinds are the kinds whose rings TestFaultFullRings shrinks.
var ringKinds = []string{core.KindDPDK}

// smallRings gives cfg rings of a few dozen descriptors (and the vdev's
// UMEM, when it is net_af_xdp, few frames).
func smallRings(cfg *core.Config) {
	cfg.DPDK.RxDesc = 64
	cfg.DPDK.TxDesc = 64
	cfg.DPDK.Mbufs = 511
}
