package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/dgramio/dgramio/internal/core"
)

// EchoOptions configures Echo.
type EchoOptions struct {
	// Batch is how many messages one Rx call takes. Default 16.
	Batch int
	// Wait makes the loop sleep in Backend.Wait when nothing arrives,
	// instead of spinning (busy poll): for machines with too few CPUs.
	Wait bool
}

// EchoResult is what Echo counted. Stats are the backend's counters when
// the loop stopped.
type EchoResult struct {
	// Received counts messages Rx returned; Reflected those queued back.
	Received, Reflected uint64
	// Dropped counts messages QueueTo refused even after a Flush
	// (back-pressure on the way back): lost by the echo, and counted as
	// its layer "app" loss.
	Dropped uint64
	// Flushes, RxCalls count calls; PeerEvents counts *core.PeerError
	// returns of Rx (a stream client closed or reset its connection), which
	// the echo survives.
	Flushes, RxCalls, PeerEvents uint64
	// Stats are the backend's counters at the end.
	Stats core.Stats
	// WaitFallback is set when Wait was asked for but the backend cannot
	// sleep, so the loop spun.
	WaitFallback string `json:",omitempty"`
	// Error is what stopped the echo, other than ctx.
	Error string `json:",omitempty"`
	// Queues is the number of queues of an echo with several (0 for
	// one); PerQueue holds each queue's share when MergeEchoes made the
	// result, in queue order.
	Queues   int         `json:",omitempty"`
	PerQueue []QueueEcho `json:",omitempty"`
}

// QueueEcho is one queue's share of an echo with several queues.
type QueueEcho struct {
	Queue int
	// Received, Reflected, Dropped, PeerEvents count the queue's messages
	// and events, as in EchoResult.
	Received, Reflected, Dropped, PeerEvents uint64
	// Stats are the queue's backend's counters.
	Stats core.Stats
}

// MergeEchoes combines the results of an echo's queues (Echo on each
// queue's backend, in queue order): counts added up, Stats the sum of the
// queues' (core.SumStats: replace it with the group's Stats, which also
// holds what the queues share), each queue's share in PerQueue, the first
// error and wait fallback kept. A single result comes back as it is.
func MergeEchoes(parts []*EchoResult) *EchoResult {
	if len(parts) == 1 {
		return parts[0]
	}
	r := &EchoResult{Queues: len(parts)}
	stats := make([]core.Stats, 0, len(parts))
	for q, p := range parts {
		r.Received += p.Received
		r.Reflected += p.Reflected
		r.Dropped += p.Dropped
		r.Flushes += p.Flushes
		r.RxCalls += p.RxCalls
		r.PeerEvents += p.PeerEvents
		stats = append(stats, p.Stats)
		if r.Error == "" && p.Error != "" {
			r.Error = fmt.Sprintf("queue %d: %s", q, p.Error)
		}
		if r.WaitFallback == "" {
			r.WaitFallback = p.WaitFallback
		}
		r.PerQueue = append(r.PerQueue, QueueEcho{Queue: q, Received: p.Received, Reflected: p.Reflected,
			Dropped: p.Dropped, PeerEvents: p.PeerEvents, Stats: p.Stats})
	}
	r.Stats = core.SumStats(stats)
	return r
}

// Layers returns the echo's own counters as layer "app".
func (r *EchoResult) Layers() []core.Counter {
	return echoLayers(r.Received, r.Reflected, r.Dropped, r.PeerEvents)
}

// Layers returns the queue's own counters, as EchoResult.Layers.
func (q *QueueEcho) Layers() []core.Counter {
	return echoLayers(q.Received, q.Reflected, q.Dropped, q.PeerEvents)
}

func echoLayers(received, reflected, dropped, peer uint64) []core.Counter {
	return []core.Counter{
		{Layer: "app", Name: "received", Value: received},
		{Layer: "app", Name: "reflected", Value: reflected},
		{Layer: "app", Name: "dropped", Value: dropped, Loss: true},
		{Layer: "app", Name: "peer_events", Value: peer},
	}
}

// Echo reflects every message b receives back to its sender (QueueTo with
// the packet's From), flushing once per Rx batch, until ctx ends or the
// backend fails. Run it on the goroutine that opened b (pin it first). A
// message QueueTo refuses is retried once after a Flush, then dropped and
// counted. A stream peer that closes or resets is counted and the echo goes
// on. The result is valid in every case.
func Echo(ctx context.Context, b core.Backend, o EchoOptions) (*EchoResult, error) {
	if o.Batch == 0 {
		o.Batch = DefaultBatch
	}
	if o.Batch < 1 {
		return nil, fmt.Errorf("echo: batch %d: must be at least 1", o.Batch)
	}
	var stop atomic.Bool
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			stop.Store(true)
		case <-done:
		}
	}()
	r := &EchoResult{}
	err := echoLoop(ctx, b, o, r, &stop)
	r.Stats = b.Stats()
	if err != nil {
		r.Error = err.Error()
	}
	return r, err
}

func echoLoop(ctx context.Context, b core.Backend, o EchoOptions, r *EchoResult, stop *atomic.Bool) error {
	pkts := make([]core.Packet, o.Batch)
	for !stop.Load() {
		n, err := b.Rx(pkts)
		r.RxCalls++
		for i := 0; i < n; i++ {
			p := &pkts[i]
			r.Received++
			if b.QueueTo(p.Data, p.From) {
				r.Reflected++
				continue
			}
			// Back-pressure: hand what is queued to the kernel or
			// ring, then try once more.
			r.Flushes++
			if ferr := b.Flush(); ferr != nil && !isPeer(ferr) {
				return fmt.Errorf("flush: %w", ferr)
			}
			if b.QueueTo(p.Data, p.From) {
				r.Reflected++
			} else {
				r.Dropped++
			}
		}
		if n > 0 {
			r.Flushes++
			if ferr := b.Flush(); ferr != nil {
				if !isPeer(ferr) {
					return fmt.Errorf("flush: %w", ferr)
				}
				r.PeerEvents++
			}
		}
		if err != nil {
			if isPeer(err) {
				r.PeerEvents++
				continue
			}
			return fmt.Errorf("rx: %w", err)
		}
		if n == 0 && o.Wait {
			werr := b.Wait(ctx)
			switch {
			case ctx.Err() != nil:
				return nil
			case werr == nil:
			case errors.Is(werr, core.ErrNotSupported):
				o.Wait = false
				r.WaitFallback = werr.Error()
			default:
				return fmt.Errorf("wait: %w", werr)
			}
		}
	}
	return nil
}

func isPeer(err error) bool {
	var pe *core.PeerError
	return errors.As(err, &pe)
}
