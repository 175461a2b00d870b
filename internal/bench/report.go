package bench

import (
	"fmt"
	"github.com/dgramio/dgramio/internal/bench/preflight"
	"strings"
	"text/tabwriter"
)

// Env describes where and how a run was made, as the JSON report's "env".
type Env struct {
	// Started is the start time (RFC 3339); Command the command line.
	Started string `json:"started"`
	Command string `json:"command"`
	// Host is the host name; Kernel the kernel release and version.
	Host   string `json:"host"`
	Kernel string `json:"kernel"`
	// CPUModel and CPUs describe the processor; AllowedCPUs the CPUs this
	// process may run on.
	CPUModel    string `json:"cpu_model"`
	CPUs        int    `json:"cpus"`
	AllowedCPUs []int  `json:"allowed_cpus"`
	// Pinning says which CPU each end ran on, and Poll whether the loops
	// busy-polled ("busy") or slept in Wait when idle ("yield"; reports
	// made before the name changed say "wait").
	Pinning string `json:"pinning"`
	Poll    string `json:"poll"`
	// Link is "veth" (two network namespaces joined by a veth pair) or
	// "ports"; Ifaces names the two ends.
	Link   string   `json:"link"`
	Ifaces []string `json:"ifaces"`
	// Offloads are the interfaces' offload settings as read back
	// ("a.tx-checksumming": "off").
	Offloads map[string]string `json:"offloads"`
	// GoVersion is the Go toolchain that built the tools.
	GoVersion string `json:"go_version"`
	// Modes maps each kind to the mode it ran in (Stats.Mode of the load
	// generator's end).
	Modes map[string]string `json:"modes"`
	// The method's parameters.
	Warmup   string `json:"warmup"`
	Duration string `json:"duration"`
	Drain    string `json:"drain"`
	Size     int    `json:"size"`
	Batch    int    `json:"batch"`
	// Queues is the most queues of the run (of the test hosts, and of
	// both ends); QueueCounts every number of queues it ran, when it ran
	// more than one (a scaling run: --queues 1,2).
	Queues      int   `json:"queues"`
	QueueCounts []int `json:"queue_counts,omitempty"`
	// Repeat is how many times each cell ran; Order how the cells were
	// interleaved.
	Repeat int    `json:"repeat"`
	Order  string `json:"order,omitempty"`
	// Preflight holds what the preflight found (coalescing, IRQs, NUMA,
	// isolated CPUs); Setup what netbench changed on real ports for the
	// run and restored after it.
	Preflight []preflight.Check `json:"preflight,omitempty"`
	Setup     []string          `json:"setup,omitempty"`
	// Pcap is the directory of the packet captures, when asked for.
	Pcap string `json:"pcap,omitempty"`
	// NotBuilt lists the kinds this build lacks (left out of the default
	// run).
	NotBuilt []string `json:"not_built,omitempty"`
	// Notes are remarks about the run (too few CPUs, a preflight warning).
	Notes []string `json:"notes,omitempty"`
	// Limits names, by row label, a setting of the run that bounds the
	// row's capacity besides its path, when the kinds are not set alike
	// (dpdk's RX ring of 256 descriptors against xdp's ring of 2048):
	// the table prints it under the rows, so that a row is not read as
	// the path's worth alone.
	Limits map[string]string `json:"limits,omitempty"`
}

