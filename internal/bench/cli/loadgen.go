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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/bench/load"
)

// LoadFile is the JSON a load generator writes with --json.
type LoadFile = ToolFile[load.LoadResult]

// LoadgenMain is the load generator: it opens a client of --kind to
// --dst:--port, sends --size-byte messages at --rate for --warmup then
// --duration without waiting for answers, keeps receiving for --drain, and
// prints p50/p99/p99.9/max of the round trip measured from each message's
// schedule, the achieved rate, and its counters. With --json it writes the
// whole result. If the backend cannot be opened it prints "failed <class>:
// <error>" on stdout. It returns ExitOK for a run that measured,
// ExitFailed for one that could not (the kind not opened, a connection
// refused, no message sent, none answered, a failure midway), ExitUsage
// for a bad flag or setting (said before anything opens).
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
	fs := flag.NewFlagSet("dgramio-loadgen", flag.ContinueOnError)
	tf := addToolFlags(fs, toolUsage{
		port:   "the echo's UDP/TCP port",
		queues: "queues, one poller and one flow each (dgramio.NewGroup when more than 1); the rate is divided among them",
		poll:   "busy (spin, a CPU per poller; the default) or yield (sleep when idle, for machines with too few CPUs)",
		batch:  "messages per Flush and per Rx",
	})
	dst := fs.String("dst", "", "the echo's address, IPv4 or IPv6, with its port (192.0.2.2:5000, [2001:db8::2]:5000) or at --port")
	rateS := fs.String("rate", "20k", "offered rate, messages per second (20k, 1.6M)")
	duration := durationFlag(fs, "duration", 5*time.Second, "measured time, like `5s`")
	warmup := durationFlag(fs, "warmup", time.Second, "warm-up, sent but not measured, like `1s`")
	drain := durationFlag(fs, "drain", load.DefaultDrain, "time to wait for answers after the last send, like `1s`")
	interval := durationFlag(fs, "interval", 0, "print what each interval sent and received, and its round trips, every this long, like `1s` (as iperf3 -i; 0: none)")
	size := fs.Int("size", load.DefaultSize, "message size in bytes")
	dstMAC := fs.String("dst-mac", "", "the echo's MAC address on the raw kinds (Config.DstMAC; empty: resolved by the neighbour table or ARP)")
	jsonPath := fs.String("json", "", "write the result as JSON to this file (-: to stdout, the other lines then go to stderr)")
	if status, done := parseFlags(fs, args, stdout, stderr); done {
		return status
	}
	out := LoadFile{ToolHeader: tf.header()}
	fail := failer("loadgen", &tf.kind, stdout, stderr, *jsonPath, &out.Failure, &out)
	human := stdout
	if *jsonPath == "-" {
		human = stderr
	}
	rate, err := bench.ParseRate(*rateS)
	if err != nil {
		return fail(ClassConfig, fmt.Errorf("--rate: %w", err))
	}
	dstAP, err := parseDest("dst", *dst)
	if err != nil {
		return fail(ClassConfig, err)
	}
	if !dstAP.Addr().IsValid() {
		return fail(ClassConfig, fmt.Errorf("--dst: the echo's address is required"))
	}
	if *duration <= 0 {
		return fail(ClassConfig, fmt.Errorf("--duration %v: the measured time must be positive", *duration))
	}
	var mac net.HardwareAddr
	if *dstMAC != "" {
		if mac, err = net.ParseMAC(*dstMAC); err != nil || len(mac) != 6 {
			return fail(ClassConfig, fmt.Errorf("--dst-mac %q: not an Ethernet MAC address (write it like 02:00:00:00:00:01)", *dstMAC))
		}
	}
	cfg, err := tf.config(dgramio.RoleClient, &out.ToolHeader)
	if err != nil {
		return fail(ClassConfig, err)
	}
	if err := checkSize(cfg, *size); err != nil {
		return fail(ClassConfig, err)
	}
	cfg.Dests, cfg.DstMAC = []netip.AddrPort{dstAP}, mac
	if err := validate(cfg); err != nil {
		return fail(ClassConfig, err)
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	lo := load.LoadOptions{
		Rate: rate, Warmup: *warmup, Duration: *duration, Drain: *drain,
		Size: *size, Batch: cfg.TxBatch, Wait: out.Wait, Interval: *interval,
	}
	if *drain == 0 {
		lo.Drain = -1 // none, as asked (LoadOptions' zero is the default)
	}
	if lo.Interval > 0 {
		lo.OnInterval = intervalPrinter(human, &out.Intervals)
	}
	if out.Queues > 1 {
		cfg.Queues, cfg.CPUs = out.Queues, out.CPUs
	}
	res, runErr, openErr := loadOnce(ctx, op, cfg, out.CPU, lo, stderr)
	if openErr != nil {
		return fail(Classify(cfg.Kind, openErr), openErr)
	}
	status := ExitOK
	if runErr != nil {
		fmt.Fprintln(stderr, "loadgen:", runErr)
		status = ExitFailed
	}
	out.Result = res
	if res != nil {
		printLoad(human, stderr, string(cfg.Kind), rate, res)
		if why := unmeasured(res, cfg); why != "" {
			fmt.Fprintln(stderr, "loadgen:", why)
			status = ExitFailed
		}
	}
	if err := writeResult(*jsonPath, stdout, &out); err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		status = ExitFailed
	}
	return status
}

