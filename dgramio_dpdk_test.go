//go:build dpdk

package dgramio_test

func init() {
	builtKinds["dpdk"] = true
	builtKinds["tcp-dpdk"] = true
}
