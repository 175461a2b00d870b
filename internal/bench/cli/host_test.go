package cli

import (
	"maps"
	"strings"
	"testing"

	"github.com/dgramio/dgramio/internal/bench"
)

// A /proc/stat of a two-CPU guest: user nice system idle iowait irq
// softirq steal guest guest_nice, in USER_HZ ticks.
const procStat = `cpu  224403 0 69992 632589 3782 0 29890 11174 0 0
cpu0 115228 0 34373 313139 1295 0 15902 5448 0 0
cpu1 109175 0 35619 319450 2487 0 13987 5726 0 0
intr 12345 0 0
ctxt 987654
`

func TestParseSteal(t *testing.T) {
	got := parseSteal(procStat)
	want := map[int]uint64{0: 54480, 1: 57260}
	if !maps.Equal(got, want) {
		t.Fatalf("parseSteal = %v, want %v", got, want)
	}
	// A kernel that lists fewer fields (no steal column) yields nothing.
	if got := parseSteal("cpu0 1 2 3 4 5 6 7\n"); len(got) != 0 {
		t.Fatalf("short line: %v, want nothing", got)
	}
}

// TestStealNoteNamesThePoller: a cell during which the hypervisor took a
// poller's CPU away for at least stealNote is explained by a note that
// names the CPU, its poller and how long; steal below that, or on no CPU
// at all, adds none.
func TestStealNoteNamesThePoller(t *testing.T) {
	before := map[string]uint64{"cpu0.steal_ms": 54480, "cpu1.steal_ms": 57260}
	after := map[string]uint64{"cpu0.steal_ms": 54490, "cpu1.steal_ms": 57400}
	host := diffCounters(before, after)
	if host["cpu1.steal_ms"] != 140 || host["cpu0.steal_ms"] != 10 {
		t.Fatalf("diff %v", host)
	}
	r := &cellRun{nb: &netbench{}, n: 1}
	r.nb.o.LoadCPU, r.nb.o.EchoCPU = 0, 1
	if got, want := r.stolen(host), "CPU 1 (the echo's poller) for 140 ms"; got != want {
		t.Fatalf("stolen = %q, want %q", got, want)
	}
	if got := r.stolen(map[string]uint64{"cpu0.steal_ms": stealNote - 1, "a.link.rx_packets": 5}); got != "" {
		t.Fatalf("steal below %d ms named: %q", stealNote, got)
	}
	c := &bench.Cell{Host: host, MaxUs: 100400}
	found := false
	for _, n := range r.explain(c) {
		if strings.Contains(n, "steal time") {
			found = true
			if !strings.Contains(n, "CPU 1 (the echo's poller) for 140 ms") || !strings.Contains(n, "max 100400") {
				t.Fatalf("note %q does not name the CPU", n)
			}
		}
	}
	if !found {
		t.Fatalf("no steal note in %q", r.explain(c))
	}
}

func TestStolenMsSumsTheCells(t *testing.T) {
	rep := &bench.Report{Cells: []bench.Cell{
		{Host: map[string]uint64{"cpu0.steal_ms": 100, "cpu1.steal_ms": 10, "a.link.rx_packets": 7}},
		{},
		{Host: map[string]uint64{"cpu1.steal_ms": 30}},
	}}
	if got := stolenMs(rep); got != 140 {
		t.Fatalf("stolenMs = %d, want 140", got)
	}
}

func TestKickNoteSaysWhenKicksFillTheLoop(t *testing.T) {
	c := map[string]uint64{
		"loadgen.xsk.tx_kicks": 400000, "loadgen.xsk.tx_kick_ns": 1_400_000_000,
		"echo.xsk.tx_kicks": 380000, "echo.xsk.tx_kick_ns": 1_216_000_000,
	}
	s := kickNote(c, 2e9, 1)
	for _, want := range []string{"took 70% of its loop: 400000 calls, 3.5 µs each", "(the echo's 3.2 µs)", "read after it"} {
		if !strings.Contains(s, want) {
			t.Fatalf("note %q lacks %q", s, want)
		}
	}
	// 35% of the loop: no note; nor when two pollers shared the kicks,
	// nor on a kind without the counters.
	if s := kickNote(c, 4e9, 1); s != "" {
		t.Fatalf("note at 35%%: %q", s)
	}
	if s := kickNote(c, 2e9, 2); s != "" {
		t.Fatalf("note at 35%% over two queues: %q", s)
	}
	if s := kickNote(map[string]uint64{"loadgen.dgramio.syscalls": 5}, 2e9, 1); s != "" {
		t.Fatalf("note without kick counters: %q", s)
	}
}

// The IPv6 rows' UDP drops are in /proc/net/snmp6 (Udp6 lines), not in
// snmp's Udp line: they come back as udp6.* keys.
func TestParseSNMP6(t *testing.T) {
	in := "Ip6InReceives                   \t12\nUdp6InDatagrams                 \t120000\nUdp6RcvbufErrors                \t3\nUdp6IgnoredMulti\t0\nUdpLite6InDatagrams\t5\nUdp6 7\nUdp6InErrors x\n"
	got := parseSNMP6(in)
	want := map[string]uint64{"udp6.in_datagrams": 120000, "udp6.rcvbuf_errors": 3, "udp6.ignored_multi": 0}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if s := movedDrops(map[string]uint64{"b.snmp.udp6.rcvbuf_errors": 3}); !strings.Contains(s, "udp6.rcvbuf_errors=3") {
		t.Errorf("movedDrops leaves out an IPv6 drop: %q", s)
	}
}

// TestNoPortsNoteBothFamilies: answers that reached the load generator's
// host after it closed are named in a note for IPv4 (Udp NoPorts of
// /proc/net/snmp) and IPv6 (Udp6NoPorts of /proc/net/snmp6) alike, and
// only when something is unaccounted.
func TestNoPortsNoteBothFamilies(t *testing.T) {
	r := &cellRun{nb: &netbench{}, n: 1}
	for _, k := range []string{"a.snmp.udp.no_ports", "a.snmp.udp6.no_ports"} {
		c := &bench.Cell{Host: map[string]uint64{k: 17}, Unaccounted: 17}
		found := false
		for _, n := range r.explain(c) {
			found = found || strings.HasPrefix(n, k+" 17: answers that reached the load generator's host after it had closed")
		}
		if !found {
			t.Errorf("%s: no note in %q", k, r.explain(c))
		}
		c.Unaccounted = 0
		for _, n := range r.explain(c) {
			if strings.Contains(n, "no_ports") {
				t.Errorf("%s: note %q with nothing unaccounted", k, n)
			}
		}
	}
}
