// Command report runs the conformance suite on our stack (netstack over
// memio, and on the tcp-xdp path over a veth), on the native engine (the
// same two ways) and on the Linux kernel (in a network namespace); the
// veth DUTs need root. It prints the side-by-side table: case, RFC
// section, ours, ours-xdp, native, native-xdp, Linux, and for every
// difference its accepted reason; the IPv6 cases in a section of their own. The native engine's differences from
// Linux are counted on a line of their own. It exits with status 1 when a difference
// has no accepted reason (a silent disagreement), or an accepted one no
// longer happens.
//
//	go run ./conformance/cmd/report          # the table
//	go run ./conformance/cmd/report -v       # with each case's notes and failures
//	go run ./conformance/cmd/report -mutants # and the suite's self-test
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/dgramio/dgramio/conformance"
)

// notRun says why a DUT did not run, when it did not.
func notRun(name string, rs map[string]conformance.Result) {
	for _, r := range rs {
		if r.Outcome == conformance.Skipped {
			fmt.Printf("%s: not run: %s\n\n", name, r.Why)
			return
		}
	}
}

// caseNames lists the results' case names, each with its outcome when
// outcome is set.
func caseNames(rs []conformance.Result, outcome bool) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Case
		if outcome {
			out[i] += " (" + string(r.Outcome) + ")"
		}
	}
	return out
}

func main() {
	verbose := flag.Bool("v", false, "print each case's notes and failures after the table")
	mutants := flag.Bool("mutants", false, "also run the mutant DUTs and say which cases catch each defect")
	quiet := flag.Bool("q", false, "no progress on stderr")
	withXDP := flag.Bool("xdp", true, "also run netstack and the native engine on the tcp-xdp path (AF_XDP on a veth; needs root)")
	flag.Parse()

	progress := func(r conformance.Result) {
		if !*quiet {
			fmt.Fprintf(os.Stderr, "%-12s %-40s %s\n", r.DUT, r.Case, r.Outcome)
		}
	}
	ours := conformance.RunAll(conformance.Ours(), progress)
	var xdp map[string]conformance.Result
	if *withXDP {
		xdp = conformance.RunAll(conformance.OursXDP(), progress)
		notRun("ours-xdp", xdp)
	}
	nat := conformance.RunAll(conformance.Native(), progress)
	var natXDP map[string]conformance.Result
	if *withXDP {
		natXDP = conformance.RunAll(conformance.NativeXDP(), progress)
		notRun("native-xdp", natXDP)
	}
	linux := conformance.RunAll(conformance.Linux(), progress)
	notRun("linux", linux)
	rows := conformance.Compare(ours, xdp, linux)
	conformance.AddNative(rows, nat, natXDP)
	silent := conformance.WriteReport(os.Stdout, rows, *verbose)

	bad := 0
	if *mutants {
		fmt.Println("\nmutants (each must fail its cases and pass its controls):")
		for _, m := range conformance.Mutants() {
			r, err := m.Run()
			if err != nil {
				fmt.Printf("  %s: %v\n", m.Factory.Name(), err)
				bad++
				continue
			}
			fmt.Printf("  %-28s %s: caught by %s", m.Factory.Name(), m.Defect, strings.Join(caseNames(r.Caught, false), ", "))
			if len(r.Missed) > 0 {
				fmt.Printf("; NOT caught by %s", strings.Join(caseNames(r.Missed, true), ", "))
				bad++
			}
			if len(r.Broken) > 0 {
				fmt.Printf("; controls that did not pass: %s", strings.Join(caseNames(r.Broken, true), ", "))
				bad++
			}
			fmt.Println()
		}
	}
	if silent > 0 || bad > 0 {
		os.Exit(1)
	}
}
