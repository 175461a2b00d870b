package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/bench/load"
)

// argv is a child tool's command line, built flag by flag.
type argv []string

// add appends flag and its values ("--kind", "udp").
func (a *argv) add(flag string, vals ...string) { *a = append(*a, append([]string{flag}, vals...)...) }

// addInt appends flag with n as its value.
func (a *argv) addInt(flag string, n int) { a.add(flag, strconv.Itoa(n)) }

// addIf appends flag and its values when on.
func (a *argv) addIf(on bool, flag string, vals ...string) {
	if on {
		a.add(flag, vals...)
	}
}

// addPositive appends flag with n as its value when n > 0 (an option left
// at its default is not passed).
func (a *argv) addPositive(flag string, n int) { a.addIf(n > 0, flag, strconv.Itoa(n)) }

// cellRun is one cell being run: its row, rate and port, and what it
// changed on the hosts for the cell (undone by restore).
type cellRun struct {
	nb            *netbench
	kind, variant string
	n             int
	rate          float64
	port          int
	name          string
	poll          string
	// load and echo are the tools' command lines.
	load, echo argv
	// notes are remarks for the cell; undo what restore reverts.
	notes []string
	undo  []func()
}

func (r *cellRun) restore() {
	for i := len(r.undo) - 1; i >= 0; i-- {
		r.undo[i]()
	}
}

// errCell is the cell of a run that failed with msg.
func (r *cellRun) errCell(msg string) (*bench.Cell, *Failure) {
	c := &bench.Cell{Kind: r.kind, Variant: r.variant, Queues: queuesField(r.n), Poll: r.poll, Rate: r.rate, Error: msg, Saturated: true}
	c.Display = c.Format()
	return c, nil
}

func (r *cellRun) path(suffix string) string { return filepath.Join(r.nb.logDir, r.name+suffix) }

// cell runs one row (a kind, or a variant of one: "uring+napi") with n
// queues at one rate on port; name names its logs. A failure that
// concerns the whole row (it cannot be opened here) comes back as a
// Failure; anything else is the cell's Error.
func (nb *netbench) cell(ctx context.Context, row string, n int, rate float64, port int, name string) (*bench.Cell, *Failure) {
	kind, variant := bench.SplitRow(row)
	nb.use(n)
	r := &cellRun{nb: nb, kind: kind, variant: variant, n: n, rate: rate, port: port, name: name, poll: string(dgramio.PollBusy)}
	defer r.restore()
	if err := r.prepare(); err != nil {
		return r.errCell(err.Error())
	}
	before := nb.hostCounters()
	echo, echoLog, c, f := r.startEcho()
	if echo == nil {
		return c, f
	}
	defer echoLog.Close()
	loadErr, loadOut, err := r.runLoad(ctx)
	_ = echo.Process.Signal(syscall.SIGTERM)
	echoErr := waitExit(echo, 15*time.Second)
	if err != nil {
		return r.errCell("loadgen: " + err.Error())
	}
	after := nb.hostCounters()
	return r.result(loadErr, loadOut, echoErr, diffCounters(before, after))
}

