package load

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
)

// Defaults of LoadOptions and EchoOptions.
const (
	DefaultSize  = 100
	DefaultBatch = 16
	DefaultDrain = time.Second
	// maxMessages bounds the messages of one run (two bitmaps of this many
	// bits are allocated up front).
	maxMessages = 1 << 32
)

// LoadOptions configures Load.
type LoadOptions struct {
	// Rate is the offered rate in messages per second.
	Rate float64
	// Warmup is sent and accounted for but not measured; Duration is the
	// measured time. Message i is scheduled at i/Rate seconds after the
	// start; those scheduled in [Warmup, Warmup+Duration) are measured.
	Warmup, Duration time.Duration
	// Drain is how long Load keeps receiving after the last send, for the
	// answers in flight. It ends early once every message sent is back.
	// Default 1 s; negative means none.
	Drain time.Duration
	// Size is the message size in bytes, at least HeaderLen. Default 100.
	Size int
	// Batch is how many messages are queued between two Flush calls, and
	// how many one Rx call takes. Default 16. A round of the loop sends at
	// most SendBurst batches and then calls Rx up to RxBurst times (see
	// Load).
	Batch int
	// Wait makes the loop sleep when it has nothing to do, instead of
	// spinning (busy poll): in Backend.Wait when the next send is far, in
	// short nanosleeps when it is near. What the sleeps cost (an answer
	// arriving during a nap, a late wake-up) shows up as lag and latency,
	// so this mode measures the scheduler too.
	Wait bool
	// RunID marks this run's messages; 0 picks a random one. The queues
	// of one run share it.
	RunID uint32
	// Queue and Queues make this loop queue Queue (0 <= Queue < Queues) of
	// a load generator with Queues queues, each driven by its own Load on
	// its own backend and goroutine (0 and 1 mean one queue: the whole
	// schedule). The run's schedule is divided among them: message g of
	// the run (scheduled g/Rate after Start) belongs to queue g mod Queues
	// and carries g as its sequence number, so each queue offers
	// Rate/Queues, the queues' messages interleave evenly, and an answer
	// that reaches another queue than its message's is recognized
	// (Totals.OtherQueue). MergeLoads combines the queues' results.
	Queue, Queues int
	// Start is when message 0 is scheduled, the same for every queue of a
	// run; zero: when Load begins. A Start in the future makes Load wait
	// for it (idling as Wait says).
	Start time.Time
	// Interval, when positive, makes Load call OnInterval from its loop
	// every Interval from the start of the schedule (as iperf3 -i), with
	// what the interval sent and received and its answers' round trips,
	// and once more for the last, shorter one when the run ends. It
	// costs one more histogram record per answer.
	Interval   time.Duration
	OnInterval func(IntervalReport)
}

// IntervalReport is one interval of a run with LoadOptions.Interval: the
// messages this queue sent and the answers it received between From and
// To (since the schedule's start, warm-up included), and the round trips
// of those answers.
type IntervalReport struct {
	Queue    int           `json:"queue"`
	From     time.Duration `json:"from_ns"`
	To       time.Duration `json:"to_ns"`
	Sent     uint64        `json:"sent"`
	Received uint64        `json:"received"`
	RTT      Summary       `json:"rtt"`
}

func (o LoadOptions) withDefaults() LoadOptions {
	if o.Drain == 0 {
		o.Drain = DefaultDrain
	}
	if o.Drain < 0 {
		o.Drain = 0
	}
	if o.Size == 0 {
		o.Size = DefaultSize
	}
	if o.Batch == 0 {
		o.Batch = DefaultBatch
	}
	for o.RunID == 0 {
		o.RunID = rand.Uint32()
	}
	if o.Queues == 0 {
		o.Queues = 1
	}
	return o
}

