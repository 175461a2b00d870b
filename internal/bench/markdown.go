package bench

import (
	"fmt"
	"sort"
	"strings"
)

// Markdown writes the report for people: the environment, the table in the
// reference's format, and under it, per cell, the counts, syscalls per
// message, the conservation and every nonzero counter of both ends.
func (r *Report) Markdown() string {
	var b strings.Builder
	e := &r.Env
	fmt.Fprintf(&b, "# netbench %s\n\n", e.Started)
	fmt.Fprintf(&b, "`%s`\n\n", e.Command)
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, strings.ReplaceAll(v, "|", "\\|")) }
	row("host", e.Host)
	row("kernel", e.Kernel)
	row("CPU", fmt.Sprintf("%s, %d CPUs (allowed %v)", e.CPUModel, e.CPUs, e.AllowedCPUs))
	row("pinning", e.Pinning)
	row("link", e.Link+": "+strings.Join(e.Ifaces, ", "))
	var offs []string
	for _, k := range sortedStrings(e.Offloads) {
		offs = append(offs, k+" "+e.Offloads[k])
	}
	row("offloads", strings.Join(offs, ", "))
	row("Go", e.GoVersion)
	row("method", fmt.Sprintf("%d-byte messages, batch %d, %d queue(s); %s warm-up, %s measured, up to %s drain per cell",
		e.Size, e.Batch, e.Queues, e.Warmup, e.Duration, e.Drain))
	for _, k := range sortedStrings(e.Modes) {
		row("mode of "+k, e.Modes[k])
	}
	if len(e.NotBuilt) > 0 {
		row("not built", strings.Join(e.NotBuilt, ", "))
	}
	for _, n := range e.Notes {
		row("note", n)
	}

	b.WriteString("\nRound trip, p50 / p99 in µs, from each message's scheduled send time; `sat. <rate>, <loss>` when fewer than 99% came back or more than 0.1% were lost.\n\n")
	b.WriteString("| kind |")
	for _, rate := range r.Rates {
		b.WriteString(" " + FormatRate(rate) + " |")
	}
	b.WriteString("\n|---|")
	for range r.Rates {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, k := range r.Kinds {
		fmt.Fprintf(&b, "| %s |", k.Kind)
		if k.Reason != "" {
			fmt.Fprintf(&b, " cannot run: %s |", strings.ReplaceAll(k.Reason, "|", "\\|"))
			for i := 1; i < len(r.Rates); i++ {
				b.WriteString(" |")
			}
			b.WriteString("\n")
			continue
		}
		for _, rate := range r.Rates {
			s := "-"
			if c, ok := r.Cell(k.Kind, rate); ok {
				s = c.Display
			}
			b.WriteString(" " + s + " |")
		}
		b.WriteString("\n")
	}

	b.WriteString("\n## Cells\n")
	for i := range r.Cells {
		c := &r.Cells[i]
		fmt.Fprintf(&b, "\n### %s at %s: %s\n\n", c.Kind, FormatRate(c.Rate), c.Display)
		if c.Error != "" {
			fmt.Fprintf(&b, "error: %s\n\n", c.Error)
		}
		fmt.Fprintf(&b, "- offered %d, sent %d, received %d, lost %d (%s), not sent (back-pressure) %d; achieved %s/s\n",
			c.Offered, c.Sent, c.Received, c.Lost, FormatLoss(c.LossPct), c.NotSent, FormatRate(c.AchievedRate))
		fmt.Fprintf(&b, "- RTT µs: p50 %s, p99 %s, p99.9 %s, max %s; sender lag µs: p50 %s, p99 %s, max %s\n",
			FormatUs(c.P50Us), FormatUs(c.P99Us), FormatUs(c.P999Us), FormatUs(c.MaxUs),
			FormatUs(c.LagP50Us), FormatUs(c.LagP99Us), FormatUs(c.LagMaxUs))
		if sent := c.Conservation.Sent; sent > 0 {
			fmt.Fprintf(&b, "- syscalls per message: loadgen %.2f, echo %.2f",
				float64(c.Counters["loadgen.dgramio.syscalls"])/float64(sent),
				float64(c.Counters["echo.dgramio.syscalls"])/float64(max(c.Counters["echo.app.received"], 1)))
			for _, k := range []string{"loadgen.tcp.segs_out", "echo.tcp.segs_out"} {
				if v, ok := c.Counters[k]; ok {
					fmt.Fprintf(&b, "; %s per message %.2f", k, float64(v)/float64(sent))
				}
			}
			b.WriteString("\n")
		}
		cs := &c.Conservation
		fmt.Fprintf(&b, "- conservation (whole run): sent %d = received %d + counted lost %d + unaccounted %d",
			cs.Sent, cs.Received, cs.Counted, cs.Unaccounted)
		if len(cs.ByLayer) > 0 {
			var parts []string
			for _, k := range SortedKeys(cs.ByLayer) {
				parts = append(parts, fmt.Sprintf("%s %d", k, cs.ByLayer[k]))
			}
			fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
		}
		b.WriteString("\n")
		for _, n := range c.Notes {
			fmt.Fprintf(&b, "- note: %s\n", n)
		}
		var nz []string
		for _, k := range SortedKeys(c.Counters) {
			if v := c.Counters[k]; v != 0 {
				nz = append(nz, fmt.Sprintf("%s=%d", k, v))
			}
		}
		if len(nz) > 0 {
			fmt.Fprintf(&b, "- counters: `%s`\n", strings.Join(nz, "` `"))
		}
		var hz []string
		for _, k := range SortedKeys(c.Host) {
			if v := c.Host[k]; v != 0 {
				hz = append(hz, fmt.Sprintf("%s=%d", k, v))
			}
		}
		if len(hz) > 0 {
			fmt.Fprintf(&b, "- host counters (not in the conservation): `%s`\n", strings.Join(hz, "` `"))
		}
	}
	return b.String()
}

func sortedStrings(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
