//go:build !dpdk

package faulttest

import (
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
)

// testKinds are the kinds this build tests. The DPDK kinds are tested in
// the build with tag dpdk (kinds_dpdk_test.go), the others here, so that
// make test's second pass (-tags dpdk) does not run them twice.
var testKinds = names(dgramio.KindUDP, dgramio.KindURing, dgramio.KindXDP, dgramio.KindTCP, dgramio.KindTCPXDP)

// xdpKinds are the kinds over AF_XDP whose XDP program a crash may leave
// behind.
var xdpKinds = names(dgramio.KindXDP, dgramio.KindTCPXDP)

// ringKinds are the kinds whose rings TestFaultFullTxRing and TestFaultEmptyFillRing shrink.
var ringKinds = names(dgramio.KindXDP)

// smallRings gives cfg rings of a few dozen frames.
func smallRings(cfg *dgramio.Config) {
	cfg.XDP.Frames = 64   // 32 to receive, 32 to transmit
	cfg.XDP.RingSize = 32 // each of the four rings
}

// rawCaps are the capabilities the raw kinds of this build need as a user
// other than root.
var rawCaps = []uintptr{unix.CAP_NET_RAW, unix.CAP_IPC_LOCK, unix.CAP_BPF, unix.CAP_NET_ADMIN}
