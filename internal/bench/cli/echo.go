package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/core"
)

// EchoFile is the JSON an echo writes with --stats.
type EchoFile struct {
	Kind string `json:"kind"`
	CPU  int    `json:"cpu"`
	Wait bool   `json:"wait"`
	// Queues, Poll and CPUs are --queues, --poll and --cpus (with one
	// queue, CPUs is the one CPU or empty).
	Queues int    `json:"queues,omitempty"`
	Poll   string `json:"poll,omitempty"`
	CPUs   []int  `json:"cpus,omitempty"`
	// SQPollCPU and NAPI are --sqpoll-cpu (when given) and --napi, the
	// options of kind uring.
	SQPollCPU *int              `json:"sqpoll_cpu,omitempty"`
	NAPI      bool              `json:"napi,omitempty"`
	Result    *bench.EchoResult `json:"result,omitempty"`
	Failure   *Failure          `json:"failure,omitempty"`
}

// EchoMain is the echo tool: it opens a server of --kind on --local:--port,
// prints "ready <mode>" on stdout, and reflects every message back to its
// sender until SIGINT or SIGTERM (or --max-time). Then it prints its
// counters on stderr and writes them as JSON to --stats. If the backend
// cannot be opened it prints "failed <class>: <error>" on stdout, writes
// the failure to --stats and returns 2. It returns the exit status.
//
// With --queues N (N > 1) it opens the kind as a group (dgramio.NewGroup):
// one poller per queue, each on its own goroutine and OS thread, pinned
// to its CPU of --cpus, reflecting what its queue receives; the JSON
// holds the group's counters and each queue's (EchoResult.PerQueue).
// --poll yield (alias --wait) makes the pollers sleep in Wait when idle;
// busy polling needs a CPU per poller (the group refuses more).
//
// Kind uring takes --sqpoll-cpu N (Config.URing.SQPoll with SQCPU N: a
// kernel thread pinned to CPU N takes the submissions; N must differ from
// the poller's CPU) and --napi (Config.URing.NAPI: NAPI busy polling,
// Linux 6.9, which acts while the poller sleeps in Wait, so pair it with
// --poll yield); any other kind refuses them.
func EchoMain(args []string, stdout, stderr io.Writer) int {
	return RunEcho(context.Background(), args, stdout, stderr)
}

