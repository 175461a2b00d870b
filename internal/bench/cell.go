package bench

import (
	"fmt"
	"github.com/dgramio/dgramio/internal/bench/load"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/dgramio/dgramio"
)

// The saturation rule of the method: a cell is saturated when
// fewer than MinBack of the offered messages came back, or more than MaxLoss
// of those sent were lost.
const (
	MinBack = 0.99
	MaxLoss = 0.001
)

// Saturated applies the rule to the measured window: offered messages
// scheduled, sent of them accepted by Queue, received of them answered by
// the end of the drain. It returns the verdict and the loss in percent of
// sent. A path that returns every message, late, is not saturated: its
// latency says how late ("2035 / 2229").
// A window with nothing offered is saturated (nothing was measured).
func Saturated(offered, sent, received uint64) (sat bool, lossPct float64) {
	if sent > 0 && received <= sent {
		lossPct = float64(sent-received) / float64(sent) * 100
	}
	if offered == 0 {
		return true, lossPct
	}
	back := float64(received) / float64(offered)
	return back < MinBack || lossPct > MaxLoss*100, lossPct
}

// Conservation checks, for a whole run, that every message sent was either
// received or counted as lost by some layer of either end.
type Conservation struct {
	// Sent counts messages the load generator's Queue accepted.
	Sent uint64 `json:"sent"`
	// Received counts distinct answers.
	Received uint64 `json:"received"`
	// Counted is the sum of every loss counter of both ends:
	// Stats.Lost() of each (TX drops, our RX drops, the layers' Loss
	// counters such as the kernel's socket drops) and the tools' own drops.
	Counted uint64 `json:"counted_lost"`
	// InFlight is what is known to be still on the way at the end: on a
	// stream kind, the records a backend accepted (TxQueued) but had not
	// yet written to its connection (TxSent) nor dropped (TxDropped) when
	// its tool stopped, at either end: a connection stalled by the
	// peer's window or by retransmissions keeps them queued, and closing
	// the backend discards them. Datagram kinds hand everything to the
	// kernel or the ring at each Flush, so for them it stays 0.
	InFlight uint64 `json:"in_flight"`
	// Unaccounted is Sent − Received − Counted − InFlight: positive when
	// messages vanished without a counter, negative when more losses were
	// counted than messages are missing.
	Unaccounted int64 `json:"unaccounted"`
	// ByLayer holds each nonzero loss counter, named "end.layer.name".
	ByLayer map[string]uint64 `json:"by_layer"`
}

// Account computes the conservation of one run from the load generator's
// and the echo's results. It uses only counters that are not derived from
// sent − received: each end's Stats.Lost() and the tools' own loss counters.
func Account(load *load.LoadResult, echo *load.EchoResult) Conservation {
	c := Conservation{
		Sent:     load.Total.Sent,
		Received: load.Total.Received,
		ByLayer:  map[string]uint64{},
	}
	add := func(end string, s *dgramio.Stats, own []dgramio.Counter) {
		for _, k := range lossCounters(s) {
			if k.Value != 0 {
				c.ByLayer[end+"."+k.Layer+"."+k.Name] += k.Value
			}
		}
		c.Counted += s.Lost()
		for _, k := range own {
			if k.Loss {
				c.Counted += k.Value
				if k.Value != 0 {
					c.ByLayer[end+"."+k.Layer+"."+k.Name] += k.Value
				}
			}
		}
	}
	add("loadgen", &load.Stats, load.Layers())
	c.InFlight += held(&load.Stats)
	if echo != nil {
		add("echo", &echo.Stats, echo.Layers())
		c.InFlight += held(&echo.Stats)
	}
	c.Unaccounted = int64(c.Sent) - int64(c.Received) - int64(c.Counted) - int64(c.InFlight)
	return c
}

// held returns the messages a stream backend still held at the end:
// accepted by Queue but neither written to the stream nor dropped.
func held(s *dgramio.Stats) uint64 {
	if !s.Kind.IsStream() {
		return 0
	}
	if out := s.TxSent + s.TxDropped; s.TxQueued > out {
		return s.TxQueued - out
	}
	return 0
}

