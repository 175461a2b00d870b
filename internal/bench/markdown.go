package bench

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Markdown writes the report for people: the environment and what the
// preflight found, the results table, the plots, and
// under it, per cell, the counts, the spread over repeats, syscalls per
// message of both ends, frames per message for stream kinds, the
// conservation (with any unaccounted loss) and every layer's counters of
// both ends.
func (r *Report) Markdown() string {
	var b strings.Builder
	e := &r.Env
	fmt.Fprintf(&b, "# netbench %s\n\n", e.Started)
	fmt.Fprintf(&b, "`%s`\n\n", e.Command)
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, cellText(v)) }
	row("host", e.Host)
	row("kernel", e.Kernel)
	row("CPU", fmt.Sprintf("%s, %d CPUs (allowed %v)", e.CPUModel, e.CPUs, e.AllowedCPUs))
	row("pinning", e.Pinning)
	row("link", e.Link+": "+strings.Join(e.Ifaces, ", "))
	row("offloads", summarizeOffloads(e.Offloads))
	row("Go", e.GoVersion)
	queues := fmt.Sprintf("%d queue(s)", e.Queues)
	if len(e.QueueCounts) > 1 {
		queues = fmt.Sprintf("queues %s (each kind with each)", strings.Trim(strings.Join(strings.Fields(fmt.Sprint(e.QueueCounts)), ", "), "[]"))
	}
	row("method", fmt.Sprintf("%d-byte messages, batch %d, %s; %s warm-up, %s measured, up to %s drain per cell",
		e.Size, e.Batch, queues, e.Warmup, e.Duration, e.Drain))
	if e.Poll != "" {
		row("poll", "poll "+PollName(e.Poll)+map[string]string{
			"busy":  ": each poller spins on its own CPU",
			"yield": ": pollers sleep in Wait when idle, so that more pollers than CPUs make progress (correct, not a measure of the fast path)",
		}[PollName(e.Poll)])
	}
	if e.Repeat > 0 {
		row("repeats", fmt.Sprintf("%d; %s", e.Repeat, e.Order))
	}
	for _, k := range slices.Sorted(maps.Keys(e.Modes)) {
		row("mode of "+k, e.Modes[k])
	}
	if len(e.NotBuilt) > 0 {
		row("not built", strings.Join(e.NotBuilt, ", "))
	}
	if e.Pcap != "" {
		row("packet capture", e.Pcap+" (a write per batch: these numbers are not for comparison)")
	}
	for _, s := range e.Setup {
		row("set for the run", s)
	}
	for _, n := range e.Notes {
		row("note", n)
	}
	if len(e.Preflight) > 0 {
		b.WriteString("\n### Preflight\n\nWhat moves results by microseconds on real ports, as found on this host.\n\n| check | | found |\n|---|---|---|\n")
		for _, c := range e.Preflight {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", cellText(c.Name), c.Status, cellText(c.Detail))
		}
	}

	b.WriteString("\n## Results\n\nRound trip, p50 / p99 in µs, from each message's scheduled send time; `sat. <rate>, <loss>` when fewer than 99% came back or more than 0.1% were lost (the rate is the achieved one); `[loadgen]` marks a cell whose limit was the load generator itself, not the path: its own receive side lost most of the missing messages, or it fell behind its schedule by more than a tenth of the measured time (then the path was offered less than the column's rate: the cell says `sender behind <lag>` and shows no latency, which would be the sender's lag).")
	if e.Repeat > 1 {
		b.WriteString(fmt.Sprintf(" Each cell is the median of %d repeats.", e.Repeat))
	}
	b.WriteString("\n\n")
	r.resultsMarkdown(&b)
	for _, k := range r.Kinds {
		if l := e.Limits[k.Label()]; l != "" && k.Reason == "" {
			fmt.Fprintf(&b, "\nLimit of %s: %s.\n", k.Label(), cellText(l))
		}
	}
	r.scalingMarkdown(&b)
	if len(r.Plots) > 0 {
		b.WriteString("\n")
		for _, p := range r.Plots {
			fmt.Fprintf(&b, "![%s](%s)\n", strings.TrimSuffix(p, ".svg"), p)
		}
		b.WriteString("\nThe lines join the table's rates that kept up; hollow marks off the lines are the capacity's probes; saturated cells are in the table only (their latency is a queue's depth, not the path's).\n")
	}
	if len(r.Captures) > 0 {
		fmt.Fprintf(&b, "\nPacket captures (pcap): %s\n", strings.Join(r.Captures, ", "))
	}

	b.WriteString("\n## Cells\n")
	for i := range r.Cells {
		r.Cells[i].markdown(&b)
	}
	return b.String()
}

