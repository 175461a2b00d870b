package arp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/neigh"
	"github.com/dgramio/dgramio/internal/pad"
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
	// Default 1 s, as the kernel's retrans_time_ms (neigh.DefaultInterval).
	Interval time.Duration
	// CacheSize bounds the cache. When it is full, a new address replaces
	// the one learnt longest ago. Default 256.
	CacheSize int
}

// Handler speaks ARP for one address over a FrameIO. Its cache and
// resolutions are a neigh.Table without NUD, whose methods it has: Lookup,
// Query, Poll, Pending, Resolve (which answer from the cache, else
// broadcast requests, Config.Retries of them Config.Interval apart, and
// end with a *ResolveError when no reply, or request from the address for
// us, came through Handle) and Flush.
//
// Threading: Handle, Resolve, Query and Poll use both sides of the FrameIO (they
// receive, answer and request), so they belong to the goroutine that
// drives it (the poll loop). Lookup, Learn and AppendLayers may be called
// from any goroutine.
type Handler struct {
	*neigh.Table
	cfg Config
	tx  [pad.MinFrame]byte // the frame being sent

	requestsIn, requestsOut, repliesIn, repliesOut atomic.Uint64
	ignored, malformed                             atomic.Uint64
}

// link is the Handler as its Table's neigh.Link.
type link Handler

// New returns a Handler for cfg.Addr at cfg.MAC over fio. It sends
// nothing.
func New(fio frameio.FrameIO, cfg Config) (*Handler, error) {
	if len(cfg.MAC) != 6 {
		return nil, fmt.Errorf("arp: MAC %v is not an Ethernet address", cfg.MAC)
	}
	if !cfg.Addr.Is4() {
		return nil, fmt.Errorf("arp: address %v is not IPv4", cfg.Addr)
	}
	cfg.MAC = append(net.HardwareAddr(nil), cfg.MAC...)
	h := &Handler{cfg: cfg}
	h.Table = neigh.New(fio, neigh.Config{Proto: "arp", Iface: cfg.Iface, Retries: cfg.Retries,
		Interval: cfg.Interval, CacheSize: cfg.CacheSize}, (*link)(h))
	return h, nil
}

// Learn puts addr at mac into the cache, as if it had been heard: a
// cached address gets mac, and a new one is added when it is an IPv4
// unicast address.
func (h *Handler) Learn(addr netip.Addr, mac [6]byte) {
	h.Merge(addr, mac, addr.Is4() && !addr.IsUnspecified())
}

// Handle takes one received frame. It returns false, doing nothing, when
// the frame is not ARP. For ARP it learns the sender (when known already,
// or when the frame is meant for us: RFC 826's merge), answers a request
// for our address with a reply given to the FrameIO's TxFrame, and counts
// what it saw: requests for other addresses are ignored and counted. frame
// is only read during the call. A reply leaves at the next Kick: call
// Flush after the frames of a poll round (Raw does).
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
		h.Merge(m.SenderIP, m.SenderMAC, forUs && m.SenderIP.Is4() && !m.SenderIP.IsUnspecified())
	}
	switch {
	case m.Op == OpRequest && forUs:
		h.requestsIn.Add(1)
		h.Send(AppendReply(h.tx[:0], h.cfg.MAC, h.cfg.Addr, net.HardwareAddr(m.SenderMAC[:]), m.SenderIP), &h.repliesOut)
	case m.Op == OpReply && forUs:
		h.repliesIn.Add(1)
	default:
		h.ignored.Add(1)
	}
	return true
}

// Handle implements neigh.Link.
func (l *link) Handle(frame []byte) bool { return (*Handler)(l).Handle(frame) }

// Solicit implements neigh.Link: a broadcast request for addr.
func (l *link) Solicit(addr netip.Addr) {
	l.Send(AppendRequest(l.tx[:0], l.cfg.MAC, l.cfg.Addr, addr), &l.requestsOut)
}

// Probe implements neigh.Link; a Table without NUD does not probe.
func (l *link) Probe(netip.Addr, [6]byte) {}

// NoReply implements neigh.Link.
func (l *link) NoReply(addr netip.Addr, requests int, waited time.Duration) error {
	return &ResolveError{Addr: addr, Iface: l.cfg.Iface, Requests: requests, Waited: waited}
}

// Counter names, as AppendLayers reports them under layer "arp".
const (
	CounterRequestsIn  = "requests_in"        // requests for our address, answered
	CounterRequestsOut = "requests_out"       // our requests sent
	CounterRepliesIn   = "replies_in"         // replies to us
	CounterRepliesOut  = "replies_out"        // our replies sent
	CounterIgnored     = "ignored"            // requests for other addresses, replies to others
	CounterMalformed   = "malformed"          // ARP frames that did not parse
	CounterTxFull      = neigh.CounterTxFull  // requests or replies the TX ring refused
	CounterLearned     = neigh.CounterLearned // cache entries added
	CounterTimeouts    = neigh.CounterTimeouts
	CounterDropped     = neigh.CounterDropped
)

// AppendLayers appends the handler's counters, layer "arp", to dst.
// dropped_while_resolving counts frames (datagrams, perhaps) that arrived
// while Resolve had the receive side and no one to give them to: Loss is
// true on it alone.
func (h *Handler) AppendLayers(dst []dgramio.Counter) []dgramio.Counter {
	c := func(name string, v *atomic.Uint64) dgramio.Counter {
		return dgramio.Counter{Layer: "arp", Name: name, Value: v.Load()}
	}
	t := func(name string) dgramio.Counter { return h.Counter("arp", name) }
	return append(dst,
		c(CounterRequestsIn, &h.requestsIn), c(CounterRequestsOut, &h.requestsOut),
		c(CounterRepliesIn, &h.repliesIn), c(CounterRepliesOut, &h.repliesOut),
		c(CounterIgnored, &h.ignored), c(CounterMalformed, &h.malformed),
		t(CounterTxFull), t(CounterLearned), t(CounterTimeouts), t(CounterDropped),
	)
}

// ErrNoReply is matched (errors.Is) by the *ResolveError of a Resolve that
// got no answer.
var ErrNoReply = errors.New("no ARP reply")

// ResolveError says that nobody answered our requests for Addr (on
// Iface, Requests of them, in Waited).
type ResolveError = neigh.ResolveError[words]

// words are ARP's for a ResolveError.
type words struct{}

func (words) Words() (error, string) {
	return ErrNoReply, "arp: no reply from %s on %s after %d requests in %v; check that the peer is up, on the same link and in the same subnet, or set Config.DstMAC"
}