// lossCounters names the parts of s.Lost(): its own drop fields (layer
// "dgramio") and the layers' Loss counters. If Lost() counts something this
// function does not know, the rest is "dgramio.other_lost".
func lossCounters(s *dgramio.Stats) []dgramio.Counter {
	out := []dgramio.Counter{
		{Layer: "dgramio", Name: "tx_dropped", Value: s.TxDropped, Loss: true},
		{Layer: "dgramio", Name: "rx_truncated", Value: s.RxTruncated, Loss: true},
		{Layer: "dgramio", Name: "rx_bad_checksum", Value: s.RxBadChecksum, Loss: true},
		{Layer: "dgramio", Name: "rx_malformed", Value: s.RxMalformed, Loss: true},
	}
	var sum uint64
	for _, k := range out {
		sum += k.Value
	}
	for _, k := range s.Layers {
		if k.Loss {
			out = append(out, k)
			sum += k.Value
		}
	}
	if l := s.Lost(); l != sum {
		out = append(out, dgramio.Counter{Layer: "dgramio", Name: "other_lost", Value: l - sum, Loss: true})
	}
	return out
}

// Flatten returns every counter of s as "end.layer.name": its own numeric
// fields under layer "dgramio" in snake case ("loadgen.dgramio.tx_sent"),
// then each layer counter, then the tool's own counters. Values of the same
// name are added.
func Flatten(end string, s *dgramio.Stats, own []dgramio.Counter, into map[string]uint64) {
	v := reflect.ValueOf(*s)
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := v.Field(i)
		var n uint64
		switch f.Kind() {
		case reflect.Uint64, reflect.Uint32, reflect.Uint:
			n = f.Uint()
		case reflect.Int, reflect.Int64, reflect.Int32:
			if f.Int() < 0 {
				continue
			}
			n = uint64(f.Int())
		default:
			continue
		}
		into[end+".dgramio."+snake(t.Field(i).Name)] += n
	}
	for _, k := range s.Layers {
		into[end+"."+k.Layer+"."+k.Name] += k.Value
	}
	for _, k := range own {
		into[end+"."+k.Layer+"."+k.Name] += k.Value
	}
}

// lossKeys names the loss counters of one end as Flatten names them.
func lossKeys(end string, s *dgramio.Stats, own []dgramio.Counter) []string {
	var out []string
	for _, k := range append(lossCounters(s), own...) {
		if k.Loss {
			out = append(out, end+"."+k.Layer+"."+k.Name)
		}
	}
	return out
}