// Totals are the counts of a whole run, warm-up included: what the
// conservation check compares with the backends' counters, which also cover
// the whole run.
type Totals struct {
	// Offered counts messages scheduled; Sent those Queue accepted; NotSent
	// those Queue refused (back-pressure: not sent, not retried, not lost).
	Offered uint64 `json:"offered,omitempty"`
	Sent    uint64 `json:"sent,omitempty"`
	NotSent uint64 `json:"not_sent,omitempty"`
	// Received counts answers matched to a message sent, each once.
	Received uint64 `json:"received"`
	// Duplicates counts answers to a message already answered.
	Duplicates uint64 `json:"duplicates"`
	// Foreign counts well-formed messages of another run, or with a
	// sequence number this run did not send.
	Foreign uint64 `json:"foreign"`
	// Malformed counts answers too short, without the magic, or whose
	// send time does not match their sequence number: a message damaged on
	// the way, counted as lost.
	Malformed uint64 `json:"malformed"`
	// OtherQueue counts well-formed answers of this run that belong to
	// another queue's messages (LoadOptions.Queues): their flow did not
	// stay on one queue. The queue that sent such a message never sees
	// its answer, so the tool counts it as lost (layer "app").
	OtherQueue uint64 `json:"other_queue,omitempty"`
	// Reordered counts answers that came back after an answer to a later
	// message of the same queue (its flow): not a loss.
	Reordered uint64 `json:"reordered,omitempty"`
	// Late counts messages sent late: due at an earlier round of the loop
	// than the one that sent them, held back because that round had sent
	// its burst (SendBurst batches) already. A sender with late messages
	// did not keep to its schedule: it offered less than Rate while it was
	// behind.
	Late uint64 `json:"late,omitempty"`
	// Flushes, RxCalls and Rounds count Flush calls, Rx calls and loop
	// rounds.
	Flushes uint64 `json:"flushes"`
	RxCalls uint64 `json:"rx_calls"`
	Rounds  uint64 `json:"rounds"`
	// ElapsedNs is the time from the first scheduled send to the end of the
	// drain.
	ElapsedNs int64 `json:"elapsed_ns"`
}

// add adds the counts of o, a run alongside t's (another queue's), to t;
// ElapsedNs becomes the longer of the two.
func (t *Totals) add(o Totals) {
	t.Offered += o.Offered
	t.Sent += o.Sent
	t.NotSent += o.NotSent
	t.Received += o.Received
	t.Duplicates += o.Duplicates
	t.Foreign += o.Foreign
	t.Malformed += o.Malformed
	t.OtherQueue += o.OtherQueue
	t.Reordered += o.Reordered
	t.Late += o.Late
	t.Flushes += o.Flushes
	t.RxCalls += o.RxCalls
	t.Rounds += o.Rounds
	t.ElapsedNs = max(t.ElapsedNs, o.ElapsedNs)
}

// LoadResult is what Load measured. The window fields (Offered … Lag) cover
// the messages scheduled after the warm-up; Total covers the whole run.
type LoadResult struct {
	// Rate is the offered rate, messages per second.
	Rate float64 `json:"rate"`
	// Size is the message size in bytes.
	Size int `json:"size"`
	// Offered counts messages scheduled in the measured window.
	Offered uint64 `json:"offered"`
	// Sent counts those Queue accepted.
	Sent uint64 `json:"sent"`
	// NotSent counts those Queue refused (back-pressure), apart from loss.
	NotSent uint64 `json:"not_sent"`
	// Late counts those sent late (Totals.Late): the load generator could
	// not keep to its schedule.
	Late uint64 `json:"late"`
	// Received counts those answered, each once.
	Received uint64 `json:"received"`
	// Lost is Sent − Received: messages sent and not answered by the end
	// of the drain.
	Lost uint64 `json:"lost"`
	// AchievedRate is the rate at which the window's answers came back:
	// 98% of Received divided by the time between the arrival of the
	// first 1% and of the first 99% of them. It does not depend on the
	// round-trip time (a constant RTT shifts both ends), and a few
	// stragglers on either side (a retransmission) do not move it; a path
	// whose queue grows returns answers slower than Rate. It is never more
	// than Received over Duration: a path that loses most messages returns
	// the rest in bursts (after a stall), whose spacing says nothing about
	// its rate. With fewer than 100 answers it is Received over Duration.
	AchievedRate float64 `json:"achieved_rate"`
	// RTT is the round-trip time from the scheduled send time to the
	// receipt of the answer.
	RTT Summary `json:"rtt"`
	// Lag is how late the sender handed messages to Flush, against their
	// schedule.
	Lag Summary `json:"lag"`
	// RTTHdr is the RTT histogram, HdrHistogram V2 compressed, in ns.
	RTTHdr []byte `json:"rtt_hdr,omitempty"`
	// Total counts the whole run.
	Total Totals `json:"total"`
	// Stats are the backend's counters at the end of the drain.
	Stats dgramio.Stats `json:"stats"`
	// WaitFallback is set when Wait was asked for but the backend cannot
	// sleep, so the loop spun.
	WaitFallback string `json:"wait_fallback,omitempty"`
	// Interrupted is true when ctx ended the run early.
	Interrupted bool `json:"interrupted,omitempty"`
	// Error is what stopped the run early, if anything.
	Error string `json:"error,omitempty"`
	// Queues is the number of queues of the run (LoadOptions.Queues; 0
	// for one); PerQueue holds each queue's share when MergeLoads made
	// the result, in queue order.
	Queues   int         `json:"queues,omitempty"`
	PerQueue []QueueLoad `json:"per_queue,omitempty"`

	// The histograms, for MergeLoads (not in the JSON).
	rttH, lagH, arriveH *Hist
	dur                 time.Duration // LoadOptions.Duration
}

