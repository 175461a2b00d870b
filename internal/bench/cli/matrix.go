package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/bench/load"
)

// Netbench makes the test hosts (or prepares the real ports), runs every
// kind at every rate Repeat times (echo in namespace B, loadgen in
// namespace A, separate processes on separate CPUs), then up to Capacity
// probes per row to narrow its capacity, and returns the report. It
// writes the report, the plots and the logs where o says. A kind that
// cannot run gets a row saying why; the error is for what stops the whole
// run (no test hosts, nothing measured).
func Netbench(ctx context.Context, o NetbenchOptions, progressW io.Writer) (*bench.Report, error) {
	o, err := o.normalized()
	if err != nil {
		return nil, err
	}
	nb := &netbench{o: o}
	nb.rep.Rates = o.Rates
	nb.env()
	o = nb.o // env picked the CPUs
	if err := nb.checkBusy(); err != nil {
		return nil, err
	}
	cleanup, err := nb.outputDirs()
	if err != nil {
		return nil, err
	}
	defer cleanup()

	nb.perCell = o.Warmup + o.Duration + startupGuess
	cells := o.Repeat * len(o.Kinds) * len(o.QueueCounts) * (len(o.Rates) + o.Capacity)
	nb.prog = newProgress(progressW, o.Bar, time.Duration(cells)*nb.perCell)
	defer nb.prog.finish()

	if nb.planRows() {
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
	}
	nb.runMatrix(ctx)
	nb.runCapacity(ctx)
	if ctx.Err() != nil {
		nb.rep.Env.Notes = append(nb.rep.Env.Notes, "interrupted: the report is partial")
	}
	nb.collect()
	if len(nb.rep.Cells) == 0 {
		if len(nb.rep.Env.NotBuilt) > 0 {
			return nb.finish(fmt.Errorf("no cell was measured (not built into this binary: %s)", strings.Join(nb.rep.Env.NotBuilt, ", ")))
		}
		return nb.finish(errors.New("no cell was measured"))
	}
	return nb.finish(nil)
}

// normalized checks o and fills in its defaults.
func (o NetbenchOptions) normalized() (NetbenchOptions, error) {
	if len(o.QueueCounts) == 0 {
		o.QueueCounts = []int{o.Queues}
	}
	badQueues := false
	for _, n := range o.QueueCounts {
		badQueues = badQueues || n < 1 || n > dgramio.MaxQueues
	}
	if o.Duration <= 0 || o.Warmup < 0 || o.Size < load.HeaderLen || o.Batch < 1 || badQueues || o.Repeat < 0 || o.Capacity < 0 {
		return o, fmt.Errorf("bad options: duration %v, warm-up %v, size %d (>= %d), batch %d, queues %v (1..%d), repeat %d, capacity probes %d",
			o.Duration, o.Warmup, o.Size, load.HeaderLen, o.Batch, o.QueueCounts, dgramio.MaxQueues, o.Repeat, o.Capacity)
	}
	o.Queues = slices.Max(o.QueueCounts)
	if err := parseRows(o.Kinds); err != nil {
		return o, err
	}
	if (o.IfaceA == "") != (o.IfaceB == "") {
		return o, fmt.Errorf("real ports: give both --iface-a and --iface-b")
	}
	if o.Repeat == 0 {
		o.Repeat = 1
	}
	if o.Drain == 0 {
		o.Drain = load.DefaultDrain
	}
	if o.Port <= 0 {
		o.Port = 5000
	}
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("find own executable: %w", err)
		}
		o.Exe = exe
	}
	return o, nil
}

// outputDirs makes the directory of the logs (a temporary one, removed by
// the returned function, when there is no output directory) and of the
// packet captures.
func (nb *netbench) outputDirs() (func(), error) {
	o := &nb.o
	cleanup := func() {}
	if o.Out == "" {
		dir, err := os.MkdirTemp("", "netbench-")
		if err != nil {
			return nil, fmt.Errorf("temporary directory: %w", err)
		}
		nb.logDir, cleanup = dir, func() { os.RemoveAll(dir) }
	} else {
		nb.logDir = filepath.Join(o.Out, "logs")
		if err := os.MkdirAll(nb.logDir, 0o755); err != nil {
			return nil, fmt.Errorf("output directory: %w", err)
		}
	}
	if o.Pcap != "" {
		if err := os.MkdirAll(o.Pcap, 0o755); err != nil {
			cleanup()
			return nil, fmt.Errorf("pcap directory: %w", err)
		}
		nb.rep.Env.Pcap = o.Pcap
	}
	return cleanup, nil
}