// snake turns "TxBackpressure" into "tx_backpressure", "SockRcvBuf" into
// "sock_rcv_buf".
func snake(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && (unicode.IsLower(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]))) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Cell is one kind at one offered rate, as the JSON report holds it.
type Cell struct {
	// Kind is the packet path; Mode how the load generator's end ran
	// (Stats.Mode), EchoMode the echo's.
	Kind     string `json:"kind"`
	Mode     string `json:"mode"`
	EchoMode string `json:"echo_mode"`
	// Variant names the option both ends' backends ran with ("sqpoll" or
	// "napi" of kind uring; see Variants), empty for the kind as it is.
	// The cell's row is RowName(Kind, Variant).
	Variant string `json:"variant,omitempty"`
	// Queues is the number of queues of both ends (0 or 1: one); Poll
	// how their pollers waited ("busy" or "yield"; empty in reports made
	// before it was recorded).
	Queues int    `json:"queues,omitempty"`
	Poll   string `json:"poll,omitempty"`
	// Rate is the offered rate, messages per second.
	Rate float64 `json:"rate"`
	// Probe is true for a cell run by the capacity's bisection
	// (Capacity), at a rate that is not a column of the table.
	Probe bool `json:"probe,omitempty"`
	// Offered, Sent, Received, Lost, NotSent are counts of the measured
	// window (see LoadResult).
	Offered  uint64 `json:"offered"`
	Sent     uint64 `json:"sent"`
	Received uint64 `json:"received"`
	Lost     uint64 `json:"lost"`
	NotSent  uint64 `json:"not_sent"`
	// Late counts the window's messages the load generator sent late
	// (LoadResult.Late): behind its schedule.
	Late uint64 `json:"late"`
	// AchievedRate is answers per second in the window.
	AchievedRate float64 `json:"achieved_rate"`
	// The round-trip time from the schedule, in microseconds.
	P50Us  float64 `json:"p50_us"`
	P99Us  float64 `json:"p99_us"`
	P999Us float64 `json:"p999_us"`
	MaxUs  float64 `json:"max_us"`
	MeanUs float64 `json:"mean_us"`
	// The sender's lag behind its schedule, in microseconds.
	LagP50Us float64 `json:"lag_p50_us"`
	LagP99Us float64 `json:"lag_p99_us"`
	LagMaxUs float64 `json:"lag_max_us"`
	// Saturated follows the rule of Saturated; LossPct is the window's
	// loss in percent of sent. The latency of a saturated cell is kept.
	Saturated bool    `json:"saturated"`
	LossPct   float64 `json:"loss_pct"`
	// LimitedBy says, for a saturated cell, which side limited it:
	// LimitPath or LimitLoadgen (see Attribute); Limit where the missing
	// messages went. A cell that kept up has none, unless its sender fell
	// behind its schedule (BehindMax): then LimitLoadgen, since the path
	// was offered less than the rate.
	LimitedBy string `json:"limited_by,omitempty"`
	Limit     *Limit `json:"limit,omitempty"`
	// Unaccounted is Conservation.Unaccounted: 0 when the counters add up.
	Unaccounted  int64        `json:"unaccounted"`
	Conservation Conservation `json:"conservation"`
	// Counters holds every counter of both ends, "end.layer.name".
	Counters map[string]uint64 `json:"counters"`
	// Host holds counters of the test hosts outside the backends (link
	// drops, the kernel's SNMP counters of each namespace), as the change
	// over the cell; they are not part of the conservation.
	Host map[string]uint64 `json:"host,omitempty"`
	// LossKeys names every counter of Counters that counts lost
	// messages ("echo.socket.drops"), zero or not.
	LossKeys []string `json:"loss_keys,omitempty"`
	// Repeats summarizes each repeat of the cell (one when --repeat is 1);
	// Spread is the range of its latencies and rates. With several
	// repeats the latencies and AchievedRate above are medians, the counts
	// and counters sums, and Saturated holds when most repeats were.
	Repeats []Repeat `json:"repeats,omitempty"`
	Spread  *Spread  `json:"spread,omitempty"`
	// Display is the table's text for the cell.
	Display string `json:"display"`
	// Notes are remarks (a fallback, an interruption).
	Notes []string `json:"notes,omitempty"`
	// Error says why the cell has no result, when it has none.
	Error string `json:"error,omitempty"`
	// RTTHdr is the RTT histogram (HdrHistogram V2 compressed, ns).
	RTTHdr []byte `json:"rtt_hdr,omitempty"`
	// PerQueue holds each queue's share when the ends ran several
	// queues, in queue order.
	PerQueue []QueueCell `json:"per_queue,omitempty"`
}

// QueueCell is queue q of both ends of a cell with several queues: the
// load generator's queue q (its flows) and the echo's queue q (whatever
// the link steered to it: not necessarily the same flows). Counts cover
// the whole run, warm-up included, like the counters; the latencies the
// measured window.
type QueueCell struct {
	Queue int `json:"queue"`
	// Sent and Received count the load generator's queue's messages
	// accepted by Queue and answered; OtherQueue the answers it received
	// that belonged to another queue's messages.
	Sent       uint64 `json:"sent"`
	Received   uint64 `json:"received"`
	OtherQueue uint64 `json:"other_queue,omitempty"`
	// Reordered counts its answers that came back after the answer to a
	// later message of its flow.
	Reordered uint64 `json:"reordered,omitempty"`
	// P50Us and P99Us are the queue's round trip, in microseconds.
	P50Us float64 `json:"p50_us"`
	P99Us float64 `json:"p99_us"`
	// EchoReceived and EchoReflected count what the echo's queue received
	// and sent back.
	EchoReceived  uint64 `json:"echo_received"`
	EchoReflected uint64 `json:"echo_reflected"`
	// LoadLost and EchoLost are the loss counters of each end's queue
	// (its backend's Stats.Lost() and the tool's own losses).
	LoadLost uint64 `json:"loadgen_lost"`
	EchoLost uint64 `json:"echo_lost"`
	// Counters holds every counter of both ends' queue q, named as the
	// cell's ("loadgen.dgramio.tx_sent"); what the queues share (an XDP
	// program's counters) is in the cell's only.
	Counters map[string]uint64 `json:"counters"`
}

