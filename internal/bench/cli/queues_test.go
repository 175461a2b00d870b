package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/bench/benchtest"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/testutil"
)

func TestParseCPUsAndQueues(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		bad  bool
	}{
		{"", nil, false},
		{"1,0", []int{1, 0}, false},
		{"0,0", []int{0, 0}, false},
		{"2-4,1", []int{2, 3, 4, 1}, false},
		{"x", nil, true},
		{"3-1", nil, true},
		{"-1", nil, true},
	} {
		got, err := parseCPUs(c.in)
		if (err != nil) != c.bad || !slices.Equal(got, c.want) {
			t.Errorf("parseCPUs(%q) = %v, %v", c.in, got, err)
		}
	}
	if got, err := parseQueueCounts("1, 2,4,2"); err != nil || !slices.Equal(got, []int{1, 2, 4}) {
		t.Errorf("parseQueueCounts: %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "1,x", "257"} {
		if _, err := parseQueueCounts(bad); err == nil {
			t.Errorf("parseQueueCounts(%q) accepted", bad)
		}
	}
	for _, c := range []struct {
		poll string
		wait bool
		want string
	}{{"", false, "busy"}, {"", true, "yield"}, {"busy", false, "busy"}, {"yield", false, "yield"}, {"wait", false, "yield"}, {"busy", true, "yield"},
		{"spin", false, "busy"}, {"sleep", false, "yield"}} {
		if got, err := parsePoll(c.poll, c.wait); err != nil || got != dgramio.Poll(c.want) {
			t.Errorf("parsePoll(%q, %v) = %q, %v; want %q", c.poll, c.wait, got, err, c.want)
		}
	}
	if _, err := parsePoll("adaptive", false); err == nil || !strings.Contains(err.Error(), "yield") {
		t.Errorf("parsePoll(adaptive): %v", err)
	}
	for _, c := range []struct {
		queues, cpu int
		cpus        string
		want        []int
		bad         bool
	}{
		{1, -1, "", nil, false},
		{1, 3, "", []int{3}, false},
		{1, -1, "2", []int{2}, false},
		{2, -1, "0,1", []int{0, 1}, false},
		{2, -1, "", nil, false},
		{2, -1, "0", nil, true},
		{2, 1, "", nil, true},
		{1, 1, "1", nil, true},
		{0, -1, "", nil, true},
	} {
		got, err := queueCPUs(c.queues, c.cpu, c.cpus)
		if (err != nil) != c.bad || !slices.Equal(got, c.want) {
			t.Errorf("queueCPUs(%d, %d, %q) = %v, %v", c.queues, c.cpu, c.cpus, got, err)
		}
	}
}

// fakeGroup is a Group over in-memory pairs: queue q is the client of
// pair q; fail makes Open fail for that queue.
type fakeGroup struct {
	mu      sync.Mutex
	clients []*benchtest.Backend
	servers []*benchtest.Backend
	spies   []*closeSpy
	opened  []bool
	closed  []bool
	fail    int
}

func newFakeGroup(n, fail int) *fakeGroup {
	g := &fakeGroup{fail: fail, opened: make([]bool, n), closed: make([]bool, n), spies: make([]*closeSpy, n)}
	for range n {
		c, s := benchtest.NewPair(benchtest.Options{})
		g.clients, g.servers = append(g.clients, c), append(g.servers, s)
	}
	return g
}

