package cli

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/vishvananda/netlink"

	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/bench/load"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// netbenchRun runs Netbench with the test binary as echo and loadgen, in
// yielding mode (the machine is shared) and short cells.
func netbenchRun(t *testing.T, kinds []string, rates []float64) (*bench.Report, string) {
	t.Helper()
	return netbenchRunWith(t, NetbenchOptions{Kinds: kinds, Rates: rates})
}

// netbenchRunWith is netbenchRun with more options: Kinds, Rates and any
// of Repeat, Pcap, IfaceA/IfaceB/Home set by the caller.
func netbenchRunWith(t *testing.T, o NetbenchOptions) (*bench.Report, string) {
	t.Helper()
	testutil.RequireRoot(t)
	out := t.TempDir()
	var progress strings.Builder
	o.KindsGiven = true
	o.Warmup, o.Duration, o.Drain = 100*time.Millisecond, 500*time.Millisecond, 2*time.Second
	o.Size, o.Batch, o.Queues = 100, 16, 1
	o.Out, o.Wait, o.LoadCPU, o.EchoCPU = out, true, -1, -1
	if o.Port == 0 {
		o.Port = 6000
	}
	o.Exe, o.Env, o.Command = os.Args[0], []string{childEnv}, "test"
	rep, err := Netbench(context.Background(), o, &progress)
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
	for _, f := range []string{"results.json", "table.txt", "report.md", bench.PlotP50, bench.PlotP99} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("output: %v", err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, "report.md"))
	for _, want := range []string{"![rtt-p50](rtt-p50.svg)", "### Preflight", "| IRQs " + rep.Env.Ifaces[0][:strings.Index(rep.Env.Ifaces[0], " ")] + " | n/a |",
		"syscalls per message: loadgen", "TCP segments per message sent", "counters of every layer, both ends"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if len(rep.Env.Preflight) == 0 || rep.Env.Repeat != 1 || len(rep.Plots) != 2 {
		t.Errorf("env preflight %v, repeat %d, plots %v", rep.Env.Preflight, rep.Env.Repeat, rep.Plots)
	}
	var back bench.Report
	b, _ := os.ReadFile(filepath.Join(out, "results.json"))
	if err := json.Unmarshal(b, &back); err != nil || len(back.Cells) != 2 {
		t.Fatalf("results.json: %v", err)
	}
	// Both held their only rate: the capacity is at least that, with
	// nothing to bisect.
	if len(back.Capacity) != 2 || back.Capacity[0].Display != "≥ 2k" || len(back.Capacity[0].Probes) != 0 {
		t.Fatalf("capacity %+v, want at least 2k for both rows", back.Capacity)
	}
	if tab, _ := os.ReadFile(filepath.Join(out, "table.txt")); !strings.Contains(string(tab), "capacity") {
		t.Fatalf("table.txt without the capacity:\n%s", tab)
	}
}