// rowKey names a row: a kind or a variant of one ("uring+napi") with a
// number of queues.
type rowKey struct {
	name   string
	queues int
}

// cellKey names the repeats of one cell in netbench.runs.
func cellKey(rk rowKey, rate float64) string {
	return rk.name + "@" + strconv.Itoa(rk.queues) + "@" + strconv.FormatFloat(rate, 'g', -1, 64)
}

// planRows makes the rows of the run; a variant this host cannot run (too
// few CPUs) says so before anything is made. It reports whether any row
// can run.
func (nb *netbench) planRows() bool {
	nb.rows, nb.failed, nb.runs = map[rowKey]*bench.KindRow{}, map[rowKey]*Failure{}, map[string][]bench.Cell{}
	runnable := false
	for _, k := range nb.o.Kinds {
		kind, variant := bench.SplitRow(k)
		for _, n := range nb.o.QueueCounts {
			rk := rowKey{k, n}
			nb.rows[rk] = &bench.KindRow{Kind: kind, Variant: variant, Queues: queuesField(n)}
			if f := nb.variantFailure(variant, n); f != nil {
				nb.failed[rk] = f
				nb.prog.logf("%s: cannot run: %s: %s", nb.rows[rk].Label(), f.Class, f.Error)
				continue
			}
			runnable = true
		}
	}
	return runnable
}

// runMatrix runs every row at every rate, Repeat times: each repeat runs
// every rate, and at each rate every row, the order of the kinds rotating
// from one repeat to the next.
func (nb *netbench) runMatrix(ctx context.Context) {
	o := &nb.o
	left := o.Repeat * len(o.Rates)
	for rep := 0; rep < o.Repeat && ctx.Err() == nil; rep++ {
		for _, rate := range o.Rates {
			left--
			for _, kind := range bench.RotateKinds(o.Kinds, rep) {
				for _, n := range o.QueueCounts {
					if ctx.Err() != nil {
						return
					}
					nb.runCell(ctx, rowKey{kind, n}, rate, rep, false, time.Duration(left)*nb.perCell)
				}
			}
		}
	}
}

// runCapacity narrows each row's capacity with up to Capacity probes,
// each run Repeat times: the geometric middle of the largest rate that
// held and the lowest saturated one above it (bench.NextProbe), until they
// are within bench.CapacityTolerance.
func (nb *netbench) runCapacity(ctx context.Context) {
	o := &nb.o
	for _, kind := range o.Kinds {
		for _, n := range o.QueueCounts {
			rk := rowKey{kind, n}
			for probe := 0; probe < o.Capacity && nb.failed[rk] == nil && ctx.Err() == nil; probe++ {
				rate, ok := bench.NextProbe(nb.points(rk))
				if !ok {
					break
				}
				for rep := 0; rep < o.Repeat && nb.failed[rk] == nil && ctx.Err() == nil; rep++ {
					nb.runCell(ctx, rk, rate, rep, true, 0)
				}
			}
		}
	}
}

// points returns the rates row rk ran so far, each from its repeats
// merged.
func (nb *netbench) points(rk rowKey) []bench.RatePoint {
	var cells []bench.Cell
	for _, rate := range nb.rowRates(rk) {
		cells = append(cells, bench.MergeRepeats(nb.runs[cellKey(rk, rate)]))
	}
	if len(cells) == 0 {
		return nil
	}
	return bench.RatePoints(cells, rk.name, queuesField(rk.queues))
}

// rowRates returns the rates row rk has results of: the table's, then the
// probes in the order they ran.
func (nb *netbench) rowRates(rk rowKey) []float64 {
	var rates []float64
	for _, rate := range nb.o.Rates {
		if len(nb.runs[cellKey(rk, rate)]) > 0 {
			rates = append(rates, rate)
		}
	}
	for _, rate := range nb.probes[rk] {
		rates = append(rates, rate)
	}
	return rates
}

