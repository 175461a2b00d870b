package load

import (
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/bench/benchtest"
)

// Answers that arrive in a burst (after a stall) say nothing about the
// rate: the achieved rate is never above the answers over the window.
func TestAchievedNotAboveMean(t *testing.T) {
	h := NewHist()
	for i := 0; i < 1000; i++ {
		h.Record(int64(500*time.Millisecond) + int64(i)*int64(10*time.Microsecond)) // 1000 answers within 10 ms
	}
	if got := achieved(1000, h, time.Second); got != 1000 {
		t.Fatalf("achieved %.0f/s, want 1000/s (1000 answers over a 1 s window)", got)
	}
	// Answers spread evenly over 2 s of a 1 s window (a queue that drains
	// slowly): the spacing gives the rate.
	h = NewHist()
	for i := 0; i < 1000; i++ {
		h.Record(int64(i) * int64(2*time.Millisecond))
	}
	if got := achieved(1000, h, time.Second); got < 480 || got > 520 {
		t.Fatalf("achieved %.0f/s, want about 500/s", got)
	}
}

// The queues' schedules interleave: queue q sends the run's messages
// q, q+N, q+2N …, each at its time in the run's schedule.
func TestQueueSchedule(t *testing.T) {
	for _, tc := range []struct {
		queues, queue     int
		total, first      uint64
		seq0, seq1, sched int64
	}{
		// 10 messages (1000/s for 10 ms), 3 measured after 7 ms.
		{1, 0, 10, 7, 0, 1, 1e6},
		{3, 0, 4, 3, 0, 3, 3e6},
		{3, 1, 3, 2, 1, 4, 4e6},
		{3, 2, 3, 2, 2, 5, 5e6},
	} {
		client, _ := benchtest.NewPair(benchtest.Options{})
		l, err := newLoader(client, LoadOptions{Rate: 1000, Warmup: 7 * time.Millisecond, Duration: 3 * time.Millisecond,
			Queue: tc.queue, Queues: tc.queues, RunID: 1})
		if err != nil {
			t.Fatal(err)
		}
		if l.total != tc.total || l.first != tc.first || int64(l.seq(0)) != tc.seq0 || int64(l.seq(1)) != tc.seq1 || l.sched(1) != tc.sched {
			t.Errorf("queue %d of %d: total %d first %d, seq %d %d, sched(1) %d; want %+v", tc.queue, tc.queues, l.total, l.first, l.seq(0), l.seq(1), l.sched(1), tc)
		}
		if l.windowStart() != 7e6 {
			t.Errorf("queue %d of %d: window starts at %d, want 7 ms (the run's message 7)", tc.queue, tc.queues, l.windowStart())
		}
	}
	client, _ := benchtest.NewPair(benchtest.Options{})
	if _, err := newLoader(client, LoadOptions{Rate: 1000, Duration: time.Second, Queue: 2, Queues: 2}); err == nil {
		t.Fatal("queue 2 of 2 accepted")
	}
}

// An answer to another queue's message is counted as other_queue (a loss
// of the tool's), one of no message of the run as foreign, a damaged one
// as malformed.
func TestAnswerOfAnotherQueue(t *testing.T) {
	client, _ := benchtest.NewPair(benchtest.Options{})
	l, err := newLoader(client, LoadOptions{Rate: 1000, Duration: 10 * time.Millisecond, Queue: 0, Queues: 2, RunID: 7})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := NewMsg(DefaultSize, 7)
	m.Stamp(3, l.schedOf(3)) // queue 1's second message
	l.answer(m, 0)
	m.Stamp(5, l.schedOf(5)+1) // queue 1's, damaged
	l.answer(m, 0)
	m.Stamp(4, l.schedOf(4)) // ours, never sent
	l.answer(m, 0)
	m.Stamp(11, l.schedOf(11)) // beyond the run
	l.answer(m, 0)
	tot := l.res.Total
	if tot.OtherQueue != 1 || tot.Malformed != 1 || tot.Foreign != 2 || tot.Received != 0 {
		t.Fatalf("totals %+v; want other_queue 1, malformed 1, foreign 2", tot)
	}
	// Queue 0's messages 0, 2 and 4 (its indexes 0, 1, 2) sent; their
	// answers come back 4, 0, 2: two reordered, none lost.
	for i := range uint64(3) {
		l.sent.set(i)
	}
	for _, g := range []uint64{4, 0, 2} {
		m.Stamp(g, l.schedOf(g))
		l.answer(m, l.schedOf(g)+1000)
	}
	if tot := l.res.Total; tot.Received != 3 || tot.Reordered != 2 {
		t.Fatalf("totals %+v; want 3 received, 2 reordered", tot)
	}
	l.res.Queues = 2
	var found bool
	for _, k := range l.res.Layers() {
		if k.Name == "other_queue" {
			found = k.Loss && k.Value == 1
		}
	}
	if !found {
		t.Fatalf("layers %+v: want app.other_queue 1, a loss", l.res.Layers())
	}
	// One queue has no other_queue counter: its JSON is as before.
	one := &LoadResult{}
	for _, k := range one.Layers() {
		if k.Name == "other_queue" {
			t.Fatalf("one queue: %+v", one.Layers())
		}
	}
}
