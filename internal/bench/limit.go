package bench

import (
	"fmt"
	"strings"
)

// The sides a saturated cell's limit is put on (Cell.LimitedBy).
const (
	// LimitPath: the path did not carry the offered rate: the echo's
	// end, the wire between them, or back-pressure of the path.
	LimitPath = "path"
	// LimitLoadgen: the load generator itself did not keep up: its own
	// receive side dropped most of what was lost, or it sent at least
	// LateMax of the offered messages late. Its cell says what the load
	// generator could do on this host, not what the path carries.
	LimitLoadgen = "loadgen"
)

// LateMax is the share of the offered messages sent late above which a
// saturated cell is put on the load generator: it offered noticeably less
// than the rate while it was behind.
const LateMax = 0.01

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
// (whose ByLayer names each end's loss counters) and its late and refused
// messages. The load generator is the limit when it sent at least LateMax
// of the offered messages late, or when its own loss counters hold more
// than the echo's, the unaccounted and the in-flight messages together;
// otherwise the path is.
func Attribute(c *Cell) Limit {
	cs := &c.Conservation
	l := Limit{InFlight: cs.InFlight, Late: c.Late, NotSent: c.NotSent, Offered: c.Offered}
	if cs.Unaccounted > 0 {
		l.Unaccounted = uint64(cs.Unaccounted)
	}
	var own, echo []string
	for _, k := range SortedKeys(cs.ByLayer) {
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
	late := c.Offered > 0 && float64(c.Late) >= LateMax*float64(c.Offered)
	pathLost := l.EchoLost + l.Unaccounted + l.InFlight
	var why []string
	if late {
		why = append(why, fmt.Sprintf("it sent %s of the offered messages late (behind its schedule by up to %s µs)",
			FormatLoss(float64(c.Late)/float64(c.Offered)*100), FormatUs(c.LagMaxUs)))
	}
	if l.LoadgenLost > pathLost {
		why = append(why, "its own receive side lost "+strings.Join(own, ", "))
	}
	if len(why) > 0 {
		l.By = LimitLoadgen
		l.Reason = "the load generator did not keep up: " + strings.Join(why, "; ")
		return l
	}
	l.By = LimitPath
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
	if len(parts) == 0 {
		parts = append(parts, "answers came back too slowly for the drain")
	}
	l.Reason = "the path carried " + FormatRate(c.AchievedRate) + "/s: " + strings.Join(parts, ", ")
	if l.LoadgenLost > 0 {
		l.Reason += fmt.Sprintf("; the load generator's own losses %d", l.LoadgenLost)
	}
	return l
}

// attribute sets LimitedBy and Limit of a saturated cell that measured
// something, and clears them otherwise.
func (c *Cell) attribute() {
	c.LimitedBy, c.Limit = "", nil
	if !c.Saturated || !c.measured() {
		return
	}
	l := Attribute(c)
	c.LimitedBy, c.Limit = l.By, &l
}
