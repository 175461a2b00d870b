package bulk

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Wire says what the two sides of a cell were joined by: the clean veth
// pair, or the lossy wire with its loss rate and one-way delay.
type Wire struct {
	Lossy bool          `json:"lossy"`
	Loss  float64       `json:"loss,omitempty"`
	Delay time.Duration `json:"delay_ns,omitempty"`
}

// String is "veth", or "wire 1% 10ms".
func (w Wire) String() string {
	if !w.Lossy {
		return "veth"
	}
	return "wire " + FormatLoss(w.Loss) + " " + w.Delay.String()
}

// Cell is one measurement: a row, a number of connections, a direction,
// a wire, one repeat.
type Cell struct {
	Row    string `json:"row"`
	Conns  int    `json:"conns"`
	Dir    Dir    `json:"dir"`
	Wire   Wire   `json:"wire"`
	Repeat int    `json:"repeat"`
	// UpGbps and DownGbps are each direction's goodput (the receiving
	// side's bytes over its receive window, Gbit/s = 1e9 bit/s); Gbps
	// their sum, the cell's figure.
	UpGbps   float64 `json:"up_gbps,omitempty"`
	DownGbps float64 `json:"down_gbps,omitempty"`
	Gbps     float64 `json:"gbps"`
	// MinShare is how evenly the connections shared the bytes: the bytes
	// of the connection that received the fewest over the mean of its
	// direction's connections (SideResult.RecvMin over Received ÷ Conns),
	// in (0, 1], 1 when every connection received as much; for both
	// directions the lower of the two. 0 (left out) for one connection.
	MinShare float64 `json:"min_share,omitempty"`
	// ClientCPU and ServerCPU are each side's CPU seconds (user + system
	// of its process) per GB (1e9 bytes) the cell moved, both directions
	// together.
	ClientCPU float64 `json:"client_cpu_s_per_gb"`
	ServerCPU float64 `json:"server_cpu_s_per_gb"`
	// Retransmits are both sides' retransmitted segments.
	Retransmits uint64 `json:"retransmits"`
	// Client and Server are the sides' own reports; WireCounters what the
	// lossy wire did, per direction ("a_to_b.dropped").
	Client       *SideResult       `json:"client,omitempty"`
	Server       *SideResult       `json:"server,omitempty"`
	WireCounters map[string]uint64 `json:"wire_counters,omitempty"`
	// Error says why the cell has no figure.
	Error string `json:"error,omitempty"`
}

// compute fills the cell's figures from its sides' results.
func (c *Cell) compute() {
	cl, sv := c.Client, c.Server
	if cl == nil || sv == nil {
		return
	}
	if sv.RecvNs > 0 {
		c.UpGbps = float64(sv.Received) * 8 / float64(sv.RecvNs)
	}
	if cl.RecvNs > 0 {
		c.DownGbps = float64(cl.Received) * 8 / float64(cl.RecvNs)
	}
	c.Gbps = c.UpGbps + c.DownGbps
	if gb := float64(cl.Received+sv.Received) / 1e9; gb > 0 {
		c.ClientCPU = float64(cl.UserNs+cl.SysNs) / 1e9 / gb
		c.ServerCPU = float64(sv.UserNs+sv.SysNs) / 1e9 / gb
	}
	c.Retransmits = cl.Retransmits + sv.Retransmits
	c.MinShare = 0
	for _, s := range []*SideResult{sv, cl} {
		if sh := s.minShare(c.Conns); sh > 0 && (c.MinShare == 0 || sh < c.MinShare) {
			c.MinShare = sh
		}
	}
}

// minShare is the side's RecvMin over the mean of its conns connections'
// bytes; 0 for one connection or when the side received nothing (or
// reported no RecvMin).
func (s *SideResult) minShare(conns int) float64 {
	if conns < 2 || s.Received <= 0 {
		return 0
	}
	return float64(s.RecvMin) * float64(conns) / float64(s.Received)
}

