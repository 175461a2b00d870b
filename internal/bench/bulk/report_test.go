package bulk

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestCellCompute: Gbit/s is each receiver's bytes over its receive
// window, CPU per GB each side's user and system time over the bytes of
// both directions.
func TestCellCompute(t *testing.T) {
	c := Cell{Dir: Both,
		Client: &SideResult{Sent: 1e9, Received: 5e8, RecvNs: 1e9, UserNs: 3e8, SysNs: 2e8, Retransmits: 2},
		Server: &SideResult{Sent: 5e8, Received: 1e9, RecvNs: 2e9, UserNs: 1e9, SysNs: 5e8, Retransmits: 3}}
	c.compute()
	if c.UpGbps != 4 || c.DownGbps != 4 || c.Gbps != 8 {
		t.Errorf("up %v down %v total %v Gbit/s, want 4, 4, 8", c.UpGbps, c.DownGbps, c.Gbps)
	}
	if math.Abs(c.ClientCPU-0.5/1.5) > 1e-12 || math.Abs(c.ServerCPU-1) > 1e-12 {
		t.Errorf("CPU s/GB client %v server %v, want 0.333 and 1", c.ClientCPU, c.ServerCPU)
	}
	if c.Retransmits != 5 {
		t.Errorf("retransmits %d, want 5", c.Retransmits)
	}
}

// TestCellMinShare: the share is the slowest connection's bytes over the
// mean of its direction's connections, the lower direction's for both;
// nothing for one connection or a side without per-connection counts (a
// report from before them).
func TestCellMinShare(t *testing.T) {
	recv := func(total, least int64) *SideResult {
		return &SideResult{Received: total, RecvMin: least, RecvMax: total, RecvNs: 1e9}
	}
	for _, tc := range []struct {
		name   string
		conns  int
		dir    Dir
		client *SideResult
		server *SideResult
		want   float64
	}{
		{"up, 4 conns", 4, Up, &SideResult{}, recv(4000, 500), 0.5},
		{"down, 4 conns", 4, Down, recv(4000, 1000), &SideResult{}, 1},
		{"both: the lower direction", 2, Both, recv(1000, 400), recv(1000, 300), 0.6},
		{"one connection", 1, Up, &SideResult{}, recv(1000, 1000), 0},
		{"no per-connection counts", 4, Up, &SideResult{}, &SideResult{Received: 4000, RecvNs: 1e9}, 0},
	} {
		c := Cell{Conns: tc.conns, Dir: tc.dir, Client: tc.client, Server: tc.server}
		c.compute()
		if math.Abs(c.MinShare-tc.want) > 1e-12 {
			t.Errorf("%s: min share %v, want %v", tc.name, c.MinShare, tc.want)
		}
	}
}

// TestFinishPerConnection: a side reports the bytes of its connection
// that received the fewest and of the one that received the most,
// headers included, beside their sum.
func TestFinishPerConnection(t *testing.T) {
	var got SideResult
	s := &side{spec: SideSpec{Conns: 3, Dir: Up, Server: true}, report: func(r SideResult) { got = r }}
	start := time.Now()
	var fl []*flow
	for _, n := range []int64{100, 50, 200} {
		fl = append(fl, &flow{rcv: &receiver{hdrN: headerLen, got: n, first: start, last: start.Add(time.Second)}})
	}
	s.finish(&SideResult{}, fl, start, rusage(), start.Add(time.Second))
	if got.Received != 350+3*headerLen || got.RecvMin != 50+headerLen || got.RecvMax != 200+headerLen || got.RecvNs != 1e9 {
		t.Errorf("received %d, least %d, most %d in %d ns; want %d, %d, %d in 1e9", got.Received, got.RecvMin, got.RecvMax, got.RecvNs,
			350+3*headerLen, 50+headerLen, 200+headerLen)
	}
	s.finish(&SideResult{}, []*flow{{rcv: &receiver{}}, {rcv: &receiver{}}}, start, rusage(), start)
	if got.Received != 0 || got.RecvMin != 0 || got.RecvMax != 0 {
		t.Errorf("a side that received nothing: %+v", got)
	}
}

