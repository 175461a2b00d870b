package load

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/dgramio/dgramio"
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
	Received  uint64 `json:"received"`
	Reflected uint64 `json:"reflected"`
	// Dropped counts messages QueueTo refused even after a Flush
	// (back-pressure on the way back) on a datagram kind, and on a stream
	// kind those held for a peer whose connection then ended, or still
	// held when the echo stopped: lost by the echo, and counted as its
	// layer "app" loss. A stream kind holds a
	// refused answer instead (see Echo).
	Dropped uint64 `json:"dropped"`
	// Flushes, RxCalls count calls; PeerEvents counts the ends of
	// connections Rx delivered (EventPeerFIN and EventReset, with
	// Config.Events: a stream client closed or reset its connection).
	Flushes    uint64 `json:"flushes"`
	RxCalls    uint64 `json:"rx_calls"`
	PeerEvents uint64 `json:"peer_events"`
	// Stats are the backend's counters at the end.
	Stats dgramio.Stats `json:"stats"`
	// WaitFallback is set when Wait was asked for but the backend cannot
	// sleep, so the loop spun.
	WaitFallback string `json:"wait_fallback,omitempty"`
	// Error is what stopped the echo, other than ctx.
	Error string `json:"error,omitempty"`
	// Queues is the number of queues of an echo with several (0 for
	// one); PerQueue holds each queue's share when MergeEchoes made the
	// result, in queue order.
	Queues   int         `json:"queues,omitempty"`
	PerQueue []QueueEcho `json:"per_queue,omitempty"`
}

// QueueEcho is one queue's share of an echo with several queues.
type QueueEcho struct {
	Queue int `json:"queue"`
	// Received, Reflected, Dropped, PeerEvents count the queue's messages
	// and events, as in EchoResult.
	Received   uint64 `json:"received"`
	Reflected  uint64 `json:"reflected"`
	Dropped    uint64 `json:"dropped"`
	PeerEvents uint64 `json:"peer_events"`
	// Stats are the queue's backend's counters.
	Stats dgramio.Stats `json:"stats"`
}

// MergeEchoes combines the results of an echo's queues (Echo on each
// queue's backend, in queue order): counts added up, Stats the sum of the
// queues' (dgramio.SumStats: replace it with the group's Stats, which also
// holds what the queues share), each queue's share in PerQueue, the first
// error and wait fallback kept. A single result comes back as it is.
func MergeEchoes(parts []*EchoResult) *EchoResult {
	if len(parts) == 1 {
		return parts[0]
	}
	r := &EchoResult{Queues: len(parts)}
	stats := make([]dgramio.Stats, 0, len(parts))
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
	r.Stats = dgramio.SumStats(stats)
	return r
}

// Layers returns the echo's own counters as layer "app".
func (r *EchoResult) Layers() []dgramio.Counter {
	return echoLayers(r.Received, r.Reflected, r.Dropped, r.PeerEvents)
}

// Layers returns the queue's own counters, as EchoResult.Layers.
func (q *QueueEcho) Layers() []dgramio.Counter {
	return echoLayers(q.Received, q.Reflected, q.Dropped, q.PeerEvents)
}

func echoLayers(received, reflected, dropped, peer uint64) []dgramio.Counter {
	return []dgramio.Counter{
		{Layer: "app", Name: "received", Value: received},
		{Layer: "app", Name: "reflected", Value: reflected},
		{Layer: "app", Name: "dropped", Value: dropped, Loss: true},
		{Layer: "app", Name: "peer_events", Value: peer},
	}
}

