//go:build dpdk

package bulk

// A DPDK build measures tcp-dpdk by default too.
func init() { DefaultRows = append(DefaultRows, "tcp-dpdk", "tcp-dpdk+netstack") }
