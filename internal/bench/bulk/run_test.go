package bulk

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/testutil"
)

// runT runs o with this test binary as the sides and checks what every
// cell must hold: no error, each receiver got every byte each sender sent
// (the sides checked them against the pattern byte for byte; a mismatch
// is a side's error), Bytes per connection and direction plus the
// streams' headers, a rate and CPU figures, the connections' share of the
// bytes; and the report's fields.
func runT(t *testing.T, o Options) *Report {
	t.Helper()
	testutil.RequireRoot(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o.Exe, o.Out, o.Port, o.Repeat = exe, t.TempDir(), 7000, 1
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(o.Rows) * len(o.Conns) * len(o.Dirs) * max(len(o.Loss)*len(o.Delays), 1); len(rep.Cells) != want {
		t.Fatalf("%d cells, want %d", len(rep.Cells), want)
	}
	for _, c := range rep.Cells {
		name := c.Wire.String() + " " + c.Row + " " + string(c.Dir)
		if c.Error != "" {
			t.Errorf("%s: %s (logs in %s)", name, c.Error, o.Out)
			continue
		}
		per := int64(c.Conns) * (o.Bytes + headerLen)
		up, down := int64(0), int64(0)
		if c.Dir.clientSends() {
			up = per
		}
		if c.Dir.serverSends() {
			down = per
		}
		if c.Client.Sent != up || c.Server.Received != up || c.Server.Sent != down || c.Client.Received != down {
			t.Errorf("%s: client sent %d received %d, server sent %d received %d; want %d up and %d down",
				name, c.Client.Sent, c.Client.Received, c.Server.Sent, c.Server.Received, up, down)
		}
		if c.Gbps <= 0 || (up > 0) != (c.UpGbps > 0) || (down > 0) != (c.DownGbps > 0) || c.ClientCPU <= 0 || c.ServerCPU <= 0 {
			t.Errorf("%s: figures %+v", name, c)
		}
		// Every connection sends o.Bytes: each receiver's connections got
		// as much, and the slowest has the mean's share.
		if c.Conns > 1 && (c.MinShare <= 0 || c.MinShare > 1) || c.Conns == 1 && c.MinShare != 0 {
			t.Errorf("%s: %d connections, min share %v", name, c.Conns, c.MinShare)
		}
		for _, s := range []*SideResult{c.Client, c.Server} {
			if want := o.Bytes + headerLen; s.Received > 0 && o.Bytes > 0 && (s.RecvMin != want || s.RecvMax != want) {
				t.Errorf("%s: a side's connections received %d to %d bytes, want %d each", name, s.RecvMin, s.RecvMax, want)
			}
		}
		if c.Client.Runs == "" || c.Server.Runs == "" {
			t.Errorf("%s: a side did not say what it ran", name)
		}
	}
	for _, res := range rep.Results {
		if res.Measured != 1 || res.Gbps <= 0 || res.Runs == "" {
			t.Errorf("result %+v", res)
		}
		if !strings.HasPrefix(res.Row, "tcp-") || res.Measured == 0 {
			continue
		}
		if res.VsTCP <= 0 || res.CPUVsTCP <= 0 {
			t.Errorf("%s %s: no ratio to kernel tcp: %+v", res.Wire, res.Row, res)
		}
	}
	if len(rep.Setup) == 0 || rep.Kernel == "" || rep.CPUs == 0 {
		t.Errorf("report without its setup: %+v", rep)
	}
	if err := writeOut(rep, o.Out); err != nil {
		t.Fatal(err)
	}
	var back Report
	if b, err := os.ReadFile(filepath.Join(o.Out, "results.json")); err != nil || json.Unmarshal(b, &back) != nil || len(back.Results) != len(rep.Results) {
		t.Errorf("results.json does not read back (%v)", err)
	}
	return rep
}

// TestRunVeth moves 2 MiB per connection each way through kernel tcp and
// tcp-xdp (native engine) over a veth pair, one connection and three,
// both directions at once.
func TestRunVeth(t *testing.T) {
	rows := []Row{{Kind: "tcp"}, {Kind: "tcp-xdp", Stack: "native"}}
	rep := runT(t, Options{Rows: rows, Conns: []int{1, 3}, Dirs: []Dir{Both}, Bytes: 2 << 20})
	t.Logf("\n%s", rep.Markdown())
}

// TestRunVethQueues moves 2 MiB per connection each way through kernel
// tcp and tcp-xdp over a veth pair of two queues, four connections: the
// native sides run an engine per queue, and each connection's bytes
// arrive on its queue's engine at both ends.
func TestRunVethQueues(t *testing.T) {
	rows := []Row{{Kind: "tcp"}, {Kind: "tcp-xdp", Stack: "native"}}
	rep := runT(t, Options{Rows: rows, Conns: []int{4}, Dirs: []Dir{Both}, Bytes: 2 << 20,
		Queues: 2, ClientCPUs: []int{0, 0}, ServerCPUs: []int{0, 0}})
	if rep.Queues != 2 {
		t.Errorf("report queues %d, want 2", rep.Queues)
	}
	for _, c := range rep.Cells {
		if c.Error != "" || c.Row != "tcp-xdp" {
			continue
		}
		for _, s := range []*SideResult{c.Client, c.Server} {
			if !strings.Contains(s.Runs, "2 queues") {
				t.Errorf("a native side ran %q, not over 2 queues", s.Runs)
			}
		}
	}
	t.Logf("\n%s", rep.Markdown())
}

// TestRunLossyWire moves 1 MiB one way through kernel tcp and tcp-xdp
// over the lossy wire at 1% loss each way: the loss shows in the wire's
// counters and in retransmissions, and the bytes still arrive exact.
func TestRunLossyWire(t *testing.T) {
	rows := []Row{{Kind: "tcp"}, {Kind: "tcp-xdp", Stack: "native"}}
	rep := runT(t, Options{Rows: rows, Conns: []int{1}, Dirs: []Dir{Up}, Bytes: 1 << 20,
		Loss: []float64{0.01}, Delays: []time.Duration{200 * time.Microsecond}})
	for _, c := range rep.Cells {
		if c.Error == "" && c.WireCounters["client_to_server.forwarded"] == 0 {
			t.Errorf("%s: the wire forwarded nothing: %v", c.Row, c.WireCounters)
		}
	}
	t.Logf("\n%s\n%s", rep.Markdown(), rep.Details())
}
