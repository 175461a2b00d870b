package arp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/pad"
)

// Defaults of Config.
const (
	DefaultRetries   = 3
	DefaultInterval  = time.Second // as the kernel's retrans_time_ms
	DefaultCacheSize = 256
)

// Config configures a Handler.
type Config struct {
	// MAC and Addr are ours: the address we answer for and send from.
	MAC  net.HardwareAddr
	Addr netip.Addr
	// Iface names the interface in errors ("veth0", "0000:03:00.0").
	Iface string
	// Retries is how many requests Resolve sends before giving up.
	// Default 3.
	Retries int
	// Interval is how long Resolve waits for a reply after each request.
	// Default 1 s.
	Interval time.Duration
	// CacheSize bounds the cache. When it is full, a new address replaces
	// the one learnt longest ago. Default 256.
	CacheSize int
}

// ErrNoReply is matched (errors.Is) by the *ResolveError of a Resolve that
// got no answer.
var ErrNoReply = errors.New("no ARP reply")

// ResolveError says that nobody answered our requests for Addr.
type ResolveError struct {
	// Addr is the address asked for; Iface the interface asked on.
	Addr  netip.Addr
	Iface string
	// Requests is how many requests were sent; Waited how long Resolve
	// waited in all.
	Requests int
	Waited   time.Duration
}

// Error implements error.
func (e *ResolveError) Error() string {
	return fmt.Sprintf("arp: no reply from %s on %s after %d requests in %v; check that the peer is up, on the same link and in the same subnet, or set Config.DstMAC",
		e.Addr, e.Iface, e.Requests, e.Waited.Round(time.Millisecond))
}

// Unwrap returns ErrNoReply.
func (e *ResolveError) Unwrap() error { return ErrNoReply }

type entry struct {
	addr    netip.Addr
	mac     [6]byte
	learned uint64 // order of learning, for replacing the oldest
}

// Handler speaks ARP for one address over a FrameIO.
//
// Threading: Handle, Resolve, Query and Poll use both sides of the FrameIO (they
// receive, answer and request), so they belong to the goroutine that
// drives it (the poll loop). Lookup, Learn and AppendLayers may be called
// from any goroutine.
type Handler struct {
	fio   frameio.FrameIO
	cfg   Config
	tx    [pad.MinFrame]byte // the frame being sent
	kick  bool               // frames given to TxFrame since the last Kick
	mu    sync.Mutex
	cache map[netip.Addr]*entry
	seq   uint64
	// queries are the resolutions in progress (Query, Resolve); the poll
	// loop's alone.
	queries map[netip.Addr]*query

	requestsIn, requestsOut, repliesIn, repliesOut atomic.Uint64
	ignored, malformed, txFull, learned, timeouts  atomic.Uint64
	droppedResolving                               atomic.Uint64
}