// markdown writes one cell's section.
func (c *Cell) markdown(b *strings.Builder) {
	fmt.Fprintf(b, "\n### %s at %s: %s\n\n", c.Label(), FormatRate(c.Rate), c.Display)
	if c.Error != "" {
		fmt.Fprintf(b, "error: %s\n\n", c.Error)
	}
	fmt.Fprintf(b, "- offered %d, sent %d, received %d, lost %d (%s), not sent (back-pressure) %d; achieved %s/s\n",
		c.Offered, c.Sent, c.Received, c.Lost, FormatLoss(c.LossPct), c.NotSent, FormatRate(c.AchievedRate))
	fmt.Fprintf(b, "- RTT µs: p50 %s, p99 %s, p99.9 %s, max %s; sender lag µs: p50 %s, p99 %s, max %s; sent late %d\n",
		FormatUs(c.P50Us), FormatUs(c.P99Us), FormatUs(c.P999Us), FormatUs(c.MaxUs),
		FormatUs(c.LagP50Us), FormatUs(c.LagP99Us), FormatUs(c.LagMaxUs), c.Late)
	if c.Limit != nil {
		fmt.Fprintf(b, "- limited by the %s: %s\n", c.LimitedBy, c.Limit.Reason)
	}
	if s := c.Spread; s != nil && s.OfRepeats > 1 {
		var rs []string
		for _, r := range c.Repeats {
			rs = append(rs, fmt.Sprintf("%d: %s", r.N, r.Display))
		}
		fmt.Fprintf(b, "- %d repeats, %d measured (medians above; counts and counters summed): p50 %s–%s µs, p99 %s–%s µs, achieved %s–%s/s; saturated in %d, unaccounted in %d (%s)\n",
			s.OfRepeats, s.Measured, FormatUs(s.P50MinUs), FormatUs(s.P50MaxUs), FormatUs(s.P99MinUs), FormatUs(s.P99MaxUs),
			FormatRate(s.AchievedMin), FormatRate(s.AchievedMax), s.SaturatedIn, s.Unaccounted, strings.Join(rs, "; "))
	}
	if c.Mode != "" || c.EchoMode != "" {
		fmt.Fprintf(b, "- mode: loadgen %s; echo %s\n", orDash(c.Mode), orDash(c.EchoMode))
	}
	if sent := c.Conservation.Sent; sent > 0 {
		fmt.Fprintf(b, "- syscalls per message: loadgen %.2f (of %d sent, each one send and one receive), echo %.2f (of %d reflected)\n",
			float64(c.Counters["loadgen.dgramio.syscalls"])/float64(sent), sent,
			float64(c.Counters["echo.dgramio.syscalls"])/float64(max(c.Counters["echo.app.received"], 1)), c.Counters["echo.app.received"])
		if fl := c.framesLine(); fl != "" {
			b.WriteString("- " + fl + "\n")
		}
	}
	cs := &c.Conservation
	fmt.Fprintf(b, "- conservation (whole run, warm-up included): sent %d = received %d + counted lost %d", cs.Sent, cs.Received, cs.Counted)
	if cs.InFlight > 0 {
		fmt.Fprintf(b, " + still queued in a stream backend at the end %d", cs.InFlight)
	}
	fmt.Fprintf(b, " + unaccounted %d", cs.Unaccounted)
	if len(cs.ByLayer) > 0 {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(cs.ByLayer)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, cs.ByLayer[k]))
		}
		fmt.Fprintf(b, " (%s)", strings.Join(parts, ", "))
	}
	b.WriteString("\n")
	if cs.Unaccounted != 0 {
		fmt.Fprintf(b, "- **unaccounted %+d**: %s\n", cs.Unaccounted, map[bool]string{
			true:  "messages vanished without any layer counting them",
			false: "more losses were counted than messages are missing (a counter counts something else, or an answer came back after being counted lost)",
		}[cs.Unaccounted > 0])
	}
	for _, n := range c.Notes {
		fmt.Fprintf(b, "- note: %s\n", n)
	}
	c.queueTable(b)
	c.counterTable(b)
	var hz []string
	for _, k := range slices.Sorted(maps.Keys(c.Host)) {
		if v := c.Host[k]; v != 0 {
			hz = append(hz, fmt.Sprintf("%s=%d", k, v))
		}
	}
	if len(hz) > 0 {
		fmt.Fprintf(b, "- host counters over the cell (not in the conservation): `%s`\n", strings.Join(hz, "` `"))
	}
}