// cell is a measured cell with the figures given.
func cell(row string, conns int, dir Dir, gbps, ccpu, scpu float64, rt uint64) Cell {
	return Cell{Row: row, Conns: conns, Dir: dir, Gbps: gbps, UpGbps: gbps, ClientCPU: ccpu, ServerCPU: scpu, Retransmits: rt,
		Client: &SideResult{Runs: "r"}, Server: &SideResult{Runs: "r", Counters: map[string]uint64{"x.tcp_retransmits": rt}}}
}

// TestSummarizeMediansAndRatio: each row's figures are the medians of its
// repeats (a failed repeat left out and named), and the ratio to kernel
// tcp is of the medians at the same conns, dir and wire.
func TestSummarizeMediansAndRatio(t *testing.T) {
	rep := Report{Cells: []Cell{
		cell("tcp", 1, Up, 4, 0.2, 0.4, 10),
		cell("tcp-xdp", 1, Up, 3, 0.3, 0.3, 1),
		cell("tcp", 1, Up, 6, 0.2, 0.6, 20),
		cell("tcp-xdp", 1, Up, 5, 0.5, 0.5, 3),
		cell("tcp", 1, Up, 5, 0.4, 0.4, 30),
		{Row: "tcp-xdp", Conns: 1, Dir: Up, Error: "client: boom"},
		cell("tcp-xdp", 16, Up, 2, 1, 1, 0), // no kernel tcp at 16: no ratio
	}}
	rep.Summarize()
	if len(rep.Results) != 3 {
		t.Fatalf("%d results, want 3: %+v", len(rep.Results), rep.Results)
	}
	tcp, xdp, xdp16 := rep.Results[0], rep.Results[1], rep.Results[2]
	if tcp.Gbps != 5 || tcp.MinGbps != 4 || tcp.MaxGbps != 6 || tcp.ServerCPU != 0.4 || tcp.Retransmits != 20 || tcp.Measured != 3 {
		t.Errorf("tcp: %+v", tcp)
	}
	if xdp.Gbps != 4 || xdp.Measured != 2 || xdp.Repeats != 3 || len(xdp.Errors) != 1 || xdp.Retransmits != 2 {
		t.Errorf("tcp-xdp: %+v", xdp)
	}
	if xdp.VsTCP != 4.0/5 {
		t.Errorf("tcp-xdp × tcp = %v, want 0.8", xdp.VsTCP)
	}
	if want := (0.4 + 0.4) / (0.2 + 0.4); math.Abs(xdp.CPUVsTCP-want) > 1e-12 {
		t.Errorf("tcp-xdp CPU × tcp = %v, want %v", xdp.CPUVsTCP, want)
	}
	if tcp.VsTCP != 0 || xdp16.VsTCP != 0 {
		t.Errorf("ratios where there is nothing to compare: tcp %v, tcp-xdp 16 %v", tcp.VsTCP, xdp16.VsTCP)
	}
	if xdp.Counters["server.x.tcp_retransmits"] != 2 {
		t.Errorf("counters %v, want server.x.tcp_retransmits 2", xdp.Counters)
	}
	md := rep.Markdown()
	for _, s := range []string{"| veth | tcp-xdp | 1 | up | 4.00 | 3.00–5.00 |", "| 0.80 |", "2/3"} {
		if !strings.Contains(md, s) {
			t.Errorf("table lacks %q:\n%s", s, md)
		}
	}
	if d := rep.Details(); !strings.Contains(d, "client: boom") {
		t.Errorf("details lack the failure:\n%s", d)
	}
	b, err := json.Marshal(&rep)
	if err != nil || !strings.Contains(string(b), `"vs_tcp":0.8`) {
		t.Errorf("JSON %s (%v) lacks vs_tcp", b, err)
	}
	if strings.Contains(string(b), "min_share") {
		t.Errorf("JSON of one-connection cells has a min_share: %s", b)
	}
}

