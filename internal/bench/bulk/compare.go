package bulk

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// Comparison is one result present in two reports: B's medians over A's.
type Comparison struct {
	Row   string `json:"row"`
	Conns int    `json:"conns"`
	Dir   Dir    `json:"dir"`
	Wire  Wire   `json:"wire"`
	// AGbps and BGbps are the two medians; Gbps is B / A. CPU is B's
	// CPU per GB of both sides over A's. 0: one has no figure.
	AGbps float64 `json:"a_gbps"`
	BGbps float64 `json:"b_gbps"`
	Gbps  float64 `json:"gbps_ratio"`
	CPU   float64 `json:"cpu_ratio"`
	// AMinShare and BMinShare are the two Result.MinShare; 0: one
	// connection, or a report from before the figure.
	AMinShare float64 `json:"a_min_share,omitempty"`
	BMinShare float64 `json:"b_min_share,omitempty"`
}

// Compare pairs the results of a and b (same row, connections, direction
// and wire) in a's order; Only lists those in one report only.
func Compare(a, b *Report) (out []Comparison, only []string) {
	find := func(r *Report, x Result) *Result {
		for i := range r.Results {
			y := &r.Results[i]
			if y.Row == x.Row && y.Conns == x.Conns && y.Dir == x.Dir && y.Wire == x.Wire {
				return y
			}
		}
		return nil
	}
	for _, x := range a.Results {
		y := find(b, x)
		if y == nil {
			only = append(only, fmt.Sprintf("A only: %s %s %d %s", x.Wire, x.Row, x.Conns, x.Dir))
			continue
		}
		out = append(out, Comparison{Row: x.Row, Conns: x.Conns, Dir: x.Dir, Wire: x.Wire, AGbps: x.Gbps, BGbps: y.Gbps,
			Gbps: ratio(y.Gbps, x.Gbps), CPU: ratio(y.ClientCPU+y.ServerCPU, x.ClientCPU+x.ServerCPU), AMinShare: x.MinShare, BMinShare: y.MinShare})
	}
	for _, y := range b.Results {
		if find(a, y) == nil {
			only = append(only, fmt.Sprintf("B only: %s %s %d %s", y.Wire, y.Row, y.Conns, y.Dir))
		}
	}
	return out, only
}

// CompareMain is "dgramio-bulk compare A.json B.json": B's medians over
// A's, a line per result both reports have. Status 0, 1 when a report
// cannot be read, 2 for a usage error.
func CompareMain(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintln(stderr, "usage: dgramio-bulk compare A.json B.json (the --json or results.json of two runs)")
		return 2
	}
	var reps [2]Report
	for i, p := range args {
		b, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(b, &reps[i])
		}
		if err != nil {
			fmt.Fprintf(stderr, "dgramio-bulk compare: %s: %v\n", p, err)
			return 1
		}
	}
	cmp, only := Compare(&reps[0], &reps[1])
	var b strings.Builder
	fmt.Fprintf(&b, "| wire | kind | conns | dir | A Gbit/s | B Gbit/s | B / A | CPU B / A | A min share | B min share |\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cmp {
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", c.Wire, c.Row, c.Conns, c.Dir, f2(c.AGbps), f2(c.BGbps), orDash(c.Gbps), orDash(c.CPU),
			orDash(c.AMinShare), orDash(c.BMinShare))
	}
	for _, o := range only {
		fmt.Fprintf(&b, "- %s\n", o)
	}
	fmt.Fprint(stdout, b.String())
	return 0
}
