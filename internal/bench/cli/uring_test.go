package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/safchain/ethtool"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

func TestPickSQPollCPUs(t *testing.T) {
	ht := map[int][]int{0: {0, 4}, 4: {0, 4}, 1: {1, 5}, 5: {1, 5}} // CPU 0's sibling is 4, 1's is 5
	sib := func(c int) []int { return ht[c] }
	for _, c := range []struct {
		allowed, given []int
		load, echo     int
		wantL, wantE   int
		reason         string
		siblings       func(int) []int
	}{
		{allowed: []int{0, 1}, load: 0, echo: 1, reason: "needs 4 CPUs (2 pollers, 2 SQ threads); this host allows 2 (0-1)"},
		{allowed: []int{0, 1, 2}, load: 0, echo: 1, reason: "needs 4 CPUs (2 pollers, 2 SQ threads); this host allows 3 (0-2)"},
		{allowed: nil, load: 0, echo: 1, reason: "unknown"},
		{allowed: []int{0, 1, 2, 3}, load: -1, echo: 1, reason: "not pinned"},
		{allowed: []int{0, 1, 2, 3}, load: 2, echo: 2, reason: "both pollers are on CPU 2"},
		{allowed: []int{0, 1, 2, 3}, load: 0, echo: 1, wantL: 2, wantE: 3},
		{allowed: []int{0, 1, 2, 3}, load: 3, echo: 1, wantL: 0, wantE: 2},
		// Hyperthread siblings of the pollers come last.
		{allowed: []int{0, 1, 2, 3, 4, 5, 6, 7}, load: 0, echo: 1, wantL: 2, wantE: 3, siblings: sib},
		{allowed: []int{0, 1, 4, 5}, load: 0, echo: 1, wantL: 4, wantE: 5, siblings: sib},
		{allowed: []int{0, 1, 3, 4, 5}, load: 0, echo: 1, wantL: 3, wantE: 4, siblings: sib},
		// Given ones are only checked.
		{allowed: []int{0, 1, 2, 3}, given: []int{3, 2}, load: 0, echo: 1, wantL: 3, wantE: 2},
		{allowed: []int{0, 1, 2, 3}, given: []int{1, 2}, load: 0, echo: 1, reason: "apart from each other and from the pollers"},
		{allowed: []int{0, 1, 2, 3}, given: []int{2, 2}, load: 0, echo: 1, reason: "apart from each other"},
		{allowed: []int{0, 1, 2, 3}, given: []int{2, 9}, load: 0, echo: 1, reason: "CPU 9 is not one this process may use (0-3)"},
		{allowed: []int{0, 1, 2, 3}, given: []int{2}, load: 0, echo: 1, reason: "give two CPUs"},
	} {
		l, e, reason := pickSQPollCPUs(c.allowed, c.given, c.load, c.echo, c.siblings)
		if c.reason != "" {
			if !strings.Contains(reason, c.reason) || l != -1 || e != -1 {
				t.Errorf("allowed %v given %v pollers %d,%d: %d, %d, %q; want a reason with %q", c.allowed, c.given, c.load, c.echo, l, e, reason, c.reason)
			}
			continue
		}
		if reason != "" || l != c.wantL || e != c.wantE {
			t.Errorf("allowed %v given %v pollers %d,%d: %d, %d, %q; want %d, %d", c.allowed, c.given, c.load, c.echo, l, e, reason, c.wantL, c.wantE)
		}
	}
}

