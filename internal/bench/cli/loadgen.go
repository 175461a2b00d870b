package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/bench/load"
	"github.com/dgramio/dgramio/internal/core"
)

// LoadFile is the JSON a load generator writes with --json.
type LoadFile = ToolFile[load.LoadResult]

// LoadgenMain is the load generator: it opens a client of --kind to
// --dst:--port, sends --size-byte messages at --rate for --warmup then
// --duration without waiting for answers, keeps receiving for --drain, and
// prints p50/p99/p99.9/max of the round trip measured from each message's
// schedule, the achieved rate, and its counters. With --json it writes the
// whole result. If the backend cannot be opened it prints "failed <class>:
// <error>" on stdout and returns 2; a run that fails midway returns 1.
//
// With --queues N (N > 1) it opens the kind as a group (dgramio.NewGroup):
// one poller per queue, pinned to its CPU of --cpus, each a flow of its
// own (its own socket, source port or connection) that sends the run's
// messages g with g mod N = q (--rate/N each, the queues' messages
// interleaved in one schedule) and matches the answers to them; the
// result merges the queues' histograms and holds each queue's share
// (LoadResult.PerQueue) and the group's counters. --poll yield (alias
// --wait) makes the pollers sleep when idle.
//
// Kind uring takes --sqpoll-cpu N and --napi, as the echo does.
func LoadgenMain(args []string, stdout, stderr io.Writer) int {
	return RunLoadgen(context.Background(), args, stdout, stderr)
}

// RunLoadgen is LoadgenMain that also stops when ctx ends.
func RunLoadgen(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runLoadgen(ctx, args, stdout, stderr, defaultOpeners())
}