func (g *fakeGroup) Open(q int) (dgramio.Backend, error) {
	if q == g.fail {
		return nil, &dgramio.ConfigError{Field: "Queues", Value: q, Reason: "cannot"}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.opened[q] = true
	g.spies[q] = &closeSpy{Backend: g.clients[q], g: g, q: q}
	return g.spies[q], nil
}

// Stats sums the queues' Stats as they are now; Mode says how many queues
// were closed when it was read.
func (g *fakeGroup) Stats() dgramio.Stats {
	g.mu.Lock()
	spies := slices.Clone(g.spies)
	closed := 0
	for _, c := range g.closed {
		if c {
			closed++
		}
	}
	g.mu.Unlock()
	var qs []dgramio.Stats
	for _, sp := range spies {
		if sp != nil {
			qs = append(qs, sp.Stats())
		}
	}
	s := dgramio.SumStats(qs)
	s.Mode = fmt.Sprintf("fake group, %d queues closed", closed)
	return s
}

func (g *fakeGroup) Close() error { return nil }

// closeSpy is a queue's Backend that records its Close, and whose Stats
// gain a loss at Close ("fake" "lost_at_close", q+1), as AF_XDP's count
// what Close finds left in the rings.
type closeSpy struct {
	*benchtest.Backend
	g *fakeGroup
	q int
}

func (c *closeSpy) Close() error {
	c.g.mu.Lock()
	c.g.closed[c.q] = true
	c.g.mu.Unlock()
	return c.Backend.Close()
}

func (c *closeSpy) Stats() dgramio.Stats {
	s := c.Backend.Stats()
	c.g.mu.Lock()
	closed := c.g.closed[c.q]
	c.g.mu.Unlock()
	var v uint64
	if closed {
		v = uint64(c.q + 1)
	}
	s.Layers = append(s.Layers, dgramio.Counter{Layer: "fake", Name: "lost_at_close", Value: v, Loss: true})
	return s
}

// runGroup runs every queue's body on its own goroutine, closes every
// queue, and only then reads the group's and each queue's Stats, so that
// what Close counts is in them; a queue that cannot open stops
// everything before ready, closing the others.
func TestRunGroup(t *testing.T) {
	g := newFakeGroup(3, -1)
	var ready bool
	var ran [3]bool
	st, qs, err := runGroup(g, 3, func() { ready = true }, func(q int, b dgramio.Backend) {
		if !ready {
			t.Errorf("queue %d ran before ready", q)
		}
		ran[q] = b.Queue([]byte("hello")) == nil && b.Flush() == nil
	})
	if err != nil || st.Mode != "fake group, 3 queues closed" || st.TxSent != 3 {
		t.Fatalf("stats %+v, %v; want the group's, read after the queues closed, 3 sent", st, err)
	}
	if v, _ := st.Counter("fake", "lost_at_close"); v != 1+2+3 {
		t.Errorf("group lost_at_close %d, want 6: the Stats were read before the queues' Close", v)
	}
	if len(qs) != 3 {
		t.Fatalf("%d queue Stats, want 3", len(qs))
	}
	for q := range 3 {
		if !ran[q] || !g.closed[q] {
			t.Errorf("queue %d: ran %v, closed %v", q, ran[q], g.closed[q])
		}
		if v, _ := qs[q].Counter("fake", "lost_at_close"); v != uint64(q+1) || qs[q].TxSent != 1 {
			t.Errorf("queue %d: lost_at_close %d (want %d), sent %d (want 1)", q, v, q+1, qs[q].TxSent)
		}
	}

	g = newFakeGroup(3, 1)
	_, _, err = runGroup(g, 3, func() { t.Error("ready called") }, func(q int, b dgramio.Backend) { t.Errorf("queue %d ran", q) })
	var ce *dgramio.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "queue 1") {
		t.Fatalf("error %v; want queue 1's ConfigError", err)
	}
	for _, q := range []int{0, 2} {
		if !g.opened[q] || !g.closed[q] {
			t.Errorf("queue %d: opened %v closed %v; want it closed again", q, g.opened[q], g.closed[q])
		}
	}
}

// allowedCPUs returns the CPUs this process may use.
func allowedCPUs(t *testing.T) []int {
	t.Helper()
	allowed, err := cpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	return allowed
}

