package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The sides a saturated cell's limit is put on (Cell.LimitedBy).
const (
	// LimitPath: the path did not carry the offered rate: the echo's
	// end, the wire between them, or back-pressure of the path.
	LimitPath = "path"
	// LimitLoadgen: the load generator itself did not keep up: its own
	// receive side dropped most of what was lost, or it fell behind its
	// schedule for good (BehindMax). Its cell says what the load generator
	// could do on this host, not what the path carries.
	LimitLoadgen = "loadgen"
)

// BehindMax is how far behind its schedule, as a share of the measured
// time, the sender may fall (its largest lag) before the cell is put on
// the load generator whatever the path lost: it then offered the path a
// lower rate than the cell's. A shorter stall (the load generator
// descheduled for a while) makes it send late and catch up at the pace
// of its bounded bursts: counted (Cell.Late), and the latency shows it,
// but the path still saw about the offered rate.
const BehindMax = 0.1

// Limit says where the messages a saturated cell missed went, over the
// whole run (warm-up included, as the conservation).
type Limit struct {
	// By is LimitPath or LimitLoadgen.
	By string `json:"by"`
	// LoadgenLost sums the load generator's own loss counters (its RX
	// drops: "loadgen.socket.drops", "loadgen.xsk.rx_dropped"); EchoLost
	// the echo's; Unaccounted the messages no counter holds (the wire, or
	// answers after the drain); InFlight what a stream backend still held.
	LoadgenLost uint64 `json:"loadgen_lost"`
	EchoLost    uint64 `json:"echo_lost"`
	Unaccounted uint64 `json:"unaccounted"`
	InFlight    uint64 `json:"in_flight"`
	// Late and NotSent are the window's messages sent late and refused by
	// Queue (back-pressure of the path), against Offered.
	Late    uint64 `json:"late"`
	NotSent uint64 `json:"not_sent"`
	Offered uint64 `json:"offered"`
	// Reason says it in words, naming the largest counters.
	Reason string `json:"reason"`
}

// Attribute puts a saturated cell's limit on a side, from its conservation
// (whose ByLayer names each end's loss counters), its sender's lag and its
// late and refused messages. The load generator is the limit when its own
// loss counters hold more than the echo's, the unaccounted and the
// in-flight messages together, or when its largest lag reached BehindMax
// of the measured time (Offered / Rate). Otherwise the path is.
func Attribute(c *Cell) Limit {
	cs := &c.Conservation
	l := Limit{InFlight: cs.InFlight, Late: c.Late, NotSent: c.NotSent, Offered: c.Offered}
	if cs.Unaccounted > 0 {
		l.Unaccounted = uint64(cs.Unaccounted)
	}
	var own, echo []string
	for _, k := range slices.Sorted(maps.Keys(cs.ByLayer)) {
		v := cs.ByLayer[k]
		switch {
		case strings.HasPrefix(k, "loadgen."):
			l.LoadgenLost += v
			own = append(own, fmt.Sprintf("%s %d", k, v))
		case strings.HasPrefix(k, "echo."):
			l.EchoLost += v
			echo = append(echo, fmt.Sprintf("%s %d", k, v))
		}
	}
	pathLost := l.EchoLost + l.Unaccounted + l.InFlight
	var why []string
	if c.behind() {
		why = append(why, fmt.Sprintf("it fell behind its schedule by up to %s µs, more than %.0f%% of the measured time, and sent %s of the offered messages late",
			FormatUs(c.LagMaxUs), BehindMax*100, FormatLoss(float64(c.Late)/float64(c.Offered)*100)))
	}
	if l.LoadgenLost > pathLost {
		why = append(why, "its own receive side lost "+strings.Join(own, ", "))
	}
	var parts []string
	parts = append(parts, echo...)
	if l.Unaccounted > 0 {
		parts = append(parts, fmt.Sprintf("uncounted (the wire, or answers after the drain) %d", l.Unaccounted))
	}
	if l.InFlight > 0 {
		parts = append(parts, fmt.Sprintf("still queued in a stream backend %d", l.InFlight))
	}
	if c.Offered > 0 && c.NotSent*100 >= c.Offered {
		parts = append(parts, fmt.Sprintf("refused by Queue (back-pressure) %d", c.NotSent))
	}
	if len(why) > 0 {
		l.By = LimitLoadgen
		l.Reason = "the load generator did not keep up: " + strings.Join(why, "; ")
		if len(parts) > 0 {
			l.Reason += fmt.Sprintf("; at the rate it did offer, the path carried %s/s and lost %s", FormatRate(c.AchievedRate), strings.Join(parts, ", "))
		}
		return l
	}
	l.By = LimitPath
	if len(parts) == 0 {
		parts = append(parts, "answers came back too slowly for the drain")
	}
	l.Reason = "the path carried " + FormatRate(c.AchievedRate) + "/s: " + strings.Join(parts, ", ")
	if l.LoadgenLost > 0 {
		l.Reason += fmt.Sprintf("; the load generator's own losses %d", l.LoadgenLost)
	}
	if c.Late > 0 && c.Offered > 0 {
		l.Reason += fmt.Sprintf("; it sent %s of the offered messages late (lag up to %s µs)", FormatLoss(float64(c.Late)/float64(c.Offered)*100), FormatUs(c.LagMaxUs))
	}
	return l
}

// behind reports whether the cell's sender fell behind its schedule by
// BehindMax of the measured time (Offered / Rate) or more.
func (c *Cell) behind() bool {
	return c.Rate > 0 && c.Offered > 0 && c.LagMaxUs/1e6 >= BehindMax*float64(c.Offered)/c.Rate
}

// attribute sets LimitedBy and Limit of a saturated cell that measured
// something, and of a cell that kept up although its sender fell behind
// (BehindMax): every answer came back, but the path was offered less than
// the cell's rate, so the cell is the load generator's too. It clears
// them otherwise.
func (c *Cell) attribute() {
	c.LimitedBy, c.Limit = "", nil
	switch {
	case !c.measured():
	case c.Saturated:
		l := Attribute(c)
		c.LimitedBy, c.Limit = l.By, &l
	case c.behind():
		c.LimitedBy = LimitLoadgen
		c.Limit = &Limit{By: LimitLoadgen, Late: c.Late, Offered: c.Offered, Reason: fmt.Sprintf(
			"every answer came back, but the load generator fell behind its schedule by up to %s µs, more than %.0f%% of the measured time, "+
				"and sent %s of the offered messages late: the path was offered less than this rate, and the latency is the sender's lag",
			FormatUs(c.LagMaxUs), BehindMax*100, FormatLoss(float64(c.Late)/float64(max(c.Offered, 1))*100))}
	}
}