// TestSummarizeMinShare: the result's share is the median of its repeats'
// (a failed repeat left out); the table shows it where there is more than
// one connection, "—" for one, every line with the header's columns, and
// the JSON has it only there.
func TestSummarizeMinShare(t *testing.T) {
	shared := func(conns int, share float64) Cell {
		c := cell("tcp", conns, Up, 4, 0.2, 0.2, 0)
		c.MinShare = share
		return c
	}
	rep := Report{Cells: []Cell{
		shared(16, 0.5), shared(16, 0.9), {Row: "tcp", Conns: 16, Dir: Up, Error: "boom"}, shared(16, 0.7),
		shared(1, 0), {Row: "tcp-xdp", Conns: 16, Dir: Up, Error: "boom"},
	}}
	rep.Summarize()
	if len(rep.Results) != 3 || rep.Results[0].MinShare != 0.7 || rep.Results[1].MinShare != 0 {
		t.Fatalf("results %+v, want min share 0.7 at 16 connections and none at 1", rep.Results)
	}
	md := rep.Markdown()
	for _, s := range []string{"| × tcp | min share |", "| veth | tcp | 16 | up | 4.00 | 4.00–4.00 |  | — | 0.70 | 0.20 |", "| veth | tcp | 1 | up | 4.00 | 4.00–4.00 |  | — | — | 0.20 |"} {
		if !strings.Contains(md, s) {
			t.Errorf("table lacks %q:\n%s", s, md)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(md), "\n") {
		if n := strings.Count(l, "|"); n != 15 {
			t.Errorf("%d columns in %q, want 14", n-1, l)
		}
	}
	b, err := json.Marshal(&rep.Results)
	if err != nil || strings.Count(string(b), `"min_share":0.7`) != 1 || strings.Count(string(b), "min_share") != 1 {
		t.Errorf("JSON %s (%v): want min_share 0.7 once, for 16 connections", b, err)
	}
}

// TestCompare: B's medians over A's for the results both have, and the
// ones only one has named; "compare" reads two JSON reports.
func TestCompare(t *testing.T) {
	a := Report{Results: []Result{
		{Row: "tcp", Conns: 1, Dir: Up, Gbps: 4, ClientCPU: 1, ServerCPU: 1, Measured: 1},
		{Row: "tcp-xdp", Conns: 1, Dir: Up, Gbps: 2, ClientCPU: 1, ServerCPU: 1, Measured: 1},
	}}
	b := Report{Results: []Result{
		{Row: "tcp-xdp", Conns: 1, Dir: Up, Gbps: 3, ClientCPU: 0.5, ServerCPU: 0.5, Measured: 1},
		{Row: "tcp-xdp", Conns: 16, Dir: Up, Gbps: 3, Measured: 1, MinShare: 0.8},
	}}
	cmp, only := Compare(&a, &b)
	if len(cmp) != 1 || cmp[0].Gbps != 1.5 || cmp[0].CPU != 0.5 || cmp[0].AMinShare != 0 || cmp[0].BMinShare != 0 {
		t.Errorf("comparisons %+v", cmp)
	}
	a.Results = append(a.Results, Result{Row: "tcp-xdp", Conns: 16, Dir: Up, Gbps: 2, Measured: 1, MinShare: 0.4})
	if cmp, _ := Compare(&a, &b); len(cmp) != 2 || cmp[1].AMinShare != 0.4 || cmp[1].BMinShare != 0.8 {
		t.Errorf("comparisons with shares %+v", cmp)
	}
	if len(only) != 2 || !strings.HasPrefix(only[0], "A only: veth tcp 1") || !strings.HasPrefix(only[1], "B only: veth tcp-xdp 16") {
		t.Errorf("only %q", only)
	}
	dir := t.TempDir()
	pa, pb := dir+"/a.json", dir+"/b.json"
	if err := a.WriteJSON(pa); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteJSON(pb); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if got := Main([]string{"compare", pa, pb}, &out, &errb); got != 0 || !strings.Contains(out.String(), "| 1.50 | 0.50 | — | — |") ||
		!strings.Contains(out.String(), "| veth | tcp-xdp | 16 | up | 2.00 | 3.00 | 1.50 | — | 0.40 | 0.80 |") {
		t.Errorf("compare: status %d, stdout %q, stderr %q", got, out.String(), errb.String())
	}
	if got := Main([]string{"compare", pa}, &out, &errb); got != 2 {
		t.Errorf("compare with one report: status %d, want 2", got)
	}
	if got := Main([]string{"compare", pa, dir + "/none.json"}, &out, &errb); got != 1 {
		t.Errorf("compare with a missing report: status %d, want 1", got)
	}
}
