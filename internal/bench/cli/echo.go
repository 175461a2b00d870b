package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench/load"
)

// EchoFile is the JSON an echo writes with --stats.
type EchoFile = ToolFile[load.EchoResult]

// EchoMain is the echo tool: it opens a server of --kind on --local:--port,
// prints "ready <mode>" on stdout, and reflects every message back to its
// sender until SIGINT or SIGTERM (or --max-time). Then it prints its
// counters on stderr and writes them as JSON to --stats. If the backend
// cannot be opened it prints "failed <class>: <error>" on stdout and
// writes the failure to --stats. It returns the exit status: ExitOK when
// it served until stopped, ExitUsage for a bad flag or setting (nothing
// opened), ExitFailed when the kind could not be opened or serving failed.
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
	return runEcho(ctx, args, stdout, stderr, defaultOpeners())
}

// runEcho is RunEcho opening its backends with op.
func runEcho(ctx context.Context, args []string, stdout, stderr io.Writer, op openers) int {
	fs := flag.NewFlagSet("dgramio-echo", flag.ContinueOnError)
	tf := addToolFlags(fs, toolUsage{
		port:   "UDP/TCP port to serve",
		queues: "queues, one poller each (dgramio.NewGroup when more than 1)",
		poll:   "busy (spin on Rx, a CPU per poller; the default) or yield (sleep in Wait when idle, for machines with too few CPUs)",
		batch:  "messages per Rx and per send batch",
	})
	stats := fs.String("stats", "", "write the counters as JSON to this file on exit (-: to stdout, after the ready line)")
	maxTime := durationFlag(fs, "max-time", 0, "stop after this long even without a signal, like `30s` (0: never)")
	framing := dgramio.FramingU16
	fs.Var(&framing, "framing", "stream kinds: u16 (u16 length-prefixed records, the default), u32 (u32 length-prefixed records) or raw (bytes as they came)")
	if status, done := parseFlags(fs, args, stdout, stderr); done {
		return status
	}
	out := EchoFile{ToolHeader: tf.header()}
	fail := failer("echo", &tf.kind, stdout, stderr, *stats, &out.Failure, &out)
	cfg, err := tf.config(dgramio.RoleServer, &out.ToolHeader)
	if err == nil {
		err = validate(cfg)
	}
	if err != nil {
		return fail(ClassConfig, err)
	}
	if cfg.Kind.IsStream() {
		cfg.Framing, cfg.Events = framing, true // the echo counts the connections' ends
	} else if framing != dgramio.FramingU16 {
		return fail(ClassConfig, fmt.Errorf("--framing %s: kind %s carries datagrams (framing applies to the stream kinds)", framing, cfg.Kind))
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *maxTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *maxTime)
		defer cancel()
	}

	eo := load.EchoOptions{Batch: cfg.TxBatch, Wait: out.Wait}
	if out.Queues > 1 {
		cfg.Queues, cfg.CPUs = out.Queues, out.CPUs
		return echoGroup(ctx, op.group, cfg, eo, &out, *stats, fail, stdout, stderr)
	}
	var res *load.EchoResult
	var start time.Time
	final, runErr, openErr := runSingle(op, cfg, out.CPU, "echo", stderr, func(b dgramio.Backend) (err error) {
		printReady(stdout, b.Stats().Mode)
		start = time.Now()
		defer watchStream("echo", cfg, b.Stats, stderr)()
		res, err = load.Echo(ctx, b, eo)
		return err
	})
	if openErr != nil {
		return fail(Classify(cfg.Kind, openErr), openErr)
	}
	if res != nil {
		res.Stats = final
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
	if err := writeResult(*stats, stdout, &out); err != nil {
		fmt.Fprintln(stderr, "echo:", err)
		status = 1
	}
	return status
}

// framingPeriod is how often the echo looks for records too long for
// its framing (watchFraming).
var framingPeriod = time.Second

// watchStream starts what watches a stream kind's counters for a client
// that does not fit the echo (watchChecksums on a raw kind, watchFraming
// in a length-prefixed framing), reading stats: one Backend's, or a
// group's sum over all its queues. The function it returns stops them and
// waits until they have; it may be called more than once.
func watchStream(tool string, cfg dgramio.Config, stats func() dgramio.Stats, stderr io.Writer) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	if cfg.Kind.IsStream() && cfg.Kind.IsRaw() {
		wg.Add(1)
		go func() { defer wg.Done(); watchChecksums(tool, stats, time.Second, stderr, quit) }()
	}
	if cfg.Kind.IsStream() && cfg.Framing != dgramio.FramingRaw {
		wg.Add(1)
		go func() {
			defer wg.Done()
			watchFraming(tool, stats, cfg.Framing, cfg.WithDefaults().MaxDatagram, framingPeriod, stderr, quit)
		}()
	}
	return sync.OnceFunc(func() { close(quit); wg.Wait() })
}

// printReady prints "ready <mode>" on stdout and syncs it (a file), so
// that whoever waits for the line sees it at once.
func printReady(stdout io.Writer, mode string) {
	fmt.Fprintf(stdout, "ready %s\n", mode)
	if f, ok := stdout.(interface{ Sync() error }); ok {
		_ = f.Sync()
	}
}

// echoGroup is the echo with several queues (cfg.Queues > 1).
func echoGroup(ctx context.Context, newGroup func(dgramio.Config) (Group, error), cfg dgramio.Config, eo load.EchoOptions, out *EchoFile, statsPath string,
	fail func(string, error) int, stdout, stderr io.Writer) int {
	g, err := newGroup(cfg)
	if err != nil {
		return fail(Classify(cfg.Kind, err), err)
	}
	defer func() {
		if err := g.Close(); err != nil {
			fmt.Fprintln(stderr, "echo: close:", err)
		}
	}()
	start := time.Now()
	parts := make([]*load.EchoResult, cfg.Queues)
	errs := make([]error, cfg.Queues)
	// The watchers read the sum over all queues (g.Stats), from ready
	// until the last queue's Echo returns, before the queues close.
	stopWatch := func() {}
	var running atomic.Int32
	running.Store(int32(cfg.Queues))
	total, final, err := runGroup(g, cfg.Queues, func() {
		printReady(stdout, g.Stats().Mode)
		stopWatch = watchStream("echo", cfg, g.Stats, stderr)
	}, func(q int, b dgramio.Backend) {
		parts[q], errs[q] = load.Echo(ctx, b, eo)
		if running.Add(-1) == 0 {
			stopWatch()
		}
	})
	stopWatch()
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
	res := load.MergeEchoes(parts)
	res.Stats = total
	out.Result = res
	fmt.Fprintf(stderr, "echo ran %v\n%s", time.Since(start).Round(time.Millisecond), formatStats("echo", &res.Stats, res.Layers()))
	for _, p := range res.PerQueue {
		fmt.Fprintf(stderr, "echo queue %d: received %d reflected %d dropped %d; rx_delivered %d tx_sent %d lost %d\n",
			p.Queue, p.Received, p.Reflected, p.Dropped, p.Stats.RxDelivered, p.Stats.TxSent, p.Stats.Lost())
	}
	if err := writeResult(statsPath, stdout, out); err != nil {
		fmt.Fprintln(stderr, "echo:", err)
		status = 1
	}
	return status
}
