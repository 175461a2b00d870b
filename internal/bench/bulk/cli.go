package bulk

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench/preflight"
	"github.com/dgramio/dgramio/internal/cpu"
)

// ParseBytes parses a size: a number of bytes with an optional suffix
// KiB, MiB, GiB (powers of 1024) or k, M, G (powers of 1000).
func ParseBytes(s string) (int64, error) {
	mult := int64(1)
	num := s
	for _, u := range []struct {
		suf string
		m   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}} {
		if n, ok := strings.CutSuffix(s, u.suf); ok {
			num, mult = n, u.m
			break
		}
	}
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || v > (1<<50)/mult {
		return 0, fmt.Errorf("--bytes %q: not a size (\"64MiB\", \"1G\", \"1048576\")", s)
	}
	return v * mult, nil
}

// usageError is a flag problem: exit status 2.
type usageError struct{ error }

// parseOptions parses dgramio-bulk's flags into Options, the JSON path
// and the output directory.
func parseOptions(args []string, stderr io.Writer) (o Options, jsonFile string, err error) {
	fs := flag.NewFlagSet("dgramio-bulk", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: dgramio-bulk [flags]\n       dgramio-bulk compare A.json B.json\n       dgramio-bulk plot RESULTS.json [DIR]\n       dgramio-bulk connrate [flags]\n\nMoves bytes through each stream kind between two network namespaces (veth, or the lossy wire with --loss) and reports Gbit/s, CPU per GB, retransmissions and loss counters; see docs/bulk.md.\n\nflags:\n")
		fs.PrintDefaults()
	}
	kinds := fs.String("kinds", strings.Join(DefaultRows, ","), "rows: tcp (kernel), tcp-xdp (native engine), tcp-xdp+netstack, tcp-dpdk, tcp-dpdk+netstack (DPDK builds)")
	conns := fs.String("conns", "1,16", "numbers of connections, each a cell")
	dirs := fs.String("dir", "up,down,both", "directions: up (client to server), down (server to client), both (at once)")
	duration := fs.Duration("duration", 5*time.Second, "how long each connection sends")
	size := fs.String("bytes", "", "what each connection sends instead of --duration (\"64MiB\")")
	repeat := fs.Int("repeat", 1, "run every cell this many times, rows interleaved; the report shows medians")
	loss := fs.String("loss", "", "run over the lossy wire (internal/wire) at these loss rates (\"0.1%,1%,3%\"; 0: the wire without loss) instead of the clean veth")
	delay := fs.String("delay", "", "with --loss: one-way delays of the wire (default \"0.2ms,10ms\")")
	jsonPath := fs.String("json", "", "write the report as JSON to this file (-: stdout, the table then goes to stderr)")
	out := fs.String("out", "", "write results.json, report.md, the plots (SVG) and the sides' logs into this directory")
	offloads := fs.Bool("offloads", false, "leave TSO, GSO and TX checksum offload on at the veth ends (default off, as on a wire)")
	poll := fs.String("poll", "yield", "the native engine's loop: yield (sleep in Engine.Wait when a round moves nothing) or busy (spin)")
	port := fs.Int("port", 6000, "first server port; each cell uses the next")
	cc := fs.String("cc", "", "congestion control of the kernel tcp and native rows: reno, cubic or bbr (default: the host's net.ipv4.tcp_congestion_control for both, as Config's default gives it to the engine, which falls back to reno for another; netstack rows keep Config's default, the host's if reno or cubic, else reno)")
	buf := fs.String("buf", "", "the native engine rows' send and receive buffers, the window fixed there (\"4MiB\"; default Config's for the native engine, 4 MiB and 6 MiB, auto-tuned; kernel tcp auto-tunes its own up to tcp_wmem's and tcp_rmem's maximum)")
	queues := fs.Int("queues", 1, "queues of the veth ends; above 1, each native engine row (tcp-xdp) runs an engine and a poll loop per queue on each side, pinned (clean veth only)")
	cpus := fs.String("cpus", "", "with --queues: the CPUs of the client's and the server's poll loops, \"C;S\" lists in queue order (\"0,1;2,3\"; default: a CPU of its own for each loop while there are enough, else the allowed CPUs in turn)")
	cpuprofile := fs.String("cpuprofile", "", "write each side's CPU profile (runtime/pprof, over its transfer) into this directory: NNN-row-conns-dir-{client,server}.pprof")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, "", err
		}
		return o, "", usageError{err}
	}
	bad := func(format string, a ...any) (Options, string, error) {
		return o, "", usageError{fmt.Errorf(format, a...)}
	}
	if fs.NArg() != 0 {
		return bad("unexpected arguments %q", fs.Args())
	}
	o = Options{Duration: *duration, Repeat: *repeat, KeepOffloads: *offloads, Port: *port, Out: *out, CPUProfile: *cpuprofile,
		Command: strings.TrimSpace("dgramio-bulk " + strings.Join(args, " "))}
	names := ParseList(*kinds)
	if len(names) == 0 {
		return bad("--kinds %q: name at least one row", *kinds)
	}
	seen := map[string]bool{}
	for _, n := range names {
		row, err := ParseRow(n)
		if err != nil {
			return bad("--kinds: %v", err)
		}
		if seen[row.String()] {
			return bad("--kinds: %s named twice", row)
		}
		seen[row.String()] = true
		o.Rows = append(o.Rows, row)
	}
	var err2 error
	if o.Conns, err2 = ParseConns(*conns); err2 != nil {
		return bad("%v", err2)
	}
	if o.Dirs, err2 = ParseDirs(*dirs); err2 != nil {
		return bad("%v", err2)
	}
	if *size != "" {
		if o.Bytes, err2 = ParseBytes(*size); err2 != nil {
			return bad("%v", err2)
		}
		if o.Bytes == 0 {
			return bad("--bytes %q: must be positive", *size)
		}
	} else if o.Duration <= 0 || o.Duration > time.Hour {
		return bad("--duration %v: must be above 0 and at most 1h", o.Duration)
	}
	if o.Repeat < 1 || o.Repeat > 100 {
		return bad("--repeat %d: must be 1..100", o.Repeat)
	}
	if *loss != "" {
		if o.Loss, err2 = ParseLoss(*loss); err2 != nil {
			return bad("%v", err2)
		}
		d := *delay
		if d == "" {
			d = "0.2ms,10ms"
		}
		if o.Delays, err2 = ParseDelays(d); err2 != nil {
			return bad("%v", err2)
		}
		if *offloads {
			return bad("--offloads: the lossy wire runs with offloads off")
		}
	} else if *delay != "" {
		return bad("--delay is a setting of the lossy wire: give --loss too (--loss 0 for the wire without loss)")
	}
	switch *poll {
	case "yield":
	case "busy":
		o.Busy = true
	default:
		return bad("--poll %q: yield or busy", *poll)
	}
	switch *cc {
	case "", "reno", "cubic", "bbr":
		o.CC = *cc
	default:
		return bad("--cc %q: reno, cubic or bbr", *cc)
	}
	if *buf != "" {
		n, err := ParseBytes(*buf)
		if err != nil {
			return bad("--buf: %v", err)
		}
		if n < 4096 || n > 1<<30 {
			return bad("--buf %q: must be 4KiB..1GiB", *buf)
		}
		o.Buf = int(n)
	}
	if err := parseQueues(&o, *queues, *cpus); err != nil {
		return bad("%v", err)
	}
	if o.Port < 1 || o.Port > 65535-10000 {
		return bad("--port %d: must be 1..55535", o.Port)
	}
	return o, *jsonPath, nil
}