// QueueLoad is one queue's share of a load generator's run with several
// queues.
type QueueLoad struct {
	// Queue is the queue's index.
	Queue int `json:"queue"`
	// Offered, Sent, Received, Lost, NotSent count the queue's messages
	// of the measured window, as in LoadResult.
	Offered  uint64 `json:"offered"`
	Sent     uint64 `json:"sent"`
	Received uint64 `json:"received"`
	Lost     uint64 `json:"lost"`
	NotSent  uint64 `json:"not_sent"`
	Late     uint64 `json:"late"`
	// RTT and Lag are the queue's own percentiles.
	RTT Summary `json:"rtt"`
	Lag Summary `json:"lag"`
	// Total counts the queue's whole run.
	Total Totals `json:"total"`
	// Stats are the queue's backend's counters.
	Stats dgramio.Stats `json:"stats"`
}

// Layers returns the load generator's own counters as layer "app": the
// damaged answers (a loss) and the answers that were not ours. With
// several queues, "other_queue" too (answers that reached another queue
// than their message's, counted lost) and "reordered" (answers that came
// back after a later message's answer; not a loss).
func (r *LoadResult) Layers() []dgramio.Counter { return loadLayers(&r.Total, r.Queues > 1) }

// Layers returns the queue's own counters, as LoadResult.Layers.
func (q *QueueLoad) Layers() []dgramio.Counter { return loadLayers(&q.Total, true) }

func loadLayers(t *Totals, queues bool) []dgramio.Counter {
	l := []dgramio.Counter{
		{Layer: "app", Name: "malformed", Value: t.Malformed, Loss: true},
		{Layer: "app", Name: "duplicates", Value: t.Duplicates},
		{Layer: "app", Name: "foreign", Value: t.Foreign},
		{Layer: "app", Name: "not_sent", Value: t.NotSent},
	}
	if queues || t.OtherQueue != 0 {
		l = append(l, dgramio.Counter{Layer: "app", Name: "other_queue", Value: t.OtherQueue, Loss: true})
	}
	if queues || t.Reordered != 0 {
		l = append(l, dgramio.Counter{Layer: "app", Name: "reordered", Value: t.Reordered})
	}
	return l
}

type bitmap []uint64

func newBitmap(n uint64) bitmap    { return make(bitmap, (n+63)/64) }
func (b bitmap) set(i uint64)      { b[i>>6] |= 1 << (i & 63) }
func (b bitmap) get(i uint64) bool { return b[i>>6]&(1<<(i&63)) != 0 }
func ceilCount(d time.Duration, r float64) uint64 {
	return uint64(math.Ceil(d.Seconds()*r - 1e-9))
}

// Load runs the open loop on b, which must be a connected client of an
// echo, from the calling goroutine (pin it first). It returns when the
// schedule and the drain are over, when ctx ends (Interrupted), or when the
// backend fails (Error, and the error). The result is valid in every case.
//
// Each round shares the CPU between sending and receiving, so that a
// sender that falls behind does not starve its own receive side (whose
// socket buffer or RX ring would overflow, and the run would measure the
// load generator instead of the path): it queues the messages whose
// scheduled time has come, at most SendBurst batches of them (flushing
// every Batch messages, at the end of the burst, and once when Queue
// refuses one), then calls Rx until it returns less than a batch or
// RxBurst times, and matches the answers. Messages left due by the burst
// bound go out in the next rounds, late (LoadResult.Late, and their lag);
// their send times stay the schedule's, so the loop stays open. It does not
// allocate per message.
func Load(ctx context.Context, b dgramio.Backend, o LoadOptions) (*LoadResult, error) {
	l, err := newLoader(b, o)
	if err != nil {
		return nil, err
	}
	if l.o.Wait {
		// Short sleeps need a fine timer slack (50 µs by default).
		runtime.LockOSThread()
		if old, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0); err == nil {
			_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
			defer unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(old), 0, 0, 0)
		}
		defer runtime.UnlockOSThread()
	}
	return l.finish(l.run(ctx))
}

