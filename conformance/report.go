package conformance

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Row is one line of the side-by-side report: a case and its outcome on
// our stack (over memio, and over AF_XDP when that ran) and on Linux.
type Row struct {
	Case, RFC        string
	Ours, XDP, Linux Result
	// Note is the reason of a difference (accepted: the table's reason) or
	// of an n/a.
	Note string
	// Silent is a difference with no accepted reason, or an accepted
	// difference that no longer happens: both fail the comparison.
	Silent bool
}

// Compare lines up the results of every case on our stack and on Linux
// (results keyed by case name; a missing one counts as not run) and judges
// each difference against Accepted. xdp, when not nil, are our stack's
// results on the tcp-xdp path: where a case ran there and over memio, the
// outcomes must be the same (the same stack), or the row is silent.
func Compare(ours, xdp, linux map[string]Result) []Row {
	var rows []Row
	for _, c := range Cases() {
		r := Row{Case: c.Name, RFC: c.RFC, Ours: ours[c.Name], XDP: xdp[c.Name], Linux: linux[c.Name]}
		if x, o := r.XDP.Outcome, r.Ours.Outcome; (x == Pass || x == Fail) && (o == Pass || o == Fail) && x != o {
			r.Silent = true
			r.Note = fmt.Sprintf("our stack %ss over memio but %ss over AF_XDP", o, x)
			rows = append(rows, r)
			continue
		}
		o, l := r.Ours.Outcome, r.Linux.Outcome
		d, accepted := acceptedFor(c.Name)
		switch {
		case o == "" || l == "" || o == Skipped || l == Skipped:
			r.Note = "not compared: not run on both"
		case o == NA || l == NA:
			why := r.Ours.Why
			who := "ours"
			if l == NA {
				why, who = r.Linux.Why, "linux"
			}
			r.Note = who + " n/a: " + why
		case o == l && !accepted:
		case o == l && accepted:
			r.Silent = true
			r.Note = fmt.Sprintf("accepted difference (ours %s, linux %s) no longer happens: remove it from Accepted", d.Ours, d.Linux)
		case accepted && d.Ours == o && d.Linux == l:
			r.Note = "accepted (" + d.RFC + "): " + d.Reason
		case accepted:
			r.Silent = true
			r.Note = fmt.Sprintf("differs, but not as accepted (ours %s, linux %s)", d.Ours, d.Linux)
		default:
			r.Silent = true
			r.Note = "SILENT DISAGREEMENT: no accepted reason"
		}
		rows = append(rows, r)
	}
	return rows
}

// WriteReport prints the rows as a table (case, RFC section, ours, ours-xdp
// when it ran, Linux, the reason of a difference) followed by a summary,
// and returns the number of silent disagreements.
func WriteReport(w io.Writer, rows []Row, verbose bool) int {
	withXDP := false
	for _, r := range rows {
		withXDP = withXDP || r.XDP.Outcome != ""
	}
	whos := []string{"ours", "linux"}
	if withXDP {
		whos = []string{"ours", "ours-xdp", "linux"}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "case\tRFC section\t%s\tdifference\n", strings.Join(whos, "\t"))
	silent := 0
	count := map[string]map[Outcome]int{}
	for _, who := range whos {
		count[who] = map[Outcome]int{}
	}
	for _, r := range rows {
		res := map[string]Result{"ours": r.Ours, "ours-xdp": r.XDP, "linux": r.Linux}
		rfc, _, _ := strings.Cut(r.RFC, " (")
		fmt.Fprintf(tw, "%s\t%s\t", r.Case, rfc)
		for _, who := range whos {
			count[who][res[who].Outcome]++
			fmt.Fprintf(tw, "%s\t", show(res[who]))
		}
		fmt.Fprintln(tw, r.Note)
		if r.Silent {
			silent++
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	for _, who := range whos {
		c := count[who]
		fmt.Fprintf(w, "%-8s: %d cases run (%d pass, %d fail), %d n/a, %d skipped\n", who,
			c[Pass]+c[Fail], c[Pass], c[Fail], c[NA], c[Skipped]+c[""])
	}
	fmt.Fprintf(w, "silent disagreements: %d\n", silent)
	if verbose {
		for _, r := range rows {
			for _, res := range []Result{r.Ours, r.XDP, r.Linux} {
				notes := notesOf(res)
				if res.Outcome == Fail {
					notes = append(notes, res.Failures...)
				}
				if len(notes) > 0 {
					fmt.Fprintf(w, "\n%s on %s (%s):\n  %s\n", r.Case, res.DUT, res.Outcome, strings.Join(notes, "\n  "))
				}
			}
		}
	}
	return silent
}

func show(r Result) string {
	if r.Outcome == "" {
		return "-"
	}
	return string(r.Outcome)
}

// notesOf returns the "note:" lines a case logged.
func notesOf(r Result) []string {
	var out []string
	for _, l := range r.Log {
		if s, ok := strings.CutPrefix(l, "note: "); ok {
			out = append(out, s)
		}
	}
	return out
}

// RunAll runs every case on f outside go test and returns the results by
// case name. A DUT that cannot be made here gives every case the outcome
// skip with the reason.
func RunAll(f Factory, progress func(Result)) map[string]Result {
	out := map[string]Result{}
	info, err := Probe(f)
	for _, c := range Cases() {
		var r Result
		if err != nil {
			r = Result{Case: c.Name, DUT: f.Name(), Outcome: Skipped, Why: err.Error()}
		} else {
			r = RunCase(f, c, info)
		}
		out[c.Name] = r
		if progress != nil {
			progress(r)
		}
	}
	return out
}
