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
	// Native and NativeXDP are the native engine's results over memio and
	// on the tcp-xdp path (AddNative); NativeNote says how they compare
	// with Linux, and NativeDiffers marks a difference that is not one
	// where the native engine is right and Linux on veth is not.
	Native, NativeXDP Result
	NativeNote        string
	NativeDiffers     bool
}

// AddNative adds the native engine's results to rows (from Compare) and
// judges them against Linux: the engine must pass every case Linux passes;
// the only accepted differences are those of Accepted where our side
// passes and Linux fails (padding, which veth does not do), and its
// results over memio and AF_XDP must agree where both ran.
func AddNative(rows []Row, nat, natXDP map[string]Result) {
	ran := func(o Outcome) bool { return o == Pass || o == Fail }
	for i := range rows {
		r := &rows[i]
		r.Native, r.NativeXDP = nat[r.Case], natXDP[r.Case]
		m, x, l := r.Native.Outcome, r.NativeXDP.Outcome, r.Linux.Outcome
		if ran(m) && ran(x) && m != x {
			r.NativeDiffers = true
			r.NativeNote = fmt.Sprintf("native %ss over memio but %ss over AF_XDP", m, x)
			continue
		}
		for _, o := range []Outcome{m, x} {
			if !ran(o) || !ran(l) || o == l {
				continue
			}
			if d, ok := acceptedFor(r.Case); ok && d.Ours == Pass && o == Pass && d.Linux == l {
				r.NativeNote = "native: accepted (" + d.RFC + ")"
				continue
			}
			r.NativeDiffers = true
			r.NativeNote = fmt.Sprintf("NATIVE DIFFERS: native %s, linux %s", o, l)
		}
	}
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

// WriteReport prints the rows as tables (case, RFC section, ours, ours-xdp
// when it ran, native and native-xdp when they ran, Linux, the reason of a
// difference), the IPv4 cases and the IPv6 ones (Case.IsIPv6) in sections
// of their own, each followed by why cases did not apply on a DUT and its
// counts, then a summary; it returns the number of silent disagreements.
func WriteReport(w io.Writer, rows []Row, verbose bool) int {
	withXDP, withNative, withNativeXDP := false, false, false
	for _, r := range rows {
		withXDP = withXDP || r.XDP.Outcome != ""
		withNative = withNative || r.Native.Outcome != ""
		withNativeXDP = withNativeXDP || r.NativeXDP.Outcome != ""
	}
	whos := []string{"ours"}
	if withXDP {
		whos = append(whos, "ours-xdp")
	}
	if withNative {
		whos = append(whos, "native")
	}
	if withNativeXDP {
		whos = append(whos, "native-xdp")
	}
	whos = append(whos, "linux")
	silent, nativeDiffers := 0, 0
	var v4, v6 []Row
	for _, r := range rows {
		if c, ok := CaseByName(r.Case); ok && c.IsIPv6() {
			v6 = append(v6, r)
		} else {
			v4 = append(v4, r)
		}
	}
	sections := []struct {
		title string
		rows  []Row
	}{{"IPv4, ARP and TCP over IPv4", v4}, {"IPv6: NDP, ICMPv6, extension headers, fragments, TCP over IPv6 (RFC 8200, 4443, 4861, 5722, 8201)", v6}}
	count := map[string]map[Outcome]int{}
	for _, sec := range sections {
		if len(sec.rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s: %d cases\n\n", sec.title, len(sec.rows))
		secCount := map[string]map[Outcome]int{}
		for _, who := range whos {
			secCount[who] = map[Outcome]int{}
			if count[who] == nil {
				count[who] = map[Outcome]int{}
			}
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "case\tRFC section\t%s\tdifference\n", strings.Join(whos, "\t"))
		for _, r := range sec.rows {
			res := map[string]Result{"ours": r.Ours, "ours-xdp": r.XDP, "native": r.Native, "native-xdp": r.NativeXDP, "linux": r.Linux}
			rfc, _, _ := strings.Cut(r.RFC, " (")
			fmt.Fprintf(tw, "%s\t%s\t", r.Case, rfc)
			for _, who := range whos {
				secCount[who][res[who].Outcome]++
				count[who][res[who].Outcome]++
				fmt.Fprintf(tw, "%s\t", show(res[who]))
			}
			note := r.Note
			if who, _, ok := strings.Cut(note, " n/a: "); ok && !strings.Contains(who, " ") {
				note = who + " n/a (the reason is below the table)"
			}
			if r.NativeNote != "" {
				note = strings.TrimPrefix(note+"; "+r.NativeNote, "; ")
			}
			fmt.Fprintln(tw, note)
			if r.Silent {
				silent++
			}
			if r.NativeDiffers {
				nativeDiffers++
			}
		}
		tw.Flush()
		fmt.Fprintln(w)
		// Why cases did not apply, once per DUT and reason.
		seen := map[string]bool{}
		for _, r := range sec.rows {
			res := map[string]Result{"ours": r.Ours, "ours-xdp": r.XDP, "native": r.Native, "native-xdp": r.NativeXDP, "linux": r.Linux}
			for _, who := range whos {
				if x := res[who]; x.Outcome == NA && !seen[who+"\x00"+x.Why] {
					seen[who+"\x00"+x.Why] = true
					fmt.Fprintf(w, "n/a on %s: %s\n", who, x.Why)
				}
			}
		}
		if len(seen) > 0 {
			fmt.Fprintln(w)
		}
		if len(sections[1].rows) > 0 {
			writeCounts(w, whos, secCount)
			fmt.Fprintln(w)
		}
	}
	if len(v6) > 0 {
		fmt.Fprintln(w, "all cases:")
	}
	writeCounts(w, whos, count)
	fmt.Fprintf(w, "silent disagreements: %d\n", silent)
	if withNative || withNativeXDP {
		fmt.Fprintf(w, "native engine: %d cases differ from Linux without an accepted reason\n", nativeDiffers)
	}
	if verbose {
		for _, r := range rows {
			for _, res := range []Result{r.Ours, r.XDP, r.Native, r.NativeXDP, r.Linux} {
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

// writeCounts prints, for each DUT, how many cases ran, passed, failed, did
// not apply and were skipped.
func writeCounts(w io.Writer, whos []string, count map[string]map[Outcome]int) {
	for _, who := range whos {
		c := count[who]
		fmt.Fprintf(w, "%-10s: %d cases run (%d pass, %d fail), %d n/a, %d skipped\n", who,
			c[Pass]+c[Fail], c[Pass], c[Fail], c[NA], c[Skipped]+c[""])
	}
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
