package bench

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseRow(t *testing.T) {
	for _, c := range []struct {
		name, kind, variant string
		bad                 bool
	}{
		{"udp", "udp", "", false},
		{"uring", "uring", "", false},
		{"uring+sqpoll", "uring", "sqpoll", false},
		{"uring+napi", "uring", "napi", false},
		{"udp+ipv6", "udp", "ipv6", false},
		{"uring+ipv6", "uring", "ipv6", false},
		{"tcp+ipv6", "tcp", "ipv6", false},
		{"xdp+ipv6", "xdp", "ipv6", false},
		{"dpdk+ipv6", "dpdk", "ipv6", false},
		{"tcp-xdp+ipv6", "tcp-xdp", "ipv6", false},
		{"tcp-dpdk+ipv6", "tcp-dpdk", "ipv6", false},
		{"tcp-xdp+netstack+ipv6", "tcp-xdp", "netstack+ipv6", false},
		{"tcp-dpdk+netstack+ipv6", "tcp-dpdk", "netstack+ipv6", false},
		{"tcp-xdp+ipv6+netstack", "", "", true},
		{"tcp-xdp+raw+ipv6", "", "", true},
		{"udp+netstack+ipv6", "", "", true},
		{"uring+", "", "", true},
		{"uring+gro", "", "", true},
		{"udp+napi", "", "", true},
		{"+napi", "", "", true},
		{"tcp+raw", "tcp", "raw", false},
		{"tcp-xdp+raw", "tcp-xdp", "raw", false},
		{"udp+raw", "", "", true},
	} {
		k, v, err := ParseRow(c.name)
		if (err != nil) != c.bad || k != c.kind || v != c.variant {
			t.Errorf("ParseRow(%q) = %q, %q, %v", c.name, k, v, err)
		}
		if err != nil && !strings.Contains(err.Error(), "uring+sqpoll, uring+napi") {
			t.Errorf("ParseRow(%q): the error does not list the variants: %v", c.name, err)
		}
		if !c.bad && RowName(k, v) != c.name {
			t.Errorf("RowName(%q, %q) = %q, want %q", k, v, RowName(k, v), c.name)
		}
	}
}