// Main is dgramio-bulk's command line ("compare A.json B.json" compares
// two reports instead: CompareMain). It returns the exit status: 0 when
// every cell measured, 1 when one could not or the run could not start,
// 2 for a usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "compare" {
		return CompareMain(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "plot" {
		return PlotMain(args[1:], stdout, stderr)
	}
	o, jsonPath, err := parseOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "dgramio-bulk:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o.Progress = stderr
	rep, runErr := Run(ctx, o)
	table := stdout
	if jsonPath == "-" {
		table = stderr
	}
	fmt.Fprint(table, rep.Markdown())
	fmt.Fprint(table, rep.Details())
	status := 0
	if jsonPath != "" {
		if err := rep.WriteJSON(jsonPath); err != nil {
			fmt.Fprintln(stderr, "dgramio-bulk:", err)
			status = 1
		}
	}
	if o.Out != "" {
		if err := writeOut(rep, o.Out); err != nil {
			fmt.Fprintln(stderr, "dgramio-bulk:", err)
			status = 1
		}
	}
	if runErr != nil {
		fmt.Fprintln(stderr, "dgramio-bulk:", runErr)
		return 1
	}
	for _, c := range rep.Cells {
		if c.Error != "" {
			fmt.Fprintln(stderr, "dgramio-bulk: some cells could not be measured (see the report)")
			return 1
		}
	}
	return status
}

