package bench

import (
	"context"
	"encoding/json"
	"github.com/dgramio/dgramio/internal/bench/load"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench/benchtest"
)

// run drives Load on the fake client and Echo on the fake server, in two
// goroutines, and returns both results and the cell. Both loops sleep in
// Wait (the machine is shared), so nothing here asserts that anything was
// fast: the checks are counts and lower bounds.
func run(t *testing.T, fo benchtest.Options, lo load.LoadOptions) (*load.LoadResult, *load.EchoResult, Cell, *benchtest.Backend) {
	t.Helper()
	client, server := benchtest.NewPair(fo)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		er   *load.EchoResult
		eerr error
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		er, eerr = load.Echo(ctx, server, load.EchoOptions{Wait: true})
	}()
	lo.Wait = true
	lr, err := load.Load(context.Background(), client, lo)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	cancel()
	wg.Wait()
	if eerr != nil {
		t.Fatalf("Echo: %v", eerr)
	}
	client.Close()
	server.Close()
	return lr, er, NewCell("fake", lr, er), server
}

func TestLoadEchoLossless(t *testing.T) {
	const delay = 200 * time.Microsecond
	lr, er, c, _ := run(t, benchtest.Options{Delay: delay}, load.LoadOptions{
		Rate: 2000, Warmup: 100 * time.Millisecond, Duration: 400 * time.Millisecond, Drain: 10 * time.Second,
	})
	if lr.Total.Offered != 1000 || lr.Offered != 800 {
		t.Fatalf("offered %d total, %d in the window; want 1000 and 800 (2000/s for 0.5 s, 0.4 s measured)", lr.Total.Offered, lr.Offered)
	}
	if lr.Sent != lr.Offered || lr.Received != lr.Sent || lr.Lost != 0 || lr.NotSent != 0 {
		t.Fatalf("window: offered %d sent %d received %d lost %d not sent %d; want all back", lr.Offered, lr.Sent, lr.Received, lr.Lost, lr.NotSent)
	}
	if lr.Total.Received != lr.Total.Sent || lr.Total.Duplicates != 0 || lr.Total.Foreign != 0 || lr.Total.Malformed != 0 {
		t.Fatalf("totals %+v", lr.Total)
	}
	if er.Received != lr.Total.Sent || er.Reflected != er.Received || er.Dropped != 0 {
		t.Fatalf("echo received %d reflected %d dropped %d; loadgen sent %d", er.Received, er.Reflected, er.Dropped, lr.Total.Sent)
	}
	if lr.RTT.Count != int64(lr.Received) {
		t.Fatalf("RTT histogram holds %d values, %d answers were measured", lr.RTT.Count, lr.Received)
	}
	// Two wire crossings of at least delay each: a lower bound only.
	if min := 2 * float64(delay) / 1e3; lr.RTT.P50Us < min*0.999 {
		t.Fatalf("p50 %.1f µs is below the two one-way delays (%.1f µs)", lr.RTT.P50Us, min)
	}
	if !(lr.RTT.P50Us <= lr.RTT.P99Us && lr.RTT.P99Us <= lr.RTT.P999Us && lr.RTT.P999Us <= lr.RTT.MaxUs) {
		t.Fatalf("percentiles out of order: %+v", lr.RTT)
	}
	if c.Unaccounted != 0 || c.Conservation.Counted != 0 || c.Conservation.Sent != c.Conservation.Received {
		t.Fatalf("conservation %+v", c.Conservation)
	}
	if c.Counters["loadgen.dgramio.tx_queued"] != lr.Total.Sent || c.Counters["echo.dgramio.rx_delivered"] != er.Received {
		t.Fatalf("counters do not match the tools' counts: %v", c.Counters)
	}
}

