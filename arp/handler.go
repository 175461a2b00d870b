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

	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/pad"
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
// Threading: Handle and Resolve use both sides of the FrameIO (they
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
	return &Handler{fio: fio, cfg: cfg, cache: make(map[netip.Addr]*entry, cfg.CacheSize)}, nil
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
// from addr for us) arrives. It drives the FrameIO's receive side while it
// waits: ARP frames go to Handle, others to other when it is not nil, and
// are dropped and counted (dropped_while_resolving, a loss) otherwise.
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
	start := time.Now()
	for n := 1; n <= h.cfg.Retries; n++ {
		req := AppendRequest(h.tx[:0], h.cfg.MAC, h.cfg.Addr, addr)
		if h.fio.TxFrame(req) {
			h.requestsOut.Add(1)
			h.kick = true
		} else {
			h.txFull.Add(1)
		}
		if err := h.Flush(); err != nil {
			return [6]byte{}, fmt.Errorf("arp: resolve %s on %s: %w", addr, h.cfg.Iface, err)
		}
		deadline := time.Now().Add(h.cfg.Interval)
		for {
			for h.fio.RxFrames(64, deliver) > 0 {
			}
			// Replies to requests that arrived meanwhile leave now.
			_ = h.Flush()
			if mac, ok := h.Lookup(addr); ok {
				return mac, nil
			}
			if err := ctx.Err(); err != nil {
				return [6]byte{}, fmt.Errorf("arp: resolve %s on %s: %w", addr, h.cfg.Iface, err)
			}
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			step := min(left, 10*time.Millisecond)
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
	h.timeouts.Add(1)
	return [6]byte{}, &ResolveError{Addr: addr, Iface: h.cfg.Iface, Requests: h.cfg.Retries, Waited: time.Since(start)}
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
	CounterTimeouts    = "timeouts"     // Resolve calls that got no reply
	CounterDropped     = "dropped_while_resolving"
)

// AppendLayers appends the handler's counters, layer "arp", to dst.
// dropped_while_resolving counts frames (datagrams, perhaps) that arrived
// while Resolve had the receive side and no one to give them to: Loss is
// true on it alone.
func (h *Handler) AppendLayers(dst []core.Counter) []core.Counter {
	c := func(name string, v *atomic.Uint64) core.Counter {
		return core.Counter{Layer: "arp", Name: name, Value: v.Load()}
	}
	dst = append(dst,
		c(CounterRequestsIn, &h.requestsIn), c(CounterRequestsOut, &h.requestsOut),
		c(CounterRepliesIn, &h.repliesIn), c(CounterRepliesOut, &h.repliesOut),
		c(CounterIgnored, &h.ignored), c(CounterMalformed, &h.malformed),
		c(CounterTxFull, &h.txFull), c(CounterLearned, &h.learned), c(CounterTimeouts, &h.timeouts),
		core.Counter{Layer: "arp", Name: CounterDropped, Value: h.droppedResolving.Load(), Loss: true},
	)
	return dst
}
