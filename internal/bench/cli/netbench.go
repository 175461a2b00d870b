package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netns"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/bench/ports"
	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/testhost"
)

// DefaultRates are the reference method's offered rates.
const DefaultRates = "20k,100k,200k,400k,800k,1.6M"

// NetbenchOptions configure a netbench run.
type NetbenchOptions struct {
	// Kinds to run; KindsGiven is true when the user named them (then
	// every one gets a row, even one not built).
	Kinds      []string
	KindsGiven bool
	// Rates are the offered rates, messages per second.
	Rates []float64
	// Warmup, Duration and Drain of each cell.
	Warmup, Duration, Drain time.Duration
	// Size is the message size; Batch the send and receive batch; Queues
	// the queues of the test hosts (or ports) and of the backends.
	Size, Batch, Queues int
	// Repeat runs every cell this many times (default 1), the kinds
	// interleaved: each repeat runs every rate, and at each rate every
	// kind, the order of the kinds rotating from one repeat to the next.
	// The report shows medians and the spread.
	Repeat int
	// JSON is a file for the report; Out a directory for results.json,
	// report.md, table.txt, the plots and the tools' logs.
	JSON, Out string
	// Pcap is a directory for packet captures: each tool gets
	// Config.Pcap = <Pcap>/<cell>-<tool> (the raw kinds write
	// <prefix>-tx.pcap and <prefix>-rx.pcap). Empty: no capture.
	Pcap string
	// IfaceA and IfaceB are two real ports to use instead of a veth pair;
	// Coalesce is the rx-usecs set on them for the run (negative: left as
	// it is); IRQCPUs the CPUs their interrupts are steered to, "A;B" CPU
	// lists, "auto" (CPUs away from the pollers and their hyperthread
	// siblings, when there are any) or "" (left as they are). Home is
	// the namespace the ports are in (0: this process's).
	IfaceA, IfaceB string
	Coalesce       int
	IRQCPUs        string
	Home           netns.NsHandle
	// XDPFrames and XDPRing, when set, size the UMEM and rings of the
	// AF_XDP kinds (Config.XDP.Frames, Config.XDP.RingSize) of both tools.
	XDPFrames, XDPRing int
	// Wait makes both tools sleep in Wait when idle instead of busy polling.
	Wait bool
	// LoadCPU and EchoCPU pin the tools; -1 picks them from the allowed
	// CPUs.
	LoadCPU, EchoCPU int
	// Port is the first port; cell i uses Port+i.
	Port int
	// Exe is the binary to run in echo and loadgen mode ("<Exe> echo ...",
	// "<Exe> loadgen ..."), with Env added to its environment. Empty: this
	// process's own executable.
	Exe string
	Env []string
	// Bar shows a progress bar on the progress writer (a terminal)
	// instead of a line per cell start.
	Bar bool
	// Command is the command line, for the report.
	Command string
}

