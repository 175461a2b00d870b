package bench

import (
	"strings"
	"testing"
)

func TestAttribute(t *testing.T) {
	for _, c := range []struct {
		name    string
		cell    Cell
		by      string
		inWords string
	}{
		{
			name: "load generator's own socket dropped most (udp at 400k before the fair loop)",
			cell: Cell{Offered: 2e6, Sent: 2e6, Received: 60e3, AchievedRate: 6e3, Conservation: Conservation{
				ByLayer: map[string]uint64{"loadgen.socket.drops": 1.89e6, "echo.socket.drops": 0.44e6}}},
			by: LimitLoadgen, inWords: "loadgen.socket.drops 1890000",
		},
		{
			name: "sender 2.8 s behind a 1 s schedule: the echo's losses are at a lower rate than the cell's",
			cell: Cell{Rate: 1e6, Offered: 1e6, Sent: 1e6, Received: 0.5e6, AchievedRate: 0.13e6, Late: 0.9e6, LagMaxUs: 2.8e6, Conservation: Conservation{
				ByLayer: map[string]uint64{"echo.socket.drops": 0.5e6}}},
			by: LimitLoadgen, inWords: "at the rate it did offer, the path carried 130k/s and lost echo.socket.drops 500000",
		},
		{
			name: "sender late after a stall, the echo dropped: the path",
			cell: Cell{Rate: 200e3, Offered: 200e3, Sent: 200e3, Received: 67e3, Late: 58e3, LagMaxUs: 53e3, Conservation: Conservation{
				ByLayer: map[string]uint64{"echo.socket.drops": 133e3}}},
			by: LimitPath, inWords: "echo.socket.drops 133000",
		},
		{
			name: "sender 100 ms behind a 1 s schedule, answers missing for the drain",
			cell: Cell{Rate: 1e6, Offered: 1e6, Sent: 1e6, Received: 0.98e6, Late: 0.2e6, LagMaxUs: 100e3, Conservation: Conservation{Unaccounted: 20e3}},
			by:   LimitLoadgen, inWords: "fell behind",
		},
		{
			name: "lag below BehindMax, echo drops: the path",
			cell: Cell{Rate: 1e6, Offered: 1e6, Sent: 1e6, Received: 0.9e6, Late: 9e3, LagMaxUs: 99e3, Conservation: Conservation{
				ByLayer: map[string]uint64{"echo.xsk.rx_dropped": 0.1e6}}},
			by: LimitPath, inWords: "echo.xsk.rx_dropped 100000",
		},
		{
			name: "lost on the wire, no counter",
			cell: Cell{Offered: 1e6, Sent: 1e6, Received: 0.5e6, Conservation: Conservation{Unaccounted: 0.5e6}},
			by:   LimitPath, inWords: "uncounted",
		},
		{
			name: "echo and loadgen lose as much: the path (the load generator is not the majority)",
			cell: Cell{Offered: 1e6, Sent: 1e6, Received: 0.8e6, Conservation: Conservation{
				ByLayer: map[string]uint64{"loadgen.xsk.rx_dropped": 0.1e6, "echo.xsk.rx_dropped": 0.1e6}}},
			by: LimitPath, inWords: "the load generator's own losses 100000",
		},
		{
			name: "back-pressure of a stream path",
			cell: Cell{Offered: 1e6, Sent: 0.5e6, NotSent: 0.5e6, Received: 0.5e6, Conservation: Conservation{InFlight: 10}},
			by:   LimitPath, inWords: "back-pressure",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := Attribute(&c.cell)
			if l.By != c.by || !strings.Contains(l.Reason, c.inWords) {
				t.Fatalf("limited by %q (%s), want %q naming %q", l.By, l.Reason, c.by, c.inWords)
			}
			c.cell.Saturated = true
			c.cell.attribute()
			c.cell.Display = c.cell.Format()
			if got := strings.HasSuffix(c.cell.Display, "[loadgen]"); got != (c.by == LimitLoadgen) || c.cell.LimitedBy != c.by {
				t.Fatalf("display %q limited by %q: want [loadgen] exactly when the load generator limited it", c.cell.Display, c.cell.LimitedBy)
			}
		})
	}
	held := Cell{Rate: 1e3, Offered: 1e3, Sent: 1e3, Received: 1e3, LagMaxUs: 50e3}
	held.attribute()
	if held.LimitedBy != "" || held.Limit != nil {
		t.Fatalf("a cell that kept up has no limit: %q %+v", held.LimitedBy, held.Limit)
	}
	// Every answer back, but the sender 3 s behind a 2 s schedule: the
	// path was offered less than the rate.
	late := Cell{Rate: 400e3, Offered: 800e3, Sent: 800e3, Received: 800e3, Late: 800e3, LagMaxUs: 3e6}
	late.attribute()
	late.Display = late.Format()
	if late.LimitedBy != LimitLoadgen || late.Limit == nil || !strings.HasSuffix(late.Display, "[loadgen]") {
		t.Fatalf("a sender 3 s behind: limited by %q, %q", late.LimitedBy, late.Display)
	}
	// Its latency from the schedule is the sender's lag: never shown as
	// a round trip (kernel tcp at 1.6M showed "2267021 / 3999269").
	late.P50Us, late.P99Us = 2267021, 3999269
	if d := late.Format(); strings.Contains(d, " / ") || strings.Contains(d, "2267021") || !strings.HasPrefix(d, "sender behind ") {
		t.Fatalf("a sender behind shows %q", d)
	}
	if pts := RatePoints([]Cell{late}, "", 0); len(pts) != 1 || pts[0].Held {
		t.Fatalf("points %+v: a rate the sender could not offer did not hold", pts)
	}
}