func TestInjectedDropsAttributed(t *testing.T) {
	const k = 7
	lr, _, c, _ := run(t, benchtest.Options{Delay: 50 * time.Microsecond, DropEvery: 13, DropMax: k}, load.LoadOptions{
		Rate: 2000, Duration: 300 * time.Millisecond, Drain: 2 * time.Second,
	})
	if lr.Lost != k || lr.Total.Sent-lr.Total.Received != k {
		t.Fatalf("lost %d (window), %d (run); want %d", lr.Lost, lr.Total.Sent-lr.Total.Received, k)
	}
	if got := c.Conservation.ByLayer["echo.fake.injected_drops"]; got != k {
		t.Fatalf("echo.fake.injected_drops = %d, want %d; by layer %v", got, k, c.Conservation.ByLayer)
	}
	if len(c.Conservation.ByLayer) != 1 {
		t.Fatalf("losses attributed to other layers too: %v", c.Conservation.ByLayer)
	}
	if c.Unaccounted != 0 || c.Conservation.Counted != k {
		t.Fatalf("conservation %+v; want %d counted, 0 unaccounted", c.Conservation, k)
	}
	// 7 of 600 is 1.2% > 0.1%: saturated by the rule, latency kept.
	if !c.Saturated || !strings.HasPrefix(c.Display, "sat. ") || c.P50Us <= 0 {
		t.Fatalf("cell %q saturated=%v p50=%v; want a sat. cell with its latency kept", c.Display, c.Saturated, c.P50Us)
	}
	if want := FormatLoss(float64(k) / float64(lr.Sent) * 100); !strings.HasSuffix(c.Display, ", "+want) {
		t.Fatalf("cell %q does not end with the loss %s", c.Display, want)
	}
}

func TestSilentDropsUnaccounted(t *testing.T) {
	const k = 5
	_, _, c, server := run(t, benchtest.Options{SilentEvery: 11, SilentMax: k}, load.LoadOptions{
		Rate: 2000, Duration: 200 * time.Millisecond, Drain: 2 * time.Second,
	})
	if server.Silent() != k {
		t.Fatalf("the fake dropped %d silently, want %d", server.Silent(), k)
	}
	if c.Unaccounted != k {
		t.Fatalf("unaccounted %d, want %d (conservation %+v)", c.Unaccounted, k, c.Conservation)
	}
	if !strings.Contains(c.Display, "unaccounted +5") {
		t.Fatalf("cell %q does not say unaccounted +5", c.Display)
	}
}

// A server that takes one message per millisecond while 2000/s are offered:
// message i cannot be answered before i ms after the first, while it was
// scheduled at i/2 ms, so its RTT is at least i/2 ms. Latency measured from
// the schedule grows through the run, and answers come back at 1000/s.
func TestSlowEchoLatencyGrows(t *testing.T) {
	lr, _, c, _ := run(t, benchtest.Options{ServerSpacing: time.Millisecond}, load.LoadOptions{
		Rate: 2000, Duration: 300 * time.Millisecond, Drain: 20 * time.Second,
	})
	n := lr.Sent
	if lr.Received != n {
		t.Fatalf("received %d of %d: the drain should wait for all", lr.Received, n)
	}
	// The last message: RTT >= (n-1)/2 ms; allow 10% for HDR rounding.
	if min := float64(n-1) / 2 * 1000 * 0.9; lr.RTT.MaxUs < min {
		t.Fatalf("max RTT %.0f µs, want at least %.0f µs", lr.RTT.MaxUs, min)
	}
	if min := float64(n) / 4 * 1000 * 0.9; lr.RTT.P50Us < min {
		t.Fatalf("p50 RTT %.0f µs, want at least %.0f µs (the median message waited behind half the queue)", lr.RTT.P50Us, min)
	}
	if lr.AchievedRate > 1000*1.05 {
		t.Fatalf("achieved %.0f/s; the echo answers at most 1000/s", lr.AchievedRate)
	}
	// Every message came back, late: not saturated by the rule, and the
	// latency says how late.
	if c.Saturated || c.Unaccounted != 0 || lr.Lost != 0 {
		t.Fatalf("cell %q: saturated %v, lost %d, unaccounted %d", c.Display, c.Saturated, lr.Lost, c.Unaccounted)
	}
}