// RunEcho is EchoMain that also stops when ctx ends.
func RunEcho(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("kind", "udp", "packet path: udp, uring, xdp, dpdk, tcp, tcp-xdp, tcp-dpdk")
	local := fs.String("local", "", "our IPv4 address (198.18.0.0/15 or loopback); required for raw kinds")
	port := fs.Uint("port", 5000, "UDP/TCP port to serve")
	iface := fs.String("iface", "", "network interface (raw kinds)")
	cpuN := fs.Int("cpu", -1, "CPU to pin the poller to (-1: not pinned)")
	queues := fs.Int("queues", 1, "queues, one poller each (dgramio.NewGroup when more than 1)")
	cpuList := fs.String("cpus", "", "CPUs of the queues' pollers, one per queue, in queue order (\"0,1\"; a CPU may repeat with --poll yield)")
	poll := fs.String("poll", "", "busy (spin on Rx, a CPU per poller; the default) or yield (sleep in Wait when idle, for machines with too few CPUs)")
	wait := fs.Bool("wait", false, "the same as --poll yield")
	batch := fs.Int("batch", bench.DefaultBatch, "messages per Rx and per send batch")
	maxDgram := fs.Int("max-datagram", 0, "largest message accepted (0: the kind's default)")
	pcap := fs.String("pcap", "", "capture prefix: the raw kinds write every frame to <prefix>-tx.pcap and <prefix>-rx.pcap (Config.Pcap)")
	xdpFrames := fs.Int("xdp-frames", 0, "UMEM frames of the AF_XDP kinds (0: the default)")
	xdpRing := fs.Int("xdp-ring", 0, "ring size of the AF_XDP kinds (0: the default)")
	dpdkRxDesc := fs.Int("dpdk-rx-desc", 0, "RX ring size of the DPDK kinds (Config.DPDK.RxDesc; 0: the default, 256)")
	dpdkVDev := fs.String("dpdk-vdev", "", "DPDK virtual device of the DPDK kinds (Config.DPDK.VDev; empty: net_af_xdp on --iface)")
	uf := addURingFlags(fs)
	stats := fs.String("stats", "", "write the counters as JSON to this file on exit")
	maxTime := fs.Duration("max-time", 0, "stop after this long even without a signal (0: never)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	out := EchoFile{Kind: *kind, CPU: *cpuN, Wait: *wait, Queues: *queues}
	fail := func(class string, err error) int {
		out.Failure = &Failure{Class: class, Error: err.Error()}
		fmt.Fprintf(stdout, "failed %s: %v\n", class, err)
		if werr := writeJSON(*stats, &out); werr != nil {
			fmt.Fprintln(stderr, "echo:", werr)
		}
		return 2
	}
	if fs.NArg() != 0 {
		return fail(ClassConfig, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	uf.record(&out.SQPollCPU, &out.NAPI)
	localIP, err := parseAddr("local", *local)
	if err != nil {
		return fail(ClassConfig, err)
	}
	if *port == 0 || *port > 65535 {
		return fail(ClassConfig, fmt.Errorf("--port %d: must be 1..65535", *port))
	}
	mode, err := pollMode(*poll, *wait)
	if err != nil {
		return fail(ClassConfig, err)
	}
	qcpus, err := queueCPUs(*queues, *cpuN, *cpuList)
	if err != nil {
		return fail(ClassConfig, err)
	}
	out.Poll, out.CPUs, out.Wait = mode, qcpus, mode == core.PollYield
	if *queues == 1 && *cpuN < 0 && len(qcpus) == 1 {
		*cpuN = qcpus[0]
		out.CPU = *cpuN
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *maxTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *maxTime)
		defer cancel()
	}

	cfg := core.Config{
		Kind:        *kind,
		Role:        core.RoleServer,
		Iface:       *iface,
		LocalIP:     localIP,
		Port:        uint16(*port),
		MaxDatagram: *maxDgram,
		TxBatch:     *batch,
		RxBatch:     *batch,
		Pcap:        *pcap,
		Poll:        mode,
	}
	cfg.XDP.Frames, cfg.XDP.RingSize = *xdpFrames, *xdpRing
	cfg.DPDK.VDev, cfg.DPDK.RxDesc = *dpdkVDev, *dpdkRxDesc
	if err := uf.apply(&cfg); err != nil {
		return fail(ClassConfig, err)
	}
	eo := bench.EchoOptions{Batch: *batch, Wait: mode == core.PollYield}
	if *queues > 1 {
		cfg.Queues, cfg.CPUs = *queues, qcpus
		return echoGroup(ctx, cfg, eo, &out, *stats, fail, stdout, stderr)
	}
	cpus, err := pin(*kind, *cpuN)
	if err != nil {
		return fail(Classify(*kind, err), err)
	}
	cfg.CPUs = cpus
	b, err := Open(cfg)
	if err != nil {
		return fail(Classify(*kind, err), err)
	}
	st := b.Stats()
	fmt.Fprintf(stdout, "ready %s\n", st.Mode)
	if f, ok := stdout.(interface{ Sync() error }); ok {
		_ = f.Sync()
	}

	start := time.Now()
	res, runErr := bench.Echo(ctx, b, eo)
	if cerr := b.Close(); cerr != nil && runErr == nil {
		fmt.Fprintln(stderr, "echo: close:", cerr)
	}
	if res != nil {
		// The counters as Close left them: it counts what it found
		// undelivered (frames left in a ring, records still staged).
		res.Stats = b.Stats()
	}
	out.Result = res
	status := 0
	if runErr != nil {
		fmt.Fprintln(stderr, "echo:", runErr)
		status = 1
	}
	if res != nil {
		fmt.Fprintf(stderr, "echo ran %v\n%s", time.Since(start).Round(time.Millisecond), formatStats("echo", &res.Stats, res.Layers()))
	}
	if err := writeJSON(*stats, &out); err != nil {
		fmt.Fprintln(stderr, "echo:", err)
		status = 1
	}
	return status
}

// echoGroup is the echo with several queues (cfg.Queues > 1).
func echoGroup(ctx context.Context, cfg core.Config, eo bench.EchoOptions, out *EchoFile, statsPath string,
	fail func(string, error) int, stdout, stderr io.Writer) int {
	g, err := NewGroup(cfg)
	if err != nil {
		return fail(Classify(cfg.Kind, err), err)
	}
	defer func() {
		if err := g.Close(); err != nil {
			fmt.Fprintln(stderr, "echo: close:", err)
		}
	}()
	start := time.Now()
	parts := make([]*bench.EchoResult, cfg.Queues)
	errs := make([]error, cfg.Queues)
	total, final, err := runGroup(g, cfg.Queues, func() {
		fmt.Fprintf(stdout, "ready %s\n", g.Stats().Mode)
		if f, ok := stdout.(interface{ Sync() error }); ok {
			_ = f.Sync()
		}
	}, func(q int, b core.Backend) {
		parts[q], errs[q] = bench.Echo(ctx, b, eo)
	})
	if parts[0] == nil {
		// No queue ran: one could not be opened, or Echo refused the
		// options.
		if err == nil {
			err = errs[0]
		}
		return fail(Classify(cfg.Kind, err), err)
	}
	status := 0
	if err != nil {
		fmt.Fprintln(stderr, "echo:", err)
	}
	for q, e := range errs {
		if e != nil {
			fmt.Fprintf(stderr, "echo: queue %d: %v\n", q, e)
			status = 1
		}
	}
	for q, p := range parts {
		if p != nil && q < len(final) {
			p.Stats = final[q] // as each queue's Close left them
		}
	}
	res := bench.MergeEchoes(parts)
	res.Stats = total
	out.Result = res
	fmt.Fprintf(stderr, "echo ran %v\n%s", time.Since(start).Round(time.Millisecond), formatStats("echo", &res.Stats, res.Layers()))
	for _, p := range res.PerQueue {
		fmt.Fprintf(stderr, "echo queue %d: received %d reflected %d dropped %d; rx_delivered %d tx_sent %d lost %d\n",
			p.Queue, p.Received, p.Reflected, p.Dropped, p.Stats.RxDelivered, p.Stats.TxSent, p.Stats.Lost())
	}
	if err := writeJSON(statsPath, out); err != nil {
		fmt.Fprintln(stderr, "echo:", err)
		status = 1
	}
	return status
}