// KindRow is one kind of a run, with one number of queues: the mode it
// ran in, or why it could not run.
type KindRow struct {
	Kind string `json:"kind"`
	// Variant names the option the row's backend ran with ("sqpoll" or
	// "napi" of kind uring; see Variants), empty for the kind as it is.
	Variant string `json:"variant,omitempty"`
	// Queues is the number of queues of both ends (0 or 1: one).
	Queues int    `json:"queues,omitempty"`
	Mode   string `json:"mode,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// Label names the row in the tables: the row's name (the kind, or
// "uring+napi" for a variant), followed by the number of queues when there
// are several ("xdp, 2 queues").
func (k *KindRow) Label() string { return rowLabel(k.Name(), k.Queues) }

// Label names the cell's row, as KindRow.Label.
func (c *Cell) Label() string { return rowLabel(c.Name(), c.Queues) }

func rowLabel(kind string, queues int) string {
	if queues <= 1 {
		return kind
	}
	return fmt.Sprintf("%s, %d queues", kind, queues)
}

// queuesOf is n with 0 (one queue, or a report made before queues were
// recorded) read as 1.
func queuesOf(n int) int { return max(n, 1) }

// PollName is the poll mode as the reports say it: "busy" or "yield"
// (reports made before the name changed said "wait" for "yield").
func PollName(p string) string {
	if p == "wait" {
		return "yield"
	}
	return p
}

// Report is the whole JSON report of a netbench run.
type Report struct {
	Env   Env       `json:"env"`
	Kinds []KindRow `json:"kinds"`
	Cells []Cell    `json:"cells"`
	// Rates are the offered rates, in the order of the table's columns.
	Rates []float64 `json:"rates"`
	// Plots are the SVG files drawn from the cells, relative to the
	// report's directory.
	Plots []string `json:"plots,omitempty"`
	// Captures are the pcap files written, relative to the report's
	// directory.
	Captures []string `json:"captures,omitempty"`
	// Scaling is the scaling table of a run with several queues (see
	// Report.ComputeScaling); empty otherwise.
	Scaling []ScaleRow `json:"scaling,omitempty"`
	// Capacity holds each row's highest sustained rate (see
	// Report.ComputeCapacity), when the run computed it.
	Capacity []Capacity `json:"capacity,omitempty"`
}

// Cell returns the cell of row name (a kind, or a variant such as
// "uring+napi": RowName) at rate, if there is one: of the fewest queues
// when the run had several numbers of queues (CellAt names one). A plain
// kind names the kind without a variant.
func (r *Report) Cell(name string, rate float64) (*Cell, bool) {
	var best *Cell
	for i := range r.Cells {
		c := &r.Cells[i]
		if c.Name() == name && c.Rate == rate && (best == nil || queuesOf(c.Queues) < queuesOf(best.Queues)) {
			best = c
		}
	}
	return best, best != nil
}

// CellAt returns the cell of row name (as for Cell) with queues queues (0
// and 1 are the same) at rate, if there is one.
func (r *Report) CellAt(name string, queues int, rate float64) (*Cell, bool) {
	for i := range r.Cells {
		c := &r.Cells[i]
		if c.Name() == name && queuesOf(c.Queues) == queuesOf(queues) && c.Rate == rate {
			return c, true
		}
	}
	return nil, false
}

// Table writes the results as a table: one row per kind,
// one column per offered rate, "p50 / p99" round trip in microseconds or
// "sat. <achieved>, <loss>", and the row's capacity in a last column when
// the report has one; a kind that could not run says why.
func (r *Report) Table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprint(w, "kind")
	for _, rate := range r.Rates {
		fmt.Fprint(w, "\t"+FormatRate(rate))
	}
	if len(r.Capacity) > 0 {
		fmt.Fprint(w, "\tcapacity")
	}
	fmt.Fprintln(w, "\t")
	for _, k := range r.Kinds {
		if k.Reason != "" {
			fmt.Fprintf(w, "%s\tcannot run: %s\n", k.Label(), k.Reason)
			continue
		}
		fmt.Fprint(w, k.Label())
		for _, rate := range r.Rates {
			s := "-"
			if c, ok := r.CellAt(k.Name(), k.Queues, rate); ok {
				s = c.Display
			}
			fmt.Fprint(w, "\t"+s)
		}
		if len(r.Capacity) > 0 {
			fmt.Fprint(w, "\t"+r.capacityText(&k))
		}
		fmt.Fprintln(w, "\t")
	}
	w.Flush()
	for _, k := range r.Kinds {
		if l := r.Env.Limits[k.Label()]; l != "" && k.Reason == "" {
			fmt.Fprintf(&b, "  limit %s: %s\n", k.Label(), l)
		}
	}
	if len(r.Scaling) > 0 {
		b.WriteString("\n" + r.ScalingTable())
	}
	return b.String()
}