// prepare builds both tools' command lines and changes what the cell
// needs on the hosts (the addresses off the veth for DPDK's
// net_af_packet, GRO on for NAPI).
func (r *cellRun) prepare() error {
	nb, o := r.nb, &r.nb.o
	a, b := nb.a, nb.b
	var common argv
	common.add("--kind", r.kind)
	common.addInt("--port", r.port)
	common.addInt("--batch", o.Batch)
	if o.Wait {
		r.poll = string(dgramio.PollYield)
		common.add("--poll", r.poll)
	}
	common.addIf(r.n > 1, "--queues", strconv.Itoa(r.n))
	common.addIf(o.Size > dgramio.DefaultMaxDatagram, "--max-datagram", strconv.Itoa(o.Size))
	common.addPositive("--xdp-frames", o.XDPFrames)
	common.addIf(o.DPDKRxDesc > 0 && strings.Contains(r.kind, "dpdk"), "--dpdk-rx-desc", strconv.Itoa(o.DPDKRxDesc))
	common.addPositive("--xdp-ring", o.XDPRing)
	r.load, r.echo = append(argv{}, common...), append(argv{}, common...)
	for _, t := range []struct {
		args *argv
		tool string
	}{{&r.load, "loadgen"}, {&r.echo, "echo"}} {
		t.args.addIf(o.Pcap != "", "--pcap", filepath.Join(o.Pcap, r.name+"-"+t.tool))
	}
	if err := r.pinArgs(); err != nil {
		return err
	}
	r.load = append(r.load, nb.variantArgs(r.variant, "loadgen")...)
	r.echo = append(r.echo, nb.variantArgs(r.variant, "echo")...)

	// The userspace TCP must not share its address with the kernel's
	// stack on the same interface (the kernel would reset its
	// connections): it gets one of its own in the same subnet.
	loadIP, echoIP := a.addr, b.addr
	userTCP := r.kind == string(dgramio.KindTCPXDP) || r.kind == string(dgramio.KindTCPDPDK)
	switch {
	case userTCP && bench.IsIPv6(r.variant):
		loadIP, echoIP = stackAddr6(a), stackAddr6(b)
	case userTCP:
		loadIP, echoIP = stackAddr(a), stackAddr(b)
	case bench.IsIPv6(r.variant):
		loadIP, echoIP = a.addr6, b.addr6
	}
	if bench.IsIPv6(r.variant) {
		r.notes = append(r.notes, fmt.Sprintf("IPv6: loadgen %v, echo %v (2001:2::/48, RFC 5180) on the same veth pair as the IPv4 rows", loadIP, echoIP))
	}
	run := o.Warmup + o.Duration + o.Drain
	r.echo.add("--local", echoIP.String())
	r.echo.add("--iface", b.iface)
	r.echo.add("--stats", r.path("-echo.json"))
	r.echo.add("--max-time", (run + 5*time.Minute).String())
	r.load.add("--local", loadIP.String())
	r.load.add("--dst", echoIP.String())
	r.load.add("--iface", a.iface)
	r.load.add("--rate", strconv.FormatFloat(r.rate, 'f', -1, 64))
	r.load.add("--warmup", o.Warmup.String())
	r.load.add("--duration", o.Duration.String())
	r.load.add("--drain", o.Drain.String())
	r.load.addInt("--size", o.Size)
	r.load.add("--json", r.path("-loadgen.json"))
	if r.variant == bench.VariantNAPI {
		restore, err := nb.groForNAPI()
		if err != nil {
			note := "GRO could not be turned on at the veth ends (" + err.Error() + "): the socket had no NAPI ID, so NAPI busy polling had nothing to poll"
			r.notes = append(r.notes, note)
			nb.prog.logf("%s: %s", r.name, note)
		} else {
			r.undo = append(r.undo, restore)
		}
	}
	return nil
}

// pinArgs adds each tool's CPU (one queue) or CPUs (several), and with
// several queues on a veth the DPDK kinds' vdev.
func (r *cellRun) pinArgs() error {
	nb, o := r.nb, &r.nb.o
	if r.n <= 1 {
		r.load.addInt("--cpu", o.LoadCPU)
		r.echo.addInt("--cpu", o.EchoCPU)
		return nil
	}
	if l, e := nb.queueCPUs(r.n); len(l) > 0 {
		r.load.add("--cpus", formatCPUs(l))
		r.echo.add("--cpus", formatCPUs(e))
	}
	if !dgramio.Kind(r.kind).IsDPDK() || nb.pports != nil {
		return nil
	}
	// net_af_xdp cannot open more than one queue of a veth (no combined
	// channels): net_af_packet with N queue pairs, each ring with room for
	// far more than the frames in flight. The PMD's fanout hands a frame
	// whose ring is full to another queue (PACKET_FANOUT_FLAG_ROLLOVER),
	// which would take its flow (a stream kind's connection) off its queue;
	// the default ring of 512 frames fills at saturation.
	const afPacketFrames = 4096
	r.load.add("--dpdk-vdev", fmt.Sprintf("net_af_packet0,iface=%s,qpairs=%d,framecnt=%d", nb.a.iface, r.n, afPacketFrames))
	if len(nb.b.mac) > 0 {
		// AF_PACKET's fanout hash puts every ARP reply on one queue: the
		// loadgen's other queues would never resolve the echo.
		r.load.add("--dst-mac", nb.b.mac.String())
	}
	r.echo.add("--dpdk-vdev", fmt.Sprintf("net_af_packet0,iface=%s,qpairs=%d,framecnt=%d", nb.b.iface, r.n, afPacketFrames))
	if dgramio.Kind(r.kind) == dgramio.KindDPDK {
		// AF_PACKET leaves the kernel its copy of every frame: without
		// its address it neither answers ARP nor sends port unreachable
		// for the raw path's datagrams.
		restore, err := nb.withoutAddrs()
		if err != nil {
			return err
		}
		r.undo = append(r.undo, restore)
	}
	return nil
}