// NetbenchMain is netbench's command line: it parses args into
// NetbenchOptions and runs Netbench, printing the table on stdout and the
// progress on stderr (a bar when stderr is a terminal). "netbench compare
// A.json B.json" compares two reports instead. It returns the exit status.
func NetbenchMain(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "compare":
			return CompareMain(args[1:], stdout, stderr)
		case "report":
			return ReportMain(args[1:], stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("netbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: netbench [flags]\n       netbench compare [--json FILE] A.json B.json\n       netbench report [--out DIR] results.json\n\nflags:\n")
		fs.PrintDefaults()
	}
	kinds := fs.String("kinds", "", "comma-separated kinds (default: every kind this build has)")
	rates := fs.String("rates", DefaultRates, "comma-separated offered rates, messages per second")
	duration := fs.Duration("duration", 5*time.Second, "measured time per cell")
	warmup := fs.Duration("warmup", time.Second, "warm-up per cell, sent but not measured")
	drain := fs.Duration("drain", bench.DefaultDrain, "time to wait for answers after the last send")
	size := fs.Int("size", bench.DefaultSize, "message size in bytes")
	batch := fs.Int("batch", bench.DefaultBatch, "messages per Flush and per Rx")
	queues := fs.Int("queues", 1, "queues of the test hosts or ports, and of the backends")
	repeat := fs.Int("repeat", 1, "run every cell this many times, kinds interleaved; the report shows medians and the spread")
	jsonPath := fs.String("json", "", "write the JSON report to this file")
	out := fs.String("out", "auto", "write results.json, report.md, table.txt, the plots and the tools' logs into this directory (auto: bench/results/<date>-<host>; none: nowhere)")
	pcap := fs.String("pcap", "", "write the frames each raw kind sends and receives to pcap files in this directory")
	ifaceA := fs.String("iface-a", "", "first of two real ports cabled together (instead of a veth pair); it stays in this namespace, with the load generator")
	ifaceB := fs.String("iface-b", "", "second real port: moved into a namespace of its own for the run, with the echo")
	coalesce := fs.Int("coalesce", 0, "real ports: rx-usecs for the run (-1: leave as it is)")
	irqCPUs := fs.String("irq-cpus", "auto", `real ports: CPUs for each port's interrupts during the run, "A;B" CPU lists ("2;3"), "auto" (away from the pollers and their hyperthread siblings) or "" (leave)`)
	xdpFrames := fs.Int("xdp-frames", 0, "UMEM frames of the AF_XDP kinds (0: the kind's default)")
	xdpRing := fs.Int("xdp-ring", 0, "ring size of the AF_XDP kinds (0: the kind's default)")
	wait := fs.Bool("wait", false, "yielding mode: the tools sleep in Wait when idle instead of busy polling")
	cpus := fs.String("cpus", "", "CPUs of loadgen and echo, \"L,E\" (default: the first two allowed CPUs)")
	port := fs.Int("port", 5000, "first port; each cell uses the next one")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "netbench: unexpected arguments %q\n", fs.Args())
		fs.Usage()
		return 2
	}
	o := NetbenchOptions{
		Duration: *duration, Warmup: *warmup, Drain: *drain, Size: *size, Batch: *batch, Queues: *queues, Repeat: *repeat,
		JSON: *jsonPath, Out: *out, Pcap: *pcap, IfaceA: *ifaceA, IfaceB: *ifaceB, Coalesce: *coalesce, IRQCPUs: *irqCPUs,
		XDPFrames: *xdpFrames, XDPRing: *xdpRing, Wait: *wait, Port: *port,
		LoadCPU: -1, EchoCPU: -1, Bar: isTerminal(stderr),
		Command: strings.TrimSpace("netbench " + strings.Join(args, " ")),
	}
	switch o.Out {
	case "auto":
		host, _ := os.Hostname()
		o.Out = filepath.Join("bench", "results", time.Now().Format("20060102-150405")+"-"+host)
	case "none":
		o.Out = ""
	}
	var err error
	if o.Rates, err = bench.ParseRates(*rates); err != nil {
		fmt.Fprintln(stderr, "netbench:", err)
		return 2
	}
	if *kinds != "" {
		o.KindsGiven = true
		for _, k := range strings.Split(*kinds, ",") {
			if k = strings.TrimSpace(k); k != "" {
				o.Kinds = append(o.Kinds, k)
			}
		}
	} else {
		o.Kinds = dgramio.Kinds()
	}
	if *cpus != "" {
		var l, e int
		if _, err := fmt.Sscanf(*cpus, "%d,%d", &l, &e); err != nil || l < 0 || e < 0 {
			fmt.Fprintf(stderr, "netbench: --cpus %q: want two CPU numbers, \"0,1\"\n", *cpus)
			return 2
		}
		o.LoadCPU, o.EchoCPU = l, e
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := Netbench(ctx, o, stderr)
	if rep != nil {
		fmt.Fprint(stdout, rep.Table())
		for _, k := range rep.Kinds {
			if k.Mode != "" {
				fmt.Fprintf(stdout, "  %s: %s\n", k.Kind, k.Mode)
			}
		}
	}
	if o.Out != "" {
		fmt.Fprintf(stderr, "netbench: results in %s (report.md, results.json", o.Out)
		if rep != nil {
			for _, p := range rep.Plots {
				fmt.Fprintf(stderr, ", %s", p)
			}
		}
		fmt.Fprintln(stderr, ")")
	}
	if err != nil {
		fmt.Fprintln(stderr, "netbench:", err)
		return 1
	}
	return 0
}

// CompareMain is "netbench compare A.json B.json": per cell (kind × rate)
// the ratios B/A of p50, p99 and the achieved rate, and the cells present
// in one report only. --json FILE writes the comparison as JSON too.
func CompareMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("netbench compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	jsonPath := fs.String("json", "", "also write the comparison as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(stderr, "usage: netbench compare [--json FILE] A.json B.json (results.json of two runs)")
		return 2
	}
	a, err := bench.ReadReport(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "netbench compare:", err)
		return 1
	}
	b, err := bench.ReadReport(fs.Arg(1))
	if err != nil {
		fmt.Fprintln(stderr, "netbench compare:", err)
		return 1
	}
	cmp := bench.Compare(a, b)
	fmt.Fprint(stdout, cmp.Table(fs.Arg(0), fs.Arg(1)))
	if *jsonPath != "" {
		if err := writeJSON(*jsonPath, &cmp); err != nil {
			fmt.Fprintln(stderr, "netbench compare:", err)
			return 1
		}
	}
	return 0
}