// newLoader checks o and allocates everything a run needs.
func newLoader(b dgramio.Backend, o LoadOptions) (*loader, error) {
	o = o.withDefaults()
	if o.Rate <= 0 || math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0) {
		return nil, fmt.Errorf("load: rate %v: must be positive", o.Rate)
	}
	if o.Warmup < 0 || o.Duration <= 0 {
		return nil, fmt.Errorf("load: warm-up %v, duration %v: duration must be positive, warm-up not negative", o.Warmup, o.Duration)
	}
	if o.Batch < 1 {
		return nil, fmt.Errorf("load: batch %d: must be at least 1", o.Batch)
	}
	if o.Interval < 0 || (o.Interval > 0 && o.OnInterval == nil) {
		return nil, fmt.Errorf("load: interval %v: must not be negative, and a positive one needs OnInterval", o.Interval)
	}
	if o.Queues < 1 || o.Queue < 0 || o.Queue >= o.Queues {
		return nil, fmt.Errorf("load: queue %d of %d: want 0 <= queue < queues", o.Queue, o.Queues)
	}
	// The run's schedule: message g at g/Rate; this queue's messages are
	// those with g mod Queues = Queue, its i-th is g = i*Queues+Queue.
	total := ceilCount(o.Warmup+o.Duration, o.Rate)
	first := ceilCount(o.Warmup, o.Rate)
	if total >= maxMessages {
		return nil, fmt.Errorf("load: %d messages in one run: more than %d; lower the rate or the duration", total, uint64(maxMessages))
	}
	nq, q := uint64(o.Queues), uint64(o.Queue)
	share := func(n uint64) uint64 { // how many of messages 0..n-1 are this queue's
		if n <= q {
			return 0
		}
		return (n - q + nq - 1) / nq
	}
	msg, err := NewMsg(o.Size, o.RunID)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	l := &loader{
		b:        b,
		o:        o,
		res:      &LoadResult{Rate: o.Rate, Size: o.Size},
		total:    share(total),
		first:    share(first),
		runAll:   total,
		runFirst: first,
		q:        q,
		nq:       nq,
		ivl:      1e9 / o.Rate,
		msg:      msg,
		pkts:     make([]dgramio.Packet, o.Batch),
		pending:  make([]int64, 0, o.Batch),
		rtt:      NewHist(),
		lag:      NewHist(),
		arrive:   NewHist(),
		base:     time.Now(),
	}
	l.sent, l.got = newBitmap(l.total), newBitmap(l.total)
	if o.Interval > 0 {
		l.ivlRTT = NewHist()
	}
	if o.Queues > 1 {
		l.res.Queues = o.Queues
	}
	if !o.Start.IsZero() {
		l.base, l.fixed = o.Start, true
	}
	l.checked = math.MinInt64
	return l, nil
}

// finish computes the result after the run, whose error is err.
func (l *loader) finish(err error) (*LoadResult, error) {
	o := l.o
	r := l.res
	r.Total.Offered = l.next
	r.Lost = r.Sent - r.Received
	r.AchievedRate = achieved(r.Received, l.arrive, o.Duration)
	r.RTT, r.Lag = l.rtt.Summary(), l.lag.Summary()
	if enc, encErr := l.rtt.Encode(); encErr == nil {
		r.RTTHdr = enc
	}
	r.Stats = l.b.Stats()
	if err != nil {
		r.Error = err.Error()
	}
	r.rttH, r.lagH, r.arriveH, r.dur = l.rtt, l.lag, l.arrive, o.Duration
	return r, err
}

