package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench"
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
	// the queues of the test hosts and of the backends.
	Size, Batch, Queues int
	// JSON is a file for the report; Out a directory for results.json,
	// table.txt and the tools' logs.
	JSON, Out string
	// IfaceA and IfaceB are two real ports to use instead of a veth pair.
	IfaceA, IfaceB string
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
	// Command is the command line, for the report.
	Command string
}

// NetbenchMain is netbench's command line: it parses args into
// NetbenchOptions and runs Netbench, printing the table on stdout and the
// progress on stderr. It returns the exit status.
func NetbenchMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("netbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kinds := fs.String("kinds", "", "comma-separated kinds (default: every kind this build has)")
	rates := fs.String("rates", DefaultRates, "comma-separated offered rates, messages per second")
	duration := fs.Duration("duration", 5*time.Second, "measured time per cell")
	warmup := fs.Duration("warmup", time.Second, "warm-up per cell, sent but not measured")
	drain := fs.Duration("drain", bench.DefaultDrain, "time to wait for answers after the last send")
	size := fs.Int("size", bench.DefaultSize, "message size in bytes")
	batch := fs.Int("batch", bench.DefaultBatch, "messages per Flush and per Rx")
	queues := fs.Int("queues", 1, "queues of the test hosts and the backends")
	jsonPath := fs.String("json", "", "write the JSON report to this file")
	out := fs.String("out", "auto", "write results.json, report.md, table.txt and the tools' logs into this directory (auto: bench/results/<date>-<host>; none: nowhere)")
	ifaceA := fs.String("iface-a", "", "first of two real ports cabled together (instead of a veth pair)")
	ifaceB := fs.String("iface-b", "", "second real port")
	wait := fs.Bool("wait", false, "yielding mode: the tools sleep in Wait when idle instead of busy polling")
	cpus := fs.String("cpus", "", "CPUs of loadgen and echo, \"L,E\" (default: the first two allowed CPUs)")
	port := fs.Int("port", 5000, "first port; each cell uses the next one")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o := NetbenchOptions{
		Duration: *duration, Warmup: *warmup, Drain: *drain, Size: *size, Batch: *batch, Queues: *queues,
		JSON: *jsonPath, Out: *out, IfaceA: *ifaceA, IfaceB: *ifaceB, Wait: *wait, Port: *port,
		LoadCPU: -1, EchoCPU: -1,
		Command: "netbench " + strings.Join(args, " "),
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
		fmt.Fprintf(stderr, "netbench: results in %s\n", o.Out)
	}
	if err != nil {
		fmt.Fprintln(stderr, "netbench:", err)
		return 1
	}
	return 0
}