// add adds o's counts and counters to c (c.Counters must not be nil);
// the latencies and Queue stay c's.
func (c *QueueCell) add(o *QueueCell) {
	c.Sent += o.Sent
	c.Received += o.Received
	c.OtherQueue += o.OtherQueue
	c.Reordered += o.Reordered
	c.LoadLost += o.LoadLost
	c.EchoReceived += o.EchoReceived
	c.EchoReflected += o.EchoReflected
	c.EchoLost += o.EchoLost
	for k, v := range o.Counters {
		c.Counters[k] += v
	}
}

// queueCells pairs the queues of both ends.
func queueCells(load *load.LoadResult, echo *load.EchoResult) []QueueCell {
	n := len(load.PerQueue)
	if echo != nil {
		n = max(n, len(echo.PerQueue))
	}
	if n == 0 {
		return nil
	}
	out := make([]QueueCell, n)
	for q := range out {
		c := &out[q]
		c.Queue = q
		c.Counters = map[string]uint64{}
		if q < len(load.PerQueue) {
			p := &load.PerQueue[q]
			c.Sent, c.Received, c.OtherQueue, c.Reordered = p.Total.Sent, p.Total.Received, p.Total.OtherQueue, p.Total.Reordered
			c.P50Us, c.P99Us = p.RTT.P50Us, p.RTT.P99Us
			own := p.Layers()
			c.LoadLost = p.Stats.Lost() + ownLoss(own)
			Flatten("loadgen", &p.Stats, own, c.Counters)
		}
		if echo != nil && q < len(echo.PerQueue) {
			p := &echo.PerQueue[q]
			c.EchoReceived, c.EchoReflected = p.Received, p.Reflected
			own := p.Layers()
			c.EchoLost = p.Stats.Lost() + ownLoss(own)
			Flatten("echo", &p.Stats, own, c.Counters)
		}
	}
	return out
}

func ownLoss(own []dgramio.Counter) uint64 {
	var n uint64
	for _, k := range own {
		if k.Loss {
			n += k.Value
		}
	}
	return n
}

// NewCell builds a cell from the two ends' results. echo may be nil when
// the echo's counters could not be collected (the conservation then covers
// only the load generator).
func NewCell(kind string, load *load.LoadResult, echo *load.EchoResult) Cell {
	c := Cell{
		Kind:         kind,
		Mode:         load.Stats.Mode,
		Rate:         load.Rate,
		Offered:      load.Offered,
		Sent:         load.Sent,
		Received:     load.Received,
		Lost:         load.Lost,
		NotSent:      load.NotSent,
		Late:         load.Late,
		AchievedRate: load.AchievedRate,
		P50Us:        load.RTT.P50Us,
		P99Us:        load.RTT.P99Us,
		P999Us:       load.RTT.P999Us,
		MaxUs:        load.RTT.MaxUs,
		MeanUs:       load.RTT.MeanUs,
		LagP50Us:     load.Lag.P50Us,
		LagP99Us:     load.Lag.P99Us,
		LagMaxUs:     load.Lag.MaxUs,
		Counters:     map[string]uint64{},
		RTTHdr:       load.RTTHdr,
	}
	if load.Queues > 1 {
		c.Queues = load.Queues
	}
	c.PerQueue = queueCells(load, echo)
	c.Saturated, c.LossPct = Saturated(load.Offered, load.Sent, load.Received)
	c.Conservation = Account(load, echo)
	c.Unaccounted = c.Conservation.Unaccounted
	Flatten("loadgen", &load.Stats, load.Layers(), c.Counters)
	c.LossKeys = lossKeys("loadgen", &load.Stats, load.Layers())
	if echo != nil {
		c.EchoMode = echo.Stats.Mode
		Flatten("echo", &echo.Stats, echo.Layers(), c.Counters)
		c.LossKeys = append(c.LossKeys, lossKeys("echo", &echo.Stats, echo.Layers())...)
		if echo.Error != "" {
			c.Notes = append(c.Notes, "echo: "+echo.Error)
		}
		if echo.WaitFallback != "" {
			c.Notes = append(c.Notes, "echo spun: "+echo.WaitFallback)
		}
	} else {
		c.Notes = append(c.Notes, "echo counters missing: conservation covers the load generator only")
	}
	if load.Interrupted {
		c.Notes = append(c.Notes, "interrupted")
	}
	if load.WaitFallback != "" {
		c.Notes = append(c.Notes, "loadgen spun: "+load.WaitFallback)
	}
	if load.Error != "" {
		c.Error = load.Error
	}
	c.Notes = append(c.Notes, c.diagnose()...)
	c.attribute()
	c.Display = c.Format()
	return c
}