// New returns a Handler for cfg.Addr at cfg.MAC over fio. It sends
// nothing.
func New(fio frameio.FrameIO, cfg Config) (*Handler, error) {
	if len(cfg.MAC) != 6 {
		return nil, fmt.Errorf("arp: MAC %v is not an Ethernet address", cfg.MAC)
	}
	if !cfg.Addr.Is4() {
		return nil, fmt.Errorf("arp: address %v is not IPv4", cfg.Addr)
	}
	if cfg.Retries <= 0 {
		cfg.Retries = DefaultRetries
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	cfg.MAC = append(net.HardwareAddr(nil), cfg.MAC...)
	return &Handler{fio: fio, cfg: cfg, cache: make(map[netip.Addr]*entry, cfg.CacheSize),
		queries: make(map[netip.Addr]*query)}, nil
}

// Lookup returns the cached MAC of addr.
func (h *Handler) Lookup(addr netip.Addr) ([6]byte, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.cache[addr]; ok {
		return e.mac, true
	}
	return [6]byte{}, false
}

// Learn puts addr at mac into the cache, as if it had been heard.
func (h *Handler) Learn(addr netip.Addr, mac [6]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.learnLocked(addr, mac, true)
}

// learnLocked updates addr's entry, and adds one when add is set (RFC 826:
// a sender we already know is always refreshed; a new one is added only
// when the packet was meant for us).
func (h *Handler) learnLocked(addr netip.Addr, mac [6]byte, add bool) {
	if e, ok := h.cache[addr]; ok {
		e.mac = mac
		return
	}
	if !add || !addr.Is4() || addr.IsUnspecified() {
		return
	}
	if len(h.cache) >= h.cfg.CacheSize {
		var old *entry
		for _, e := range h.cache {
			if old == nil || e.learned < old.learned {
				old = e
			}
		}
		delete(h.cache, old.addr)
	}
	h.seq++
	h.cache[addr] = &entry{addr: addr, mac: mac, learned: h.seq}
	h.learned.Add(1)
}

// Handle takes one received frame. It returns false, doing nothing, when
// the frame is not ARP. For ARP it learns the sender (when known already,
// or when the frame is meant for us), answers a request for our address
// with a reply given to the FrameIO's TxFrame, and counts what it saw:
// requests for other addresses are ignored and counted. frame is only read
// during the call. A reply leaves at the next Kick: call Flush after the
// frames of a poll round (Raw does).
func (h *Handler) Handle(frame []byte) bool {
	if !IsARP(frame) {
		return false
	}
	m, err := ParseARP(frame)
	if err != nil {
		h.malformed.Add(1)
		return true
	}
	forUs := m.TargetIP == h.cfg.Addr
	if m.SenderIP != h.cfg.Addr { // never learn our own address from others
		h.mu.Lock()
		h.learnLocked(m.SenderIP, m.SenderMAC, forUs)
		h.mu.Unlock()
	}
	switch {
	case m.Op == OpRequest && forUs:
		h.requestsIn.Add(1)
		reply := AppendReply(h.tx[:0], h.cfg.MAC, h.cfg.Addr, net.HardwareAddr(m.SenderMAC[:]), m.SenderIP)
		if h.fio.TxFrame(reply) {
			h.repliesOut.Add(1)
			h.kick = true
		} else {
			h.txFull.Add(1)
		}
	case m.Op == OpReply && forUs:
		h.repliesIn.Add(1)
	default:
		h.ignored.Add(1)
	}
	return true
}

// Flush kicks the FrameIO when Handle or Resolve gave it frames since the
// last Flush, and reports the Kick's error.
func (h *Handler) Flush() error {
	if !h.kick {
		return nil
	}
	h.kick = false
	return h.fio.Kick()
}

// Resolve returns addr's MAC: from the cache, or by broadcasting requests,
// Config.Retries of them Config.Interval apart, until a reply (or a request
// from addr for us) arrives. It blocks, driving the FrameIO's receive side
// while it waits: ARP frames go to Handle, others to other when it is not
// nil, and are dropped and counted (dropped_while_resolving, a loss)
// otherwise. A poll loop that must not stop uses Query and Poll instead.
// Giving up returns a *ResolveError naming the address and the interface;
// a done ctx returns ctx.Err() wrapped.
func (h *Handler) Resolve(ctx context.Context, addr netip.Addr, other func(frame []byte)) ([6]byte, error) {
	if mac, ok := h.Lookup(addr); ok {
		return mac, nil
	}
	if !addr.Is4() {
		return [6]byte{}, fmt.Errorf("arp: resolve %v: not an IPv4 address", addr)
	}
	deliver := func(frame []byte) {
		if h.Handle(frame) {
			return
		}
		if other != nil {
			other(frame)
		} else {
			h.droppedResolving.Add(1)
		}
	}
	waiter, _ := h.fio.(frameio.Waiter)
	h.Query(addr, time.Now())
	defer delete(h.queries, addr) // gone already unless ctx ended it
	for {
		if err := h.Flush(); err != nil {
			return [6]byte{}, fmt.Errorf("arp: resolve %s on %s: %w", addr, h.cfg.Iface, err)
		}
		for h.fio.RxFrames(64, deliver) > 0 {
		}
		// Replies to requests that arrived meanwhile leave at the next Flush.
		now := time.Now()
		if mac, fin, err := h.step(addr, h.queries[addr], now); fin {
			return mac, err
		}
		if err := ctx.Err(); err != nil {
			return [6]byte{}, fmt.Errorf("arp: resolve %s on %s: %w", addr, h.cfg.Iface, err)
		}
		step := min(h.queries[addr].next.Sub(now), 10*time.Millisecond)
		if step <= 0 {
			continue
		}
		if waiter != nil {
			wctx, cancel := context.WithTimeout(ctx, step)
			err := waiter.Wait(wctx)
			cancel()
			if errors.Is(err, net.ErrClosed) {
				return [6]byte{}, fmt.Errorf("arp: resolve %s on %s: %w", addr, h.cfg.Iface, err)
			}
		} else {
			time.Sleep(min(step, time.Millisecond))
		}
	}
}

// query is an address being resolved: requests sent so far, when the next
// one is due (after the last: when to give up), when the first left.
type query struct {
	sent        int
	next, start time.Time
}

// Query returns addr's MAC and true when it is cached. Otherwise it starts
// resolving addr without blocking, unless that is in progress already: it
// gives the first request to the FrameIO (it leaves at the next Flush) and
// returns false; Poll sends the next ones and reports the end. now is the
// current time. Like Handle, Query and Poll belong to the poll loop; the
// number of queries in progress is the caller's to bound (Pending).
func (h *Handler) Query(addr netip.Addr, now time.Time) ([6]byte, bool) {
	if mac, ok := h.Lookup(addr); ok {
		return mac, true
	}
	if _, ok := h.queries[addr]; ok || !addr.Is4() {
		return [6]byte{}, false
	}
	q := &query{start: now}
	h.queries[addr] = q
	h.request(addr, q, now)
	return [6]byte{}, false
}

// Poll sends the requests that are due and calls done for each query that
// ended since the last call: with the MAC once addr is in the cache (its
// reply, or a request from it, went through Handle), or with a
// *ResolveError after Config.Retries requests went unanswered for
// Config.Interval each (counted in timeouts). It returns how many queries
// are still in progress. It never blocks; requests leave at the next Flush.
func (h *Handler) Poll(now time.Time, done func(addr netip.Addr, mac [6]byte, err error)) int {
	for addr, q := range h.queries {
		if mac, fin, err := h.step(addr, q, now); fin {
			delete(h.queries, addr)
			done(addr, mac, err)
		}
	}
	return len(h.queries)
}

// Pending returns how many queries are in progress.
func (h *Handler) Pending() int { return len(h.queries) }

// step advances one query: it reports fin with the MAC when addr is
// cached, fin with a *ResolveError when the last request went unanswered,
// and sends the next request when it is due.
func (h *Handler) step(addr netip.Addr, q *query, now time.Time) (mac [6]byte, fin bool, err error) {
	if mac, ok := h.Lookup(addr); ok {
		return mac, true, nil
	}
	if now.Before(q.next) {
		return mac, false, nil
	}
	if q.sent >= h.cfg.Retries {
		h.timeouts.Add(1)
		return mac, true, &ResolveError{Addr: addr, Iface: h.cfg.Iface, Requests: q.sent, Waited: now.Sub(q.start)}
	}
	h.request(addr, q, now)
	return mac, false, nil
}

// request gives the next request for addr to the FrameIO.
func (h *Handler) request(addr netip.Addr, q *query, now time.Time) {
	req := AppendRequest(h.tx[:0], h.cfg.MAC, h.cfg.Addr, addr)
	if h.fio.TxFrame(req) {
		h.requestsOut.Add(1)
		h.kick = true
	} else {
		h.txFull.Add(1)
	}
	q.sent++
	q.next = now.Add(h.cfg.Interval)
}

// Counter names, as AppendLayers reports them under layer "arp".
const (
	CounterRequestsIn  = "requests_in"  // requests for our address, answered
	CounterRequestsOut = "requests_out" // our requests sent
	CounterRepliesIn   = "replies_in"   // replies to us
	CounterRepliesOut  = "replies_out"  // our replies sent
	CounterIgnored     = "ignored"      // requests for other addresses, replies to others
	CounterMalformed   = "malformed"    // ARP frames that did not parse
	CounterTxFull      = "tx_full"      // requests or replies the TX ring refused
	CounterLearned     = "learned"      // cache entries added
	CounterTimeouts    = "timeouts"     // resolutions (Resolve, Query) that got no reply
	CounterDropped     = "dropped_while_resolving"
)

// AppendLayers appends the handler's counters, layer "arp", to dst.
// dropped_while_resolving counts frames (datagrams, perhaps) that arrived
// while Resolve had the receive side and no one to give them to: Loss is
// true on it alone.
func (h *Handler) AppendLayers(dst []dgramio.Counter) []dgramio.Counter {
	c := func(name string, v *atomic.Uint64) dgramio.Counter {
		return dgramio.Counter{Layer: "arp", Name: name, Value: v.Load()}
	}
	dst = append(dst,
		c(CounterRequestsIn, &h.requestsIn), c(CounterRequestsOut, &h.requestsOut),
		c(CounterRepliesIn, &h.repliesIn), c(CounterRepliesOut, &h.repliesOut),
		c(CounterIgnored, &h.ignored), c(CounterMalformed, &h.malformed),
		c(CounterTxFull, &h.txFull), c(CounterLearned, &h.learned), c(CounterTimeouts, &h.timeouts),
		dgramio.Counter{Layer: "arp", Name: CounterDropped, Value: h.droppedResolving.Load(), Loss: true},
	)
	return dst
}
