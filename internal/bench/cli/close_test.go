package cli

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/bench/benchtest"
	"github.com/dgramio/dgramio/internal/bench/load"
)

// TestResultsCarryCloseTimeCounters: echo and loadgen over the in-memory
// pair, whose server drops every 50th message without a counter and
// counts those drops only in its Stats after Close (as AF_XDP counts the
// frames Close finds unread, rx_unread_at_close). The tools' JSON holds
// the counters as Close left them, so both files together account for
// every message; read before Close, 10 would be unaccounted.
func TestResultsCarryCloseTimeCounters(t *testing.T) {
	cli, srv := benchtest.NewPair(benchtest.Options{SilentEvery: 50, SilentMax: 10, SilentAtClose: true})
	op := defaultOpeners()
	op.single = func(cfg dgramio.Config) (dgramio.Backend, error) {
		if cfg.Role == dgramio.RoleServer {
			return srv, nil
		}
		return cli, nil
	}
	lf, ef, _ := echoAndLoadWith(t, op,
		[]string{"--kind", "udp", "--local", "198.18.0.2", "--wait"},
		[]string{"--kind", "udp", "--dst", "198.18.0.2", "--rate", "2k",
			"--warmup", "0s", "--duration", "500ms", "--drain", "300ms", "--wait"}, nil)
	if got := srv.Silent(); got != 10 {
		t.Fatalf("the fake dropped %d, want 10", got)
	}
	if v, ok := ef.Result.Stats.Counter("fake", "silent_at_close"); !ok || v != 10 {
		t.Fatalf("echo JSON: silent_at_close %d (present %v), want 10: the Stats were read before Close", v, ok)
	}
	c := bench.NewCell("udp", lf.Result, ef.Result)
	if c.Unaccounted != 0 || lf.Result.Lost != 10 {
		t.Fatalf("lost %d (want 10), unaccounted %d: %+v", lf.Result.Lost, c.Unaccounted, c.Conservation)
	}
}

// loadGroup's result holds every queue's counters as its Close left them,
// and the group's, read after the queues closed.
func TestLoadGroupCloseTimeCounters(t *testing.T) {
	g := newFakeGroup(2, -1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range g.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			load.Echo(ctx, s, load.EchoOptions{Wait: true})
		}()
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	res, runErr, openErr := loadGroup(context.Background(), func(dgramio.Config) (Group, error) { return g, nil }, dgramio.Config{Kind: "udp", Queues: 2},
		load.LoadOptions{Rate: 2000, Duration: 200 * time.Millisecond, Drain: 5 * time.Second, Wait: true})
	if openErr != nil || runErr != nil {
		t.Fatalf("open %v, run %v", openErr, runErr)
	}
	if res.Total.Sent != 400 || res.Received != 400 {
		t.Fatalf("sent %d received %d, want 400 each", res.Total.Sent, res.Received)
	}
	if v, _ := res.Stats.Counter("fake", "lost_at_close"); v != 1+2 {
		t.Errorf("group lost_at_close %d, want 3", v)
	}
	if len(res.PerQueue) != 2 {
		t.Fatalf("%d queues in the result", len(res.PerQueue))
	}
	for q, p := range res.PerQueue {
		if v, _ := p.Stats.Counter("fake", "lost_at_close"); v != uint64(q+1) {
			t.Errorf("queue %d: lost_at_close %d, want %d", q, v, q+1)
		}
	}
}
