package bench

import (
	"fmt"
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
	// busy-polled or slept in Wait.
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
	Queues   int    `json:"queues"`
	// Repeat is how many times each cell ran; Order how the cells were
	// interleaved.
	Repeat int    `json:"repeat"`
	Order  string `json:"order,omitempty"`
	// Preflight holds what the preflight found (coalescing, IRQs, NUMA,
	// isolated CPUs); Setup what netbench changed on real ports for the
	// run and restored after it.
	Preflight []Check  `json:"preflight,omitempty"`
	Setup     []string `json:"setup,omitempty"`
	// Pcap is the directory of the packet captures, when asked for.
	Pcap string `json:"pcap,omitempty"`
	// NotBuilt lists the kinds this build lacks (left out of the default
	// run).
	NotBuilt []string `json:"not_built,omitempty"`
	// Notes are remarks about the run (too few CPUs, a preflight warning).
	Notes []string `json:"notes,omitempty"`
}

// KindRow is one kind of a run: the mode it ran in, or why it could not
// run.
type KindRow struct {
	Kind   string `json:"kind"`
	Mode   string `json:"mode,omitempty"`
	Reason string `json:"reason,omitempty"`
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
}

// Cell returns the cell of kind at rate, if there is one.
func (r *Report) Cell(kind string, rate float64) (*Cell, bool) {
	for i := range r.Cells {
		if r.Cells[i].Kind == kind && r.Cells[i].Rate == rate {
			return &r.Cells[i], true
		}
	}
	return nil, false
}

// Table writes the results in the reference's format: one row per kind,
// one column per offered rate, "p50 / p99" round trip in microseconds or
// "sat. <achieved>, <loss>"; a kind that could not run says why.
func (r *Report) Table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprint(w, "kind")
	for _, rate := range r.Rates {
		fmt.Fprint(w, "\t"+FormatRate(rate))
	}
	fmt.Fprintln(w, "\t")
	for _, k := range r.Kinds {
		if k.Reason != "" {
			fmt.Fprintf(w, "%s\tcannot run: %s\n", k.Kind, k.Reason)
			continue
		}
		fmt.Fprint(w, k.Kind)
		for _, rate := range r.Rates {
			s := "-"
			if c, ok := r.Cell(k.Kind, rate); ok {
				s = c.Display
			}
			fmt.Fprint(w, "\t"+s)
		}
		fmt.Fprintln(w, "\t")
	}
	w.Flush()
	return b.String()
}