// writeOut writes results.json, report.md and the plots (WritePlots)
// into dir.
func writeOut(rep *Report, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	plots, err := rep.WritePlots(dir)
	if err != nil {
		return err
	}
	rep.Plots = plots
	if err := rep.WriteJSON(filepath.Join(dir, "results.json")); err != nil {
		return err
	}
	md := "# dgramio-bulk\n\n`" + rep.Command + "`, " + rep.Start.Format(time.RFC3339) + ", " + rep.Host + ", Linux " + rep.Kernel + ", " + strconv.Itoa(rep.CPUs) + " CPUs, load average " + strings.Join(rep.LoadAvg, " → ") + "\n\n"
	for _, s := range rep.Setup {
		md += "- " + s + "\n"
	}
	md += "\n" + rep.Markdown() + "\n" + rep.Details()
	for _, p := range rep.Plots {
		md += "\n![" + p + "](" + p + ")\n"
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(md), 0o644)
}

// PlotMain is "dgramio-bulk plot RESULTS.json [DIR]": it draws the plots
// of a report written before (WritePlots) into DIR, by default the
// report's directory.
func PlotMain(args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 || len(args) > 2 {
		fmt.Fprintln(stderr, "usage: dgramio-bulk plot RESULTS.json [DIR]")
		return 2
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "dgramio-bulk plot:", err)
		return 1
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		fmt.Fprintf(stderr, "dgramio-bulk plot: %s: %v\n", args[0], err)
		return 1
	}
	dir := filepath.Dir(args[0])
	if len(args) == 2 {
		dir = args[1]
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(stderr, "dgramio-bulk plot:", err)
		return 1
	}
	files, err := rep.WritePlots(dir)
	if err != nil {
		fmt.Fprintln(stderr, "dgramio-bulk plot:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s in %s\n", strings.Join(files, ", "), dir)
	return 0
}

// MaxQueues bounds --queues.
const MaxQueues = 64

// parseQueues sets o.Queues and its CPUs from --queues and --cpus (after
// the rows, --loss and --poll are parsed): only the native engine runs
// several queues, over the clean veth; busy loops need a CPU each.
func parseQueues(o *Options, queues int, cpus string) error {
	if queues < 1 || queues > MaxQueues {
		return fmt.Errorf("--queues %d: must be 1..%d", queues, MaxQueues)
	}
	if queues == 1 {
		if cpus != "" {
			return fmt.Errorf("--cpus pins the poll loops of several queues: give --queues too")
		}
		return nil
	}
	if len(o.Loss) > 0 {
		return fmt.Errorf("--queues %d: the lossy wire has one queue each way; run several queues on the clean veth (without --loss)", queues)
	}
	for _, r := range o.Rows {
		if !r.IsKernel() && (r.Kind != dgramio.KindTCPXDP || r.Stack != dgramio.TCPStackNative) {
			return fmt.Errorf("--queues %d: row %s runs one queue (several queues are the native engine's, kind tcp-xdp); drop it from --kinds or run it without --queues", queues, r)
		}
	}
	o.Queues = queues
	if cs, ss, ok := strings.Cut(cpus, ";"); ok {
		var err error
		if o.ClientCPUs, err = preflight.ParseCPUs(cs, MaxQueues); err == nil {
			o.ServerCPUs, err = preflight.ParseCPUs(ss, MaxQueues)
		}
		if err != nil || len(o.ClientCPUs) != queues || len(o.ServerCPUs) != queues {
			return fmt.Errorf("--cpus %q: want \"C;S\", %d CPUs for the client's loops and %d for the server's (\"0,1;2,3\")", cpus, queues, queues)
		}
	} else if cpus != "" {
		return fmt.Errorf("--cpus %q: want \"C;S\", the CPUs of the client's loops and of the server's in queue order (\"0,1;2,3\")", cpus)
	}
	allowed, err := cpu.Allowed()
	if err != nil {
		return fmt.Errorf("--queues %d: the CPUs this process may use: %v", queues, err)
	}
	if o.ClientCPUs == nil {
		if 2*queues <= len(allowed) {
			o.ClientCPUs, o.ServerCPUs = slices.Clone(allowed[:queues]), slices.Clone(allowed[queues:2*queues])
		} else {
			o.ClientCPUs, o.ServerCPUs = make([]int, queues), make([]int, queues)
			for q := range queues {
				o.ClientCPUs[q] = allowed[q%len(allowed)]
				o.ServerCPUs[q] = allowed[(queues+q)%len(allowed)]
			}
		}
	}
	if o.Busy {
		seen := map[int]bool{}
		for _, c := range append(slices.Clone(o.ClientCPUs), o.ServerCPUs...) {
			if seen[c] {
				return fmt.Errorf("--poll busy with %d queues: %d spinning loops need as many CPUs, and CPU %d would run two (this process may use %s); use --poll yield or fewer queues", queues, 2*queues, c, cpu.FormatList(allowed))
			}
			seen[c] = true
		}
	}
	return nil
}
