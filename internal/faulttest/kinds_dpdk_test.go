//go:build dpdk

package faulttest

import (
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
)

// testKinds are the kinds this build tests: with tag dpdk, the DPDK kinds
// only (the others ran in the build without the tag).
var testKinds = names(dgramio.KindDPDK, dgramio.KindTCPDPDK)

// xdpKinds are the kinds over AF_XDP whose XDP program a crash may leave
// behind: DPDK's default device is a net_af_xdp vdev.
var xdpKinds = names(dgramio.KindDPDK, dgramio.KindTCPDPDK)

// ringKinds are the kinds whose rings TestFaultFullTxRing and TestFaultEmptyFillRing shrink.
var ringKinds = names(dgramio.KindDPDK)

// smallRings gives cfg rings of a few dozen descriptors.
func smallRings(cfg *dgramio.Config) {
	cfg.DPDK.RxDesc = 64
	cfg.DPDK.TxDesc = 64
}

// rawCaps are the capabilities the raw kinds of this build need as a user
// other than root: DPDK 22.11's net_af_xdp cannot create its socket
// without CAP_SYS_ADMIN even with CAP_NET_RAW, CAP_IPC_LOCK, CAP_BPF and
// CAP_NET_ADMIN (seen on Linux 6.18), and with CAP_SYS_ADMIN it needs no
// CAP_BPF.
var rawCaps = []uintptr{unix.CAP_NET_RAW, unix.CAP_IPC_LOCK, unix.CAP_NET_ADMIN, unix.CAP_SYS_ADMIN}