// A kind that cannot run gets a row that says why; the run goes on. The
// kind is dpdk, which cannot run in a build without it (with -tags dpdk
// it may run, and then there is nothing to check).
func TestNetbenchKindThatCannotRun(t *testing.T) {
	rep, _ := netbenchRun(t, []string{"udp", "dpdk"}, []float64{1000})
	var dpdk *bench.KindRow
	for i := range rep.Kinds {
		if rep.Kinds[i].Kind == "dpdk" {
			dpdk = &rep.Kinds[i]
		}
	}
	if c, ran := rep.Cell("dpdk", 1000); ran && c.Error == "" {
		t.Skip("this build has DPDK (-tags dpdk), and dpdk ran")
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

// --repeat 2: each cell runs twice, the report holds the median with the
// spread, the counts summed, and both repeats' logs.
func TestNetbenchRepeat(t *testing.T) {
	rep, out := netbenchRunWith(t, NetbenchOptions{Kinds: []string{"udp", "tcp"}, Rates: []float64{2000}, Repeat: 2, Port: 6300})
	if len(rep.Cells) != 2 {
		t.Fatalf("%d cells, want 2", len(rep.Cells))
	}
	for _, c := range rep.Cells {
		if len(c.Repeats) != 2 || c.Spread == nil || c.Spread.OfRepeats != 2 || c.Spread.Measured != 2 {
			t.Fatalf("%s: repeats %+v spread %+v", c.Kind, c.Repeats, c.Spread)
		}
		if c.Offered != 2000 || c.Conservation.Sent < 2000 || c.Unaccounted != 0 {
			t.Fatalf("%s: offered %d (want 2 × 1000), conservation %+v", c.Kind, c.Offered, c.Conservation)
		}
		if c.P50Us < c.Spread.P50MinUs || c.P50Us > c.Spread.P50MaxUs {
			t.Fatalf("%s: median p50 %v outside its spread %+v", c.Kind, c.P50Us, c.Spread)
		}
		for _, r := range []string{"r1", "r2"} {
			if _, err := os.Stat(filepath.Join(out, "logs", c.Kind+"-2k-"+r+"-loadgen.json")); err != nil {
				t.Errorf("log of repeat %s: %v", r, err)
			}
		}
	}
	if rep.Env.Repeat != 2 || rep.Env.Order == "" {
		t.Fatalf("env repeat %d order %q", rep.Env.Repeat, rep.Env.Order)
	}
}

// --pcap over xdp: the raw kind's frames both ways in pcap files that
// gopacket reads back as our messages; the kernel's kind wrote none, and
// the report says so.
func TestNetbenchPcapXDP(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	rep, _ := netbenchRunWith(t, NetbenchOptions{Kinds: []string{"xdp", "udp"}, Rates: []float64{1000}, Pcap: dir, Port: 6400})
	for _, k := range rep.Kinds {
		if k.Kind == "xdp" && strings.HasPrefix(k.Reason, ClassNotSupported+":") {
			testutil.Skip(t, "xdp cannot run here: "+k.Reason)
		}
	}
	c, ok := rep.Cell("xdp", 1000)
	if !ok || c.Error != "" {
		t.Fatalf("xdp cell: %+v; kinds %+v", c, rep.Kinds)
	}
	if !strings.Contains(c.Mode, "+pcap") || !strings.Contains(c.EchoMode, "+pcap") {
		t.Fatalf("modes %q / %q do not say the run was captured", c.Mode, c.EchoMode)
	}
	for _, f := range []struct {
		file string
		want uint64
	}{
		{"xdp-1k-loadgen-tx.pcap", c.Counters["loadgen.dgramio.tx_sent"]},
		{"xdp-1k-echo-rx.pcap", c.Counters["echo.app.received"]},
		{"xdp-1k-echo-tx.pcap", c.Counters["echo.dgramio.tx_sent"]},
		{"xdp-1k-loadgen-rx.pcap", c.Counters["loadgen.dgramio.rx_delivered"]},
	} {
		n := countOurMessages(t, filepath.Join(dir, f.file))
		if n != f.want || n == 0 {
			t.Errorf("%s: %d of our messages, the counters say %d", f.file, n, f.want)
		}
	}
	if len(rep.Captures) != 4 {
		t.Errorf("captures %v", rep.Captures)
	}
	if !strings.Contains(strings.Join(rep.Env.Notes, ";"), "pcap: no capture from udp") {
		t.Errorf("notes %v", rep.Env.Notes)
	}
}

// countOurMessages reads a pcap file and counts the UDP datagrams that
// carry a message of package bench.
func countOurMessages(t *testing.T, path string) uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var n uint64
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		pkt := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		if u, ok := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP); ok && load.Msg(u.Payload).IsValid() {
			n++
		}
	}
	return n
}

// Two "real ports" stood in by a veth pair whose ends are both in one
// namespace (the home of the run): netbench moves B into a namespace of its
// own, measures over them, and gives everything back.
func TestNetbenchPortsStandIn(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{Queues: 1})
	move := func(from, to *testhost.Host, name string) {
		t.Helper()
		if err := from.Do(func() error {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			return netlink.LinkSetNsFd(l, int(to.NS))
		}); err != nil {
			t.Fatal(err)
		}
	}
	move(p.B, p.A, p.B.Iface)
	defer move(p.A, p.B, p.B.Iface)
	addrs := func() string {
		var s []string
		p.A.Do(func() error {
			for _, n := range []string{p.A.Iface, p.B.Iface} {
				l, err := netlink.LinkByName(n)
				if err != nil {
					s = append(s, n+": "+err.Error())
					continue
				}
				as, _ := netlink.AddrList(l, netlink.FAMILY_V4)
				for _, a := range as {
					s = append(s, n+" "+a.IPNet.String())
				}
			}
			return nil
		})
		return strings.Join(s, ", ")
	}
	before := addrs()
	rep, _ := netbenchRunWith(t, NetbenchOptions{Kinds: []string{"udp"}, Rates: []float64{2000}, Port: 6500,
		IfaceA: p.A.Iface, IfaceB: p.B.Iface, Home: p.A.NS, Coalesce: 0, IRQCPUs: "auto"})
	c, ok := rep.Cell("udp", 2000)
	if !ok || c.Error != "" || c.Unaccounted != 0 || c.Received == 0 {
		t.Fatalf("udp over the ports: %+v", c)
	}
	if rep.Env.Link != "ports" || len(rep.Env.Setup) == 0 || !strings.Contains(strings.Join(rep.Env.Setup, ";"), "moved into a network namespace of its own") {
		t.Fatalf("env link %q setup %v", rep.Env.Link, rep.Env.Setup)
	}
	if c.Host["a.link.tx_packets"] < c.Conservation.Sent {
		t.Fatalf("port A sent %d packets for %d messages", c.Host["a.link.tx_packets"], c.Conservation.Sent)
	}
	if after := addrs(); after != before {
		t.Fatalf("ports not restored:\nbefore %s\nafter  %s", before, after)
	}
}