type loader struct {
	b            dgramio.Backend
	o            LoadOptions
	res          *LoadResult
	total, first uint64 // this queue's messages, and the first measured one
	// The run's messages (all queues) and its first measured one; this
	// queue is q of nq: its message i is the run's message i*nq+q.
	runAll, runFirst uint64
	q, nq            uint64
	next             uint64  // next of this queue's messages to schedule
	ivl              float64 // ns between two of the run's messages
	start            int64   // clock value of message 0's schedule
	fixed            bool    // start is Options.Start (base), not when run begins
	sent, got        bitmap  // by this queue's index i
	highest          uint64  // the highest index answered so far
	checked          int64   // clock value of the last sendDue: what was due then and is sent later is late
	msg              Msg
	pkts             []dgramio.Packet
	queued           int     // messages queued since the last Flush
	pending          []int64 // scheduled times of the measured ones among them
	rtt, lag         *Hist
	arrive           *Hist // arrival of the window's answers, from the window's start
	base             time.Time
	// The interval reports' state (LoadOptions.Interval): the end of the
	// current interval (a clock value), the totals at its start, and its
	// answers' round trips.
	ivlEnd           int64
	ivlSent, ivlRecv uint64
	ivlRTT           *Hist
}

// report calls OnInterval for the interval that ends at now, when one
// has ended (or, last, for what is left of the run), and starts the next.
func (l *loader) report(now int64, last bool) {
	if l.ivlRTT == nil || (now < l.ivlEnd && !last) {
		return
	}
	from := l.ivlEnd - int64(l.o.Interval)
	to := l.ivlEnd
	if last {
		to = now
	}
	if to <= from {
		return
	}
	t := &l.res.Total
	l.o.OnInterval(IntervalReport{Queue: l.o.Queue, From: time.Duration(from - l.start), To: time.Duration(to - l.start),
		Sent: t.Sent - l.ivlSent, Received: t.Received - l.ivlRecv, RTT: l.ivlRTT.Summary()})
	l.ivlSent, l.ivlRecv = t.Sent, t.Received
	l.ivlRTT.Reset()
	for l.ivlEnd <= now {
		l.ivlEnd += int64(l.o.Interval)
	}
}

func (l *loader) clock() int64 { return int64(time.Since(l.base)) }

// seq is the sequence number of this queue's message i: its index in the
// run's schedule.
func (l *loader) seq(i uint64) uint64 { return i*l.nq + l.q }

// schedOf is the scheduled time of the run's message g (any queue's).
func (l *loader) schedOf(g uint64) int64 { return l.start + int64(float64(g)*l.ivl) }

// sched is the scheduled time of this queue's message i.
func (l *loader) sched(i uint64) int64 { return l.schedOf(l.seq(i)) }

// windowStart is the schedule of the run's first measured message: the
// origin of the arrival times, the same for every queue.
func (l *loader) windowStart() int64 { return l.schedOf(l.runFirst) }

