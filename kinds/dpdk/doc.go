// Package dpdk registers kind "dpdk" with dgramio.New and dgramio.NewGroup:
// raw Ethernet/IPv4/UDP frames over a DPDK port (build tag dpdk).
// Import it for its effect:
//
//	import _ "github.com/dgramio/dgramio/kinds/dpdk"
package dpdk