// The same slow echo with a drain too short for its queue: what is still
// queued at the end is missing, the cell is saturated, and the fake's
// backlog (not a loss counter) does not count as a loss.
func TestSlowEchoShortDrainSaturates(t *testing.T) {
	lr, _, c, _ := run(t, benchtest.Options{ServerSpacing: time.Millisecond}, load.LoadOptions{
		Rate: 2000, Duration: 300 * time.Millisecond, Drain: 50 * time.Millisecond,
	})
	// At most 1 answer per ms over 350 ms + the first: at most ~351 of 600.
	if lr.Received > 360 || !c.Saturated || !strings.HasPrefix(c.Display, "sat. ") {
		t.Fatalf("received %d of %d, cell %q: want a saturated cell", lr.Received, lr.Sent, c.Display)
	}
	if c.RTTHdr == nil || c.P50Us <= 0 {
		t.Fatal("a saturated cell keeps its latency")
	}
	if c.Unaccounted <= 0 {
		t.Fatalf("unaccounted %d: the messages still queued in the fake are in no loss counter", c.Unaccounted)
	}
	if c.LimitedBy != LimitPath || c.Limit == nil || c.Limit.Unaccounted == 0 || strings.Contains(c.Display, "[loadgen]") {
		t.Fatalf("cell %q limited by %q (%+v): a slow echo is the path's limit", c.Display, c.LimitedBy, c.Limit)
	}
}

// A sender whose Flush takes 5 ms per 16 messages (3200/s) at 4000/s falls
// behind; its lag is reported and is inside every RTT (measured from the
// schedule, not from the late send).
func TestSlowSenderLagInLatency(t *testing.T) {
	lr, _, _, _ := run(t, benchtest.Options{ClientFlushDelay: 5 * time.Millisecond}, load.LoadOptions{
		Rate: 4000, Duration: 300 * time.Millisecond, Drain: 10 * time.Second,
	})
	if lr.Received != lr.Sent || lr.Sent != lr.Offered {
		t.Fatalf("offered %d sent %d received %d", lr.Offered, lr.Sent, lr.Received)
	}
	// Message i leaves no sooner than floor(i/16)*5 ms; scheduled at i/4 ms.
	i := float64(lr.Sent - 1)
	if min := (float64(int(i)/16)*5 - i/4) * 1000 * 0.9; lr.Lag.MaxUs < min {
		t.Fatalf("max lag %.0f µs, want at least %.0f µs", lr.Lag.MaxUs, min)
	}
	if lr.RTT.P50Us < lr.Lag.P50Us || lr.RTT.MaxUs < lr.Lag.MaxUs {
		t.Fatalf("RTT %+v is below the lag %+v: the lag must be inside the RTT", lr.RTT, lr.Lag)
	}
}

// Queue refusing (back-pressure) counts as not sent, apart from loss.
func TestBackpressureNotSent(t *testing.T) {
	lr, _, c, _ := run(t, benchtest.Options{TxQueue: 4, ClientFlushDelay: 2 * time.Millisecond}, load.LoadOptions{
		Rate: 20000, Duration: 200 * time.Millisecond, Drain: 10 * time.Second,
	})
	if lr.NotSent == 0 {
		t.Fatal("no message was refused, though Queue holds 4 and 40 fall due during each 2 ms flush")
	}
	if lr.Total.Sent+lr.Total.NotSent != lr.Total.Offered {
		t.Fatalf("sent %d + not sent %d != offered %d", lr.Total.Sent, lr.Total.NotSent, lr.Total.Offered)
	}
	if lr.Lost != 0 || c.Unaccounted != 0 || lr.Received != lr.Sent {
		t.Fatalf("lost %d unaccounted %d received %d sent %d: refused messages are not losses", lr.Lost, c.Unaccounted, lr.Received, lr.Sent)
	}
	if !c.Saturated || c.LossPct != 0 {
		t.Fatalf("cell %q: fewer than 99%% offered came back, so saturated with 0%% loss", c.Display)
	}
	if c.Counters["loadgen.app.not_sent"] != lr.Total.NotSent || c.Counters["loadgen.dgramio.tx_backpressure"] != lr.Total.NotSent {
		t.Fatalf("not-sent counters %d/%d, want %d", c.Counters["loadgen.app.not_sent"], c.Counters["loadgen.dgramio.tx_backpressure"], lr.Total.NotSent)
	}
}