// On a host that allows 2 CPUs, the uring+sqpoll row says that it needs
// 4 and is not measured; nothing is made for it (no test hosts, so no
// root needed), and table, report.md and results.json all say why. The
// row keeps kind "uring" with its variant beside it.
func TestNetbenchSQPollTooFewCPUs(t *testing.T) {
	out := t.TempDir()
	var progress strings.Builder
	rep, err := Netbench(context.Background(), NetbenchOptions{
		Kinds: []string{"uring+sqpoll"}, KindsGiven: true, Rates: []float64{20000}, AllowedCPUs: []int{0, 1},
		Warmup: 100 * time.Millisecond, Duration: time.Second, Size: 100, Batch: 16, Queues: 1,
		LoadCPU: -1, EchoCPU: -1, Out: out, Exe: os.Args[0], Env: []string{childEnv}, Command: "test",
	}, &progress)
	if err == nil || !strings.Contains(err.Error(), "no cell was measured") {
		t.Fatalf("Netbench: %v, want no cell measured", err)
	}
	const why = "not_supported: needs 4 CPUs (2 pollers, 2 SQ threads); this host allows 2 (0-1)"
	if len(rep.Kinds) != 1 || rep.Kinds[0].Kind != "uring" || rep.Kinds[0].Variant != "sqpoll" || rep.Kinds[0].Reason != why {
		t.Fatalf("rows %+v", rep.Kinds)
	}
	if len(rep.Cells) != 0 {
		t.Fatalf("cells measured: %+v", rep.Cells)
	}
	if rep.Env.Link != "" {
		t.Fatalf("test hosts were made for a run with nothing to run: link %q", rep.Env.Link)
	}
	if !strings.Contains(progress.String(), "uring+sqpoll: cannot run: "+why) {
		t.Fatalf("progress %q", progress.String())
	}
	for _, f := range []struct{ file, want string }{
		{"table.txt", "uring+sqpoll  cannot run: " + why},
		{"report.md", "| uring+sqpoll | cannot run: " + why + " |"},
		{"report.md", "uring+sqpoll: needs 4 CPUs (2 pollers, 2 SQ threads); this host allows 2 (0-1): the row is not measured"},
		{"results.json", `"variant": "sqpoll"`},
	} {
		b, err := os.ReadFile(filepath.Join(out, f.file))
		if err != nil || !strings.Contains(string(b), f.want) {
			t.Errorf("%s lacks %q (%v):\n%s", f.file, f.want, err, b)
		}
	}

	// With enough CPUs but two queues: one SQ CPU for every queue's SQ
	// thread would not be a CPU of its own.
	rep, err = Netbench(context.Background(), NetbenchOptions{
		Kinds: []string{"uring+sqpoll"}, KindsGiven: true, Rates: []float64{20000}, QueueCounts: []int{2}, AllowedCPUs: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		Warmup: 100 * time.Millisecond, Duration: time.Second, Size: 100, Batch: 16, Queues: 2,
		LoadCPU: -1, EchoCPU: -1, Out: "", Exe: os.Args[0], Env: []string{childEnv}, Command: "test",
	}, &progress)
	if err == nil || len(rep.Kinds) != 1 || !strings.Contains(rep.Kinds[0].Reason, "one queue only") {
		t.Fatalf("two queues: %v, rows %+v", err, rep.Kinds)
	}
}

func TestNetbenchMainRejectsUnknownVariant(t *testing.T) {
	var out, errOut strings.Builder
	if st := NetbenchMain([]string{"--kinds", "udp,uring+gro", "--out", "none"}, &out, &errOut); st != 2 {
		t.Fatalf("exit %d", st)
	}
	if !strings.Contains(errOut.String(), `"uring+gro": not a variant of a kind; the variants are udp+ipv6, uring+sqpoll, uring+napi, uring+ipv6`) {
		t.Fatalf("stderr %q", errOut.String())
	}
	errOut.Reset()
	if st := NetbenchMain([]string{"--kinds", "uring+sqpoll", "--sqpoll-cpus", "2", "--out", "none"}, &out, &errOut); st != 2 ||
		!strings.Contains(errOut.String(), "--sqpoll-cpus") {
		t.Fatalf("exit %d: %q", st, errOut.String())
	}
}

// The flags each netbench row gives the tools.
func TestVariantArgs(t *testing.T) {
	nb := &netbench{sqLoad: 2, sqEcho: 3}
	for _, c := range []struct {
		variant, tool string
		wait          bool
		want          string
	}{
		{"", "echo", false, ""},
		{"sqpoll", "loadgen", false, "--sqpoll-cpu 2"},
		{"sqpoll", "echo", false, "--sqpoll-cpu 3"},
		{"napi", "loadgen", false, "--napi"},
		{"napi", "echo", false, "--napi --poll yield"},
		{"napi", "echo", true, "--napi"},
		{"raw", "echo", false, "--framing raw"},
		{"raw", "loadgen", false, ""},
		{"ipv6", "echo", false, ""},
		{"netstack", "loadgen", false, "--tcp-stack netstack"},
		{"netstack+ipv6", "echo", false, "--tcp-stack netstack"},
		{"netstack+ipv6", "loadgen", false, "--tcp-stack netstack"},
	} {
		nb.o.Wait = c.wait
		if got := strings.Join(nb.variantArgs(c.variant, c.tool), " "); got != c.want {
			t.Errorf("%s %s (wait %v): %q, want %q", c.variant, c.tool, c.wait, got, c.want)
		}
	}
}