// Result is a row's figures at one number of connections, direction and
// wire: medians over the repeats that measured, and the ratio to kernel
// tcp's medians in the same run.
type Result struct {
	Row   string `json:"row"`
	Conns int    `json:"conns"`
	Dir   Dir    `json:"dir"`
	Wire  Wire   `json:"wire"`
	// Runs says what each side ran (from the sides' reports).
	Runs string `json:"runs,omitempty"`
	// Measured is the number of repeats with a figure, of Repeats.
	Measured int `json:"measured"`
	Repeats  int `json:"repeats"`
	// Gbps is the median, MinGbps and MaxGbps the spread; UpGbps and
	// DownGbps each direction's median.
	Gbps     float64 `json:"gbps"`
	MinGbps  float64 `json:"min_gbps"`
	MaxGbps  float64 `json:"max_gbps"`
	UpGbps   float64 `json:"up_gbps,omitempty"`
	DownGbps float64 `json:"down_gbps,omitempty"`
	// MinShare is the median of the repeats' Cell.MinShare; 0 (left out)
	// for one connection.
	MinShare float64 `json:"min_share,omitempty"`
	// ClientCPU and ServerCPU: median CPU seconds per GB of each side.
	ClientCPU float64 `json:"client_cpu_s_per_gb"`
	ServerCPU float64 `json:"server_cpu_s_per_gb"`
	// Retransmits is the median of both sides' retransmitted segments.
	Retransmits float64 `json:"retransmits"`
	// Counters are the medians of the loss and recovery counters that
	// moved, "client.<layer>.<name>", "server.…", "wire.…".
	Counters map[string]float64 `json:"counters,omitempty"`
	// VsTCP is Gbps / kernel tcp's Gbps at the same conns, dir and wire;
	// CPUVsTCP the same of the two sides' CPU per GB summed. 0: no kernel
	// tcp figure to compare with (or this is kernel tcp).
	VsTCP    float64 `json:"vs_tcp,omitempty"`
	CPUVsTCP float64 `json:"cpu_vs_tcp,omitempty"`
	// Errors are the failed repeats' reasons.
	Errors []string `json:"errors,omitempty"`
}

// Report is a bulk run.
type Report struct {
	Command string    `json:"command"`
	Start   time.Time `json:"start"`
	Host    string    `json:"host"`
	Kernel  string    `json:"kernel,omitempty"`
	CPUs    int       `json:"cpus"`
	// LoadAvg is /proc/loadavg at the start and at the end: on a shared
	// host, how much else ran.
	LoadAvg []string `json:"loadavg,omitempty"`
	// Queues is the veth ends' queues, each native engine row's engines
	// and poll loops per side (Options.Queues); absent for one.
	Queues int `json:"queues,omitempty"`
	// Setup says how the sides were joined and what each ran.
	Setup   []string `json:"setup,omitempty"`
	Cells   []Cell   `json:"cells"`
	Results []Result `json:"results"`
	// Plots are the plots written beside the report (WritePlots), by
	// file name.
	Plots []string `json:"plots,omitempty"`
}

// median returns the median of xs (the mean of the middle two for an
// even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

type resultKey struct {
	row   string
	conns int
	dir   Dir
	wire  Wire
}

// Summarize computes the Results from the Cells: medians per row, number
// of connections, direction and wire, in the order the cells first ran,
// and each row's ratios to kernel tcp's at the same place.
func (r *Report) Summarize() {
	var order []resultKey
	groups := map[resultKey][]*Cell{}
	for i := range r.Cells {
		c := &r.Cells[i]
		k := resultKey{c.Row, c.Conns, c.Dir, c.Wire}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], c)
	}
	r.Results = r.Results[:0]
	for _, k := range order {
		res := Result{Row: k.row, Conns: k.conns, Dir: k.dir, Wire: k.wire, Repeats: len(groups[k])}
		var g, up, down, share, ccpu, scpu, rt []float64
		counters := map[string][]float64{}
		for _, c := range groups[k] {
			if c.Error != "" {
				res.Errors = append(res.Errors, c.Error)
				continue
			}
			res.Measured++
			g, up, down = append(g, c.Gbps), append(up, c.UpGbps), append(down, c.DownGbps)
			ccpu, scpu, rt = append(ccpu, c.ClientCPU), append(scpu, c.ServerCPU), append(rt, float64(c.Retransmits))
			if c.MinShare > 0 {
				share = append(share, c.MinShare)
			}
			if res.Runs == "" && c.Client != nil && c.Server != nil {
				res.Runs = c.Client.Runs
				if c.Server.Runs != c.Client.Runs {
					res.Runs = "client: " + c.Client.Runs + "; server: " + c.Server.Runs
				}
			}
			for name, m := range map[string]map[string]uint64{"client": sideCounters(c.Client), "server": sideCounters(c.Server), "wire": c.WireCounters} {
				for k, v := range m {
					counters[name+"."+k] = append(counters[name+"."+k], float64(v))
				}
			}
		}
		if res.Measured > 0 {
			res.Gbps, res.MinGbps, res.MaxGbps = median(g), slices.Min(g), slices.Max(g)
			res.UpGbps, res.DownGbps, res.MinShare = median(up), median(down), median(share)
			res.ClientCPU, res.ServerCPU, res.Retransmits = median(ccpu), median(scpu), median(rt)
			res.Counters = map[string]float64{}
			for k, vs := range counters {
				for len(vs) < res.Measured { // a repeat where it did not move
					vs = append(vs, 0)
				}
				if m := median(vs); m > 0 {
					res.Counters[k] = m
				}
			}
		}
		r.Results = append(r.Results, res)
	}
	for i := range r.Results {
		res := &r.Results[i]
		if strings.HasPrefix(res.Row, "tcp+") || res.Row == "tcp" || res.Measured == 0 {
			continue
		}
		for _, base := range r.Results {
			if base.Row == "tcp" && base.Conns == res.Conns && base.Dir == res.Dir && base.Wire == res.Wire && base.Measured > 0 {
				res.VsTCP, res.CPUVsTCP = ratio(res.Gbps, base.Gbps), ratio(res.ClientCPU+res.ServerCPU, base.ClientCPU+base.ServerCPU)
			}
		}
	}
}