// TestWaitNotSupportedFallsBack: both tools asked to sleep in Wait on a
// backend that cannot say so and go on polling. At 200 messages a second
// the load generator is idle 5 ms between sends, longer than its shortest
// Wait, so it asks for one (at 1000 a second the gaps of 1 ms are napped
// instead, and whether it ever asked depended on the host's timing).
func TestWaitNotSupportedFallsBack(t *testing.T) {
	lr, er, _, _ := run(t, benchtest.Options{NoWait: true}, load.LoadOptions{
		Rate: 200, Duration: 100 * time.Millisecond, Drain: 5 * time.Second,
	})
	if lr.WaitFallback == "" || er.WaitFallback == "" {
		t.Fatalf("no fallback reported: loadgen %q echo %q", lr.WaitFallback, er.WaitFallback)
	}
	if lr.Received != lr.Sent {
		t.Fatalf("received %d of %d", lr.Received, lr.Sent)
	}
}

func TestSaturationRule(t *testing.T) {
	for _, c := range []struct {
		name                    string
		offered, sent, received uint64
		sat                     bool
		loss                    float64
	}{
		{"all back", 100000, 100000, 100000, false, 0},
		{"0.1% lost is allowed", 100000, 100000, 99900, false, 0.1},
		{"0.11% lost", 100000, 100000, 99890, true, 0.11},
		{"99% back, no loss", 100000, 99000, 99000, false, 0},
		{"98.9% back: back-pressure", 100000, 98900, 98900, true, 0},
		{"seed: udp at 800k", 4000000, 3066000, 1533000, true, 50},
		{"nothing offered", 0, 0, 0, true, 0},
	} {
		sat, loss := Saturated(c.offered, c.sent, c.received)
		if sat != c.sat || loss < c.loss-1e-9 || loss > c.loss+1e-9 {
			t.Errorf("%s: Saturated = %v, %.4f%%; want %v, %.4f%%", c.name, sat, loss, c.sat, c.loss)
		}
	}
	// The display follows the rule.
	c := Cell{Saturated: true, AchievedRate: 613e3, LossPct: 50}
	if got := c.Format(); got != "sat. 613k, 50%" {
		t.Errorf("Format = %q", got)
	}
	c = Cell{Saturated: true, Offered: 1000, NotSent: 1000}
	if got := c.Format(); got != "sat. 0, 0% (100% not sent)" {
		t.Errorf("Format = %q", got)
	}
	c = Cell{P50Us: 17.24, P99Us: 18.91}
	if got := c.Format(); got != "17.2 / 18.9" {
		t.Errorf("Format = %q", got)
	}
	c = Cell{P50Us: 1226, P99Us: 1349.4, Unaccounted: -2}
	if got := c.Format(); got != "1226 / 1349 unaccounted -2" {
		t.Errorf("Format = %q", got)
	}
}

func TestAccountSynthetic(t *testing.T) {
	lr := &load.LoadResult{Total: load.Totals{Sent: 1000, Received: 990, Malformed: 1}}
	lr.Stats = dgramio.Stats{TxDropped: 2, Layers: []dgramio.Counter{
		{Layer: "socket", Name: "drops", Value: 3, Loss: true},
		{Layer: "socket", Name: "rcvbuf", Value: 1 << 20},
	}}
	echo := &load.EchoResult{Dropped: 1, Stats: dgramio.Stats{RxTruncated: 1, Layers: []dgramio.Counter{
		{Layer: "xsk", Name: "rx_ring_full", Value: 2, Loss: true},
	}}}
	c := Account(lr, echo)
	want := map[string]uint64{
		"loadgen.dgramio.tx_dropped": 2, "loadgen.socket.drops": 3, "loadgen.app.malformed": 1,
		"echo.dgramio.rx_truncated": 1, "echo.xsk.rx_ring_full": 2, "echo.app.dropped": 1,
	}
	if c.Counted != 10 || c.Unaccounted != 0 {
		t.Fatalf("counted %d unaccounted %d, want 10 and 0", c.Counted, c.Unaccounted)
	}
	for k, v := range want {
		if c.ByLayer[k] != v {
			t.Errorf("by layer %s = %d, want %d", k, c.ByLayer[k], v)
		}
	}
	if len(c.ByLayer) != len(want) {
		t.Errorf("by layer %v, want %v", c.ByLayer, want)
	}
	lr.Total.Received = 995 // more came back than the counters allow
	if c := Account(lr, echo); c.Unaccounted != -5 {
		t.Fatalf("unaccounted %d, want -5", c.Unaccounted)
	}
}

