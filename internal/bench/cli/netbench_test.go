package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/testutil"
)

// netbenchRun runs Netbench with the test binary as echo and loadgen, in
// yielding mode (the machine is shared) and short cells.
func netbenchRun(t *testing.T, kinds []string, rates []float64) (*bench.Report, string) {
	t.Helper()
	testutil.RequireRoot(t)
	out := t.TempDir()
	var progress strings.Builder
	rep, err := Netbench(context.Background(), NetbenchOptions{
		Kinds: kinds, KindsGiven: true, Rates: rates,
		Warmup: 100 * time.Millisecond, Duration: 500 * time.Millisecond, Drain: 2 * time.Second,
		Size: 100, Batch: 16, Queues: 1, Out: out, Wait: true, LoadCPU: -1, EchoCPU: -1, Port: 6000,
		Exe: os.Args[0], Env: []string{childEnv}, Command: "test",
	}, &progress)
	t.Logf("progress:\n%s", progress.String())
	if rep != nil {
		t.Logf("table:\n%s", rep.Table())
	}
	if err != nil {
		t.Fatalf("Netbench: %v", err)
	}
	return rep, out
}

// udp and tcp over the veth pair, echo and loadgen in separate processes in
// two namespaces: every message comes back and the counters add up.
func TestNetbenchOverVeth(t *testing.T) {
	rep, out := netbenchRun(t, []string{"udp", "tcp"}, []float64{2000})
	if len(rep.Cells) != 2 {
		t.Fatalf("%d cells, want 2; kinds %+v", len(rep.Cells), rep.Kinds)
	}
	for _, c := range rep.Cells {
		if c.Error != "" {
			t.Fatalf("%s: cell error %s", c.Kind, c.Error)
		}
		if c.Offered != 1000 || c.Sent != c.Offered {
			t.Fatalf("%s: offered %d sent %d, want 1000 (2000/s for 0.5 s)", c.Kind, c.Offered, c.Sent)
		}
		if c.Unaccounted != 0 {
			t.Fatalf("%s: unaccounted %d: %+v %v", c.Kind, c.Unaccounted, c.Conservation, c.Notes)
		}
		if c.Counters["echo.dgramio.rx_delivered"] == 0 || c.Counters["loadgen.dgramio.tx_sent"] == 0 {
			t.Fatalf("%s: counters of both ends missing: %v", c.Kind, c.Counters)
		}
		if rep.Env.Modes[c.Kind] == "" {
			t.Fatalf("%s: no mode in env %+v", c.Kind, rep.Env.Modes)
		}
		for _, f := range []string{"echo.json", "loadgen.json", "echo.log", "loadgen.log"} {
			if _, err := os.Stat(filepath.Join(out, "logs", c.Kind+"-2k-"+f)); err != nil {
				t.Errorf("output: %v", err)
			}
		}
	}
	c, _ := rep.Cell("udp", 2000)
	// The kernel's own counters outside the backends saw the same traffic.
	if c.Host["a.link.tx_packets"] < c.Conservation.Sent {
		t.Fatalf("host counters: A's veth sent %d packets, loadgen %d messages", c.Host["a.link.tx_packets"], c.Conservation.Sent)
	}
	if c.Host["b.snmp.udp.in_datagrams"] < c.Conservation.Sent-c.Conservation.Counted {
		t.Fatalf("host counters: B's UDP took in %d datagrams: %v", c.Host["b.snmp.udp.in_datagrams"], c.Host)
	}
	if rep.Env.Link != "veth" || len(rep.Env.Offloads) == 0 {
		t.Fatalf("env %+v", rep.Env)
	}
	for _, f := range []string{"results.json", "table.txt", "report.md"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("output: %v", err)
		}
	}
	var back bench.Report
	b, _ := os.ReadFile(filepath.Join(out, "results.json"))
	if err := json.Unmarshal(b, &back); err != nil || len(back.Cells) != 2 {
		t.Fatalf("results.json: %v", err)
	}
}

// A kind that cannot run gets a row that says why; the run goes on.
func TestNetbenchKindThatCannotRun(t *testing.T) {
	rep, _ := netbenchRun(t, []string{"udp", "dpdk"}, []float64{1000})
	var dpdk *bench.KindRow
	for i := range rep.Kinds {
		if rep.Kinds[i].Kind == "dpdk" {
			dpdk = &rep.Kinds[i]
		}
	}
	if dpdk == nil || dpdk.Reason == "" {
		t.Fatalf("no reason for dpdk: %+v", rep.Kinds)
	}
	if !strings.Contains(rep.Table(), "dpdk  cannot run: ") {
		t.Fatalf("table:\n%s", rep.Table())
	}
	if _, ok := rep.Cell("udp", 1000); !ok {
		t.Fatal("udp did not run beside the failing kind")
	}
}

// An interrupted run stops the cell in progress, keeps what it measured
// and says that the report is partial.
func TestNetbenchInterrupted(t *testing.T) {
	testutil.RequireRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Interrupt two seconds after the first cell started running.
	progress := &watchWriter{on: "running", do: func() { time.AfterFunc(2*time.Second, cancel) }}
	start := time.Now()
	rep, err := Netbench(ctx, NetbenchOptions{
		Kinds: []string{"udp"}, KindsGiven: true, Rates: []float64{1000, 2000},
		Warmup: 100 * time.Millisecond, Duration: 60 * time.Second, Drain: time.Second,
		Size: 100, Batch: 16, Queues: 1, Wait: true, LoadCPU: -1, EchoCPU: -1, Port: 6200,
		Exe: os.Args[0], Env: []string{childEnv}, Command: "test",
	}, progress)
	if err != nil {
		t.Fatalf("Netbench: %v\n%s", err, progress.String())
	}
	if time.Since(start) > 50*time.Second {
		t.Fatalf("the interrupted run took %v", time.Since(start))
	}
	if len(rep.Cells) != 1 {
		t.Fatalf("%d cells, want the interrupted one only", len(rep.Cells))
	}
	c := rep.Cells[0]
	if !strings.Contains(strings.Join(c.Notes, ";"), "interrupted") || c.Sent == 0 {
		t.Fatalf("cell notes %v, sent %d", c.Notes, c.Sent)
	}
	if !strings.Contains(strings.Join(rep.Env.Notes, ";"), "interrupted") {
		t.Fatalf("env notes %v", rep.Env.Notes)
	}
}

// watchWriter collects what is written and calls do once, the first time
// the text contains on.
type watchWriter struct {
	mu   sync.Mutex
	b    strings.Builder
	on   string
	do   func()
	done bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if !w.done && strings.Contains(w.b.String(), w.on) {
		w.done = true
		w.do()
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