// ReportMain is "netbench report [--out DIR] results.json": it writes
// report.md, table.txt and the plots again from a results.json (into the
// file's directory unless --out says otherwise), for a report made by an
// older netbench or moved from another host.
func ReportMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("netbench report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "directory to write into (default: the directory of results.json)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: netbench report [--out DIR] results.json")
		return 2
	}
	rep, err := bench.ReadReport(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "netbench report:", err)
		return 1
	}
	dir := *out
	if dir == "" {
		dir = filepath.Dir(fs.Arg(0))
	}
	nb := &netbench{o: NetbenchOptions{Out: dir}, rep: *rep}
	if _, err := nb.finish(nil); err != nil {
		fmt.Fprintln(stderr, "netbench report:", err)
		return 1
	}
	fmt.Fprint(stdout, nb.rep.Table())
	fmt.Fprintf(stderr, "netbench report: report.md, table.txt, results.json and %s in %s\n", strings.Join(nb.rep.Plots, ", "), dir)
	return 0
}

// startupGuess is what starting the two tools of a cell adds to its
// warm-up and measured time, for the progress bar's estimate.
const startupGuess = 500 * time.Millisecond

// Netbench makes the test hosts (or prepares the real ports), runs every
// kind at every rate Repeat times (echo in namespace B, loadgen in
// namespace A, separate processes on separate CPUs), and returns the
// report. It writes the report, the plots and the logs where o says. A
// kind that cannot run gets a row saying why; the error is for what stops
// the whole run (no test hosts, nothing measured).
func Netbench(ctx context.Context, o NetbenchOptions, progressW io.Writer) (*bench.Report, error) {
	if o.Duration <= 0 || o.Warmup < 0 || o.Size < bench.HeaderLen || o.Batch < 1 || o.Queues < 1 || o.Repeat < 0 {
		return nil, fmt.Errorf("bad options: duration %v, warm-up %v, size %d (>= %d), batch %d, queues %d, repeat %d",
			o.Duration, o.Warmup, o.Size, bench.HeaderLen, o.Batch, o.Queues, o.Repeat)
	}
	if (o.IfaceA == "") != (o.IfaceB == "") {
		return nil, fmt.Errorf("real ports: give both --iface-a and --iface-b")
	}
	if o.Repeat == 0 {
		o.Repeat = 1
	}
	if o.Drain == 0 {
		o.Drain = bench.DefaultDrain
	}
	if o.Port <= 0 {
		o.Port = 5000
	}
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find own executable: %w", err)
		}
		o.Exe = exe
	}
	nb := &netbench{o: o}
	nb.rep.Rates = o.Rates
	nb.env()
	o = nb.o // env picked the CPUs

	var err error
	nb.logDir = o.Out
	if nb.logDir == "" {
		if nb.logDir, err = os.MkdirTemp("", "netbench-"); err != nil {
			return nil, fmt.Errorf("temporary directory: %w", err)
		}
		defer os.RemoveAll(nb.logDir)
	} else {
		nb.logDir = filepath.Join(o.Out, "logs")
		if err := os.MkdirAll(nb.logDir, 0o755); err != nil {
			return nil, fmt.Errorf("output directory: %w", err)
		}
	}
	if o.Pcap != "" {
		if err := os.MkdirAll(o.Pcap, 0o755); err != nil {
			return nil, fmt.Errorf("pcap directory: %w", err)
		}
		nb.rep.Env.Pcap = o.Pcap
	}

	perCell := o.Warmup + o.Duration + startupGuess
	nb.prog = newProgress(progressW, o.Bar, time.Duration(o.Repeat*len(o.Rates)*len(o.Kinds))*perCell)
	defer nb.prog.finish()

	closeHosts, err := nb.hosts()
	if err != nil {
		nb.failAll(Classify("", err), err.Error())
		return nb.finish(err)
	}
	defer func() {
		if cerr := closeHosts(); cerr != nil {
			nb.prog.logf("netbench: %v", cerr)
		}
	}()
	nb.preflight()

	failed := map[string]*Failure{}
	rows := map[string]*bench.KindRow{}
	for _, k := range o.Kinds {
		rows[k] = &bench.KindRow{Kind: k}
	}
	runs := map[string][]bench.Cell{}
	key := func(kind string, rate float64) string { return kind + "@" + strconv.FormatFloat(rate, 'g', -1, 64) }
	idx := 0
	left := o.Repeat * len(o.Rates)
	for rep := 0; rep < o.Repeat && ctx.Err() == nil; rep++ {
		order := bench.RotateKinds(o.Kinds, rep)
		for _, rate := range o.Rates {
			left--
			for _, kind := range order {
				if failed[kind] != nil {
					continue
				}
				if ctx.Err() != nil {
					break
				}
				name := fmt.Sprintf("%s-%s", kind, bench.FormatRate(rate))
				if o.Repeat > 1 {
					name += fmt.Sprintf("-r%d", rep+1)
				}
				nb.prog.startCell(name, perCell)
				c, f := nb.cell(ctx, kind, rate, o.Port+idx, name)
				nb.prog.endCell()
				idx++
				if f != nil {
					failed[kind] = f
					nb.prog.skip(time.Duration(left) * perCell)
					nb.prog.logf("%s: cannot run: %s: %s", kind, f.Class, f.Error)
					continue
				}
				if c.Mode != "" {
					rows[kind].Mode = c.Mode
					nb.rep.Env.Modes[kind] = c.Mode
				}
				runs[key(kind, rate)] = append(runs[key(kind, rate)], *c)
				nb.prog.logf("%s: %s", name, c.Display)
			}
		}
	}
	if ctx.Err() != nil {
		nb.rep.Env.Notes = append(nb.rep.Env.Notes, "interrupted: the report is partial")
	}
	for _, k := range o.Kinds {
		for _, rate := range o.Rates {
			if rs := runs[key(k, rate)]; len(rs) > 0 {
				nb.rep.Cells = append(nb.rep.Cells, bench.MergeRepeats(rs))
			}
		}
	}
	for _, k := range o.Kinds {
		f := failed[k]
		switch {
		case f != nil && f.Class == ClassNotBuilt && !o.KindsGiven:
			nb.rep.Env.NotBuilt = append(nb.rep.Env.NotBuilt, k)
			continue
		case f != nil:
			rows[k].Reason = f.Class + ": " + f.Error
		}
		nb.rep.Kinds = append(nb.rep.Kinds, *rows[k])
	}
	nb.noteCaptures()
	if len(nb.rep.Cells) == 0 {
		if len(nb.rep.Env.NotBuilt) > 0 {
			return nb.finish(fmt.Errorf("no cell was measured (not built into this binary: %s)", strings.Join(nb.rep.Env.NotBuilt, ", ")))
		}
		return nb.finish(errors.New("no cell was measured"))
	}
	return nb.finish(nil)
}