// sideCounters is a side's counters, none for a side that did not report.
func sideCounters(s *SideResult) map[string]uint64 {
	if s == nil {
		return nil
	}
	return s.Counters
}

// ratio is a / b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Markdown returns the report's table: a line per Result.
func (r *Report) Markdown() string {
	var b strings.Builder
	b.WriteString("| wire | kind | conns | dir | Gbit/s (median) | min–max | up / down | × tcp | min share | client CPU s/GB | server CPU s/GB | CPU × tcp | retransmits | runs |\n")
	b.WriteString("|---|---|---:|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, res := range r.Results {
		if res.Measured == 0 {
			fmt.Fprintf(&b, "| %s | %s | %d | %s | — | | | | | | | | | 0/%d: %s |\n", res.Wire, res.Row, res.Conns, res.Dir, res.Repeats, oneLine(firstOr(res.Errors)))
			continue
		}
		ud := ""
		if res.Dir == Both {
			ud = f2(res.UpGbps) + " / " + f2(res.DownGbps)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s–%s | %s | %s | %s | %s | %s | %s | %s | %d/%d |\n",
			res.Wire, res.Row, res.Conns, res.Dir, f2(res.Gbps), f2(res.MinGbps), f2(res.MaxGbps), ud,
			orDash(res.VsTCP), orDash(res.MinShare), f2(res.ClientCPU), f2(res.ServerCPU), orDash(res.CPUVsTCP),
			strconv.FormatFloat(res.Retransmits, 'f', -1, 64), res.Measured, res.Repeats)
	}
	return b.String()
}

// Details returns what each row ran and the loss counters that moved,
// below the table.
func (r *Report) Details() string {
	var b strings.Builder
	runs := map[string]string{}
	var rows []string
	for _, res := range r.Results {
		if _, ok := runs[res.Row]; !ok && res.Runs != "" {
			runs[res.Row] = res.Runs
			rows = append(rows, res.Row)
		}
	}
	for _, row := range rows {
		fmt.Fprintf(&b, "- %s: %s\n", row, runs[row])
	}
	for _, res := range r.Results {
		if len(res.Counters) > 0 {
			var parts []string
			for _, k := range sortedKeys(res.Counters) {
				parts = append(parts, k+"="+strconv.FormatFloat(res.Counters[k], 'f', -1, 64))
			}
			fmt.Fprintf(&b, "- %s %s %d conns %s, loss and recovery counters (medians): %s\n", res.Wire, res.Row, res.Conns, res.Dir, strings.Join(parts, " "))
		}
		for _, e := range res.Errors {
			fmt.Fprintf(&b, "- %s %s %d conns %s failed: %s\n", res.Wire, res.Row, res.Conns, res.Dir, oneLine(e))
		}
	}
	return b.String()
}

func f2(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }

func orDash(x float64) string {
	if x == 0 {
		return "—"
	}
	return f2(x)
}

func firstOr(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// WriteJSON writes the report as JSON to path ("-": w).
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