// flush hands the queued messages to the backend; their lag is the time of
// this call against their schedule.
func (l *loader) flush() error {
	t := l.clock()
	if len(l.pending) > 0 {
		for _, s := range l.pending {
			l.lag.Record(t - s)
		}
		l.pending = l.pending[:0]
	}
	l.queued = 0
	l.res.Total.Flushes++
	if err := l.b.Flush(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

// sendDue queues the messages scheduled at or before now, at most
// SendBurst batches of them, and counts those that were already due at the
// previous call as late. It reports whether there was any. A message
// Queue refuses (back-pressure, or no connection) is not sent and not
// retried; a message too large or a closed backend ends the run with the
// error, since no later message could go either. The first
// refusal of a call makes it Flush
// even with nothing queued since the last Flush: a backend may hold bytes
// an earlier Flush released that only its next Flush (or Rx) hands on,
// and an open-loop sender that flushed only after a Queue that succeeded
// would wait for them for good.
func (l *loader) sendDue(now int64) (bool, error) {
	did := false
	flushedOnRefusal := false
	r := l.res
	prev := l.checked
	l.checked = now
	for burst := l.o.Batch * SendBurst; burst > 0 && l.next < l.total; burst-- {
		s := l.sched(l.next)
		if s > now {
			break
		}
		did = true
		seq := l.next
		l.next++
		win := seq >= l.first
		if win {
			r.Offered++
		}
		if s <= prev {
			r.Total.Late++
			if win {
				r.Late++
			}
		}
		l.msg.Stamp(l.seq(seq), s)
		if qerr := l.b.Queue(l.msg); qerr != nil {
			if qerr == dgramio.ErrTooLarge || qerr == dgramio.ErrClosed {
				return did, fmt.Errorf("queue: %w", qerr) // no later message can go
			}
			r.Total.NotSent++
			if win {
				r.NotSent++
			}
			if !flushedOnRefusal {
				flushedOnRefusal = true
				if err := l.flush(); err != nil {
					return did, err
				}
			}
			continue
		}
		l.sent.set(seq)
		r.Total.Sent++
		l.queued++
		if win {
			r.Sent++
			l.pending = append(l.pending, s)
		}
		if l.queued >= l.o.Batch {
			if err := l.flush(); err != nil {
				return did, err
			}
		}
	}
	if l.queued > 0 {
		if err := l.flush(); err != nil {
			return did, err
		}
	}
	return did, nil
}

// answer matches one received message, timestamped t.
func (l *loader) answer(d []byte, t int64) {
	r := l.res
	m := Msg(d)
	if !m.IsValid() {
		r.Total.Malformed++
		return
	}
	g := m.Seq()
	if m.RunID() != l.o.RunID || g >= l.runAll {
		r.Total.Foreign++
		return
	}
	s := l.schedOf(g)
	if g%l.nq != l.q {
		// Another queue's message, whole: its flow left its queue.
		if m.Sched() != s || len(d) != l.o.Size {
			r.Total.Malformed++
		} else {
			r.Total.OtherQueue++
		}
		return
	}
	seq := g / l.nq
	if !l.sent.get(seq) {
		r.Total.Foreign++
		return
	}
	if m.Sched() != s || len(d) != l.o.Size {
		r.Total.Malformed++
		return
	}
	if l.got.get(seq) {
		r.Total.Duplicates++
		return
	}
	l.got.set(seq)
	r.Total.Received++
	if seq < l.highest {
		r.Total.Reordered++
	} else {
		l.highest = seq
	}
	if l.ivlRTT != nil {
		l.ivlRTT.Record(t - s)
	}
	if seq >= l.first {
		r.Received++
		l.rtt.Record(t - s)
		l.arrive.Record(t - l.windowStart())
	}
}

// idle sleeps until deadline (a clock value) when the options ask for it;
// otherwise it returns at once. A sleep longer than waitMin goes into
// Backend.Wait, which wakes early when an answer arrives but whose timeout
// has the granularity of poll(2) (a millisecond), so it is asked to wake a
// millisecond early; a shorter one is a nanosleep of at most napMax (the
// thread's timer slack is 1 ns in this mode), during which an arriving
// answer waits.
func (l *loader) idle(ctx context.Context, deadline int64) error {
	if !l.o.Wait {
		return nil
	}
	left := time.Duration(deadline - l.clock())
	if left <= 0 {
		return nil
	}
	if left < waitMin {
		ts := unix.NsecToTimespec(int64(min(left, napMax)))
		_ = unix.Nanosleep(&ts, nil)
		return nil
	}
	// One context per sleep: an allocation per idle period, not per
	// message; only in the yielding mode.
	wctx, cancel := context.WithDeadline(ctx, l.base.Add(time.Duration(deadline)-time.Millisecond))
	err := l.b.Wait(wctx)
	cancel()
	switch {
	case err == nil, errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return nil
	case errors.Is(err, dgramio.ErrNotSupported):
		l.o.Wait = false
		l.res.WaitFallback = err.Error()
		return nil
	default:
		return fmt.Errorf("wait: %w", err)
	}
}

// The bounds of one round of the loop: at most SendBurst batches sent, at
// most RxBurst Rx calls. Twice the calls of the sends: the answers to a
// burst and as much again of a backlog fit in one round.
const (
	SendBurst = 4
	RxBurst   = 2 * SendBurst
)

// The sleeps of the yielding mode.
const (
	waitMin = 1500 * time.Microsecond
	napMax  = 20 * time.Microsecond
)

func (l *loader) run(ctx context.Context) error {
	r := l.res
	if !l.fixed {
		l.start = l.clock()
	}
	var drainEnd int64
	sending := true
	l.ivlEnd = l.start + int64(l.o.Interval)
	defer func() {
		r.Total.ElapsedNs = l.clock() - l.start
		l.report(l.clock(), true)
	}()
	for round := uint64(0); ; round++ {
		r.Total.Rounds++
		if round&255 == 0 && ctx.Err() != nil {
			r.Interrupted = true
			return nil
		}
		now := l.clock()
		l.report(now, false)
		did := false
		if sending {
			var err error
			if did, err = l.sendDue(now); err != nil {
				return err
			}
			if l.next >= l.total {
				sending = false
				drainEnd = l.clock() + int64(l.o.Drain)
			}
		}
		got, err := l.receive()
		if err != nil {
			return err
		}
		did = did || got
		if !sending && (r.Total.Received == r.Total.Sent || l.clock() >= drainEnd) {
			return nil
		}
		if !did {
			deadline := drainEnd
			if sending {
				deadline = l.sched(l.next)
			}
			if l.ivlRTT != nil {
				deadline = min(deadline, l.ivlEnd) // the next report on time
			}
			if err := l.idle(ctx, deadline); err != nil {
				return err
			}
		}
	}
}

// receive calls Rx until it returns less than a batch (nothing more was
// waiting) or RxBurst times, and matches the answers. It reports whether
// there was any.
func (l *loader) receive() (bool, error) {
	did := false
	for range RxBurst {
		n, err := l.b.Rx(l.pkts)
		l.res.Total.RxCalls++
		if n > 0 {
			t := l.clock()
			for i := 0; i < n; i++ {
				l.answer(l.pkts[i].Data, t)
			}
			did = true
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return did, fmt.Errorf("rx: backend closed: %w", err)
			}
			return did, fmt.Errorf("rx: %w", err)
		}
		if n < len(l.pkts) {
			break
		}
	}
	return did, nil
}

// achieved is the answer rate of n answers whose arrival times (from the
// window's start) are in h; see LoadResult.AchievedRate.
func achieved(n uint64, h *Hist, d time.Duration) float64 {
	if n == 0 {
		return 0
	}
	mean := float64(n) / d.Seconds()
	t1, t99 := h.h.ValueAtQuantile(1), h.h.ValueAtQuantile(99)
	if n < 100 || t99 <= t1 {
		return mean
	}
	return min(mean, 0.98*float64(n)/(float64(t99-t1)/1e9))
}

// MergeLoads combines the results of the queues of one run (Load with
// LoadOptions.Queue 0 … Queues-1, in queue order) into the run's result:
// counts and totals added up, the histograms merged (so the percentiles
// and the achieved rate are the whole run's, not an average of the
// queues'), Stats the sum of the queues' (dgramio.SumStats: replace it with
// the group's Stats, which also holds the counters of what the queues
// share), and each queue's share in PerQueue. The first error,
// interruption and wait fallback are kept. Only results that Load returned
// in this process can be merged (the histograms are not in the JSON); a
// single result comes back as it is.
func MergeLoads(parts []*LoadResult) *LoadResult {
	if len(parts) == 1 {
		return parts[0]
	}
	r := &LoadResult{Queues: len(parts)}
	rtt, lag, arrive := NewHist(), NewHist(), NewHist()
	var d time.Duration
	stats := make([]dgramio.Stats, 0, len(parts))
	for q, p := range parts {
		if q == 0 {
			r.Rate, r.Size = p.Rate, p.Size
		}
		r.Offered += p.Offered
		r.Sent += p.Sent
		r.NotSent += p.NotSent
		r.Late += p.Late
		r.Received += p.Received
		r.Lost += p.Lost
		r.Total.add(p.Total)
		for _, m := range []struct{ into, from *Hist }{{rtt, p.rttH}, {lag, p.lagH}, {arrive, p.arriveH}} {
			if m.from != nil {
				m.into.h.Merge(m.from.h)
				m.into.Clamped += m.from.Clamped
			}
		}
		d = max(d, p.dur)
		stats = append(stats, p.Stats)
		if r.Error == "" && p.Error != "" {
			r.Error = fmt.Sprintf("queue %d: %s", q, p.Error)
		}
		if r.WaitFallback == "" {
			r.WaitFallback = p.WaitFallback
		}
		r.Interrupted = r.Interrupted || p.Interrupted
		r.PerQueue = append(r.PerQueue, QueueLoad{
			Queue: q, Offered: p.Offered, Sent: p.Sent, Received: p.Received, Lost: p.Lost, NotSent: p.NotSent, Late: p.Late,
			RTT: p.RTT, Lag: p.Lag, Total: p.Total, Stats: p.Stats,
		})
	}
	r.Stats = dgramio.SumStats(stats)
	r.RTT, r.Lag = rtt.Summary(), lag.Summary()
	if enc, err := rtt.Encode(); err == nil {
		r.RTTHdr = enc
	}
	r.rttH, r.lagH, r.arriveH = rtt, lag, arrive
	if d > 0 {
		r.AchievedRate = achieved(r.Received, arrive, d)
	} else {
		for _, p := range parts {
			r.AchievedRate += p.AchievedRate
		}
	}
	return r
}