type netbench struct {
	o      NetbenchOptions
	prog   *progress
	rep    bench.Report
	a, b   *side
	logDir string
	// pports are the real ports, when the run has them.
	pports *ports.Ports
}

// hosts makes the veth test hosts, or prepares the real ports, and
// returns how to remove them (or restore the ports).
func (nb *netbench) hosts() (func() error, error) {
	o := nb.o
	e := &nb.rep.Env
	e.Offloads = map[string]string{}
	if o.IfaceA != "" {
		po := ports.Options{IfaceA: o.IfaceA, IfaceB: o.IfaceB, Queues: o.Queues, RxUsecs: o.Coalesce, Home: o.Home}
		var err error
		if po.IRQCPUsA, po.IRQCPUsB, err = nb.irqCPUs(); err != nil {
			return nil, err
		}
		p, err := ports.Open(po)
		if err != nil {
			return nil, fmt.Errorf("real ports: %w", err)
		}
		nb.pports = p
		nb.a = &side{ep: p.A, iface: p.A.Iface, addr: p.A.Addr, prefix: p.A.Prefix}
		nb.b = &side{ep: p.B, iface: p.B.Iface, addr: p.B.Addr, prefix: p.B.Prefix}
		e.Link = "ports"
		e.Setup = p.Setup()
		for _, s := range e.Setup {
			nb.prog.logf("ports: %s", s)
		}
		nb.recordSides()
		return p.Close, nil
	}
	p, err := testhost.New(testhost.Options{Queues: o.Queues})
	if err != nil {
		return nil, fmt.Errorf("test hosts: %w", err)
	}
	nb.a = &side{ep: p.A, iface: p.A.Iface, addr: p.A.Addr, prefix: p.A.Prefix}
	nb.b = &side{ep: p.B, iface: p.B.Iface, addr: p.B.Addr, prefix: p.B.Prefix}
	e.Link = "veth"
	nb.recordSides()
	return p.Close, nil
}

// recordSides writes the two sides' interfaces and offloads into the env.
func (nb *netbench) recordSides() {
	e := &nb.rep.Env
	what := map[string]string{"veth": "a veth pair between two network namespaces", "ports": "two ports cabled together, the echo's in a namespace of its own"}[e.Link]
	e.Ifaces = []string{nb.a.iface + " " + nb.a.prefix.String() + " (loadgen)", nb.b.iface + " " + nb.b.prefix.String() + " (echo)", what}
	for name, s := range map[string]*side{"a": nb.a, "b": nb.b} {
		if offs, err := s.ep.Offloads(); err == nil {
			for f, on := range offs {
				e.Offloads[name+"."+f] = map[bool]string{true: "on", false: "off"}[on]
			}
		} else {
			e.Notes = append(e.Notes, "offloads of "+name+": "+err.Error())
		}
	}
}