// Echo reflects every message b receives back to its sender (QueueTo with
// the packet's From), flushing once per Rx batch, until ctx ends or the
// backend fails (any error of Rx or Flush: a connection's end is none).
// Run it on the goroutine that opened b (pin it first). A message QueueTo
// refuses is retried once after a Flush. Then, on a stream kind (a
// backend that is a dgramio.Conns), the answer is kept, in order with the
// later messages of the same peer, and the peer is paused
// (dgramio.Conns.Pause), so that TCP's window stops it until the answer
// fits; nothing is dropped for back-pressure. On a datagram kind it is
// dropped and counted. The ends of connections (Config.Events) are
// counted in PeerEvents; the other events are passed over. In raw framing
// (Config.FramingRaw) it reflects bytes as they came. The result is valid
// in every case.
func Echo(ctx context.Context, b dgramio.Backend, o EchoOptions) (*EchoResult, error) {
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

func echoLoop(ctx context.Context, b dgramio.Backend, o EchoOptions, r *EchoResult, stop *atomic.Bool) error {
	pkts := make([]dgramio.Packet, o.Batch)
	h := newHeld(b)
	defer func() { r.Dropped += h.left() }() // answers never queued
	for !stop.Load() {
		if _, err := h.retry(r); err != nil {
			return err
		}
		n, err := b.Rx(pkts)
		r.RxCalls++
		if err != nil {
			return fmt.Errorf("rx: %w", err)
		}
		for i := range pkts[:n] {
			p := &pkts[i]
			switch p.Event {
			case dgramio.EventData:
			case dgramio.EventPeerFIN, dgramio.EventReset:
				r.PeerEvents++
				continue
			default: // opened, ended, stalled
				continue
			}
			r.Received++
			if h.waiting() && h.add(p) {
				continue // behind an answer that waits for room
			}
			switch err := b.QueueTo(p.Data, p.From); err {
			case nil:
				r.Reflected++
				continue
			case dgramio.ErrTooLarge, dgramio.ErrNoRoute:
				r.Dropped++ // a retry cannot help
				continue
			}
			// Back-pressure: hand what is queued to the kernel or
			// ring, then try once more.
			switch {
			case h.flush(r) != nil:
				return h.err
			case b.QueueTo(p.Data, p.From) == nil:
				r.Reflected++
			case !h.hold(p):
				r.Dropped++
			}
		}
		if n > 0 {
			if err := h.flush(r); err != nil {
				return err
			}
		}
		if n == 0 && o.Wait {
			// Held answers may fit now that Rx wrote what was released;
			// when they do not, the stream still has released bytes,
			// and Wait wakes when the socket takes them.
			if progress, err := h.retry(r); err != nil {
				return err
			} else if progress {
				continue
			}
			werr := b.Wait(ctx)
			switch {
			case ctx.Err() != nil:
				return nil
			case werr == nil:
			case errors.Is(werr, dgramio.ErrNotSupported):
				o.Wait = false
				r.WaitFallback = werr.Error()
			default:
				return fmt.Errorf("wait: %w", werr)
			}
		}
	}
	return nil
}

// answers are what an echo on a stream kind keeps for peers whose
// connection has no room, in order per peer, while their delivery is held.
// Its buffers are reused: it allocates only when more answers wait than
// ever before.
type answers struct {
	b     dgramio.Backend
	c     dgramio.Conns // nil: a datagram kind, nothing is held
	peers map[netip.AddrPort]*heldPeer
	free  [][]byte
	err   error // flush's last error
}

type heldPeer struct{ recs [][]byte }

func newHeld(b dgramio.Backend) *answers {
	c, _ := b.(dgramio.Conns)
	return &answers{b: b, c: c, peers: make(map[netip.AddrPort]*heldPeer)}
}

func (h *answers) waiting() bool { return len(h.peers) > 0 }

// left is how many answers are held, of every peer.
func (h *answers) left() uint64 {
	var n uint64
	for _, hp := range h.peers {
		n += uint64(len(hp.recs))
	}
	return n
}

// hold keeps a copy of p's answer and pauses the peer. It returns false
// when the backend cannot pause or the peer has no connection.
func (h *answers) hold(p *dgramio.Packet) bool {
	if h.c == nil || h.c.Pause(p.From) != nil {
		return false
	}
	h.peers[p.From] = &heldPeer{}
	return h.add(p)
}

// add keeps a copy of p's answer behind those held for its peer; false
// when nothing is held for it.
func (h *answers) add(p *dgramio.Packet) bool {
	hp := h.peers[p.From]
	if hp == nil {
		return false
	}
	var buf []byte
	if k := len(h.free); k > 0 {
		buf, h.free = h.free[k-1][:0], h.free[:k-1]
	}
	hp.recs = append(hp.recs, append(buf, p.Data...))
	return true
}

// retry queues the held answers that fit now, in order, and resumes
// every peer whose answers all went; progress says whether it queued
// any. It flushes before (what is staged must be released to make room)
// and after (what it queued). A peer whose connection ended has its
// answers counted as dropped. The error is Flush's. Nothing held: it does
// nothing.
func (h *answers) retry(r *EchoResult) (progress bool, err error) {
	if len(h.peers) == 0 {
		return false, nil
	}
	if err := h.flush(r); err != nil {
		return false, err
	}
	for peer, hp := range h.peers {
		k := 0
		for ; k < len(hp.recs) && h.b.QueueTo(hp.recs[k], peer) == nil; k++ {
			r.Reflected++
			progress = true
		}
		h.free = append(h.free, hp.recs[:k]...)
		hp.recs = append(hp.recs[:0], hp.recs[k:]...)
		if len(hp.recs) > 0 {
			if h.c.Pause(peer) == nil {
				continue // still connected: wait for room
			}
			r.Dropped += uint64(len(hp.recs))
			h.free = append(h.free, hp.recs...)
		}
		_ = h.c.Resume(peer) // ErrNoConn: it ended meanwhile
		delete(h.peers, peer)
		progress = true
	}
	if progress {
		return true, h.flush(r)
	}
	return false, nil
}

// flush flushes the backend and counts it; its error (kept in h.err too)
// is Flush's, which ends the echo.
func (h *answers) flush(r *EchoResult) error {
	r.Flushes++
	if err := h.b.Flush(); err != nil {
		h.err = fmt.Errorf("flush: %w", err)
		return h.err
	}
	return nil
}
