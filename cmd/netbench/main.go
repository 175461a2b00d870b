// Command netbench runs the whole measurement: it makes two network
// namespaces joined by a veth pair (internal/testhost), then for every kind
// and offered rate starts an echo in namespace B and a loadgen in namespace
// A, as separate processes pinned to different CPUs, and prints the table
// in the reference's format ("p50 / p99" round trip in microseconds, or
// "sat. <achieved rate>, <loss>"), with every layer's counters of both ends
// in the JSON report.
//
//	netbench                                   # every kind built, 20k … 1.6M, 1 s warm-up, 5 s a point
//	netbench --kinds udp,tcp --rates 20k --duration 2s --json out.json
//
// It is one binary: it re-executes itself as "netbench echo …" and
// "netbench loadgen …" (the same flags as cmd/echo and cmd/loadgen), so it
// runs on a bare host with nothing but root, and "go run ./cmd/netbench"
// works. Flags: --kinds, --rates, --duration, --warmup, --drain, --size,
// --batch, --queues, --json FILE, --out DIR (default
// bench/results/<date>-<host>: results.json, report.md, table.txt and the
// tools' logs; "none" for nothing), --iface-a/--iface-b (two real
// ports; not implemented yet), --wait (yielding mode for machines with too
// few CPUs), --cpus L,E, --port.
package main

import (
	"os"

	"github.com/dgramio/dgramio/internal/bench/cli"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "echo":
			os.Exit(cli.EchoMain(os.Args[2:], os.Stdout, os.Stderr))
		case "loadgen":
			os.Exit(cli.LoadgenMain(os.Args[2:], os.Stdout, os.Stderr))
		}
	}
	os.Exit(cli.NetbenchMain(os.Args[1:], os.Stdout, os.Stderr))
}