// irqCPUs picks the CPUs of the ports' interrupts from --irq-cpus.
func (nb *netbench) irqCPUs() (a, b []int, err error) {
	o := nb.o
	switch o.IRQCPUs {
	case "":
		return nil, nil, nil
	case "auto":
		allowed, _ := cpu.Allowed()
		away := map[int]bool{}
		for _, c := range []int{o.LoadCPU, o.EchoCPU} {
			if c < 0 {
				continue
			}
			away[c] = true
			sib, _ := bench.Host.Siblings(c)
			for _, s := range sib {
				away[s] = true
			}
		}
		var free []int
		for _, c := range allowed {
			if !away[c] {
				free = append(free, c)
			}
		}
		if len(free) == 0 {
			nb.rep.Env.Notes = append(nb.rep.Env.Notes, "no CPU apart from the pollers and their hyperthread siblings: the ports' IRQ affinity is left as it is")
			return nil, nil, nil
		}
		return free[:1], free[1%len(free) : 1%len(free)+1], nil
	}
	as, bs, ok := strings.Cut(o.IRQCPUs, ";")
	if !ok {
		return nil, nil, fmt.Errorf("--irq-cpus %q: want \"A;B\" CPU lists, auto, or empty", o.IRQCPUs)
	}
	if a, err = bench.ParseCPUList(as); err == nil {
		b, err = bench.ParseCPUList(bs)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("--irq-cpus: %w", err)
	}
	return a, b, nil
}

// preflight looks at what moves results by microseconds and records it.
func (nb *netbench) preflight() {
	o := nb.o
	var pp []bench.PreflightPort
	if nb.pports != nil {
		for _, x := range []struct {
			h    *ports.Host
			role string
		}{{nb.pports.A, "loadgen"}, {nb.pports.B, "echo"}} {
			pp = append(pp, bench.PreflightPort{Iface: x.h.Iface, Role: x.role, NUMANode: x.h.NUMANode, IRQs: x.h.IRQs, RxUsecs: x.h.RxUsecs})
		}
	} else {
		pp = []bench.PreflightPort{{Iface: nb.a.iface, Role: "loadgen", Veth: true}, {Iface: nb.b.iface, Role: "echo", Veth: true}}
	}
	nb.rep.Env.Preflight = bench.Preflight(bench.Host, pp, o.LoadCPU, o.EchoCPU)
	for _, c := range nb.rep.Env.Preflight {
		if c.Status == bench.StatusWarn {
			nb.prog.logf("preflight: %s: %s", c.Name, c.Detail)
		}
	}
}

// noteCaptures lists the pcap files written and the kinds that wrote
// none.
func (nb *netbench) noteCaptures() {
	if nb.o.Pcap == "" {
		return
	}
	files, _ := filepath.Glob(filepath.Join(nb.o.Pcap, "*.pcap"))
	for _, f := range files {
		rel := f
		if nb.o.Out != "" {
			if r, err := filepath.Rel(nb.o.Out, f); err == nil && !strings.HasPrefix(r, "..") {
				rel = r
			}
		}
		nb.rep.Captures = append(nb.rep.Captures, rel)
	}
	var none []string
	for _, r := range nb.rep.Kinds {
		if r.Reason == "" && !hasCaptureOf(files, r.Kind, nb.o.Kinds) {
			none = append(none, r.Kind)
		}
	}
	if len(none) > 0 {
		nb.rep.Env.Notes = append(nb.rep.Env.Notes, fmt.Sprintf("pcap: no capture from %s: only the raw kinds whose constructor applies Config.Pcap write one; the kernel's kinds can be seen with tcpdump inside the namespaces", strings.Join(none, ", ")))
	}
}

// hasCaptureOf reports whether files hold a capture of kind itself, not of
// a longer kind that starts with its name.
func hasCaptureOf(files []string, kind string, kinds []string) bool {
	for _, f := range files {
		base := filepath.Base(f)
		if !strings.HasPrefix(base, kind+"-") {
			continue
		}
		longer := false
		for _, l := range kinds {
			if l != kind && strings.HasPrefix(l, kind+"-") && strings.HasPrefix(base, l+"-") {
				longer = true
			}
		}
		if !longer {
			return true
		}
	}
	return false
}