// startEcho starts the echo and waits for it to be ready. It returns the
// running echo and its log, or (echo nil) the cell or the row's failure.
func (r *cellRun) startEcho() (*exec.Cmd, *os.File, *bench.Cell, *Failure) {
	nb := r.nb
	echo, echoOut, echoLog, err := nb.child(nb.b.ep, r.path("-echo.log"), "echo", r.echo...)
	if err != nil {
		c, f := r.errCell("echo: " + err.Error())
		return nil, nil, c, f
	}
	line, err := firstLine(echoOut, 60*time.Second)
	if err != nil || !strings.HasPrefix(line, "ready") {
		_ = echo.Process.Kill()
		_ = waitExit(echo, 10*time.Second)
		echoLog.Close()
		if class, msg, ok := parseFailed(line); ok {
			return nil, nil, nil, &Failure{Class: class, Error: msg}
		}
		why := line
		if err != nil {
			why = err.Error()
		}
		c, f := r.errCell(fmt.Sprintf("echo did not start (%s): %s", why, tail(echoLog.Name(), 300)))
		return nil, nil, c, f
	}
	go io.Copy(io.Discard, echoOut)
	return echo, echoLog, nil, nil
}

// runLoad runs the load generator to its end (interrupting it when ctx
// ends, killing it when it overruns), and returns its exit error and its
// stdout; err when it could not be started.
func (r *cellRun) runLoad(ctx context.Context) (exitErr error, stdout string, err error) {
	nb := r.nb
	load, loadOut, loadLog, err := nb.child(nb.a.ep, r.path("-loadgen.log"), "loadgen", r.load...)
	if err != nil {
		return nil, "", err
	}
	defer loadLog.Close()
	var out strings.Builder
	copied := make(chan struct{})
	go func() { io.Copy(&out, loadOut); close(copied) }()
	done := make(chan error, 1)
	go func() { <-copied; done <- load.Wait() }()
	limit := nb.o.Warmup + nb.o.Duration + nb.o.Drain + 2*time.Minute
	select {
	case exitErr = <-done:
	case <-ctx.Done():
		_ = load.Process.Signal(os.Interrupt)
		select {
		case exitErr = <-done:
		case <-time.After(30 * time.Second):
			_ = load.Process.Kill()
			exitErr = <-done
		}
	case <-time.After(limit):
		_ = load.Process.Kill()
		exitErr = fmt.Errorf("loadgen killed after %v: %v", limit, <-done)
	}
	return exitErr, strings.TrimSpace(out.String()), nil
}

// result reads both tools' files into the cell, with the host counters
// that moved over it.
func (r *cellRun) result(loadErr error, loadOut string, echoErr error, host map[string]uint64) (*bench.Cell, *Failure) {
	var lf LoadFile
	var ef EchoFile
	lerr := readFile(r.path("-loadgen.json"), &lf)
	eerr := readFile(r.path("-echo.json"), &ef)
	if lf.Failure != nil {
		switch lf.Failure.Class {
		case ClassNotBuilt, ClassNotSupported, ClassPrivilege:
			return nil, lf.Failure
		}
		return r.errCell("loadgen: " + lf.Failure.Error)
	}
	if lerr != nil || lf.Result == nil {
		return r.errCell(fmt.Sprintf("loadgen left no result (%v, exit %v): %s %s", lerr, loadErr, loadOut, tail(r.path("-loadgen.log"), 300)))
	}
	var er *load.EchoResult
	if eerr == nil && ef.Result != nil {
		er = ef.Result
	}
	c := bench.NewCell(r.kind, lf.Result, er)
	c.Variant = r.variant
	c.Queues, c.Poll = queuesField(r.n), r.poll
	c.Notes = append(c.Notes, r.nb.variantNotes(r.variant)...)
	c.Notes = append(c.Notes, r.notes...)
	if er == nil {
		c.Notes = append(c.Notes, fmt.Sprintf("echo left no counters (%v, exit %v)", eerr, echoErr))
	}
	c.Host = host
	c.Notes = append(c.Notes, r.explain(&c)...)
	if s := kickNote(c.Counters, lf.Result.Total.ElapsedNs, r.n); s != "" {
		c.Notes = append(c.Notes, s)
	}
	return &c, nil
}

