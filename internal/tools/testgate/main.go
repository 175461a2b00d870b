// Command testgate reads `go test -json` on stdin, prints the test output as
// plain text, and summarises. With CI=true (or -strict) a skipped test is a
// failure: in CI nothing may pass by being skipped. It exits non-zero when a
// test failed, a package failed to build, or (strict) a test was skipped.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	strict := flag.Bool("strict", os.Getenv("CI") == "true", "fail on any skipped test (default: CI=true)")
	quiet := flag.Bool("quiet", false, "print only failures, skips and the summary")
	flag.Parse()

	var passed, failed, skipped []string
	output := map[string][]string{} // package/test -> lines, for failures when quiet
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// Not JSON: a build error or vet output. Print it.
			fmt.Println(string(line))
			continue
		}
		key := e.Package
		if e.Test != "" {
			key += " " + e.Test
		}
		switch e.Action {
		case "output":
			if *quiet {
				output[key] = append(output[key], e.Output)
			} else {
				fmt.Print(e.Output)
			}
		case "pass":
			if e.Test != "" {
				passed = append(passed, key)
			}
		case "fail":
			failed = append(failed, key)
			if *quiet {
				for _, l := range output[key] {
					fmt.Print(l)
				}
			}
		case "skip":
			if e.Test != "" {
				skipped = append(skipped, key)
				if *quiet {
					for _, l := range output[key] {
						fmt.Print(l)
					}
				}
			}
		}
		if *quiet && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip") {
			delete(output, key)
		}
	}
	sort.Strings(skipped)
	sort.Strings(failed)
	fmt.Printf("\ntestgate: %d passed, %d failed, %d skipped\n", len(passed), len(failed), len(skipped))
	for _, s := range skipped {
		fmt.Println("  skipped:", s)
	}
	for _, f := range failed {
		fmt.Println("  FAILED: ", f)
	}
	switch {
	case len(failed) > 0:
		os.Exit(1)
	case *strict && len(skipped) > 0:
		fmt.Println("testgate: CI=true: a skipped test is a failure (nothing may pass by being skipped)")
		os.Exit(1)
	}
}
