package main

import (
	"strings"
	"testing"
)

// TestHot: an instruction's own cost counts, a call's inclusive cost does
// not; a line is hot when one of its instructions ran at least every
// other iteration; lines are counted by the package of their function.
func TestHot(t *testing.T) {
	const prof = `positions: instr line
events: Ir
fn=github.com/a/b.(*T).M
0x1000 10 100
0x1004 10 100
calls=100 0x2000 20
0x1008 11 900000
0x1040 12 49
fn=github.com/a/c.F'2
0x2000 20 300
0x2080 21 50
fn=runtime.memmove
0x3000 1 5000
`
	p, err := parse(strings.NewReader(prof))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.cost[0x1008]; got != 0 {
		t.Fatalf("the call's inclusive cost counted at its address: %d", got)
	}
	r := p.hot(100, pkgOf)
	if r.perIter != 55.99 { // (100+100+49+300+50+5000)/100
		t.Fatalf("instructions an iteration: %v, want 55.99", r.perIter)
	}
	// Hot (>= 50): 0x1000/0x1004 (one line), 0x2000, 0x2080, 0x3000; not
	// 0x1040 (49).
	if r.lines != 4 {
		t.Fatalf("hot lines: %d, want 4", r.lines)
	}
	want := []pkgLines{{"github.com/a/c", 2}, {"github.com/a/b", 1}, {"runtime", 1}}
	if len(r.byPkg) != len(want) {
		t.Fatalf("by package: %v, want %v", r.byPkg, want)
	}
	for i := range want {
		if r.byPkg[i] != want[i] {
			t.Fatalf("by package: %v, want %v", r.byPkg, want)
		}
	}
}

// TestSharedLine: a line holding the end of one function and the start
// of another counts once, for the function at its lower address.
func TestSharedLine(t *testing.T) {
	const prof = `fn=github.com/a/b.F
0x1000 1 10
fn=github.com/a/c.G
0x1020 1 10
`
	for i := 0; i < 20; i++ { // map order varies from run to run
		p, err := parse(strings.NewReader(prof))
		if err != nil {
			t.Fatal(err)
		}
		r := p.hot(10, pkgOf)
		if r.lines != 1 || len(r.byPkg) != 1 || r.byPkg[0] != (pkgLines{"github.com/a/b", 1}) {
			t.Fatalf("shared line: %d lines, %v; want 1, [{github.com/a/b 1}]", r.lines, r.byPkg)
		}
	}
}

// TestByFunc: with funcOf the lines are counted by function, a
// recursive entry's suffix dropped.
func TestByFunc(t *testing.T) {
	const prof = `fn=github.com/a/b.F
0x1000 1 10
fn=github.com/a/b.F'2
0x1040 1 10
fn=github.com/a/b.G
0x1080 1 10
`
	p, err := parse(strings.NewReader(prof))
	if err != nil {
		t.Fatal(err)
	}
	r := p.hot(10, funcOf)
	want := []pkgLines{{"github.com/a/b.F", 2}, {"github.com/a/b.G", 1}}
	if len(r.byPkg) != len(want) || r.byPkg[0] != want[0] || r.byPkg[1] != want[1] {
		t.Fatalf("by function: %v, want %v", r.byPkg, want)
	}
}

func TestPkgOf(t *testing.T) {
	for fn, want := range map[string]string{
		"github.com/a/b.(*T).M'2":                   "github.com/a/b",
		"github.com/a/b.F":                          "github.com/a/b",
		"github.com/a/tcp.(*c).github.com/a/s.hook": "github.com/a/tcp",
		"runtime.memmove":                           "runtime",
	} {
		if got := pkgOf(fn); got != want {
			t.Errorf("pkgOf(%q) = %q, want %q", fn, got, want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, bad := range []string{"0x10 5\n", "0xzz 1 2\n", "0x10 1 x\n"} {
		if _, err := parse(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
