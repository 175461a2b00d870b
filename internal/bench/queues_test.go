package bench

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/bench/benchtest"
	"github.com/dgramio/dgramio/internal/core"
)

// runQueues drives n queues: queue q's Load on the client of pair q and
// its Echo on the server of pair q, each in its own goroutine, the loads
// sharing one schedule (Start, RunID); it returns the merged results and
// the cell. Every loop sleeps in Wait.
func runQueues(t *testing.T, n int, fo benchtest.Options, lo LoadOptions) (*LoadResult, *EchoResult, Cell) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loads := make([]*LoadResult, n)
	echoes := make([]*EchoResult, n)
	errs := make([]error, 2*n)
	lo.Wait, lo.Queues, lo.RunID = true, n, 0x5eed
	lo.Start = time.Now().Add(20 * time.Millisecond)
	var ewg, lwg sync.WaitGroup
	for q := range n {
		client, server := benchtest.NewPair(fo)
		defer client.Close()
		defer server.Close()
		ewg.Add(1)
		go func() {
			defer ewg.Done()
			echoes[q], errs[n+q] = Echo(ctx, server, EchoOptions{Wait: true})
		}()
		lwg.Add(1)
		go func() {
			defer lwg.Done()
			o := lo
			o.Queue = q
			loads[q], errs[q] = Load(context.Background(), client, o)
		}()
	}
	lwg.Wait()
	cancel()
	ewg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("loop %d: %v", i, err)
		}
	}
	lr, er := MergeLoads(loads), MergeEchoes(echoes)
	return lr, er, NewCell("fake", lr, er)
}

// Two queues offer the run's rate between them: the same messages as one
// queue would, half each, every one answered, the per-queue counts adding
// up to the totals and the histograms merged.
func TestLoadTwoQueues(t *testing.T) {
	lr, er, c := runQueues(t, 2, benchtest.Options{Delay: 100 * time.Microsecond}, LoadOptions{
		Rate: 2000, Warmup: 100 * time.Millisecond, Duration: 400 * time.Millisecond, Drain: 10 * time.Second,
	})
	if lr.Total.Offered != 1000 || lr.Offered != 800 {
		t.Fatalf("offered %d total, %d in the window; want 1000 and 800, as with one queue", lr.Total.Offered, lr.Offered)
	}
	if lr.Received != lr.Offered || lr.Total.Received != lr.Total.Sent || lr.Total.OtherQueue != 0 || lr.Total.Foreign != 0 {
		t.Fatalf("window received %d of %d; totals %+v", lr.Received, lr.Offered, lr.Total)
	}
	if lr.Queues != 2 || len(lr.PerQueue) != 2 || er.Queues != 2 || len(er.PerQueue) != 2 {
		t.Fatalf("queues: load %d %d, echo %d %d", lr.Queues, len(lr.PerQueue), er.Queues, len(er.PerQueue))
	}
	for q, p := range lr.PerQueue {
		if p.Total.Sent != 500 || p.Total.Received != 500 || p.Offered != 400 {
			t.Errorf("queue %d: sent %d received %d offered %d in the window; want 500, 500, 400", q, p.Total.Sent, p.Total.Received, p.Offered)
		}
		if p.RTT.Count != int64(p.Received) || p.Stats.TxSent != p.Total.Sent {
			t.Errorf("queue %d: %d RTTs for %d answers; backend sent %d", q, p.RTT.Count, p.Received, p.Stats.TxSent)
		}
	}
	if lr.RTT.Count != int64(lr.Received) || lr.RTT.MaxUs < lr.PerQueue[0].RTT.MaxUs || lr.RTT.MaxUs < lr.PerQueue[1].RTT.MaxUs {
		t.Fatalf("merged RTT %+v, queues %+v %+v", lr.RTT, lr.PerQueue[0].RTT, lr.PerQueue[1].RTT)
	}
	// The merged answers span the window: the achieved rate is the
	// run's, not one queue's.
	if lr.AchievedRate < 1000 || lr.AchievedRate > 2000*1.01 {
		t.Fatalf("achieved %v/s at 2000/s offered", lr.AchievedRate)
	}
	if c.Unaccounted != 0 || c.Queues != 2 || len(c.PerQueue) != 2 {
		t.Fatalf("cell: unaccounted %d, queues %d, per queue %d", c.Unaccounted, c.Queues, len(c.PerQueue))
	}
	if d := c.QueueMismatches(); len(d) > 0 {
		t.Fatalf("per-queue counters do not add up: %v", d)
	}
	for _, q := range c.PerQueue {
		if q.Sent == 0 || q.EchoReceived != q.Sent || q.Counters["echo.dgramio.tx_sent"] != q.Sent || q.LoadLost != 0 {
			t.Fatalf("queue %+v", q)
		}
	}
	if _, ok := c.Counters["loadgen.app.other_queue"]; !ok {
		t.Fatalf("no loadgen.app.other_queue counter with two queues: %v", SortedKeys(c.Counters))
	}
	var md strings.Builder
	c.markdown(&md)
	for _, want := range []string{"| queue | loadgen sent |", "| 0 | 500 | 500 | 0 | 0 |", "| sum | 1000 | 1000 | 0 | 0 |", "| total | 1000 | 1000 | 0 | 0 |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("cell markdown lacks %q:\n%s", want, md.String())
		}
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

// MergeLoads and MergeEchoes give one result back as it is.
func TestMergeOne(t *testing.T) {
	lr := &LoadResult{Rate: 5, Stats: core.Stats{Kind: "x"}}
	er := &EchoResult{Received: 3}
	if MergeLoads([]*LoadResult{lr}) != lr || MergeEchoes([]*EchoResult{er}) != er {
		t.Fatal("a single result was rebuilt")
	}
}
