package conformance

import (
	"strings"
	"testing"

	"github.com/dgramio/dgramio/internal/testutil"
)

// TestConformance runs every case on every DUT this host can make:
// TestConformance/<dut>/<case>. Ours needs nothing; linux needs root (it
// skips without, and fails in CI).
func TestConformance(t *testing.T) {
	for _, f := range factories() {
		Run(t, f)
	}
}

func factories() []Factory { return []Factory{Ours(), Native(), Linux(), OursXDP(), NativeXDP()} }

// TestDifferences compares our stack with Linux case by case: a difference
// must be in Accepted (with its RFC section and reason), and every entry of
// Accepted must still happen. It reuses TestConformance's results when it
// ran in the same binary, and runs the suite itself otherwise.
func TestDifferences(t *testing.T) {
	results := map[string]map[string]Result{}
	for _, f := range []Factory{Ours(), Linux()} {
		if r, ok := recorded(f.Name()); ok {
			results[f.Name()] = r
			continue
		}
		info, err := Probe(f)
		if err != nil {
			testutil.Skip(t, "cannot compare: "+err.Error())
		}
		r := map[string]Result{}
		for _, c := range Cases() {
			r[c.Name] = RunCase(f, c, info)
		}
		results[f.Name()] = r
	}
	// Our stack on the tcp-xdp path is compared with it over memio when
	// TestConformance ran it.
	xdp, _ := recorded("ours-xdp")
	rows := Compare(results["ours-memio"], xdp, results["linux"])
	var b strings.Builder
	silent := WriteReport(&b, rows, false)
	t.Logf("side by side:\n%s", b.String())
	for _, r := range rows {
		if r.Silent {
			t.Errorf("%s: ours %s, linux %s: %s", r.Case, r.Ours.Outcome, r.Linux.Outcome, r.Note)
		}
	}
	if silent > 0 {
		t.Errorf("%d silent disagreements", silent)
	}
	for _, d := range accepted {
		if _, ok := CaseByName(d.Case); !ok {
			t.Errorf("accepted difference for unknown case %q", d.Case)
		}
		if d.RFC == "" || d.Reason == "" {
			t.Errorf("accepted difference for %s has no RFC section or reason", d.Case)
		}
	}
}

// TestCases checks the suite's own bookkeeping: at least 40 cases for
// each DUT, every case named once with an RFC section and a title.
func TestCases(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Cases() {
		if seen[c.Name] {
			t.Errorf("case %s registered twice", c.Name)
		}
		seen[c.Name] = true
		if c.RFC == "" || c.Title == "" || c.Run == nil {
			t.Errorf("case %s lacks an RFC section, a title or a body", c.Name)
		}
		if strings.ContainsAny(c.Name, " /") {
			t.Errorf("case name %q has a space or a slash", c.Name)
		}
		if c.IsIPv6() != c.Setup.IPv6 {
			t.Errorf("case %s: needs IPv6 %v but its Setup asks for IPv6 %v", c.Name, c.IsIPv6(), c.Setup.IPv6)
		}
	}
	for _, info := range []Info{
		{Name: "ours-memio", Lacks: netstackLacks()},
		{Name: "native-memio", Lacks: nativeLacks},
		{Name: "linux", Lacks: linuxLacks},
		{Name: "ours-xdp", Lacks: xdpLacksNow()},
	} {
		n := 0
		for _, c := range Cases() {
			if ok, _ := c.Applies(info); ok {
				n++
			}
		}
		if n < 40 {
			t.Errorf("%s runs %d cases, want at least 40", info.Name, n)
		}
	}
}
