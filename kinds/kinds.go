// Package kinds registers every kind this build has with dgramio.New and
// dgramio.NewGroup: udp, uring, tcp, xdp and tcp-xdp, and dpdk and
// tcp-dpdk (which, without the build tag dpdk, return ErrNoDPDK). Import
// it for its effect:
//
//	import _ "github.com/dgramio/dgramio/kinds"
//
// A program that needs fewer kinds imports only their packages
// (kinds/udp, kinds/uring, kinds/tcp, kinds/xdp, kinds/tcpxdp,
// kinds/dpdk, kinds/tcpdpdk) and links nothing of the others: kind udp
// alone links no AF_XDP, eBPF, netlink or userspace TCP code.
package kinds

import (
	_ "github.com/dgramio/dgramio/kinds/dpdk"
	_ "github.com/dgramio/dgramio/kinds/tcp"
	_ "github.com/dgramio/dgramio/kinds/tcpdpdk"
	_ "github.com/dgramio/dgramio/kinds/tcpxdp"
	_ "github.com/dgramio/dgramio/kinds/udp"
	_ "github.com/dgramio/dgramio/kinds/uring"
	_ "github.com/dgramio/dgramio/kinds/xdp"
)
