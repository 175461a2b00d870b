// Package tcpdpdk registers kind "tcp-dpdk" with dgramio.New and dgramio.NewGroup:
// the userspace TCP over a DPDK port (build tag dpdk).
// Import it for its effect:
//
//	import _ "github.com/dgramio/dgramio/kinds/tcpdpdk"
package tcpdpdk