// runLoadgen is RunLoadgen opening its backends with op.
func runLoadgen(ctx context.Context, args []string, stdout, stderr io.Writer, op openers) int {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tf := addToolFlags(fs, toolUsage{
		port:   "the echo's UDP/TCP port",
		queues: "queues, one poller and one flow each (dgramio.NewGroup when more than 1); the rate is divided among them",
		poll:   "busy (spin, a CPU per poller; the default) or yield (sleep when idle, for machines with too few CPUs)",
		batch:  "messages per Flush and per Rx",
	})
	dst := fs.String("dst", "", "the echo's IPv4 address, with its port (198.18.0.2:5000) or at --port (198.18.0.0/15 or loopback)")
	rateS := fs.String("rate", "20k", "offered rate, messages per second (20k, 1.6M)")
	duration := fs.Duration("duration", 5e9, "measured time")
	warmup := fs.Duration("warmup", 1e9, "warm-up, sent but not measured")
	drain := fs.Duration("drain", load.DefaultDrain, "time to wait for answers after the last send")
	size := fs.Int("size", load.DefaultSize, "message size in bytes")
	dstMAC := fs.String("dst-mac", "", "the echo's MAC address on the raw kinds (Config.DstMAC; empty: resolved by the neighbour table or ARP)")
	jsonPath := fs.String("json", "", "write the result as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	out := LoadFile{ToolHeader: tf.header()}
	fail := failer("loadgen", stdout, stderr, *jsonPath, &out.Failure, &out)
	if fs.NArg() != 0 {
		return fail(ClassConfig, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	rate, err := bench.ParseRate(*rateS)
	if err != nil {
		return fail(ClassConfig, err)
	}
	dstAP, err := parseDest("dst", *dst)
	if err != nil {
		return fail(ClassConfig, err)
	}
	if !dstAP.Addr().IsValid() {
		return fail(ClassConfig, fmt.Errorf("--dst: the echo's address is required"))
	}
	if *size < load.HeaderLen {
		return fail(ClassConfig, fmt.Errorf("--size %d: must be at least %d", *size, load.HeaderLen))
	}
	var mac net.HardwareAddr
	if *dstMAC != "" {
		if mac, err = net.ParseMAC(*dstMAC); err != nil {
			return fail(ClassConfig, fmt.Errorf("--dst-mac: %w", err))
		}
	}
	cfg, err := tf.config(core.RoleClient, &out.ToolHeader)
	if err != nil {
		return fail(ClassConfig, err)
	}
	cfg.Dests, cfg.DstMAC = []netip.AddrPort{dstAP}, mac

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	lo := load.LoadOptions{
		Rate: rate, Warmup: *warmup, Duration: *duration, Drain: *drain,
		Size: *size, Batch: cfg.TxBatch, Wait: out.Wait,
	}
	if out.Queues > 1 {
		cfg.Queues, cfg.CPUs = out.Queues, out.CPUs
	}
	res, runErr, openErr := loadOnce(ctx, op, cfg, out.CPU, lo, stderr)
	if openErr != nil {
		return fail(Classify(cfg.Kind, openErr), openErr)
	}
	status := 0
	if runErr != nil {
		fmt.Fprintln(stderr, "loadgen:", runErr)
		status = 1
	}
	out.Result = res
	if res != nil {
		printLoad(stdout, stderr, string(cfg.Kind), rate, res)
	}
	if err := writeJSON(*jsonPath, &out); err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		status = 1
	}
	return status
}

// loadOnce runs the load generator on one backend, or on a group of
// cfg.Queues queues (on the CPUs of cfg.CPUs), and returns its result
// with the counters as Close left them; openErr when nothing could be
// opened.
func loadOnce(ctx context.Context, op openers, cfg core.Config, cpu int, lo load.LoadOptions, stderr io.Writer) (res *load.LoadResult, runErr, openErr error) {
	if cfg.Queues > 1 {
		return loadGroup(ctx, op.group, cfg, lo)
	}
	final, runErr, openErr := runSingle(op, cfg, cpu, "loadgen", stderr, func(b core.Backend) (err error) {
		res, err = load.Load(ctx, b, lo)
		return err
	})
	if res != nil {
		res.Stats = final
	}
	return res, runErr, openErr
}

// runSingle opens one backend of cfg, its poller pinned to cpu (-1: not
// pinned), runs run on it and closes it. final is the backend's counters
// as Close left them: Close counts what it found undelivered (frames left
// in a ring, records still staged). openErr says why nothing could be
// opened; a failed Close is reported on stderr, prefixed with tool, when
// run did not fail first.
func runSingle(op openers, cfg core.Config, cpu int, tool string, stderr io.Writer, run func(b core.Backend) error) (final core.Stats, runErr, openErr error) {
	cpus, err := pin(cfg, cpu)
	if err != nil {
		return core.Stats{}, nil, err
	}
	cfg.CPUs = cpus
	b, err := op.single(cfg)
	if err != nil {
		return core.Stats{}, nil, err
	}
	runErr = run(b)
	if cerr := b.Close(); cerr != nil && runErr == nil {
		fmt.Fprintf(stderr, "%s: close: %v\n", tool, cerr)
	}
	return b.Stats(), runErr, nil
}

// printLoad prints the result's line on stdout (and each queue's), the
// counters on stderr.
func printLoad(stdout, stderr io.Writer, kind string, rate float64, res *load.LoadResult) {
	c := bench.NewCell(kind, res, nil)
	c.Unaccounted = 0 // the conservation needs the echo's counters too: netbench has them
	fmt.Fprintf(stdout, "%s %s: %s  (p50 %s p99 %s p99.9 %s max %s µs; lag p99 %s µs; achieved %s/s; offered %d sent %d received %d lost %d not sent %d late %d)\n",
		kind, bench.FormatRate(rate), c.Format(),
		bench.FormatUs(res.RTT.P50Us), bench.FormatUs(res.RTT.P99Us), bench.FormatUs(res.RTT.P999Us), bench.FormatUs(res.RTT.MaxUs),
		bench.FormatUs(res.Lag.P99Us), bench.FormatRate(res.AchievedRate),
		res.Offered, res.Sent, res.Received, res.Lost, res.NotSent, res.Late)
	fmt.Fprint(stderr, formatStats("loadgen", &res.Stats, res.Layers()))
	for _, p := range res.PerQueue {
		fmt.Fprintf(stdout, "  queue %d (whole run): sent %d received %d other_queue %d reordered %d; p50 %s p99 %s µs; rx_delivered %d tx_sent %d lost %d\n",
			p.Queue, p.Total.Sent, p.Total.Received, p.Total.OtherQueue, p.Total.Reordered, bench.FormatUs(p.RTT.P50Us), bench.FormatUs(p.RTT.P99Us),
			p.Stats.RxDelivered, p.Stats.TxSent, p.Stats.Lost())
	}
}

// loadGroup is the load generator with several queues (cfg.Queues > 1):
// each queue's poller runs Load on its share of one schedule, which starts
// once every queue is open. It returns the merged result and the first
// error of a queue, or openErr when the group or a queue could not be
// opened (nothing ran).
func loadGroup(ctx context.Context, newGroup func(core.Config) (Group, error), cfg core.Config, lo load.LoadOptions) (res *load.LoadResult, runErr, openErr error) {
	g, err := newGroup(cfg)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err := g.Close(); err != nil && runErr == nil && openErr == nil {
			runErr = fmt.Errorf("close: %w", err)
		}
	}()
	lo.Queues = cfg.Queues
	for lo.RunID == 0 {
		lo.RunID = rand.Uint32()
	}
	parts := make([]*load.LoadResult, cfg.Queues)
	errs := make([]error, cfg.Queues)
	total, final, err := runGroup(g, cfg.Queues, func() {
		// Every queue is open: the schedule starts shortly, the same for all.
		lo.Start = time.Now().Add(groupStartDelay)
	}, func(q int, b core.Backend) {
		o := lo
		o.Queue = q
		parts[q], errs[q] = load.Load(ctx, b, o)
	})
	if parts[0] == nil {
		// No queue ran: one could not be opened, or Load refused the
		// options.
		if err == nil {
			err = errs[0]
		}
		return nil, nil, err
	}
	for q, e := range errs {
		if e != nil && runErr == nil {
			runErr = fmt.Errorf("queue %d: %w", q, e)
		}
		if parts[q] == nil {
			return nil, runErr, nil
		}
	}
	for q, p := range parts {
		p.Stats = final[q] // as each queue's Close left them
	}
	res = load.MergeLoads(parts)
	res.Stats = total
	if runErr == nil && err != nil {
		runErr = err
	}
	return res, runErr, nil
}

// groupStartDelay is how long after the last queue opened a group's
// schedule starts: time for every poller to enter its loop.
const groupStartDelay = 20 * time.Millisecond