// runCell runs repeat rep of row rk at rate and files the result; a
// failure of the whole row marks it failed (the progress skips skip, the
// time its other cells would have taken).
func (nb *netbench) runCell(ctx context.Context, rk rowKey, rate float64, rep int, probe bool, skip time.Duration) {
	if nb.failed[rk] != nil {
		return
	}
	o := &nb.o
	name := fmt.Sprintf("%s-%s", rk.name, bench.FormatRate(rate))
	if len(o.QueueCounts) > 1 || rk.queues > 1 {
		name = fmt.Sprintf("%s-q%d-%s", rk.name, rk.queues, bench.FormatRate(rate))
	}
	if probe {
		name += "-probe"
	}
	if o.Repeat > 1 {
		name += fmt.Sprintf("-r%d", rep+1)
	}
	label := nb.rows[rk].Label()
	nb.prog.startCell(name, nb.perCell)
	c, f := nb.cell(ctx, rk.name, rk.queues, rate, o.Port+nb.idx, name)
	nb.prog.endCell()
	nb.idx++
	if f != nil {
		nb.failed[rk] = f
		nb.prog.skip(skip)
		nb.prog.logf("%s: cannot run: %s: %s", label, f.Class, f.Error)
		return
	}
	c.Probe = probe
	if c.Mode != "" {
		nb.rows[rk].Mode = c.Mode
		nb.rep.Env.Modes[label] = c.Mode
	}
	if l := nb.limitOf(rk.name); l != "" {
		if nb.rep.Env.Limits == nil {
			nb.rep.Env.Limits = map[string]string{}
		}
		nb.rep.Env.Limits[label] = l
	}
	key := cellKey(rk, rate)
	if probe && len(nb.runs[key]) == 0 {
		if nb.probes == nil {
			nb.probes = map[rowKey][]float64{}
		}
		nb.probes[rk] = append(nb.probes[rk], rate)
	}
	nb.runs[key] = append(nb.runs[key], *c)
	nb.prog.logf("%s: %s", name, c.Display)
}

// collect merges the repeats of every cell into the report's cells (the
// table's rates, then the probes), makes the rows, and computes the
// capacity.
func (nb *netbench) collect() {
	o := &nb.o
	for _, k := range o.Kinds {
		for _, n := range o.QueueCounts {
			rk := rowKey{k, n}
			for _, rate := range nb.rowRates(rk) {
				nb.rep.Cells = append(nb.rep.Cells, bench.MergeRepeats(nb.runs[cellKey(rk, rate)]))
			}
		}
	}
	for _, k := range o.Kinds {
		for _, n := range o.QueueCounts {
			rk := rowKey{k, n}
			f := nb.failed[rk]
			switch {
			case f != nil && f.Class == ClassNotBuilt && !o.KindsGiven:
				if !slices.Contains(nb.rep.Env.NotBuilt, k) {
					nb.rep.Env.NotBuilt = append(nb.rep.Env.NotBuilt, k)
				}
				continue
			case f != nil:
				nb.rows[rk].Reason = f.Class + ": " + f.Error
			}
			nb.rep.Kinds = append(nb.rep.Kinds, *nb.rows[rk])
		}
	}
	nb.noteCaptures()
	nb.rep.ComputeCapacity()
}

// limitOf names the setting of the run that bounds row's capacity besides
// its path, where the kinds are not set alike: the DPDK kinds' RX ring,
// 256 descriptors by default (small, for DDIO's sake on real NICs)
// against the AF_XDP kinds' ring of 2048. On a host that stalls (a VM,
// a veth) the smaller ring overflows first, and the row's capacity is
// the ring's as much as the path's.
func (nb *netbench) limitOf(row string) string {
	kind, _ := bench.SplitRow(row)
	if !dgramio.Kind(kind).IsDPDK() {
		return ""
	}
	defaults := dgramio.Config{Kind: dgramio.Kind(kind)}.WithDefaults()
	rx := nb.o.DPDKRxDesc
	if rx <= 0 {
		rx = defaults.DPDK.RxDesc
	}
	xdp := nb.o.XDPRing
	if xdp <= 0 {
		xdp = defaults.XDP.RingSize
	}
	if rx >= xdp {
		return ""
	}
	return fmt.Sprintf("RX ring of %d descriptors (the xdp kinds' ring: %d): a stall overflows it first, so the capacity is the ring's as much as the path's; --dpdk-rx-desc %d runs it like for like", rx, xdp, xdp)
}
