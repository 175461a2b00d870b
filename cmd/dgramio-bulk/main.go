// Command dgramio-bulk measures bulk transfer through the stream kinds:
// kernel tcp, tcp-xdp on the native engine and on netstack, tcp-dpdk
// where built. Each cell runs a server and a client process, each in a
// network namespace of its own at one end of a veth pair (or of the lossy
// wire, with --loss), over one or more connections, in one direction or
// both, and reports Gbit/s, each side's CPU time per GB, the
// retransmissions and the loss counters, with medians over --repeat and
// every row's ratio to kernel tcp in the same run; --out DIR writes the
// report and its plots (SVG) there, "dgramio-bulk plot results.json"
// draws the plots again. docs/bulk.md says how to read it.
// "dgramio-bulk connrate" measures connections per second instead, with
// kernel or native clients, and --hold N the memory of N idle
// connections (docs/memory.md).
//
// Exit status: 0 when every cell measured, 1 when one could not (or the
// run could not start: no root), 2 for a usage error (said on stderr
// before anything starts).
package main

import (
	"os"

	"github.com/dgramio/dgramio/internal/bench/bulk"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "side" {
		os.Exit(bulk.SideMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "connrate-side" {
		os.Exit(bulk.ConnRateSideMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "connrate" {
		os.Exit(bulk.ConnRateMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(bulk.Main(os.Args[1:], os.Stdout, os.Stderr))
}
