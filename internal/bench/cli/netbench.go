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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netns"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/bench/load"
	"github.com/dgramio/dgramio/internal/bench/ports"
	"github.com/dgramio/dgramio/internal/bench/preflight"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/testhost"
)

// DefaultRates are the method's offered rates (README.md, BENCHMARKS.md).
const DefaultRates = "20k,100k,200k,400k,800k,1.6M"

// NetbenchOptions configure a netbench run.
type NetbenchOptions struct {
	// Kinds are the rows to run: kinds, or variants of a kind
	// ("uring+sqpoll", "uring+napi"; see bench.Variants), each a row of
	// its own. KindsGiven is true when the user named them (then every
	// one gets a row, even one not built).
	Kinds      []string
	KindsGiven bool
	// Rates are the offered rates, messages per second.
	Rates []float64
	// Warmup, Duration and Drain of each cell.
	Warmup, Duration, Drain time.Duration
	// Size is the message size; Batch the send and receive batch; Queues
	// the queues of the test hosts (or ports) and of the backends.
	Size, Batch, Queues int
	// QueueCounts, when set, are the numbers of queues to run, each kind
	// with each (a scaling run, --queues 1,2,4): a cell per kind, number
	// of queues and rate, and the report's scaling table. Empty: Queues
	// alone. With N > 1 queues both tools open the kind as a group of N
	// queues (dgramio.NewGroup), and on veth the test hosts have N queues,
	// XPS masks that send each loadgen CPU's frames on its own queue, and
	// static neighbour entries (a datagram that waited for ARP would leave
	// from whichever CPU handled the reply).
	QueueCounts []int
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
	// DPDKRxDesc, when set, is the RX ring size of the DPDK kinds
	// (Config.DPDK.RxDesc) in both tools.
	DPDKRxDesc int
	// Wait is the yielding poll mode (--poll yield, or --wait): both
	// tools' pollers sleep in Wait when idle instead of busy polling, so
	// that more pollers than CPUs make progress; the report marks its rows
	// "poll yield".
	Wait bool
	// LoadCPU and EchoCPU pin the tools with one queue; -1 picks them from
	// the allowed CPUs.
	LoadCPU, EchoCPU int
	// SQPollCPUs are the CPUs of the SQ threads of row uring+sqpoll, the
	// loadgen's and the echo's. Empty: picked from the allowed CPUs apart
	// from the pollers (and from their hyperthread siblings while there
	// are others). A host without CPUs for both pollers and both SQ
	// threads gets the row's reason instead of a measurement.
	SQPollCPUs []int
	// LoadCPUs and EchoCPUs are the CPUs of the tools' queues with several
	// queues, in queue order (a run with N queues uses the first N of
	// each). Empty: picked from the allowed CPUs: with busy polling a CPU
	// of its own for every poller of both tools (a run that needs more
	// than there are is refused), with yielding pollers CPU q of the
	// allowed ones for queue q of both tools (on veth a frame is
	// processed on its sender's CPU, so the echo's queue q then runs
	// where its flows arrive).
	LoadCPUs, EchoCPUs []int
	// Capacity is how many probes each row may run after the table's
	// rates to narrow its capacity (bench.NextProbe): rates between the
	// largest that held and the lowest saturated one. 0: none, the
	// capacity is bracketed by the table's rates alone.
	Capacity int
	// AllowedCPUs, when set, are the CPUs the run picks its pollers' (and
	// SQ threads') CPUs from, instead of all those this process may use.
	AllowedCPUs []int
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
	o, code := netbenchOptions(args, stdout, stderr)
	if code < 0 {
		return ExitOK // --help
	}
	if code != 0 {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := Netbench(ctx, o, stderr)
	if rep != nil {
		fmt.Fprint(stdout, rep.Table())
		for _, k := range rep.Kinds {
			if k.Mode != "" {
				fmt.Fprintf(stdout, "  %s: %s\n", k.Label(), k.Mode)
			}
		}
		if ms := stolenMs(rep); ms >= stealNote {
			fmt.Fprintf(stdout, "  host: the hypervisor ran other work in place of this machine's CPUs for %d ms during the cells (steal time, /proc/stat); report.md names each repeat in which one CPU lost %d ms or more\n", ms, stealNote)
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

// netbenchOptions parses netbench's flags; a positive status means they
// were wrong (said on stderr), -1 that --help printed them on stdout.
func netbenchOptions(args []string, stdout, stderr io.Writer) (o NetbenchOptions, status int) {
	fs := flag.NewFlagSet("netbench", flag.ContinueOnError)
	kinds := fs.String("kinds", "", "comma-separated kinds (default: every kind this build has), and variants measured as rows of their own: "+
		"uring+sqpoll (SQPOLL, each tool's SQ thread on a CPU of its own: 4 CPUs), uring+napi (NAPI busy polling; the echo sleeps in io_uring_enter, GRO on the veth for those cells), "+
		"tcp-xdp+native and tcp-xdp+netstack (the userspace TCP engine), tcp+raw and tcp-xdp+raw (the echo in raw-bytes framing), "+
		"kind+ipv6 and tcp-xdp+netstack+ipv6 (over IPv6; --family makes them)")
	rates := fs.String("rates", DefaultRates, "comma-separated offered rates, messages per second")
	duration := durationFlag(fs, "duration", 5*time.Second, "measured time per cell, like `5s`")
	warmup := durationFlag(fs, "warmup", time.Second, "warm-up per cell, sent but not measured, like `1s`")
	drain := durationFlag(fs, "drain", load.DefaultDrain, "time to wait for answers after the last send, like `1s`")
	size := fs.Int("size", load.DefaultSize, "message size in bytes")
	batch := fs.Int("batch", load.DefaultBatch, "messages per Flush and per Rx")
	queues := fs.String("queues", "1", "queues of the test hosts or ports and of both tools (one poller each); a list (1,2,4) runs each kind with each and adds a scaling table")
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
	dpdkRxDesc := fs.Int("dpdk-rx-desc", 0, "RX ring size of the DPDK kinds (0: the default, 256, small for DDIO's sake; --xdp-ring's default is 2048)")
	poll := fs.String("poll", "busy", "busy: each poller spins on a CPU of its own (more pollers than CPUs are refused); yield: pollers sleep in Wait when idle (machines with too few CPUs; rows marked poll yield)")
	wait := fs.Bool("wait", false, "the same as --poll yield")
	cpus := fs.String("cpus", "", "CPUs of loadgen and echo: \"L,E\" with one queue (default: the first two allowed CPUs), or \"L;E\" lists in queue order (\"0,1;2,3\"), of which N queues use the first N")
	port := fs.Int("port", 5000, "first port; each cell uses the next one")
	sqpollCPUs := fs.String("sqpoll-cpus", "", "row uring+sqpoll: CPUs of the loadgen's and the echo's SQ threads, \"L,E\" (default: picked apart from the pollers)")
	capacity := fs.Int("capacity", 3, "probes per row after the table's rates, bisecting between the largest rate that held and the lowest saturated one, to find its capacity (0: the capacity from the table's rates alone)")
	family := fs.String("family", "4", "address families of the rows: 4, 6 (rows kind+ipv6, and tcp-xdp+netstack+ipv6 for tcp-xdp+netstack, over 2001:2::/48) or 4,6 (a row per family); the variants without an IPv6 row (uring+sqpoll, uring+napi, +raw, +native) run over IPv4")
	if status, done := parseFlags(fs, args, stdout, stderr); done {
		if status == ExitOK {
			fmt.Fprintf(stdout, "\n       netbench compare [--json FILE] A.json B.json\n       netbench report [--out DIR] results.json\n")
			return o, -1 // --help: nothing to run, exit 0
		}
		return o, status
	}
	if *duration <= 0 {
		fmt.Fprintf(stderr, "netbench: --duration %v: the measured time must be positive\n", *duration)
		return o, ExitUsage
	}
	if *port < 1 || *port > maxFirstPort {
		fmt.Fprintf(stderr, "netbench: --port %d: must be 1..%d (each cell takes the next port)\n", *port, maxFirstPort)
		return o, ExitUsage
	}
	counts, err := parseQueueCounts(*queues)
	if err != nil {
		fmt.Fprintln(stderr, "netbench:", err)
		return o, 2
	}
	mode, err := parsePoll(*poll, *wait)
	if err != nil {
		fmt.Fprintln(stderr, "netbench:", err)
		return o, 2
	}
	o = NetbenchOptions{
		Duration: *duration, Warmup: *warmup, Drain: *drain, Size: *size, Batch: *batch, Queues: slices.Max(counts), QueueCounts: counts, Repeat: *repeat,
		JSON: *jsonPath, Out: *out, Pcap: *pcap, IfaceA: *ifaceA, IfaceB: *ifaceB, Coalesce: *coalesce, IRQCPUs: *irqCPUs,
		XDPFrames: *xdpFrames, XDPRing: *xdpRing, DPDKRxDesc: *dpdkRxDesc, Wait: mode == dgramio.PollYield, Port: *port,
		LoadCPU: -1, EchoCPU: -1, Bar: isTerminal(stderr), Capacity: *capacity,
		Command: strings.TrimSpace("netbench " + strings.Join(args, " ")),
	}
	switch o.Out {
	case "auto":
		host, _ := os.Hostname()
		o.Out = filepath.Join("bench", "results", time.Now().Format("20060102-150405")+"-"+host)
	case "none":
		o.Out = ""
	}
	if o.Rates, err = bench.ParseRates(*rates); err != nil {
		fmt.Fprintln(stderr, "netbench:", err)
		return o, 2
	}
	if *kinds != "" {
		o.KindsGiven = true
		for _, k := range strings.Split(*kinds, ",") {
			if k = strings.TrimSpace(k); k != "" {
				o.Kinds = append(o.Kinds, k)
			}
		}
		if err := parseRows(o.Kinds); err != nil {
			fmt.Fprintln(stderr, "netbench:", err)
			return o, 2
		}
	} else {
		o.Kinds = kindNames(dgramio.Kinds())
	}
	if o.Kinds, err = familyRows(o.Kinds, *family); err != nil {
		fmt.Fprintln(stderr, "netbench:", err)
		return o, 2
	}
	if err := checkNetbenchSize(o.Kinds, *size); err != nil {
		fmt.Fprintln(stderr, "netbench:", err)
		return o, 2
	}
	if err := o.parseCPUFlags(*cpus, *sqpollCPUs); err != nil {
		fmt.Fprintln(stderr, "netbench:", err)
		return o, 2
	}
	return o, 0
}

// maxFirstPort bounds --port: each cell of a run takes the next port, and
// the last must still be a port (as dgramio-bulk's --port).
const maxFirstPort = 55535

// familyRows applies --family to the rows: "4" leaves them, "6" makes
// each plain row of a kind that serves IPv6 its IPv6 row (udp → udp+ipv6), "4,6" puts
// the IPv6 row after the plain one. Rows of other kinds and variants stay
// as they are (IPv4); a row named twice is run once.
func familyRows(rows []string, family string) ([]string, error) {
	var v4, v6 bool
	for _, f := range strings.Split(family, ",") {
		switch strings.TrimSpace(f) {
		case "4":
			v4 = true
		case "6":
			v6 = true
		default:
			return nil, fmt.Errorf("--family %q: want 4, 6 or 4,6", family)
		}
	}
	var out []string
	add := func(r string) {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	for _, r := range rows {
		kind, variant := bench.SplitRow(r)
		r6, ok := bench.IPv6Row(kind, variant)
		if bench.IsIPv6(variant) || !ok || !dgramio.Kind(kind).ServesIPv6() {
			add(r)
			continue
		}
		if v4 {
			add(r)
		}
		if v6 {
			add(r6)
		}
	}
	return out, nil
}

// parseCPUFlags sets the CPUs of o from --cpus and --sqpoll-cpus.
func (o *NetbenchOptions) parseCPUFlags(cpus, sqpollCPUs string) error {
	var err error
	if sqpollCPUs != "" {
		if o.SQPollCPUs, err = parseCPUs(sqpollCPUs); err != nil || len(o.SQPollCPUs) != 2 {
			return fmt.Errorf("--sqpoll-cpus %q: want two CPU numbers, \"L,E\"", sqpollCPUs)
		}
	}
	if ls, es, ok := strings.Cut(cpus, ";"); ok {
		if o.LoadCPUs, err = parseCPUs(ls); err == nil {
			o.EchoCPUs, err = parseCPUs(es)
		}
		if err != nil || len(o.LoadCPUs) == 0 || len(o.EchoCPUs) == 0 {
			return fmt.Errorf("--cpus %q: want \"L;E\", the CPUs of the loadgen's queues and of the echo's (\"0,1;2,3\")", cpus)
		}
		o.LoadCPU, o.EchoCPU = o.LoadCPUs[0], o.EchoCPUs[0]
	} else if cpus != "" {
		var l, e int
		if _, err := fmt.Sscanf(cpus, "%d,%d", &l, &e); err != nil || l < 0 || e < 0 {
			return fmt.Errorf("--cpus %q: want two CPU numbers, \"0,1\", or \"L;E\" lists with several queues", cpus)
		}
		o.LoadCPU, o.EchoCPU = l, e
	}
	return nil
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
	rep.Reassess()
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

type netbench struct {
	o      NetbenchOptions
	prog   *progress
	rep    bench.Report
	a, b   *side // the test hosts (or ports) of the cell running now
	logDir string
	// pports are the real ports, when the run has them.
	pports *ports.Ports
	// sqLoad and sqEcho are the CPUs of the SQ threads of row
	// uring+sqpoll, or sqReason why the row cannot run here.
	sqLoad, sqEcho int
	sqReason       string
	// sets are the test hosts of each number of queues (on veth, a pair
	// with that many queues; real ports serve every number); cur is the
	// one in use.
	sets map[int]*hostSet
	cur  *hostSet
	// The rows of the run (a kind or a variant, with a number of queues),
	// those that cannot run and why, and the repeats of each cell by
	// cellKey; idx numbers the cells run (each on a port of its own).
	rows    map[rowKey]*bench.KindRow
	failed  map[rowKey]*Failure
	runs    map[string][]bench.Cell
	probes  map[rowKey][]float64 // the capacity's probe rates of each row, in order
	idx     int
	perCell time.Duration
}

// hostSet is the two sides a cell with some number of queues runs on.
type hostSet struct {
	a, b *side
	// pair is the veth pair (nil for real ports); neigh whether it has
	// static neighbour entries.
	pair  *testhost.Pair
	neigh bool
}

// hasIPv6Rows reports whether a row of the run is a kind over IPv6
// (bench.VariantIPv6): the test hosts then have IPv6 on.
func (nb *netbench) hasIPv6Rows() bool {
	for _, k := range nb.o.Kinds {
		if _, v := bench.SplitRow(k); bench.IsIPv6(v) {
			return true
		}
	}
	return false
}

// use makes the hosts of n queues those of the next cell.
func (nb *netbench) use(n int) {
	if s := nb.sets[n]; s != nil {
		nb.a, nb.b, nb.cur = s.a, s.b, s
	}
}

// hosts makes the veth test hosts, a pair for each number of queues, or
// prepares the real ports, and returns how to remove them (or restore the
// ports).
func (nb *netbench) hosts() (func() error, error) {
	o := nb.o
	e := &nb.rep.Env
	e.Offloads = map[string]string{}
	nb.sets = map[int]*hostSet{}
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
		set := &hostSet{
			a: &side{ep: p.A, iface: p.A.Iface, addr: p.A.Addr, prefix: p.A.Prefix, mac: p.A.MAC},
			b: &side{ep: p.B, iface: p.B.Iface, addr: p.B.Addr, prefix: p.B.Prefix, mac: p.B.MAC},
		}
		for _, n := range o.QueueCounts {
			nb.sets[n] = set
		}
		nb.use(o.QueueCounts[0])
		e.Link = "ports"
		e.Setup = p.Setup()
		for _, s := range e.Setup {
			nb.prog.logf("ports: %s", s)
		}
		nb.recordSides()
		return p.Close, nil
	}
	var pairs []*testhost.Pair
	closeAll := func() error {
		var errs []error
		for _, p := range pairs {
			errs = append(errs, p.Close())
		}
		return errors.Join(errs...)
	}
	for _, n := range o.QueueCounts {
		if nb.sets[n] != nil {
			continue
		}
		ho := testhost.Options{Queues: n, IPv6: nb.hasIPv6Rows()}
		if n > 1 {
			ho.XPSCPUs, _ = nb.queueCPUs(n)
		}
		p, err := testhost.New(ho)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("test hosts with %d queues: %w", n, err), closeAll())
		}
		pairs = append(pairs, p)
		set := &hostSet{
			a:    &side{ep: p.A, iface: p.A.Iface, addr: p.A.Addr, addr6: p.A.Addr6, prefix: p.A.Prefix, mac: p.A.MAC},
			b:    &side{ep: p.B, iface: p.B.Iface, addr: p.B.Addr, addr6: p.B.Addr6, prefix: p.B.Prefix, mac: p.B.MAC},
			pair: p,
		}
		if n > 1 {
			set.neigh = true
			if err := staticNeighbours(p); err != nil {
				return nil, errors.Join(fmt.Errorf("test hosts with %d queues: %w", n, err), closeAll())
			}
			e.Setup = append(e.Setup, fmt.Sprintf("%d queues: veth %s / %s with %d queues, XPS CPU %s → TX queue 0, 1, … on both ends, static neighbour entries both ways",
				n, p.A.Iface, p.B.Iface, n, formatCPUs(ho.XPSCPUs)))
		}
		nb.sets[n] = set
	}
	nb.use(o.QueueCounts[0])
	e.Link = "veth"
	nb.recordSides()
	return closeAll, nil
}

// staticNeighbours gives both ends of p permanent neighbour entries for
// each other's addresses, the kernel's and those of the userspace TCP
// kinds: a datagram that waits for ARP leaves from the CPU that handles
// the ARP reply, on that CPU's TX queue, and a connected socket keeps the
// TX queue of its first datagram, so without them a flow can start on
// another queue than its poller's.
func staticNeighbours(p *testhost.Pair) error {
	for _, x := range []struct{ h, peer *testhost.Host }{{p.A, p.B}, {p.B, p.A}} {
		peer := &side{addr: x.peer.Addr, prefix: x.peer.Prefix}
		for _, ip := range []netip.Addr{x.peer.Addr, stackAddr(peer), x.peer.Addr6} {
			if !ip.IsValid() {
				continue // no IPv6 on these hosts
			}
			if err := x.h.AddNeigh(ip, x.peer.MAC); err != nil {
				return fmt.Errorf("neighbour %s on %s: %w", ip, x.h.Iface, err)
			}
		}
	}
	return nil
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
		allowed, _ := nb.hostCPUs()
		away := map[int]bool{}
		for _, c := range append([]int{o.LoadCPU, o.EchoCPU}, append(slices.Clone(o.LoadCPUs), o.EchoCPUs...)...) {
			if c < 0 {
				continue
			}
			away[c] = true
			sib, _ := preflight.Host.Siblings(c)
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
	if a, err = preflight.ParseCPUList(as); err == nil {
		b, err = preflight.ParseCPUList(bs)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("--irq-cpus: %w", err)
	}
	return a, b, nil
}

// preflight looks at what moves results by microseconds and records it.
func (nb *netbench) preflight() {
	o := nb.o
	var pp []preflight.PreflightPort
	if nb.pports != nil {
		for _, x := range []struct {
			h    *ports.Host
			role string
		}{{nb.pports.A, "loadgen"}, {nb.pports.B, "echo"}} {
			pp = append(pp, preflight.PreflightPort{Iface: x.h.Iface, Role: x.role, NUMANode: x.h.NUMANode, IRQs: x.h.IRQs, RxUsecs: x.h.RxUsecs})
		}
	} else {
		pp = []preflight.PreflightPort{{Iface: nb.a.iface, Role: "loadgen", Veth: true}, {Iface: nb.b.iface, Role: "echo", Veth: true}}
	}
	lc, ec := o.LoadCPU, o.EchoCPU
	if !slices.Contains(o.QueueCounts, 1) && len(o.LoadCPUs) > 0 && len(o.EchoCPUs) > 0 {
		// Only groups run: their first pollers stand for them.
		lc, ec = o.LoadCPUs[0], o.EchoCPUs[0]
	}
	nb.rep.Env.Preflight = preflight.Preflight(preflight.Host, pp, lc, ec)
	for _, c := range nb.rep.Env.Preflight {
		if c.Status == preflight.StatusWarn {
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
		if r.Reason == "" && !hasCaptureOf(files, r.Name(), nb.o.Kinds) {
			none = append(none, r.Name())
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
		for _, n := range nb.o.QueueCounts {
			kind, variant := bench.SplitRow(k)
			nb.rep.Kinds = append(nb.rep.Kinds, bench.KindRow{Kind: kind, Variant: variant, Queues: queuesField(n), Reason: class + ": " + reason})
		}
	}
}

// queuesField is n queues as KindRow.Queues and Cell.Queues hold it: 0
// for one, so that a report of one queue reads as before.
func queuesField(n int) int {
	if n <= 1 {
		return 0
	}
	return n
}

// parseQueueCounts parses --queues: a number of queues, or several
// ("1,2,4"), each 1..dgramio.MaxQueues, in the order given, without repeats.
func parseQueueCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > dgramio.MaxQueues {
			return nil, fmt.Errorf("--queues %q: %q is not a number of queues (1..%d)", s, f, dgramio.MaxQueues)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--queues %q: no number of queues given", s)
	}
	return out, nil
}

// pickQueueCPUs fills in LoadCPUs and EchoCPUs for the largest number of
// queues, unless given: with busy polling a CPU of its own for each of
// the 2N pollers while there are enough (checkBusy refuses the run
// otherwise), with yielding pollers the q-th allowed CPU (round robin) for
// queue q of both tools.
func (nb *netbench) pickQueueCPUs(allowed []int) {
	o := &nb.o
	n := o.Queues
	if len(o.LoadCPUs) > 0 || len(o.EchoCPUs) > 0 {
		return
	}
	if !o.Wait && 2*n <= len(allowed) {
		o.LoadCPUs = slices.Clone(allowed[:n])
		o.EchoCPUs = slices.Clone(allowed[n : 2*n])
		return
	}
	o.LoadCPUs, o.EchoCPUs = make([]int, n), make([]int, n)
	for q := range n {
		o.LoadCPUs[q] = allowed[q%len(allowed)]
		o.EchoCPUs[q] = allowed[q%len(allowed)]
	}
}

// queueCPUs returns the CPUs of the loadgen's and the echo's queues with n
// queues (n > 1); nil when the tools are not pinned.
func (nb *netbench) queueCPUs(n int) (load, echo []int) {
	o := &nb.o
	if len(o.LoadCPUs) < n || len(o.EchoCPUs) < n {
		return nil, nil
	}
	return o.LoadCPUs[:n], o.EchoCPUs[:n]
}

// checkBusy refuses busy polling with more pollers than CPUs: with N > 1
// queues the loadgen and the echo run N pollers each, in two processes,
// and each group checks only its own N against the CPUs, so the sum is
// checked here: 2N distinct CPUs that this process may use. It also
// checks the lengths of CPU lists given with --cpus.
func (nb *netbench) checkBusy() error {
	o := &nb.o
	if o.Queues <= 1 {
		return nil
	}
	if (len(o.LoadCPUs) > 0 || len(o.EchoCPUs) > 0) && (len(o.LoadCPUs) < o.Queues || len(o.EchoCPUs) < o.Queues) {
		return fmt.Errorf("--cpus: %d queues need %d CPUs for each tool; given %s for the loadgen and %s for the echo",
			o.Queues, o.Queues, formatCPUs(o.LoadCPUs), formatCPUs(o.EchoCPUs))
	}
	if o.Wait {
		return nil
	}
	allowed, err := nb.hostCPUs()
	if err != nil {
		return nil // env noted it; the groups check what they can
	}
	for _, n := range o.QueueCounts {
		if n == 1 {
			continue
		}
		if 2*n > len(allowed) {
			return fmt.Errorf("busy polling with %d queues needs %d CPUs, one per poller (%d of the loadgen and %d of the echo, two processes: each group checks only its own); "+
				"this process may use %d (%s). Use --poll yield (pollers sleep when idle; the report marks the rows poll yield), fewer queues, or a host with more CPUs",
				n, 2*n, n, n, len(allowed), cpu.FormatList(allowed))
		}
		l, e := nb.queueCPUs(n)
		seen := map[int]string{}
		for _, x := range []struct {
			tool string
			cpus []int
		}{{"loadgen", l}, {"echo", e}} {
			for q, c := range x.cpus {
				who := fmt.Sprintf("%s queue %d", x.tool, q)
				if !slices.Contains(allowed, c) {
					return fmt.Errorf("--cpus: CPU %d (%s) is not one this process may use (%s)", c, who, cpu.FormatList(allowed))
				}
				if other, dup := seen[c]; dup {
					return fmt.Errorf("busy polling with %d queues: CPU %d is given to %s and to %s; two busy pollers on one CPU take turns at the scheduler's pace. "+
						"Give each of the %d pollers a CPU of its own (--cpus \"L;E\"), or use --poll yield", n, c, other, who, 2*n)
				}
				seen[c] = who
			}
		}
	}
	return nil
}

// finish writes the report (and the plots) where the options say and
// returns it with err.
func (nb *netbench) finish(err error) (*bench.Report, error) {
	rep := &nb.rep
	rep.Scaling = rep.ComputeScaling()
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
	if len(o.QueueCounts) > 1 {
		e.QueueCounts = o.QueueCounts
	}
	e.Repeat = o.Repeat
	e.Order = "each repeat runs every rate in turn and, at each rate, every kind in turn (the kinds' order rotates by one each repeat), so the machine's drift hits every kind alike; a cell's two tools start afresh each time"
	allowed, err := nb.hostCPUs()
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
	e.Poll = string(dgramio.PollBusy)
	if o.Wait {
		e.Poll = string(dgramio.PollYield)
	}
	e.Pinning = nb.pinning(allowed)
	if len(allowed) > 0 && len(allowed) <= 2 && !o.Wait && o.Queues == 1 {
		e.Notes = append(e.Notes, fmt.Sprintf("only %d CPUs: the two pollers busy-poll CPUs %d and %d, leaving none free for the kernel's softirq work and the rest of the system", len(allowed), o.LoadCPU, o.EchoCPU))
	}
	for _, k := range o.Kinds {
		if dgramio.Kind(k) == dgramio.KindTCPXDP || dgramio.Kind(k) == dgramio.KindTCPDPDK {
			e.Notes = append(e.Notes, fmt.Sprintf("tcp-xdp and tcp-dpdk use addresses of their own, %d above the kernel's on each side (the kernel's stack would reset their connections)", stackOffset))
			break
		}
	}
	if o.XDPFrames > 0 || o.XDPRing > 0 {
		e.Notes = append(e.Notes, fmt.Sprintf("AF_XDP kinds: %d UMEM frames, rings of %d (0: the default)", o.XDPFrames, o.XDPRing))
	}
	if o.DPDKRxDesc > 0 {
		e.Notes = append(e.Notes, fmt.Sprintf("DPDK kinds: RX rings of %d descriptors", o.DPDKRxDesc))
	}
	nb.sqpollEnv(allowed)
	for _, k := range o.Kinds {
		if _, v := bench.SplitRow(k); v == bench.VariantNAPI {
			if o.IfaceA != "" {
				e.Notes = append(e.Notes, "uring+napi: GRO left as it is on the real ports (a NIC's queue is a NAPI instance with or without it)")
			} else {
				e.Notes = append(e.Notes, "uring+napi: GRO (rx-gro) turned on at both veth ends for that row's cells only, and put back after each: "+
					"without GRO a veth end takes its packets through the per-CPU backlog, the socket has no NAPI ID (SO_INCOMING_NAPI_ID 0) and NAPI busy polling has nothing to poll; "+
					"every other row runs with GRO as the kernel leaves it on veth (off)")
			}
			break
		}
	}
}

// pinning says where the tools' pollers run, picking the queues' CPUs
// from allowed when the run has several queues.
func (nb *netbench) pinning(allowed []int) string {
	o := &nb.o
	cpuName := func(c int) string {
		if c < 0 {
			return "no CPU in particular (unpinned)"
		}
		return "CPU " + strconv.Itoa(c)
	}
	pinning := fmt.Sprintf("loadgen on %s, echo on %s, each in its own process; netbench itself unpinned", cpuName(o.LoadCPU), cpuName(o.EchoCPU))
	if o.Queues > 1 {
		if len(allowed) > 0 {
			nb.pickQueueCPUs(allowed)
		}
		var ns []string
		for _, n := range o.QueueCounts {
			if n == 1 {
				ns = append(ns, "with 1 queue as above")
				continue
			}
			l, ec := nb.queueCPUs(n)
			if len(l) == 0 {
				ns = append(ns, fmt.Sprintf("with %d queues unpinned", n))
				continue
			}
			ns = append(ns, fmt.Sprintf("with %d queues loadgen's queues on CPUs %s, echo's on CPUs %s", n, formatCPUs(l), formatCPUs(ec)))
		}
		if o.QueueCounts[0] > 1 && len(o.QueueCounts) == 1 {
			pinning = "each tool in its own process, a poller per queue on a thread of its own; netbench itself unpinned"
		}
		pinning += "; " + strings.Join(ns, "; ")
	}
	if o.Wait {
		pinning += "; pollers sleep in Wait when idle (poll yield)"
	} else {
		pinning += "; pollers busy-poll their CPU (poll busy)"
	}
	return pinning
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

// stackOffset is how far above the kernel's address of a side the
// userspace TCP kinds' own address is (198.18.n.1 → 198.18.n.11).
const stackOffset = 10

// stackAddr6 is stackAddr over IPv6: the side's IPv6 address stackOffset
// higher in its last byte (2001:2:0:n::1 → 2001:2:0:n::b), in its /64.
func stackAddr6(s *side) netip.Addr {
	a := s.addr6.As16()
	if int(a[15])+stackOffset > 254 {
		return s.addr6
	}
	a[15] += stackOffset
	return netip.AddrFrom16(a)
}

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

// withoutAddrs takes the kernel's addresses off both veth ends for a
// cell, and returns what puts them back.
func (nb *netbench) withoutAddrs() (func(), error) {
	type addrs interface {
		DelAddr() error
		AddAddr() error
	}
	var done []addrs
	cur := nb.cur
	restore := func() {
		for _, h := range done {
			if err := h.AddAddr(); err != nil {
				nb.prog.logf("netbench: put the address back: %v", err)
			}
		}
		// Taking the last address off flushes the neighbour table.
		if len(done) > 0 && cur != nil && cur.neigh {
			if err := staticNeighbours(cur.pair); err != nil {
				nb.prog.logf("netbench: %v", err)
			}
		}
	}
	for _, s := range []*side{nb.a, nb.b} {
		h, ok := s.ep.(addrs)
		if !ok {
			restore()
			return nil, fmt.Errorf("cannot take the address off %s for DPDK's net_af_packet", s.iface)
		}
		if err := h.DelAddr(); err != nil {
			restore()
			return nil, fmt.Errorf("take the address off %s: %w", s.iface, err)
		}
		done = append(done, h)
	}
	return restore, nil
}

// kindNames returns the kinds' names, as --kinds takes them.
func kindNames(ks []dgramio.Kind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}
