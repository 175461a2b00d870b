// Command hotcode reads a callgrind profile written with --dump-instr=yes
// --compress-pos=no --compress-strings=no and prints the code a hot loop
// runs: the instructions per iteration and the 64-byte lines of code whose
// instructions ran at least once every other iteration, by package. A poll
// loop whose hot code does not fit the instruction cache, or that the
// kernel evicts between two calls, fetches those lines again on every
// pass: the count is its code footprint, which neither a noisy host nor
// the CPU's mode moves.
//
//	hotcode -n 2000 callgrind.out
//
// n is the number of iterations the profile collected. With -funcs the
// lines are counted by function instead of by package.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

func main() {
	n := flag.Int("n", 0, "iterations the profile collected (required)")
	funcs := flag.Bool("funcs", false, "count the hot lines by function, not by package")
	flag.Parse()
	if *n <= 0 || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: hotcode -n ITERATIONS callgrind.out")
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "hotcode:", err)
		os.Exit(1)
	}
	defer f.Close()
	p, err := parse(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hotcode:", err)
		os.Exit(1)
	}
	by := pkgOf
	if *funcs {
		by = funcOf
	}
	r := p.hot(*n, by)
	fmt.Printf("%.0f instructions an iteration; %d hot lines of code (%d KiB)\n", r.perIter, r.lines, r.lines*64/1024)
	for _, pk := range r.byPkg {
		fmt.Printf("  %5d  %s\n", pk.lines, pk.name)
	}
}

// profile is the exclusive cost (Ir) of each instruction address, and the
// function it is in.
type profile struct {
	cost  map[uint64]uint64
	owner map[uint64]string
}

// parse reads the instruction lines of a callgrind profile ("addr line
// Ir"), skipping the inclusive cost line that follows each calls= line.
func parse(r io.Reader) (*profile, error) {
	p := &profile{cost: map[uint64]uint64{}, owner: map[uint64]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	fn, call := "", false
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "fn="):
			fn = strings.TrimSpace(l[3:])
		case strings.HasPrefix(l, "calls="):
			call = true
		case strings.HasPrefix(l, "0x"):
			if call {
				call = false // a call's inclusive cost, not this instruction's
				continue
			}
			fs := strings.Fields(l)
			if len(fs) < 3 {
				return nil, fmt.Errorf("want \"addr line Ir\" (positions: instr line), got %q", l)
			}
			a, err := strconv.ParseUint(fs[0][2:], 16, 64)
			if err != nil {
				return nil, fmt.Errorf("address in %q: %v", l, err)
			}
			c, err := strconv.ParseUint(fs[2], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("cost in %q: %v", l, err)
			}
			p.cost[a] += c
			p.owner[a] = fn
		}
	}
	return p, sc.Err()
}

type pkgLines struct {
	name  string
	lines int
}

type report struct {
	perIter float64
	lines   int
	byPkg   []pkgLines
}

// hot sums the profile of n iterations, counting the hot lines by what
// by makes of their function's symbol.
func (p *profile) hot(n int, by func(string) string) report {
	var total uint64
	first := map[uint64]uint64{} // hot line -> its lowest hot address
	for a, c := range p.cost {
		total += c
		if c >= uint64(n+1)/2 {
			if f, ok := first[a/64]; !ok || a < f {
				first[a/64] = a
			}
		}
	}
	// A line that two functions share counts for the first of them, so
	// that the counts do not depend on the map's order.
	count := map[string]int{}
	for _, a := range first {
		count[by(p.owner[a])]++
	}
	r := report{perIter: float64(total) / float64(n), lines: len(first)}
	for name, k := range count {
		r.byPkg = append(r.byPkg, pkgLines{name, k})
	}
	sort.Slice(r.byPkg, func(i, j int) bool {
		if r.byPkg[i].lines != r.byPkg[j].lines {
			return r.byPkg[i].lines > r.byPkg[j].lines
		}
		return r.byPkg[i].name < r.byPkg[j].name
	})
	return r
}

// pkgOf is the import path of a Go function's symbol
// ("github.com/x/y.(*T).M'2" is "github.com/x/y", also when the method's
// name holds another path: a promoted method's wrapper).
func pkgOf(fn string) string {
	if i := strings.Index(fn, ".("); i >= 0 {
		return fn[:i]
	}
	slash := strings.LastIndexByte(fn, '/')
	if dot := strings.IndexByte(fn[slash+1:], '.'); dot >= 0 {
		return fn[:slash+1+dot]
	}
	return fn
}

// funcOf is a Go function's symbol without callgrind's suffix for a
// function it saw entered recursively ("'2").
func funcOf(fn string) string {
	if i := strings.LastIndexByte(fn, '\''); i >= 0 {
		return fn[:i]
	}
	return fn
}