// A variant is a row of its own in the table, report.md and the lookups,
// while its cells keep kind "uring" and name the variant beside it.
func TestVariantRows(t *testing.T) {
	mk := func(variant string, p50 float64) Cell {
		c := Cell{Kind: "uring", Variant: variant, Rate: 20000, P50Us: p50, P99Us: 2 * p50, Sent: 100, Received: 100,
			Offered: 100, AchievedRate: 20000, Counters: map[string]uint64{}}
		c.Display = c.Format()
		return c
	}
	r := &Report{
		Rates: []float64{20000},
		Kinds: []KindRow{{Kind: "uring"}, {Kind: "uring", Variant: "napi"},
			{Kind: "uring", Variant: "sqpoll", Reason: "not_supported: needs 4 CPUs (2 pollers, 2 SQ threads); this host allows 2 (0-1)"}},
		Cells: []Cell{mk("", 10), mk("napi", 7)},
	}
	if c, ok := r.Cell("uring", 20000); !ok || c.Variant != "" || c.P50Us != 10 {
		t.Fatalf("Cell(uring) = %+v, %v", c, ok)
	}
	if c, ok := r.CellAt("uring+napi", 1, 20000); !ok || c.Variant != "napi" || c.P50Us != 7 {
		t.Fatalf("CellAt(uring+napi) = %+v, %v", c, ok)
	}
	if _, ok := r.Cell("uring+sqpoll", 20000); ok {
		t.Fatal("a cell of uring+sqpoll, which did not run")
	}
	table := r.Table()
	for _, want := range []string{"uring         10.0 / 20.0", "uring+napi    7.0 / 14.0",
		"uring+sqpoll  cannot run: not_supported: needs 4 CPUs (2 pollers, 2 SQ threads); this host allows 2 (0-1)"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	md := r.Markdown()
	for _, want := range []string{"| uring | 10.0 / 20.0 |", "| uring+napi | 7.0 / 14.0 |", "| uring+sqpoll | cannot run: not_supported: needs 4 CPUs",
		"### uring+napi at 20k: 7.0 / 14.0"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}

	// JSON: the kind stays "uring", the variant is a field of its own,
	// absent for the kind as it is (so earlier reports read the same).
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	js := string(b)
	if !strings.Contains(js, `{"kind":"uring","variant":"napi"`) || strings.Count(js, `"variant"`) != 3 {
		t.Fatalf("JSON %s", js)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || back.Cells[1].Name() != "uring+napi" || back.Kinds[2].Label() != "uring+sqpoll" {
		t.Fatalf("read back: %v %+v", err, back.Kinds)
	}
	var old Report
	if err := json.Unmarshal([]byte(`{"kinds":[{"kind":"uring"}],"cells":[{"kind":"uring","rate":20000,"display":"x"}],"rates":[20000]}`), &old); err != nil {
		t.Fatal(err)
	}
	if c, ok := old.Cell("uring", 20000); !ok || c.Display != "x" {
		t.Fatalf("a report without variants: %+v %v", c, ok)
	}

	// Compare keeps the rows apart.
	b2 := *r
	b2.Cells = []Cell{mk("", 20), mk("napi", 7)}
	cmp := Compare(r, &b2)
	if len(cmp.Rows) != 2 || cmp.Rows[1].Variant != "napi" || float64(cmp.Rows[0].P50) != 2 || float64(cmp.Rows[1].P50) != 1 {
		t.Fatalf("compare rows %+v", cmp.Rows)
	}
	if out := cmp.Table("a", "b"); !strings.Contains(out, "uring+napi  20k") {
		t.Fatalf("compare table:\n%s", out)
	}

	// Several queues: the scaling table has a row per kind or variant.
	q2 := mk("napi", 9)
	q2.Queues, q2.AchievedRate = 2, 20000
	r.Cells = append(r.Cells, q2)
	rows := r.ComputeScaling()
	var names []string
	for _, s := range rows {
		names = append(names, RowName(s.Kind, s.Variant))
	}
	if strings.Join(names, ",") != "uring,uring+napi,uring+napi" || rows[2].Queues != 2 {
		t.Fatalf("scaling rows %+v", rows)
	}
}

// IsIPv6, BaseVariant and IPv6Row split and join the IPv6 part of a
// variant.
func TestIPv6Variants(t *testing.T) {
	for _, c := range []struct {
		variant, base string
		v6            bool
	}{
		{"", "", false}, {"ipv6", "", true}, {"netstack", "netstack", false},
		{"netstack+ipv6", "netstack", true}, {"napi", "napi", false}, {"raw", "raw", false},
	} {
		if IsIPv6(c.variant) != c.v6 || BaseVariant(c.variant) != c.base {
			t.Errorf("%q: IsIPv6 %v BaseVariant %q", c.variant, IsIPv6(c.variant), BaseVariant(c.variant))
		}
	}
	for _, c := range []struct{ kind, variant, want string }{
		{"udp", "", "udp+ipv6"}, {"xdp", "", "xdp+ipv6"}, {"tcp-xdp", "", "tcp-xdp+ipv6"},
		{"tcp-dpdk", "", "tcp-dpdk+ipv6"}, {"tcp-xdp", "netstack", "tcp-xdp+netstack+ipv6"},
		{"tcp-xdp", "ipv6", "tcp-xdp+ipv6"}, {"tcp-xdp", "raw", ""}, {"tcp-xdp", "native", ""},
		{"uring", "napi", ""}, {"tcp", "raw", ""},
	} {
		got, ok := IPv6Row(c.kind, c.variant)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("IPv6Row(%q, %q) = %q, %v; want %q", c.kind, c.variant, got, ok, c.want)
		}
	}
}