// Echo and loadgen with two queues over the kernel's UDP on loopback, in
// yielding mode: both queues of both tools carry messages, every message
// comes back to the queue that sent it, and the per-queue counters add
// up to the totals. No root needed.
func TestEchoLoadgenLoopbackTwoQueues(t *testing.T) {
	port := fmt.Sprint(freeUDPPort(t))
	var pin []string
	if a := allowedCPUs(t); len(a) >= 2 {
		// On loopback a datagram is received on its sender's CPU: the
		// echo's reuseport group steers CPU a[q] to queue q.
		pin = []string{"--cpus", fmt.Sprintf("%d,%d", a[0], a[1])}
	}
	lf, ef, out := echoAndLoad(t,
		append([]string{"--kind", "udp", "--local", "127.0.0.1", "--port", port, "--queues", "2", "--poll", "yield"}, pin...),
		append([]string{"--kind", "udp", "--dst", "127.0.0.1", "--port", port, "--queues", "2", "--wait",
			"--rate", "4k", "--warmup", "100ms", "--duration", "400ms", "--drain", "5s"}, pin...),
		func(line string) bool {
			return strings.Contains(line, "2 queues") && strings.Contains(line, "poll yield")
		})
	if lf.Queues != 2 || lf.Poll != "yield" || ef.Queues != 2 {
		t.Fatalf("files: %+v / %+v", lf, ef)
	}
	c := bench.NewCell("udp", lf.Result, ef.Result)
	t.Logf("cell %s; loadgen said:\n%s", c.Display, out)
	if lf.Result.Total.Sent != 2000 || c.Unaccounted != 0 {
		t.Fatalf("sent %d (want 2000), unaccounted %d: %+v", lf.Result.Total.Sent, c.Unaccounted, c.Conservation)
	}
	if d := c.QueueMismatches(); len(d) > 0 || len(c.PerQueue) != 2 {
		t.Fatalf("per queue %d, mismatches %v", len(c.PerQueue), d)
	}
	for _, q := range c.PerQueue {
		if q.Sent != 1000 || q.OtherQueue != 0 || q.EchoReceived == 0 || q.Counters["loadgen.dgramio.rx_delivered"] != q.Received {
			t.Errorf("queue %+v: want 1000 sent, none of another queue's, the echo's queue carrying some", q)
		}
	}
	if !strings.Contains(c.Mode, "2 queues") || !strings.Contains(c.EchoMode, "poll yield") {
		t.Errorf("modes %q / %q", c.Mode, c.EchoMode)
	}
	if !strings.Contains(out, "queue 1 (whole run): sent 1000") {
		t.Errorf("loadgen printed %q", out)
	}
}