// explain returns the remarks on counters whose cause is known.
func (r *cellRun) explain(c *bench.Cell) []string {
	var notes []string
	if d := c.QueueMismatches(); len(d) > 0 {
		notes = append(notes, "per-queue counters do not add up to the totals: "+strings.Join(d, "; "))
	}
	if f := c.Counters["loadgen.dgramio.rx_filtered"]; r.n > 1 && c.Unaccounted > 0 && f > 0 {
		notes = append(notes, fmt.Sprintf("loadgen.dgramio.rx_filtered %d (udp.other_port %d): a queue of the load generator takes only the answers to its own flow, "+
			"so an answer that reached another queue was filtered there as not its port and is missing here: the link did not keep every flow on one queue (%s)",
			f, c.Counters["loadgen.udp.other_port"], c.Mode))
	}
	if c.Unaccounted != 0 {
		notes = append(notes, "host counters that moved: "+movedDrops(c.Host))
	}
	if s := r.stolen(c.Host); s != "" {
		notes = append(notes, fmt.Sprintf("the hypervisor ran other work in place of %s during this cell (steal time, /proc/stat): "+
			"what runs there stood still meanwhile, so the top of the latency histogram (max %s µs) and a ring that ran over can be that stall, not the path",
			s, bench.FormatUs(c.MaxUs)))
	}
	for _, k := range []string{"a.snmp.udp.no_ports", "a.snmp.udp6.no_ports"} {
		if n := c.Host[k]; n > 0 && c.Unaccounted > 0 {
			notes = append(notes, fmt.Sprintf("%s %d: answers that reached the load generator's host after it had closed "+
				"(the drain, --drain %v, ended before the echo's backlog did); frames still in its receive ring at that moment are counted nowhere", k, n, r.nb.o.Drain))
		}
	}
	return notes
}

// kickBusy is the share of the load generator's time in TX kicks from
// which kickNote speaks.
const kickBusy = 0.5

// kickNote says how much of the load generator's loop its AF_XDP TX kicks
// took (counters xsk.tx_kick_ns and xsk.tx_kicks of both tools, over the
// run of elapsedNs, summed over the queues' pollers), when that is kickBusy or
// more; empty otherwise, and on kinds without the counters. On a copying
// device the kick's sendto carries each frame through the kernel into the
// peer's ring, a few microseconds that the caller's loop cannot poll in:
// an answer that lands meanwhile waits, and the loop near its end has no
// room for the noise of the host.
func kickNote(counters map[string]uint64, elapsedNs int64, queues int) string {
	ns, kicks := counters["loadgen.xsk.tx_kick_ns"], counters["loadgen.xsk.tx_kicks"]
	if kicks == 0 || elapsedNs <= 0 {
		return ""
	}
	share := float64(ns) / (float64(elapsedNs) * float64(max(queues, 1)))
	if share < kickBusy {
		return ""
	}
	s := fmt.Sprintf("the load generator's TX kicks (sendto) took %.0f%% of its loop: %d calls, %s µs each",
		100*share, kicks, bench.FormatUs(float64(ns)/float64(kicks)/1e3))
	if en, ek := counters["echo.xsk.tx_kick_ns"], counters["echo.xsk.tx_kicks"]; ek > 0 {
		s += fmt.Sprintf(" (the echo's %s µs)", bench.FormatUs(float64(en)/float64(ek)/1e3))
	}
	return s + ": an answer that lands during a kick is read after it, so this p50 moves with the host's kick time (README, \"Measuring\")"
}

// stealNote is the steal time of one CPU during a cell from which a note
// names it: a stall a busy poller cannot hide (at 200k/s an AF_XDP ring of
// 2048 frames lasts 10 ms).
const stealNote = 20 // ms

// stolen names the CPUs whose steal time during the cell (host, from
// hostCounters) reached stealNote, with the pollers on them and how long:
// "CPU 1 (the echo's poller) for 140 ms". Empty when none did.
func (r *cellRun) stolen(host map[string]uint64) string {
	o := &r.nb.o
	load, echo := []int{o.LoadCPU}, []int{o.EchoCPU}
	if r.n > 1 {
		load, echo = r.nb.queueCPUs(r.n)
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(host)) {
		ms := host[k]
		name, ok := strings.CutSuffix(k, ".steal_ms")
		if !ok || ms < stealNote {
			continue
		}
		cpu, err := strconv.Atoi(strings.TrimPrefix(name, "cpu"))
		if err != nil {
			continue
		}
		var who []string
		if slices.Contains(load, cpu) {
			who = append(who, "the load generator's poller")
		}
		if slices.Contains(echo, cpu) {
			who = append(who, "the echo's poller")
		}
		d := fmt.Sprintf("CPU %d", cpu)
		if len(who) > 0 {
			d += " (" + strings.Join(who, " and ") + ")"
		}
		out = append(out, fmt.Sprintf("%s for %d ms", d, ms))
	}
	return strings.Join(out, ", ")
}
