// Command netbench runs the whole measurement: it makes two network
// namespaces joined by a veth pair (internal/testhost), or prepares two real
// ports cabled together, then for every kind and offered rate starts an echo
// in namespace B and a loadgen in namespace A, as separate processes pinned
// to different CPUs, then bisects each kind's capacity (--capacity N more
// rates per kind, between the largest that held and the lowest that
// saturated), and prints the table ("p50 / p99" round trip in
// microseconds, or "sat. <achieved rate>, <loss>"; "[loadgen]" where the
// load generator, not the path, was the limit; the capacity last). It
// writes results.json (every layer's counters of both ends),
// report.md (environment, preflight, table, per-cell counters), SVG plots
// of p50 and p99 against the offered rate, and the tools' logs.
//
//	netbench                                   # make bench: every kind built, 20k … 1.6M, 1 s warm-up, 5 s a point
//	netbench --kinds udp,tcp --rates 20k --duration 2s --json out.json
//	netbench --repeat 3                        # each cell 3 times, kinds interleaved; medians and spread
//	netbench --kinds udp,xdp --rates 20k,200k,800k --capacity 4   # up to 4 more rates per kind to narrow its capacity
//	netbench --kinds xdp --rates 20k --pcap /tmp/cap   # the raw kinds' frames in pcap files
//	netbench --kinds xdp,udp --queues 2 --rates 100k --poll yield   # two queues, pollers that sleep when idle
//	netbench --kinds xdp,udp --queues 1,2 --rates 100k,400k --poll yield   # each kind with 1 and 2 queues: the scaling table
//	netbench --kinds uring,uring+napi,uring+sqpoll --rates 20k,200k   # uring beside its options, each a row of its own
//	netbench --iface-a enp3s0f0 --iface-b enp3s0f1     # two real ports cabled together
//	netbench compare old/results.json new/results.json # ratios per cell
//	netbench report bench/results/X/results.json       # report.md and plots again
//
// It is one binary: it re-executes itself as "netbench echo …" and
// "netbench loadgen …" (the same flags as cmd/dgramio-echo and cmd/dgramio-loadgen), so it
// runs on a bare host with nothing but root, and "go run ./cmd/netbench"
// works.
//
// # Variants of uring
//
// --kinds also takes uring+sqpoll and uring+napi: kind uring with one of
// its options, measured as a row of its own beside plain uring (not run
// by default). In results.json their rows and cells keep kind "uring" and
// name the option in "variant" ("sqpoll", "napi"); the tables and
// report.md show "uring+sqpoll" and "uring+napi".
//
//   - uring+sqpoll: both tools with Config.URing.SQPoll, each tool's SQ
//     thread pinned (IORING_SETUP_SQ_AFF) to a CPU of its own, apart from
//     both pollers and, while there are others, from their hyperthread
//     siblings (--sqpoll-cpus L,E names them): 4 CPUs for one queue. On a
//     host that allows fewer, the row reads why ("needs 4 CPUs (2
//     pollers, 2 SQ threads); this host allows 2") and nothing is
//     measured: an SQ thread sharing a CPU with a busy poller measures the
//     scheduler. It runs with one queue only (one SQCPU for every queue).
//   - uring+napi: both tools with Config.URing.NAPI (NAPI busy polling,
//     Linux 6.9, for SO_BUSY_POLL's 50 µs). The kernel polls NAPI only
//     while a thread sleeps in io_uring_enter, so this row's echo sleeps
//     in Wait (poll yield) where row uring's spins on the CQ: the two rows
//     compare NAPI busy polling with plain CQ spinning (the loadgen, the
//     instrument, spins in both). On veth, GRO (rx-gro) is turned on at
//     both ends for this row's cells only and put back after each: without
//     it a veth socket has no NAPI ID and there is nothing to poll. The
//     report's notes say so; real ports are left as they are.
//
// Flags: --kinds, --rates, --duration, --warmup, --drain, --size,
// --batch, --queues (N, or a list such as 1,2,4: every kind runs with each
// number of queues, one poller per queue on both ends, and the report adds
// per-queue counters and a scaling table: rate(N), the highest achieved
// rate with N queues, and the efficiency rate(N) / (N × rate(1))), --poll
// busy|yield (busy: each poller spins on a CPU of its own, and a run that
// needs more CPUs than there are is refused; yield: pollers sleep when
// idle, so the tools run on a small host, and the report marks such rows
// "poll yield"), --repeat, --json FILE, --out DIR (default
// bench/results/<date>-<host>; "none" for nothing), --pcap DIR,
// --iface-a/--iface-b (real ports; B moves into a namespace of its own for
// the run) with --coalesce (rx-usecs, default 0) and --irq-cpus ("auto":
// away from the pollers and their hyperthread siblings), --xdp-frames,
// --xdp-ring and --dpdk-rx-desc (the DPDK kinds' RX ring: 256 by default,
// against AF_XDP's 2048), --wait (the same as --poll yield), --cpus L,E (or "L;E", the
// CPU lists of the loadgen's and the echo's queues), --sqpoll-cpus L,E,
// --port. A progress
// bar shows on a terminal. See package internal/bench/cli.
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
		// "compare" and "report" are netbench's own subcommands.
	}
	os.Exit(cli.NetbenchMain(os.Args[1:], os.Stdout, os.Stderr))
}