// --sqpoll-cpu and --napi reach Config.URing of both tools, one queue or
// several, and the tools' JSON; another kind refuses them.
func TestURingFlagsReachConfig(t *testing.T) {
	var got []dgramio.Config
	errStop := dgramio.NotSupported("test backend", "", "stops the tool after its Config was seen", nil)
	op := openers{
		single: func(cfg dgramio.Config) (dgramio.Backend, error) { got = append(got, cfg); return nil, errStop },
		group:  func(cfg dgramio.Config) (Group, error) { got = append(got, cfg); return nil, errStop },
	}

	dir := t.TempDir()
	run := func(tool string, args ...string) (int, string) {
		var out, errOut strings.Builder
		file := filepath.Join(dir, tool+".json")
		if tool == "echo" {
			return runEcho(context.Background(), append(args, "--local", "127.0.0.1", "--stats", file), &out, &errOut, op), out.String()
		}
		return runLoadgen(context.Background(), append(args, "--dst", "127.0.0.1", "--json", file), &out, &errOut, op), out.String()
	}
	for _, tool := range []string{"echo", "loadgen"} {
		for _, q := range []string{"1", "2"} {
			got = nil
			st, out := run(tool, "--kind", "uring", "--queues", q, "--sqpoll-cpu", "7", "--napi")
			if st != ExitFailed || !strings.Contains(out, "failed not_supported: test backend") || len(got) != 1 {
				t.Fatalf("%s --queues %s: exit %d, %q, %d configs", tool, q, st, out, len(got))
			}
			u := got[0].URing
			if !u.SQPoll || u.SQCPU == nil || *u.SQCPU != 7 || !u.NAPI {
				t.Fatalf("%s --queues %s: Config.URing %+v", tool, q, u)
			}
			var f struct {
				SQPollCPU *int `json:"sqpoll_cpu"`
				NAPI      bool `json:"napi"`
			}
			readJSON(t, filepath.Join(dir, tool+".json"), &f)
			if f.SQPollCPU == nil || *f.SQPollCPU != 7 || !f.NAPI {
				t.Fatalf("%s JSON: %+v", tool, f)
			}
		}
		got = nil
		if st, _ := run(tool, "--kind", "uring"); st != ExitFailed || len(got) != 1 || got[0].URing.SQPoll || got[0].URing.SQCPU != nil || got[0].URing.NAPI {
			t.Fatalf("%s without the flags: exit %d, configs %+v", tool, st, got)
		}
		got = nil
		st, out := run(tool, "--kind", "udp", "--napi")
		if st != 2 || !strings.HasPrefix(out, "failed config: --sqpoll-cpu and --napi are options of kind uring, not of udp") || len(got) != 0 {
			t.Fatalf("%s --kind udp --napi: exit %d, %q, %d configs opened", tool, st, out, len(got))
		}
		if st, out := run(tool, "--kind", "uring", "--sqpoll-cpu", "-2"); st != 2 || !strings.HasPrefix(out, "failed config: --sqpoll-cpu -2") {
			t.Fatalf("%s --sqpoll-cpu -2: exit %d, %q", tool, st, out)
		}
	}
}

