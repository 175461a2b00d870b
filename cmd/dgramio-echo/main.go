// Command dgramio-echo reflects every message it receives back to its sender, on
// any dgramio kind: the far end of a measurement by dgramio-loadgen.
//
//	dgramio-echo --kind udp --local 198.18.0.2 --port 5000 --cpu 1 [--wait] [--stats echo.json]
//	dgramio-echo --kind xdp --iface veth0 --local 198.18.0.2 --queues 2 --cpus 0,1 --poll yield
//	dgramio-echo --kind uring --local 198.18.0.2 --cpu 1 --sqpoll-cpu 3
//	dgramio-echo --kind uring --local 198.18.0.2 --cpu 1 --napi --poll yield
//
// With --queues N it opens the kind as a group of N queues
// (dgramio.NewGroup), one poller per queue pinned to its CPU of --cpus,
// and its JSON holds each queue's counters beside the group's. --poll busy
// (the default) spins, a CPU per poller; --poll yield (or --wait) sleeps
// when idle.
//
// It serves until SIGINT or SIGTERM, then prints its counters (the
// backend's Stats and its own) and writes them as JSON with --stats. It
// busy-polls on the pinned CPU by default; --wait sleeps in the backend's
// Wait when idle, for machines with too few CPUs. --pcap PREFIX makes the
// raw kinds write every frame to PREFIX-tx.pcap and PREFIX-rx.pcap
// (Config.Pcap); --xdp-frames and --xdp-ring size the AF_XDP kinds' UMEM
// and rings, --dpdk-rx-desc the DPDK kinds' RX ring. Kind uring takes --sqpoll-cpu N (SQPOLL, the kernel's SQ
// thread pinned to CPU N, which must differ from --cpu) and --napi (NAPI
// busy polling, Linux 6.9; it acts while the poller sleeps in Wait, so use
// it with --poll yield, and on veth only with GRO on at the receiving end).
// --framing raw makes a stream kind (tcp, tcp-xdp, tcp-dpdk) reflect the
// bytes of each connection as they came (Config.FramingRaw) instead of
// u16 records (the default); a u16 client's records come back whole
// either way. See package internal/bench/cli for the flags.
//
// See package internal/bench/cli for the flags, docs/tools.md for the
// whole list.
//
// Exit status, as iperf3's: 0 a run that measured (stopped by a signal or
// --max-time), 1 a run that could not (a kind this host cannot open, a
// failure while serving), 2 a usage error (a bad flag, said before
// anything starts). --help prints the flags and exits 0.
package main

import (
	"os"

	"github.com/dgramio/dgramio/internal/bench/cli"
)

func main() { os.Exit(cli.EchoMain(os.Args[1:], os.Stdout, os.Stderr)) }