// failAll gives every kind the same reason.
func (nb *netbench) failAll(class, reason string) {
	for _, k := range nb.o.Kinds {
		nb.rep.Kinds = append(nb.rep.Kinds, bench.KindRow{Kind: k, Reason: class + ": " + reason})
	}
}

// finish writes the report (and the plots) where the options say and
// returns it with err.
func (nb *netbench) finish(err error) (*bench.Report, error) {
	rep := &nb.rep
	var werrs []error
	if nb.o.Out != "" && len(rep.Cells) > 0 {
		if e := os.MkdirAll(nb.o.Out, 0o755); e != nil {
			werrs = append(werrs, fmt.Errorf("output directory: %w", e))
		} else if files, e := rep.WritePlots(nb.o.Out); e != nil {
			werrs = append(werrs, e)
		} else {
			rep.Plots = files
		}
	}
	b, jerr := json.MarshalIndent(rep, "", "  ")
	if jerr != nil {
		return rep, errors.Join(err, fmt.Errorf("encode report: %w", jerr))
	}
	b = append(b, '\n')
	if nb.o.JSON != "" {
		if e := os.WriteFile(nb.o.JSON, b, 0o644); e != nil {
			werrs = append(werrs, fmt.Errorf("write report: %w", e))
		}
	}
	if nb.o.Out != "" {
		if e := os.MkdirAll(nb.o.Out, 0o755); e != nil {
			werrs = append(werrs, fmt.Errorf("output directory: %w", e))
		} else {
			for _, f := range []struct {
				name string
				data []byte
			}{{"results.json", b}, {"table.txt", []byte(rep.Table())}, {"report.md", []byte(rep.Markdown())}} {
				if e := os.WriteFile(filepath.Join(nb.o.Out, f.name), f.data, 0o644); e != nil {
					werrs = append(werrs, fmt.Errorf("write %s: %w", f.name, e))
				}
			}
		}
	}
	return rep, errors.Join(append([]error{err}, werrs...)...)
}

// env fills in the environment and picks the CPUs.
func (nb *netbench) env() {
	o := &nb.o
	e := &nb.rep.Env
	e.Started = time.Now().Format(time.RFC3339)
	e.Command = o.Command
	e.Host, _ = os.Hostname()
	e.Kernel = kernelVersion()
	e.CPUModel = cpuModel()
	e.CPUs = runtime.NumCPU()
	e.GoVersion = runtime.Version()
	e.Modes = map[string]string{}
	e.Warmup, e.Duration, e.Drain = o.Warmup.String(), o.Duration.String(), o.Drain.String()
	e.Size, e.Batch, e.Queues = o.Size, o.Batch, o.Queues
	e.Repeat = o.Repeat
	e.Order = "each repeat runs every rate in turn and, at each rate, every kind in turn (the kinds' order rotates by one each repeat), so the machine's drift hits every kind alike; a cell's two tools start afresh each time"
	allowed, err := cpu.Allowed()
	if err != nil || len(allowed) == 0 {
		e.Notes = append(e.Notes, fmt.Sprintf("allowed CPUs unknown (%v): the tools are not pinned", err))
	} else {
		e.AllowedCPUs = allowed
		if o.LoadCPU < 0 {
			o.LoadCPU = allowed[0]
		}
		if o.EchoCPU < 0 {
			o.EchoCPU = allowed[len(allowed)-1]
			if len(allowed) > 1 {
				o.EchoCPU = allowed[1]
			}
		}
		if o.LoadCPU == o.EchoCPU && !o.Wait {
			o.Wait = true
			e.Notes = append(e.Notes, fmt.Sprintf("one CPU (%d) for both tools: yielding mode forced, the numbers include the scheduler", o.LoadCPU))
		}
	}
	e.Poll = "busy"
	if o.Wait {
		e.Poll = "wait"
	}
	cpuName := func(c int) string {
		if c < 0 {
			return "no CPU in particular (unpinned)"
		}
		return "CPU " + strconv.Itoa(c)
	}
	e.Pinning = fmt.Sprintf("loadgen on %s, echo on %s, each in its own process; netbench itself unpinned", cpuName(o.LoadCPU), cpuName(o.EchoCPU))
	if o.Wait {
		e.Pinning += "; both sleep in Wait when idle (yielding mode)"
	} else {
		e.Pinning += "; both busy-poll their CPU"
	}
	if len(allowed) > 0 && len(allowed) <= 2 && !o.Wait {
		e.Notes = append(e.Notes, fmt.Sprintf("only %d CPUs: the two pollers busy-poll CPUs %d and %d, leaving none free for the kernel's softirq work and the rest of the system", len(allowed), o.LoadCPU, o.EchoCPU))
	}
	for _, k := range o.Kinds {
		if k == core.KindTCPXDP || k == core.KindTCPDPDK {
			e.Notes = append(e.Notes, fmt.Sprintf("tcp-xdp and tcp-dpdk use addresses of their own, %d above the kernel's on each side (the kernel's stack would reset their connections)", stackOffset))
			break
		}
	}
	if o.XDPFrames > 0 || o.XDPRing > 0 {
		e.Notes = append(e.Notes, fmt.Sprintf("AF_XDP kinds: %d UMEM frames, rings of %d (0: the default)", o.XDPFrames, o.XDPRing))
	}
}

