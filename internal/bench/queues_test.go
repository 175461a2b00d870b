package bench

import (
	"context"
	"github.com/dgramio/dgramio/internal/bench/load"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench/benchtest"
)

// runQueues drives n queues: queue q's Load on the client of pair q and
// its Echo on the server of pair q, each in its own goroutine, the loads
// sharing one schedule (Start, RunID); it returns the merged results and
// the cell. Every loop sleeps in Wait.
func runQueues(t *testing.T, n int, fo benchtest.Options, lo load.LoadOptions) (*load.LoadResult, *load.EchoResult, Cell) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loads := make([]*load.LoadResult, n)
	echoes := make([]*load.EchoResult, n)
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
			echoes[q], errs[n+q] = load.Echo(ctx, server, load.EchoOptions{Wait: true})
		}()
		lwg.Add(1)
		go func() {
			defer lwg.Done()
			o := lo
			o.Queue = q
			loads[q], errs[q] = load.Load(context.Background(), client, o)
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
	lr, er := load.MergeLoads(loads), load.MergeEchoes(echoes)
	return lr, er, NewCell("fake", lr, er)
}

// Two queues offer the run's rate between them: the same messages as one
// queue would, half each, every one answered, the per-queue counts adding
// up to the totals and the histograms merged.
func TestLoadTwoQueues(t *testing.T) {
	lr, er, c := runQueues(t, 2, benchtest.Options{Delay: 100 * time.Microsecond}, load.LoadOptions{
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
		t.Fatalf("no loadgen.app.other_queue counter with two queues: %v", slices.Sorted(maps.Keys(c.Counters)))
	}
	var md strings.Builder
	c.markdown(&md)
	for _, want := range []string{"| queue | loadgen sent |", "| 0 | 500 | 500 | 0 | 0 |", "| sum | 1000 | 1000 | 0 | 0 |", "| total | 1000 | 1000 | 0 | 0 |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("cell markdown lacks %q:\n%s", want, md.String())
		}
	}
}

// MergeLoads and MergeEchoes give one result back as it is.
func TestMergeOne(t *testing.T) {
	lr := &load.LoadResult{Rate: 5, Stats: dgramio.Stats{Kind: "x"}}
	er := &load.EchoResult{Received: 3}
	if load.MergeLoads([]*load.LoadResult{lr}) != lr || load.MergeEchoes([]*load.EchoResult{er}) != er {
		t.Fatal("a single result was rebuilt")
	}
}