// Netbench makes the test hosts, runs every kind at every rate (echo in
// namespace B, loadgen in namespace A, separate processes on separate
// CPUs), and returns the report. It writes the report where o says. A kind
// that cannot run gets a row saying why; the error is for what stops the
// whole run (no test hosts, nothing measured).
func Netbench(ctx context.Context, o NetbenchOptions, progress io.Writer) (*bench.Report, error) {
	if o.Duration <= 0 || o.Warmup < 0 || o.Size < bench.HeaderLen || o.Batch < 1 || o.Queues < 1 {
		return nil, fmt.Errorf("bad options: duration %v, warm-up %v, size %d (>= %d), batch %d, queues %d",
			o.Duration, o.Warmup, o.Size, bench.HeaderLen, o.Batch, o.Queues)
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
	nb := &netbench{o: o, progress: progress}
	nb.rep.Rates = o.Rates
	nb.env()
	if o.IfaceA != "" || o.IfaceB != "" {
		// Two real ports need one of them moved into its own namespace
		// and restored afterwards; not built yet.
		err := core.NotSupported("real ports (--iface-a/--iface-b)", "", "not implemented yet: use the default veth pair", nil)
		nb.failAll(ClassNotSupported, err.Error())
		return nb.finish(err)
	}

	var err error
	nb.logDir = o.Out
	if nb.logDir == "" {
		if nb.logDir, err = os.MkdirTemp("", "netbench-"); err != nil {
			return nil, fmt.Errorf("temporary directory: %w", err)
		}
		defer os.RemoveAll(nb.logDir)
	} else if err := os.MkdirAll(filepath.Join(nb.logDir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}

	p, err := testhost.New(testhost.Options{Queues: o.Queues})
	if err != nil {
		nb.failAll(Classify("", err), "test hosts: "+err.Error())
		return nb.finish(fmt.Errorf("test hosts: %w", err))
	}
	defer p.Close()
	nb.pair = p
	nb.rep.Env.Link = "veth"
	nb.rep.Env.Ifaces = []string{p.A.Iface + " " + p.A.Prefix.String() + " (loadgen)", p.B.Iface + " " + p.B.Prefix.String() + " (echo)"}
	nb.rep.Env.Offloads = map[string]string{}
	for name, h := range map[string]*testhost.Host{"a": p.A, "b": p.B} {
		if offs, err := h.Offloads(); err == nil {
			for f, on := range offs {
				nb.rep.Env.Offloads[name+"."+f] = map[bool]string{true: "on", false: "off"}[on]
			}
		} else {
			nb.rep.Env.Notes = append(nb.rep.Env.Notes, "offloads of "+name+": "+err.Error())
		}
	}

	failed := map[string]*Failure{}
	rows := map[string]*bench.KindRow{}
	for _, k := range o.Kinds {
		rows[k] = &bench.KindRow{Kind: k}
	}
	idx := 0
	for _, rate := range o.Rates {
		for _, kind := range o.Kinds {
			if failed[kind] != nil {
				continue
			}
			if ctx.Err() != nil {
				break
			}
			c, f := nb.cell(ctx, kind, rate, o.Port+idx)
			idx++
			if f != nil {
				failed[kind] = f
				continue
			}
			if c.Mode != "" {
				rows[kind].Mode = c.Mode
				nb.rep.Env.Modes[kind] = c.Mode
			}
			nb.rep.Cells = append(nb.rep.Cells, *c)
			fmt.Fprintf(progress, "%s %s: %s\n", kind, bench.FormatRate(rate), c.Display)
		}
	}
	if ctx.Err() != nil {
		nb.rep.Env.Notes = append(nb.rep.Env.Notes, "interrupted: the report is partial")
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
	if len(nb.rep.Cells) == 0 {
		if len(nb.rep.Env.NotBuilt) > 0 {
			return nb.finish(fmt.Errorf("no cell was measured (not built into this binary: %s)", strings.Join(nb.rep.Env.NotBuilt, ", ")))
		}
		return nb.finish(errors.New("no cell was measured"))
	}
	return nb.finish(nil)
}

type netbench struct {
	o        NetbenchOptions
	progress io.Writer
	rep      bench.Report
	pair     *testhost.Pair
	logDir   string
}

// failAll gives every kind the same reason.
func (nb *netbench) failAll(class, reason string) {
	for _, k := range nb.o.Kinds {
		nb.rep.Kinds = append(nb.rep.Kinds, bench.KindRow{Kind: k, Reason: class + ": " + reason})
	}
}

// finish writes the report where the options say and returns it with err.
func (nb *netbench) finish(err error) (*bench.Report, error) {
	rep := &nb.rep
	b, jerr := json.MarshalIndent(rep, "", "  ")
	if jerr != nil {
		return rep, errors.Join(err, fmt.Errorf("encode report: %w", jerr))
	}
	b = append(b, '\n')
	var werrs []error
	if nb.o.JSON != "" {
		if e := os.WriteFile(nb.o.JSON, b, 0o644); e != nil {
			werrs = append(werrs, fmt.Errorf("write report: %w", e))
		}
	}
	if nb.o.Out != "" {
		if e := os.MkdirAll(nb.o.Out, 0o755); e != nil {
			werrs = append(werrs, fmt.Errorf("output directory: %w", e))
		} else {
			if e := os.WriteFile(filepath.Join(nb.o.Out, "results.json"), b, 0o644); e != nil {
				werrs = append(werrs, fmt.Errorf("write report: %w", e))
			}
			if e := os.WriteFile(filepath.Join(nb.o.Out, "table.txt"), []byte(rep.Table()), 0o644); e != nil {
				werrs = append(werrs, fmt.Errorf("write table: %w", e))
			}
			if e := os.WriteFile(filepath.Join(nb.o.Out, "report.md"), []byte(rep.Markdown()), 0o644); e != nil {
				werrs = append(werrs, fmt.Errorf("write report: %w", e))
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

// child starts "<exe> mode args..." in host h, its stderr into logPath.
func (nb *netbench) child(h *testhost.Host, logPath string, mode string, args ...string) (*exec.Cmd, io.ReadCloser, *os.File, error) {
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

// cell runs one kind at one rate on port. A failure that concerns the
// whole kind (it cannot be opened here) comes back as a Failure; anything
// else is the cell's Error.
func (nb *netbench) cell(ctx context.Context, kind string, rate float64, port int) (*bench.Cell, *Failure) {
	o := nb.o
	p := nb.pair
	name := fmt.Sprintf("%s-%s", kind, bench.FormatRate(rate))
	dir := nb.logDir
	if o.Out != "" {
		dir = filepath.Join(o.Out, "logs")
	}
	echoJSON, loadJSON := filepath.Join(dir, name+"-echo.json"), filepath.Join(dir, name+"-loadgen.json")
	common := []string{"--kind", kind, "--port", strconv.Itoa(port), "--batch", strconv.Itoa(o.Batch)}
	if o.Wait {
		common = append(common, "--wait")
	}
	if o.Size > core.DefaultMaxDatagram {
		common = append(common, "--max-datagram", strconv.Itoa(o.Size))
	}
	run := o.Warmup + o.Duration + o.Drain
	errCell := func(msg string) (*bench.Cell, *Failure) {
		c := &bench.Cell{Kind: kind, Rate: rate, Error: msg, Saturated: true}
		c.Display = c.Format()
		fmt.Fprintf(nb.progress, "%s: %s\n", name, msg)
		return c, nil
	}

	fmt.Fprintf(nb.progress, "%s: running (%v warm-up, %v, up to %v drain)\n", name, o.Warmup, o.Duration, o.Drain)
	before := nb.hostCounters()
	echoArgs := append(append([]string{}, common...), "--local", p.B.Addr.String(), "--iface", p.B.Iface,
		"--cpu", strconv.Itoa(o.EchoCPU), "--stats", echoJSON, "--max-time", (run + 5*time.Minute).String())
	echo, echoOut, echoLog, err := nb.child(p.B, filepath.Join(dir, name+"-echo.log"), "echo", echoArgs...)
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

	loadArgs := append(append([]string{}, common...), "--local", p.A.Addr.String(), "--dst", p.B.Addr.String(), "--iface", p.A.Iface,
		"--cpu", strconv.Itoa(o.LoadCPU), "--rate", strconv.FormatFloat(rate, 'f', -1, 64),
		"--warmup", o.Warmup.String(), "--duration", o.Duration.String(), "--drain", o.Drain.String(),
		"--size", strconv.Itoa(o.Size), "--json", loadJSON)
	load, loadOut, loadLog, err := nb.child(p.A, filepath.Join(dir, name+"-loadgen.log"), "loadgen", loadArgs...)
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
	return &c, nil
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