func kernelVersion() string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return "unknown"
	}
	str := func(a [65]int8) string {
		b := make([]byte, 0, len(a))
		for _, c := range a {
			if c == 0 {
				break
			}
			b = append(b, byte(c))
		}
		return string(b)
	}
	return str(u.Release) + " " + str(u.Version)
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// child starts "<exe> mode args..." in h's namespace, its stderr into
// logPath.
func (nb *netbench) child(h endpoint, logPath string, mode string, args ...string) (*exec.Cmd, io.ReadCloser, *os.File, error) {
	cmd := h.Command(nb.o.Exe, append([]string{mode}, args...)...)
	cmd.Env = append(os.Environ(), nb.o.Env...)
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("log file: %w", err)
	}
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, nil, nil, fmt.Errorf("stdout pipe: %w", err)
	}
	if err := h.Start(cmd); err != nil {
		logf.Close()
		return nil, nil, nil, fmt.Errorf("start %s: %w", mode, err)
	}
	return cmd, out, logf, nil
}

// firstLine reads the first line of r, or returns an error after timeout.
func firstLine(r io.Reader, timeout time.Duration) (string, error) {
	ch := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(r).ReadString('\n')
		ch <- strings.TrimSpace(l)
	}()
	select {
	case l := <-ch:
		return l, nil
	case <-time.After(timeout):
		return "", fmt.Errorf("no answer in %v", timeout)
	}
}