// The JSON report carries the fields scripts depend on, with their types.
func TestJSONSchema(t *testing.T) {
	lr, er, c, _ := run(t, benchtest.Options{}, load.LoadOptions{Rate: 1000, Duration: 50 * time.Millisecond, Drain: 5 * time.Second})
	_ = lr
	_ = er
	rep := Report{
		Env: Env{Kernel: "6.18", CPUModel: "x", CPUs: 2, Pinning: "loadgen CPU 0, echo CPU 1", Poll: "busy",
			Link: "veth", Offloads: map[string]string{"a.tx-checksumming": "off"}, GoVersion: "go1.26",
			Modes: map[string]string{"fake": c.Mode}},
		Kinds: []KindRow{{Kind: "fake", Mode: c.Mode}, {Kind: "dpdk", Reason: "not built"}},
		Cells: []Cell{c},
		Rates: []float64{1000},
	}
	b, err := json.Marshal(&rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	env, ok := m["env"].(map[string]any)
	if !ok {
		t.Fatalf("env is %T", m["env"])
	}
	for _, f := range []string{"kernel", "cpu_model", "pinning", "poll", "link", "go_version"} {
		if _, ok := env[f].(string); !ok {
			t.Errorf("env.%s is %T, want a string", f, env[f])
		}
	}
	if _, ok := env["cpus"].(float64); !ok {
		t.Errorf("env.cpus is %T, want a number", env["cpus"])
	}
	for _, f := range []string{"offloads", "modes"} {
		if _, ok := env[f].(map[string]any); !ok {
			t.Errorf("env.%s is %T, want an object", f, env[f])
		}
	}
	cells, ok := m["cells"].([]any)
	if !ok || len(cells) != 1 {
		t.Fatalf("cells is %T %v", m["cells"], m["cells"])
	}
	cell := cells[0].(map[string]any)
	for _, f := range []string{"rate", "sent", "received", "lost", "not_sent", "achieved_rate", "p50_us", "p99_us", "p999_us", "max_us", "unaccounted"} {
		if _, ok := cell[f].(float64); !ok {
			t.Errorf("cell.%s is %T, want a number", f, cell[f])
		}
	}
	if _, ok := cell["kind"].(string); !ok {
		t.Errorf("cell.kind is %T", cell["kind"])
	}
	if _, ok := cell["saturated"].(bool); !ok {
		t.Errorf("cell.saturated is %T", cell["saturated"])
	}
	counters, ok := cell["counters"].(map[string]any)
	if !ok {
		t.Fatalf("cell.counters is %T", cell["counters"])
	}
	for _, k := range []string{"loadgen.dgramio.tx_sent", "echo.dgramio.rx_delivered", "echo.fake.injected_drops", "echo.app.dropped"} {
		if _, ok := counters[k].(float64); !ok {
			t.Errorf("counters[%q] is %T, want a number", k, counters[k])
		}
	}
	md := rep.Markdown()
	for _, want := range []string{"| fake | " + c.Display + " |", "| dpdk | cannot run: not built |", "### fake at 1k", "conservation (whole run, warm-up included): sent"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	tab := rep.Table()
	if !strings.Contains(tab, "fake") || !strings.Contains(tab, "1k") || !strings.Contains(tab, "dpdk  cannot run: not built") {
		t.Errorf("table:\n%s", tab)
	}
}