// diagnose explains counters whose cause is known: an AF_XDP fill ring
// that ran empty drops every frame that arrives meanwhile (the kernel
// counts them in rx_fill_ring_empty_descs and rx_dropped); it empties when
// its end does not hand frames back for longer than the ring lasts at the
// offered rate, which a stall of that end, or a burst from the other end
// catching up after its own stall, brings about. The UDP kinds' socket
// buffers (tens of MiB) absorb such stalls; a ring of 2048 frames lasts
// 100 ms at 20k/s and 10 ms at 200k/s.
func (c *Cell) diagnose() []string {
	var out []string
	for _, end := range []string{"loadgen", "echo"} {
		empty := c.Counters[end+".xsk.rx_fill_ring_empty_descs"]
		if empty == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s: its AF_XDP fill ring ran empty %d times, dropping the frames that arrived (xsk.rx_dropped %d): "+
			"%s handed no frame back for longer than the ring lasts at %s/s (a stall of that process, or a burst from the other end catching up; "+
			"the load generator fell behind its schedule by up to %s µs); a larger ring (--xdp-ring, --xdp-frames) survives longer stalls",
			end, empty, c.Counters[end+".xsk.rx_dropped"], end, FormatRate(c.Rate), FormatUs(c.LagMaxUs)))
	}
	return out
}

// Format writes the cell as the table shows it: "p50 / p99" in
// microseconds, or "sat. <achieved rate>, <loss>" (with "(N% not sent)"
// when Queue refused at least 1% of the offered messages: back-pressure,
// not loss; and "[loadgen]" when the load generator, not the path, was
// the limit: LimitedBy), followed by "unaccounted N" when the counters do not add up,
// or the error.
func (c *Cell) Format() string {
	var s string
	switch {
	case c.Error != "" && c.Sent == 0:
		return "error: " + c.Error
	case c.Saturated:
		s = fmt.Sprintf("sat. %s, %s", FormatRate(c.AchievedRate), FormatLoss(c.LossPct))
		// Back-pressure is not loss: say how much was never sent.
		if c.Offered > 0 && c.NotSent*100 >= c.Offered {
			s += fmt.Sprintf(" (%s not sent)", FormatLoss(float64(c.NotSent)/float64(c.Offered)*100))
		}
		if c.LimitedBy == LimitLoadgen {
			s += " [loadgen]"
		}
	case c.LimitedBy == LimitLoadgen:
		// Every answer back, but the sender fell behind its schedule:
		// the latency measured from the schedule is its lag, not the
		// path's round trip, so none is shown.
		behind := time.Duration(c.LagMaxUs * 1e3).Round(time.Millisecond)
		s = fmt.Sprintf("sender behind %v, %s/s [loadgen]", behind, FormatRate(c.AchievedRate))
	default:
		s = FormatUs(c.P50Us) + " / " + FormatUs(c.P99Us)
	}
	if c.Unaccounted != 0 {
		s += fmt.Sprintf(" unaccounted %+d", c.Unaccounted)
	}
	if c.Error != "" {
		s += " (error)"
	}
	return s
}