// framesLine describes how messages were packed into frames or segments
// on a stream kind: the userspace TCP's frames carrying data per record
// (tcp.FramesPerRecord), or the kernel TCP's segments (TCP_INFO, data and
// pure ACKs together) per message.
func (c *Cell) framesLine() string {
	per := func(num, den string) (float64, bool) {
		n, ok1 := c.Counters[num]
		d, ok2 := c.Counters[den]
		if !ok1 || !ok2 || d == 0 {
			return 0, false
		}
		return float64(n) / float64(d), true
	}
	var parts []string
	for _, end := range []string{"loadgen", "echo"} {
		tx, okT := per(end+".link.tx_tcp_data_frames", end+".stream.records_tx")
		rx, okR := per(end+".link.rx_tcp_data_frames", end+".stream.records_rx")
		if okT || okR {
			parts = append(parts, fmt.Sprintf("%s tx %.2f rx %.2f", end, tx, rx))
		}
	}
	if len(parts) > 0 {
		return "frames carrying data per record: " + strings.Join(parts, ", ") + " (below 1: several records in one segment)"
	}
	for _, end := range []string{"loadgen", "echo"} {
		msgs := c.Counters[end+".dgramio.tx_sent"]
		out, okO := c.Counters[end+".tcp.segs_out"]
		in, okI := c.Counters[end+".tcp.segs_in"]
		if (okO || okI) && msgs > 0 {
			parts = append(parts, fmt.Sprintf("%s out %.2f in %.2f", end, float64(out)/float64(msgs), float64(in)/float64(msgs)))
		}
	}
	if len(parts) > 0 {
		return "TCP segments per message sent (TCP_INFO, data and pure ACKs): " + strings.Join(parts, ", ")
	}
	return ""
}