// unmeasured says why a run that went to its end measured nothing (no
// message sent, or none answered: the peer unreachable, or everything
// lost), with the cause where the counters name one; "" when it measured.
func unmeasured(res *load.LoadResult, cfg dgramio.Config) string {
	dst := cfg.Dests[0]
	if dst.Port() == 0 {
		dst = netip.AddrPortFrom(dst.Addr(), cfg.Port)
	}
	switch {
	case res.Interrupted:
		return ""
	case res.Total.Sent == 0:
		return fmt.Sprintf("no message was sent (not sent %d, tx_oversize %d): nothing measured", res.Total.NotSent, res.Stats.TxOversize)
	case res.Total.Received == 0:
		why := fmt.Sprintf("none of the %d messages sent came back from %s port %d: is an echo listening there, and is the path open?", res.Total.Sent, dst.Addr(), dst.Port())
		if cfg.Dests[0].Port() == 0 {
			why += portInAddrHint(dst.Addr())
		}
		if n := checksumErrors(res.Stats); n > 0 {
			why += fmt.Sprintf(" %d TCP segments were dropped for a bad checksum: %s", n, checksumFix)
		}
		if v, ok := res.Stats.Counter("udp", "rx_icmp_refused"); ok && v > 0 {
			why += fmt.Sprintf(" (%d ICMP port unreachable came back: nothing listens on port %d there)", v, dst.Port())
		}
		return why
	}
	return ""
}

// portInAddrHint says, for an IPv6 --dst given without a port whose last
// group reads as a decimal port (2001:db8::2:5000), how to write the
// port: without brackets it is a part of the address (RFC 5952 §6).
func portInAddrHint(a netip.Addr) string {
	if !a.Is6() || a.Is4In6() {
		return ""
	}
	s := a.String()
	i := strings.LastIndexByte(s, ':')
	last := s[i+1:]
	if n, err := strconv.Atoi(last); err != nil || n < 1 || n > 65535 {
		return ""
	}
	if _, err := netip.ParseAddr(s[:i]); err != nil {
		return "" // 2001:db8::2 is not 2001:db8: and a port
	}
	return fmt.Sprintf(" (if :%s was meant as the port, write --dst [%s]:%s: an IPv6 address takes its port after brackets)", last, s[:i], last)
}

// checkSize refuses a message size that the kind cannot send: smaller
// than the load header, or larger than its largest message
// (--max-datagram, whose default is dgramio.DefaultMaxDatagram).
func checkSize(cfg dgramio.Config, size int) error {
	if size < load.HeaderLen {
		return fmt.Errorf("--size %d: must be at least %d (the load generator's header)", size, load.HeaderLen)
	}
	if max := cfg.WithDefaults().MaxDatagram; size > max {
		if max == maxMessage(cfg.Kind) {
			return fmt.Errorf("--size %d: larger than the largest message of kind %s, %d bytes", size, cfg.Kind, max)
		}
		return fmt.Errorf("--size %d: larger than the largest message of kind %s here, %d bytes: raise --max-datagram, up to %d (a datagram must fit the path's MTU)",
			size, cfg.Kind, max, maxMessage(cfg.Kind))
	}
	return nil
}

// intervalPrinter returns the LoadOptions.OnInterval of --interval: a
// line per interval on w, as iperf3 -i prints them, kept in *into for
// the JSON too. The loop calls it (a queue's goroutine each): it locks.
func intervalPrinter(w io.Writer, into *[]load.IntervalReport) func(load.IntervalReport) {
	var mu sync.Mutex
	return func(r load.IntervalReport) {
		mu.Lock()
		defer mu.Unlock()
		*into = append(*into, r)
		secs := (r.To - r.From).Seconds()
		fmt.Fprintf(w, "[q%d] %6.2f-%-6.2f s  sent %d (%s/s)  received %d (%s/s)  p50 %s p99 %s µs\n",
			r.Queue, r.From.Seconds(), r.To.Seconds(), r.Sent, bench.FormatRate(float64(r.Sent)/secs),
			r.Received, bench.FormatRate(float64(r.Received)/secs), bench.FormatUs(r.RTT.P50Us), bench.FormatUs(r.RTT.P99Us))
	}
}

// loadOnce runs the load generator on one backend, or on a group of
// cfg.Queues queues (on the CPUs of cfg.CPUs), and returns its result
// with the counters as Close left them; openErr when nothing could be
// opened.
func loadOnce(ctx context.Context, op openers, cfg dgramio.Config, cpu int, lo load.LoadOptions, stderr io.Writer) (res *load.LoadResult, runErr, openErr error) {
	if cfg.Queues > 1 {
		return loadGroup(ctx, op.group, cfg, lo)
	}
	final, runErr, openErr := runSingle(op, cfg, cpu, "loadgen", stderr, func(b dgramio.Backend) (err error) {
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
func runSingle(op openers, cfg dgramio.Config, cpu int, tool string, stderr io.Writer, run func(b dgramio.Backend) error) (final dgramio.Stats, runErr, openErr error) {
	cpus, err := pin(cfg, cpu)
	if err != nil {
		return dgramio.Stats{}, nil, err
	}
	cfg.CPUs = cpus
	b, err := op.single(cfg)
	if err != nil {
		return dgramio.Stats{}, nil, err
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
func loadGroup(ctx context.Context, newGroup func(dgramio.Config) (Group, error), cfg dgramio.Config, lo load.LoadOptions) (res *load.LoadResult, runErr, openErr error) {
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
	}, func(q int, b dgramio.Backend) {
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
