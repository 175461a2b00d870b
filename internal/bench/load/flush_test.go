package load

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench/benchtest"
)

// heldClient is a client whose Queue refuses while it holds bytes that
// only a Flush hands on (as a stream backend whose socket refused what the
// last Flush released): it starts holding, and every Flush lets go.
type heldClient struct {
	*benchtest.Backend
	mu   sync.Mutex
	held bool
}

func (c *heldClient) Queue(p []byte) error {
	c.mu.Lock()
	held := c.held
	c.mu.Unlock()
	if held {
		return dgramio.ErrBackPressure
	}
	return c.Backend.Queue(p)
}

func (c *heldClient) Flush() error {
	c.mu.Lock()
	c.held = false
	c.mu.Unlock()
	return c.Backend.Flush()
}

// TestLoadFlushesOnRefusal: a refused Queue makes Load flush, even with
// nothing queued since its last Flush, so a backend that needs a Flush to
// take messages again gets it; only the refused message is not sent.
func TestLoadFlushesOnRefusal(t *testing.T) {
	client, server := benchtest.NewPair(benchtest.Options{})
	c := &heldClient{Backend: client, held: true}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		Echo(ctx, server, EchoOptions{Wait: true})
	}()
	lr, err := Load(context.Background(), c, LoadOptions{Rate: 2000, Duration: 200 * time.Millisecond, Drain: 10 * time.Second, Wait: true})
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if lr.Total.NotSent != 1 || lr.Total.Sent != 399 || lr.Total.Received != lr.Total.Sent {
		t.Fatalf("offered %d, sent %d, not sent %d, received %d; want the first refused, the other 399 sent and back",
			lr.Total.Offered, lr.Total.Sent, lr.Total.NotSent, lr.Total.Received)
	}
}
