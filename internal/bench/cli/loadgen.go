package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/core"
)

// LoadFile is the JSON a load generator writes with --json.
type LoadFile struct {
	Kind    string            `json:"kind"`
	CPU     int               `json:"cpu"`
	Wait    bool              `json:"wait"`
	Result  *bench.LoadResult `json:"result,omitempty"`
	Failure *Failure          `json:"failure,omitempty"`
}

// LoadgenMain is the load generator: it opens a client of --kind to
// --dst:--port, sends --size-byte messages at --rate for --warmup then
// --duration without waiting for answers, keeps receiving for --drain, and
// prints p50/p99/p99.9/max of the round trip measured from each message's
// schedule, the achieved rate, and its counters. With --json it writes the
// whole result. If the backend cannot be opened it prints "failed <class>:
// <error>" on stdout and returns 2; a run that fails midway returns 1.
func LoadgenMain(args []string, stdout, stderr io.Writer) int {
	return RunLoadgen(context.Background(), args, stdout, stderr)
}

// RunLoadgen is LoadgenMain that also stops when ctx ends.
func RunLoadgen(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("kind", "udp", "packet path: udp, uring, xdp, dpdk, tcp, tcp-xdp, tcp-dpdk")
	local := fs.String("local", "", "our IPv4 address (198.18.0.0/15 or loopback); required for raw kinds")
	dst := fs.String("dst", "", "the echo's IPv4 address (198.18.0.0/15 or loopback)")
	port := fs.Uint("port", 5000, "the echo's UDP/TCP port")
	iface := fs.String("iface", "", "network interface (raw kinds)")
	cpuN := fs.Int("cpu", -1, "CPU to pin the poller to (-1: not pinned)")
	wait := fs.Bool("wait", false, "sleep in Wait when idle instead of busy polling")
	rateS := fs.String("rate", "20k", "offered rate, messages per second (20k, 1.6M)")
	duration := fs.Duration("duration", 5e9, "measured time")
	warmup := fs.Duration("warmup", 1e9, "warm-up, sent but not measured")
	drain := fs.Duration("drain", bench.DefaultDrain, "time to wait for answers after the last send")
	size := fs.Int("size", bench.DefaultSize, "message size in bytes")
	batch := fs.Int("batch", bench.DefaultBatch, "messages per Flush and per Rx")
	maxDgram := fs.Int("max-datagram", 0, "largest message accepted (0: the kind's default)")
	pcap := fs.String("pcap", "", "capture prefix: the raw kinds write every frame to <prefix>-tx.pcap and <prefix>-rx.pcap (Config.Pcap)")
	xdpFrames := fs.Int("xdp-frames", 0, "UMEM frames of the AF_XDP kinds (0: the default)")
	xdpRing := fs.Int("xdp-ring", 0, "ring size of the AF_XDP kinds (0: the default)")
	jsonPath := fs.String("json", "", "write the result as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	out := LoadFile{Kind: *kind, CPU: *cpuN, Wait: *wait}
	fail := func(class string, err error) int {
		out.Failure = &Failure{Class: class, Error: err.Error()}
		fmt.Fprintf(stdout, "failed %s: %v\n", class, err)
		if werr := writeJSON(*jsonPath, &out); werr != nil {
			fmt.Fprintln(stderr, "loadgen:", werr)
		}
		return 2
	}
	if fs.NArg() != 0 {
		return fail(ClassConfig, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	rate, err := bench.ParseRate(*rateS)
	if err != nil {
		return fail(ClassConfig, err)
	}
	localIP, err := parseAddr("local", *local)
	if err != nil {
		return fail(ClassConfig, err)
	}
	dstIP, err := parseAddr("dst", *dst)
	if err != nil {
		return fail(ClassConfig, err)
	}
	if !dstIP.IsValid() {
		return fail(ClassConfig, fmt.Errorf("--dst: the echo's address is required"))
	}
	if *port == 0 || *port > 65535 {
		return fail(ClassConfig, fmt.Errorf("--port %d: must be 1..65535", *port))
	}
	if *size < bench.HeaderLen {
		return fail(ClassConfig, fmt.Errorf("--size %d: must be at least %d", *size, bench.HeaderLen))
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cpus, err := pin(*cpuN)
	if err != nil {
		return fail(Classify(*kind, err), err)
	}
	cfg := core.Config{
		Kind:        *kind,
		Role:        core.RoleClient,
		Iface:       *iface,
		LocalIP:     localIP,
		Dests:       []netip.Addr{dstIP},
		Port:        uint16(*port),
		MaxDatagram: *maxDgram,
		TxBatch:     *batch,
		RxBatch:     *batch,
		CPUs:        cpus,
		Pcap:        *pcap,
	}
	cfg.XDP.Frames, cfg.XDP.RingSize = *xdpFrames, *xdpRing
	b, err := Open(cfg)
	if err != nil {
		return fail(Classify(*kind, err), err)
	}
	res, runErr := bench.Load(ctx, b, bench.LoadOptions{
		Rate: rate, Warmup: *warmup, Duration: *duration, Drain: *drain,
		Size: *size, Batch: *batch, Wait: *wait,
	})
	if cerr := b.Close(); cerr != nil && runErr == nil {
		fmt.Fprintln(stderr, "loadgen: close:", cerr)
	}
	status := 0
	if runErr != nil {
		fmt.Fprintln(stderr, "loadgen:", runErr)
		status = 1
	}
	out.Result = res
	if res != nil {
		c := bench.NewCell(*kind, res, nil)
		c.Unaccounted = 0 // the conservation needs the echo's counters too: netbench has them
		fmt.Fprintf(stdout, "%s %s: %s  (p50 %s p99 %s p99.9 %s max %s µs; lag p99 %s µs; achieved %s/s; offered %d sent %d received %d lost %d not sent %d)\n",
			*kind, bench.FormatRate(rate), c.Format(),
			bench.FormatUs(res.RTT.P50Us), bench.FormatUs(res.RTT.P99Us), bench.FormatUs(res.RTT.P999Us), bench.FormatUs(res.RTT.MaxUs),
			bench.FormatUs(res.Lag.P99Us), bench.FormatRate(res.AchievedRate),
			res.Offered, res.Sent, res.Received, res.Lost, res.NotSent)
		fmt.Fprint(stderr, formatStats("loadgen", &res.Stats, res.Layers()))
	}
	if err := writeJSON(*jsonPath, &out); err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		status = 1
	}
	return status
}