// groForNAPI turns GRO on at both veth ends and puts them back as they
// were.
func TestGROForNAPI(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	gro := func(h *testhost.Host) bool {
		t.Helper()
		var on bool
		if err := h.Do(func() error {
			e, err := ethtool.NewEthtool()
			if err != nil {
				return err
			}
			defer e.Close()
			f, err := e.Features(h.Iface)
			on = f[groFeature]
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return on
	}
	before := []bool{gro(p.A), gro(p.B)}
	t.Logf("GRO before: A %v, B %v", before[0], before[1])
	var logs strings.Builder
	nb := &netbench{prog: newProgress(&logs, false, time.Second)}
	set := &hostSet{
		a:    &side{ep: p.A, iface: p.A.Iface, addr: p.A.Addr, prefix: p.A.Prefix},
		b:    &side{ep: p.B, iface: p.B.Iface, addr: p.B.Addr, prefix: p.B.Prefix},
		pair: p,
	}
	nb.sets = map[int]*hostSet{1: set}
	nb.use(1)
	restore, err := nb.groForNAPI()
	if err != nil {
		testutil.SkipIfNotSupported(t, err)
		t.Fatal(err)
	}
	if !gro(p.A) || !gro(p.B) {
		t.Fatal("GRO not on at both ends")
	}
	restore()
	if after := []bool{gro(p.A), gro(p.B)}; !slices.Equal(after, before) {
		t.Fatalf("GRO before %v, after restore %v (%s)", before, after, logs.String())
	}
	if logs.Len() != 0 {
		t.Fatalf("logged %q", logs.String())
	}
}

// A real run of uring beside uring+napi (and uring+sqpoll, which runs on
// a host with 4 CPUs and says why not on a smaller one) over the veth
// pair: each variant is a row of its own, its cells keep kind "uring",
// both ends ran the option (their modes say so), and the counters add up.
func TestNetbenchURingVariants(t *testing.T) {
	rep, out := netbenchRunWith(t, NetbenchOptions{Kinds: []string{"uring", "uring+napi", "uring+sqpoll"}, Rates: []float64{2000}, Port: 6600})
	for _, k := range rep.Kinds {
		if k.Name() == "uring" && k.Reason != "" {
			testutil.SkipIfNotSupported(t, errors.New(k.Reason))
		}
	}
	allowed, _ := cpu.Allowed()
	for _, row := range []string{"uring", "uring+napi", "uring+sqpoll"} {
		c, ok := rep.Cell(row, 2000)
		if row == "uring+sqpoll" && len(allowed) < 4 {
			if ok {
				t.Fatalf("uring+sqpoll measured on %d CPUs", len(allowed))
			}
			want := fmt.Sprintf("needs 4 CPUs (2 pollers, 2 SQ threads); this host allows %d", len(allowed))
			if k := rep.Kinds[2]; k.Name() != row || !strings.Contains(k.Reason, want) {
				t.Fatalf("row %+v, want the reason %q", k, want)
			}
			continue
		}
		if !ok || c.Error != "" {
			t.Fatalf("%s: %+v; rows %+v", row, c, rep.Kinds)
		}
		if c.Kind != "uring" || c.Name() != row || c.Offered != 1000 || c.Received == 0 || c.Unaccounted != 0 {
			t.Fatalf("%s: kind %q variant %q offered %d received %d unaccounted %d: %+v %v", row, c.Kind, c.Variant, c.Offered, c.Received, c.Unaccounted, c.Conservation, c.Notes)
		}
		want := map[string]string{"uring": "", "uring+napi": "napi busy poll", "uring+sqpoll": "sqpoll cpu"}[row]
		if want != "" && (!strings.Contains(c.Mode, want) || !strings.Contains(c.EchoMode, want)) {
			t.Fatalf("%s: modes %q / %q do not say %q", row, c.Mode, c.EchoMode, want)
		}
		if want == "" && (strings.Contains(c.Mode, "napi") || strings.Contains(c.Mode, "sqpoll")) {
			t.Fatalf("uring ran with an option: %q", c.Mode)
		}
		if rep.Env.Modes[row] == "" {
			t.Fatalf("%s: no mode in env %v", row, rep.Env.Modes)
		}
		if row == "uring+napi" {
			notes := strings.Join(c.Notes, "; ")
			if !strings.Contains(notes, "NAPI busy polling registered on both rings") || strings.Contains(notes, "GRO could not be turned on") {
				t.Fatalf("napi notes: %s", notes)
			}
		}
		if _, err := os.Stat(filepath.Join(out, "logs", row+"-2k-echo.json")); err != nil {
			t.Errorf("logs: %v", err)
		}
	}
	if !strings.Contains(strings.Join(rep.Env.Notes, ";"), "uring+napi: GRO (rx-gro) turned on at both veth ends for that row's cells only") {
		t.Errorf("env notes %v", rep.Env.Notes)
	}
	var back bench.Report
	b, _ := os.ReadFile(filepath.Join(out, "results.json"))
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if c, ok := back.Cell("uring+napi", 2000); !ok || c.Kind != "uring" || c.Variant != "napi" {
		t.Fatalf("results.json: %+v", c)
	}
}