func TestStackAddr(t *testing.T) {
	s := &side{addr: netip.MustParseAddr("198.18.7.2"), prefix: netip.MustParsePrefix("198.18.7.2/24")}
	if got := stackAddr(s); got != netip.MustParseAddr("198.18.7.12") {
		t.Fatalf("stackAddr %v", got)
	}
	s = &side{addr: netip.MustParseAddr("198.18.7.250"), prefix: netip.MustParsePrefix("198.18.7.250/24")}
	if got := stackAddr(s); got != s.addr {
		t.Fatalf("outside the subnet: %v", got)
	}
}

// The progress bar names the running cell; without a terminal only lines.
func TestProgress(t *testing.T) {
	var lines strings.Builder
	p := newProgress(&lines, false, 10*time.Second)
	p.startCell("udp-20k", time.Second)
	p.endCell()
	p.logf("udp-20k: 7.6 / 12.0")
	p.finish()
	if got := lines.String(); got != "udp-20k: running\nudp-20k: 7.6 / 12.0\n" {
		t.Fatalf("lines %q", got)
	}
	var bar testutil.LockedBuffer
	p = newProgress(&bar, true, 2*time.Second)
	p.startCell("xdp-200k-r2", time.Second)
	time.Sleep(600 * time.Millisecond)
	p.logf("result line")
	p.endCell()
	p.skip(500 * time.Millisecond)
	p.finish()
	out := bar.String()
	if !strings.Contains(out, "xdp-200k-r2") || !strings.Contains(out, "result line\n") {
		t.Fatalf("bar output %q", out)
	}
	if isTerminal(&bar) {
		t.Fatal("a buffer is not a terminal")
	}
}

// TestNetbenchCapacityProbes: a rate far beyond what this host carries
// (3M/s) does not hold, so netbench bisects between it and the rate that
// held, runs the probes as cells of their own (not columns of the table),
// and reports the capacity between the two, with the failing cell's side.
// The 3M cell either saturates or, on a host so busy that the load
// generator cannot send fast enough to overflow the path, gets every
// answer back late with the load generator named as its limit; neither
// holds.
func TestNetbenchCapacityProbes(t *testing.T) {
	rep, _ := netbenchRunWith(t, NetbenchOptions{Kinds: []string{"udp"}, Rates: []float64{2000, 3e6}, Capacity: 2})
	if len(rep.Capacity) != 1 {
		t.Fatalf("capacity %+v, want one row", rep.Capacity)
	}
	cp := rep.Capacity[0]
	high, ok := rep.Cell("udp", 3e6)
	if !ok {
		t.Fatal("no 3M cell")
	}
	if !(high.Saturated || high.LimitedBy == bench.LimitLoadgen) || high.LimitedBy == "" || high.Limit == nil {
		t.Fatalf("the 3M cell (%s: offered %d, sent %d, received %d, late %d, saturated %v, limited by %q) held: neither saturated nor limited by the load generator, or without its side named",
			high.Display, high.Offered, high.Sent, high.Received, high.Late, high.Saturated, high.LimitedBy)
	}
	if len(cp.Probes) == 0 || len(cp.Probes) > 2 {
		t.Fatalf("capacity %+v: want one or two probes between 2k and 3M", cp)
	}
	for _, p := range cp.Probes {
		c, ok := rep.Cell("udp", p)
		if !ok || !c.Probe || p <= 2000 || p >= 3e6 {
			t.Fatalf("probe at %v: cell %v (probe %v), want a probe cell between 2k and 3M", p, ok, c != nil && c.Probe)
		}
	}
	if cp.Rate < 2000 || cp.SaturatedAt <= cp.Rate || cp.SaturatedAt > 3e6 || cp.LimitedBy == "" {
		t.Fatalf("capacity %+v: want a held rate below a saturated one", cp)
	}
	header, _, _ := strings.Cut(rep.Table(), "\n")
	if len(rep.Cells) != 2+len(cp.Probes) || strings.Contains(header, bench.FormatRate(cp.Probes[0])) {
		t.Fatalf("%d cells; the probes are cells but not columns:\n%s", len(rep.Cells), rep.Table())
	}
}
