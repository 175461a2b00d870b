// Command dgramio-loadgen offers messages at a fixed rate to an echo without
// waiting for answers (open loop) and measures the round trip from each
// message's scheduled send time, so a sender that falls behind shows up as
// latency:
//
//	dgramio-loadgen --kind udp --dst 198.18.0.2 --port 5000 --rate 200k --warmup 1s --duration 5s --cpu 0 [--json out.json]
//
// It prints p50/p99/p99.9/max, the sender's lag, the achieved rate, the
// counts (offered, sent, received, lost, not sent for back-pressure) and
// its counters, and writes everything as JSON with --json. --pcap PREFIX,
// --xdp-frames, --xdp-ring and --dpdk-rx-desc are as for echo. With --queues N it opens the
// kind as a group of N queues, one poller and one flow each (pinned to its
// CPU of --cpus), which share the run's schedule (--rate/N each); it
// prints each queue's counts and latency too, and counts answers that
// reached another queue than their message's (other_queue, a loss).
// --poll yield (or --wait) makes the pollers sleep when idle. Kind uring
// takes --sqpoll-cpu N and --napi, as for echo. See package
// internal/bench/cli for the flags, docs/tools.md for the whole list.
//
// Exit status, as iperf3's: 0 a run that measured, 1 a run that could not
// (the peer unreachable, everything lost, a connection refused, a kind
// this host cannot open), 2 a usage error (a bad flag, said before
// anything starts). --help prints the flags and exits 0.
package main

import (
	"os"

	"github.com/dgramio/dgramio/internal/bench/cli"
)

func main() { os.Exit(cli.LoadgenMain(os.Args[1:], os.Stdout, os.Stderr)) }