// queueTable writes the per-queue counters of a cell with several
// queues: each queue of both ends, and their sum beside the totals.
func (c *Cell) queueTable(b *strings.Builder) {
	if len(c.PerQueue) == 0 {
		return
	}
	fmt.Fprintf(b, "\nPer queue (whole run): queue q of the load generator (its own flow; answers that reached another queue are other_queue, those that came back after a later message's answer reordered) and queue q of the echo (what the link steered to it). "+
		"rx / tx are the backends' rx_delivered / tx_sent; lost counts each end's loss counters.\n\n"+
		"| queue | loadgen sent | answered | other_queue | reordered | p50 / p99 µs | loadgen rx / tx | loadgen lost | echo received | echo reflected | echo rx / tx | echo lost |\n"+
		"|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---|---:|\n")
	var sum QueueCell
	sum.Counters = map[string]uint64{}
	for i := range c.PerQueue {
		q := &c.PerQueue[i]
		fmt.Fprintf(b, "| %d | %d | %d | %d | %d | %s / %s | %d / %d | %d | %d | %d | %d / %d | %d |\n", q.Queue, q.Sent, q.Received, q.OtherQueue, q.Reordered,
			FormatUs(q.P50Us), FormatUs(q.P99Us),
			q.Counters["loadgen.dgramio.rx_delivered"], q.Counters["loadgen.dgramio.tx_sent"], q.LoadLost,
			q.EchoReceived, q.EchoReflected, q.Counters["echo.dgramio.rx_delivered"], q.Counters["echo.dgramio.tx_sent"], q.EchoLost)
		sum.add(q)
	}
	fmt.Fprintf(b, "| sum | %d | %d | %d | %d | | %d / %d | %d | %d | %d | %d / %d | %d |\n", sum.Sent, sum.Received, sum.OtherQueue, sum.Reordered,
		sum.Counters["loadgen.dgramio.rx_delivered"], sum.Counters["loadgen.dgramio.tx_sent"], sum.LoadLost,
		sum.EchoReceived, sum.EchoReflected, sum.Counters["echo.dgramio.rx_delivered"], sum.Counters["echo.dgramio.tx_sent"], sum.EchoLost)
	fmt.Fprintf(b, "| total | %d | %d | %d | %d | %s / %s | %d / %d | | %d | %d | %d / %d | |\n", c.Conservation.Sent, c.Conservation.Received,
		c.Counters["loadgen.app.other_queue"], c.Counters["loadgen.app.reordered"], FormatUs(c.P50Us), FormatUs(c.P99Us),
		c.Counters["loadgen.dgramio.rx_delivered"], c.Counters["loadgen.dgramio.tx_sent"],
		c.Counters["echo.app.received"], c.Counters["echo.app.reflected"], c.Counters["echo.dgramio.rx_delivered"], c.Counters["echo.dgramio.tx_sent"])
	if d := c.QueueMismatches(); len(d) > 0 {
		fmt.Fprintf(b, "\n**per-queue counters do not add up to the totals**: %s\n", strings.Join(d, "; "))
	}
}

// QueueMismatches lists the message counters of both ends whose per-queue
// values do not add up to the cell's totals (the counters of state the
// queues share, such as an XDP program's, are left out: they are in the
// totals only). Empty when they add up, or when the cell has one queue.
func (c *Cell) QueueMismatches() []string {
	if len(c.PerQueue) == 0 {
		return nil
	}
	var out []string
	for _, end := range []string{"loadgen", "echo"} {
		names := []string{"dgramio.tx_queued", "dgramio.tx_sent", "dgramio.tx_dropped", "dgramio.rx_delivered", "dgramio.rx_truncated",
			"dgramio.rx_bad_checksum", "dgramio.rx_malformed", "dgramio.rx_filtered"}
		for _, k := range slices.Sorted(maps.Keys(c.Counters)) {
			if rest, ok := strings.CutPrefix(k, end+".app."); ok {
				names = append(names, "app."+rest)
			}
		}
		for _, name := range names {
			k := end + "." + name
			total, ok := c.Counters[k]
			if !ok {
				continue
			}
			var sum uint64
			for i := range c.PerQueue {
				sum += c.PerQueue[i].Counters[k]
			}
			if sum != total {
				out = append(out, fmt.Sprintf("%s: queues %d, total %d", k, sum, total))
			}
		}
	}
	return out
}