// waitExit waits for cmd to exit, SIGKILLing it after timeout.
func waitExit(cmd *exec.Cmd, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("killed after %v", timeout)
	}
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// cell runs one kind at one rate on port; name names its logs. A failure
// that concerns the whole kind (it cannot be opened here) comes back as a
// Failure; anything else is the cell's Error.
func (nb *netbench) cell(ctx context.Context, kind string, rate float64, port int, name string) (*bench.Cell, *Failure) {
	o := nb.o
	a, b := nb.a, nb.b
	dir := nb.logDir
	echoJSON, loadJSON := filepath.Join(dir, name+"-echo.json"), filepath.Join(dir, name+"-loadgen.json")
	common := []string{"--kind", kind, "--port", strconv.Itoa(port), "--batch", strconv.Itoa(o.Batch)}
	if o.Wait {
		common = append(common, "--wait")
	}
	if o.Size > core.DefaultMaxDatagram {
		common = append(common, "--max-datagram", strconv.Itoa(o.Size))
	}
	if o.XDPFrames > 0 {
		common = append(common, "--xdp-frames", strconv.Itoa(o.XDPFrames))
	}
	if o.XDPRing > 0 {
		common = append(common, "--xdp-ring", strconv.Itoa(o.XDPRing))
	}
	pcapArgs := func(tool string) []string {
		if o.Pcap == "" {
			return nil
		}
		return []string{"--pcap", filepath.Join(o.Pcap, name+"-"+tool)}
	}
	run := o.Warmup + o.Duration + o.Drain
	errCell := func(msg string) (*bench.Cell, *Failure) {
		c := &bench.Cell{Kind: kind, Rate: rate, Error: msg, Saturated: true}
		c.Display = c.Format()
		return c, nil
	}

	// The userspace TCP must not share its address with the kernel's
	// stack on the same interface (the kernel would reset its
	// connections): it gets one of its own in the same subnet.
	loadIP, echoIP := a.addr, b.addr
	if kind == core.KindTCPXDP || kind == core.KindTCPDPDK {
		loadIP, echoIP = stackAddr(a), stackAddr(b)
	}
	before := nb.hostCounters()
	echoArgs := append(append(append([]string{}, common...), pcapArgs("echo")...), "--local", echoIP.String(), "--iface", b.iface,
		"--cpu", strconv.Itoa(o.EchoCPU), "--stats", echoJSON, "--max-time", (run + 5*time.Minute).String())
	echo, echoOut, echoLog, err := nb.child(b.ep, filepath.Join(dir, name+"-echo.log"), "echo", echoArgs...)
	if err != nil {
		return errCell("echo: " + err.Error())
	}
	defer echoLog.Close()
	line, err := firstLine(echoOut, 60*time.Second)
	if err != nil || !strings.HasPrefix(line, "ready") {
		_ = echo.Process.Kill()
		_ = waitExit(echo, 10*time.Second)
		if class, msg, ok := parseFailed(line); ok {
			return nil, &Failure{Class: class, Error: msg}
		}
		why := line
		if err != nil {
			why = err.Error()
		}
		return errCell(fmt.Sprintf("echo did not start (%s): %s", why, tail(echoLog.Name(), 300)))
	}
	go io.Copy(io.Discard, echoOut)

	loadArgs := append(append(append([]string{}, common...), pcapArgs("loadgen")...), "--local", loadIP.String(), "--dst", echoIP.String(), "--iface", a.iface,
		"--cpu", strconv.Itoa(o.LoadCPU), "--rate", strconv.FormatFloat(rate, 'f', -1, 64),
		"--warmup", o.Warmup.String(), "--duration", o.Duration.String(), "--drain", o.Drain.String(),
		"--size", strconv.Itoa(o.Size), "--json", loadJSON)
	load, loadOut, loadLog, err := nb.child(a.ep, filepath.Join(dir, name+"-loadgen.log"), "loadgen", loadArgs...)
	if err != nil {
		_ = echo.Process.Signal(syscall.SIGTERM)
		_ = waitExit(echo, 15*time.Second)
		return errCell("loadgen: " + err.Error())
	}
	defer loadLog.Close()
	var loadLine strings.Builder
	copied := make(chan struct{})
	go func() { io.Copy(&loadLine, loadOut); close(copied) }()
	done := make(chan error, 1)
	go func() { <-copied; done <- load.Wait() }()
	var loadErr error
	select {
	case loadErr = <-done:
	case <-ctx.Done():
		_ = load.Process.Signal(os.Interrupt)
		select {
		case loadErr = <-done:
		case <-time.After(30 * time.Second):
			_ = load.Process.Kill()
			loadErr = <-done
		}
	case <-time.After(run + 2*time.Minute):
		_ = load.Process.Kill()
		loadErr = <-done
		loadErr = fmt.Errorf("loadgen killed after %v: %v", run+2*time.Minute, loadErr)
	}
	_ = echo.Process.Signal(syscall.SIGTERM)
	echoErr := waitExit(echo, 15*time.Second)
	after := nb.hostCounters()

	var lf LoadFile
	var ef EchoFile
	lerr := readFile(loadJSON, &lf)
	eerr := readFile(echoJSON, &ef)
	if lf.Failure != nil {
		switch lf.Failure.Class {
		case ClassNotBuilt, ClassNotSupported, ClassPrivilege:
			return nil, lf.Failure
		}
		return errCell("loadgen: " + lf.Failure.Error)
	}
	if lerr != nil || lf.Result == nil {
		return errCell(fmt.Sprintf("loadgen left no result (%v, exit %v): %s %s", lerr, loadErr, strings.TrimSpace(loadLine.String()), tail(loadLog.Name(), 300)))
	}
	var er *bench.EchoResult
	if eerr == nil && ef.Result != nil {
		er = ef.Result
	}
	c := bench.NewCell(kind, lf.Result, er)
	if er == nil {
		c.Notes = append(c.Notes, fmt.Sprintf("echo left no counters (%v, exit %v)", eerr, echoErr))
	}
	c.Host = diffCounters(before, after)
	if c.Unaccounted != 0 {
		c.Notes = append(c.Notes, "host counters that moved: "+movedDrops(c.Host))
	}
	if n := c.Host["a.snmp.udp.no_ports"]; n > 0 && c.Unaccounted > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("a.snmp.udp.no_ports %d: answers that reached the load generator's host after it had closed "+
			"(the drain, --drain %v, ended before the echo's backlog did); frames still in its receive ring at that moment are counted nowhere", n, o.Drain))
	}
	return &c, nil
}

// stackOffset is how far above the kernel's address of a side the
// userspace TCP kinds' own address is (198.18.n.1 → 198.18.n.11).
const stackOffset = 10

// stackAddr returns the address the userspace TCP kinds use on side s: in
// its subnet, not held by the kernel.
func stackAddr(s *side) netip.Addr {
	a := s.addr.As4()
	if int(a[3])+stackOffset > 254 {
		return s.addr
	}
	a[3] += stackOffset
	if x := netip.AddrFrom4(a); s.prefix.Contains(x) {
		return x
	}
	return s.addr
}

// parseFailed parses "failed <class>: <error>".
func parseFailed(line string) (class, msg string, ok bool) {
	rest, ok := strings.CutPrefix(line, "failed ")
	if !ok {
		return "", "", false
	}
	class, msg, ok = strings.Cut(rest, ": ")
	return class, msg, ok
}

func readFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
