//go:build !dpdk

package faulttest

import "github.com/dgramio/dgramio/internal/core"

// testKinds are the kinds this build tests. The DPDK kinds are tested in
// the build with tag dpdk (kinds_dpdk_test.go), the others here, so that
// make test's second pass (-tags dpdk) does not run them twice.
var testKinds = []string{core.KindUDP, core.KindURing, core.KindXDP, core.KindTCP, core.KindTCPXDP}

// xdpKinds are the kinds over AF_XDP whose XDP program a crash may leave
// behind.
var xdpKinds = []string{core.KindXDP, core.KindTCPXDP}