// counterTable writes every layer's counters of both ends, one row per
// layer and name, in a collapsed block.
func (c *Cell) counterTable(b *strings.Builder) {
	type row struct{ loadgen, echo string }
	rows := map[string]*row{}
	nonzero := 0
	for k, v := range c.Counters {
		end, rest, ok := strings.Cut(k, ".")
		if !ok {
			continue
		}
		r := rows[rest]
		if r == nil {
			r = &row{}
			rows[rest] = r
		}
		s := fmt.Sprint(v)
		if end == "loadgen" {
			r.loadgen = s
		} else {
			r.echo = s
		}
		if v != 0 {
			nonzero++
		}
	}
	if len(rows) == 0 {
		return
	}
	loss := map[string]bool{}
	for _, k := range c.LossKeys {
		if _, rest, ok := strings.Cut(k, "."); ok {
			loss[rest] = true
		}
	}
	keys := slices.Sorted(maps.Keys(rows))
	fmt.Fprintf(b, "\n<details><summary>counters of every layer, both ends (%d nonzero)</summary>\n\n| layer.counter | loadgen | echo | loss |\n|---|---:|---:|---|\n", nonzero)
	for _, k := range keys {
		r := rows[k]
		if (r.loadgen == "" || r.loadgen == "0") && (r.echo == "" || r.echo == "0") {
			continue
		}
		l := ""
		if loss[k] {
			l = "loss"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", k, orDash(r.loadgen), orDash(r.echo), l)
	}
	var zero []string
	for _, k := range keys {
		r := rows[k]
		if (r.loadgen == "" || r.loadgen == "0") && (r.echo == "" || r.echo == "0") {
			zero = append(zero, k)
		}
	}
	if len(zero) > 0 {
		fmt.Fprintf(b, "\nzero at both ends: %s\n", strings.Join(zero, ", "))
	}
	b.WriteString("\n</details>\n")
}

// summarizeOffloads writes the offload settings compactly: the features
// that are off on both ends, then any other.
func summarizeOffloads(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	byFeature := map[string][]string{}
	for k, v := range m {
		end, f, ok := strings.Cut(k, ".")
		if !ok {
			f, end = k, ""
		}
		byFeature[f] = append(byFeature[f], end+"="+v)
	}
	var off, other []string
	for _, f := range slices.Sorted(maps.Keys(byFeature)) {
		vs := byFeature[f]
		sort.Strings(vs)
		allOff := true
		for _, v := range vs {
			if !strings.HasSuffix(v, "=off") {
				allOff = false
			}
		}
		if allOff {
			off = append(off, f)
		} else {
			other = append(other, f+" "+strings.Join(vs, " "))
		}
	}
	var parts []string
	if len(off) > 0 {
		parts = append(parts, "off on both ends: "+strings.Join(off, ", "))
	}
	if len(other) > 0 {
		parts = append(parts, strings.Join(other, "; "))
	}
	return strings.Join(parts, "; ")
}

// cellText makes s safe inside a markdown table cell.
func cellText(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// resultsMarkdown writes the results table: a row per kind, a column per
// rate, and the capacity column when the report has one.
func (r *Report) resultsMarkdown(b *strings.Builder) {
	capCol := len(r.Capacity) > 0
	b.WriteString("| kind |")
	for _, rate := range r.Rates {
		b.WriteString(" " + FormatRate(rate) + " |")
	}
	if capCol {
		b.WriteString(" capacity |")
	}
	b.WriteString("\n|---|")
	for range r.Rates {
		b.WriteString("---|")
	}
	if capCol {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, k := range r.Kinds {
		fmt.Fprintf(b, "| %s |", k.Label())
		if k.Reason != "" {
			fmt.Fprintf(b, " cannot run: %s |", cellText(k.Reason))
			for i := 1; i < len(r.Rates); i++ {
				b.WriteString(" |")
			}
			if capCol {
				b.WriteString(" |")
			}
			b.WriteString("\n")
			continue
		}
		for _, rate := range r.Rates {
			s := "-"
			if c, ok := r.CellAt(k.Name(), k.Queues, rate); ok {
				s = c.Display
			}
			b.WriteString(" " + cellText(s) + " |")
		}
		if capCol {
			b.WriteString(" " + cellText(r.capacityText(&k)) + " |")
		}
		b.WriteString("\n")
	}
	if capCol {
		b.WriteString("\nCapacity: the largest offered rate that held (less than 0.1% lost, at least 99% answered), by bisection between the rates run; " +
			"`≥` when no rate run saturated, `<` when none held, `[loadgen]` when the rate above it was the load generator's limit (the path carries at least that). A rate the load generator could not offer (it fell behind) does not count as held.")
		for _, c := range r.Capacity {
			if len(c.Probes) > 0 {
				fmt.Fprintf(b, " %s probed %s.", rowLabel(RowName(c.Kind, c.Variant), c.Queues), formatRates(c.Probes))
			}
		}
		b.WriteString("\n")
	}
}

// formatRates writes rates as "566k, 476k".
func formatRates(rs []float64) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = FormatRate(r)
	}
	return strings.Join(out, ", ")
}