// Busy pollers beyond the CPUs: a tool's own group refuses them, and so
// does netbench for both tools together, before it makes anything,
// naming the CPUs and the way out.
func TestBusyPollersBeyondCPUsRefused(t *testing.T) {
	allowed := allowedCPUs(t)
	var out, errOut strings.Builder
	dir := t.TempDir()
	st := RunEcho(context.Background(), []string{"--kind", "udp", "--local", "127.0.0.1", "--port", fmt.Sprint(freeUDPPort(t)),
		"--queues", fmt.Sprint(len(allowed) + 1), "--poll", "busy", "--stats", filepath.Join(dir, "e.json")}, &out, &errOut)
	if st != 2 || !strings.HasPrefix(out.String(), "failed config: ") || !strings.Contains(out.String(), `"yield"`) {
		t.Fatalf("echo with %d busy queues on %d CPUs: exit %d, %q", len(allowed)+1, len(allowed), st, out.String())
	}

	n := (len(allowed) + 2) / 2 // 2n > allowed
	_, err := Netbench(context.Background(), NetbenchOptions{
		Kinds: []string{"udp"}, KindsGiven: true, Rates: []float64{1000}, QueueCounts: []int{1, n},
		Warmup: 0, Duration: time.Second, Size: 100, Batch: 16, LoadCPU: -1, EchoCPU: -1, Out: "", Exe: os.Args[0],
	}, io.Discard)
	if err == nil {
		t.Fatalf("netbench ran %d busy pollers per tool on %d CPUs", n, len(allowed))
	}
	for _, want := range []string{fmt.Sprintf("busy polling with %d queues needs %d CPUs", n, 2*n), cpu.FormatList(allowed), "--poll yield"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if len(allowed) < 4 {
		return
	}
	_, err = Netbench(context.Background(), NetbenchOptions{
		Kinds: []string{"udp"}, KindsGiven: true, Rates: []float64{1000}, QueueCounts: []int{2},
		Duration: time.Second, Size: 100, Batch: 16, LoadCPU: -1, EchoCPU: -1, Exe: os.Args[0],
		LoadCPUs: allowed[:2], EchoCPUs: allowed[1:3],
	}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("CPU %d is given to loadgen queue 1 and to echo queue 0", allowed[1])) {
		t.Fatalf("overlapping CPU lists: %v", err)
	}
}

// netbench --queues 1,2 over two veth pairs (one queue, two queues), xdp
// and udp, yielding pollers: every message is accounted for, both queues
// of both tools carry traffic, each answer comes back to the queue that
// sent its message, the per-queue counters add up to the totals, and the
// report has per-queue tables and the scaling table with rows marked
// poll yield.
func TestNetbenchTwoQueues(t *testing.T) {
	testutil.RequireRoot(t)
	if a := allowedCPUs(t); len(a) < 2 {
		testutil.Skip(t, fmt.Sprintf("two queues pinned to two CPUs: this process may use %v", a))
	}
	rep, out := netbenchRunWith(t, NetbenchOptions{Kinds: []string{"xdp", "udp"}, Rates: []float64{4000}, QueueCounts: []int{1, 2}, Port: 6600})
	for _, k := range rep.Kinds {
		if k.Kind == "xdp" && strings.HasPrefix(k.Reason, ClassNotSupported+":") {
			testutil.Skip(t, "xdp cannot run here: "+k.Reason)
		}
	}
	if len(rep.Cells) != 4 || len(rep.Kinds) != 4 {
		t.Fatalf("%d cells, %d rows (%+v); want 4 of each", len(rep.Cells), len(rep.Kinds), rep.Kinds)
	}
	for _, kind := range []string{"xdp", "udp"} {
		for _, n := range []int{1, 2} {
			c, ok := rep.CellAt(kind, n, 4000)
			if !ok || c.Error != "" {
				t.Fatalf("%s with %d queues: %+v", kind, n, c)
			}
			if c.Offered != 2000 || c.Unaccounted != 0 || c.Conservation.Sent != c.Conservation.Received+c.Conservation.Counted {
				t.Errorf("%s: offered %d (want 2000), conservation %+v, notes %v", c.Label(), c.Offered, c.Conservation, c.Notes)
			}
			if c.Poll != "yield" {
				t.Errorf("%s: poll %q", c.Label(), c.Poll)
			}
			if n == 1 {
				if c.Queues != 0 || len(c.PerQueue) != 0 {
					t.Errorf("%s: one queue with queues %d, %d per-queue rows", c.Label(), c.Queues, len(c.PerQueue))
				}
				continue
			}
			if c.Queues != 2 || len(c.PerQueue) != 2 || !strings.Contains(c.Mode, "2 queues") || !strings.Contains(c.EchoMode, "2 queues") {
				t.Fatalf("%s: queues %d, %d per-queue rows, modes %q / %q", c.Label(), c.Queues, len(c.PerQueue), c.Mode, c.EchoMode)
			}
			if d := c.QueueMismatches(); len(d) > 0 {
				t.Errorf("%s: per-queue counters do not add up: %v", c.Label(), d)
			}
			var sent, received uint64
			for _, q := range c.PerQueue {
				if q.Sent == 0 || q.Received == 0 || q.EchoReceived == 0 || q.EchoReflected == 0 || q.OtherQueue != 0 || q.Reordered != 0 {
					t.Errorf("%s queue %d: sent %d received %d, echo received %d reflected %d, other_queue %d, reordered %d; "+
						"want both ends' queue carrying traffic, every answer on its own queue and in order",
						c.Label(), q.Queue, q.Sent, q.Received, q.EchoReceived, q.EchoReflected, q.OtherQueue, q.Reordered)
				}
				sent += q.Sent
				received += q.Received
			}
			if sent != c.Conservation.Sent || received != c.Conservation.Received {
				t.Errorf("%s: queues sent %d received %d; totals %d %d", c.Label(), sent, received, c.Conservation.Sent, c.Conservation.Received)
			}
			for _, q := range c.PerQueue {
				t.Logf("%s queue %d: loadgen sent %d received %d, echo received %d reflected %d", c.Label(), q.Queue, q.Sent, q.Received, q.EchoReceived, q.EchoReflected)
			}
		}
	}
	if len(rep.Scaling) != 4 || rep.Env.Poll != "yield" || !slices.Equal(rep.Env.QueueCounts, []int{1, 2}) {
		t.Fatalf("scaling %+v, env poll %q queues %v", rep.Scaling, rep.Env.Poll, rep.Env.QueueCounts)
	}
	for _, s := range rep.Scaling {
		if s.Poll != "yield" || s.Rate <= 0 {
			t.Errorf("scaling row %+v", s)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Scaling", "| xdp | 2 | poll yield |", "| udp | 1 | poll yield |", "| xdp, 2 queues |",
		"### udp, 2 queues at 4k", "| queue | loadgen sent |", "| sum | 2400 |", "static neighbour entries both ways"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "logs", "xdp-q2-4k-loadgen.json")); err != nil {
		t.Errorf("logs: %v", err)
	}
}
