package ndp

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
)

// Defaults of Config: RFC 4861 §10's MAX_MULTICAST_SOLICIT (3),
// RETRANS_TIMER (1 s), REACHABLE_TIME (30 s), DELAY_FIRST_PROBE_TIME (5 s)
// and MAX_UNICAST_SOLICIT (3).
const (
	DefaultRetries         = 3
	DefaultInterval        = time.Second
	DefaultReachable       = 30 * time.Second
	DefaultDelayFirstProbe = 5 * time.Second
	DefaultProbes          = 3
	DefaultCacheSize       = 256
)

// Config configures a Handler.
type Config struct {
	// MAC and Addr are ours: the address we answer for and send from, an
	// IPv6 unicast address without zone. We also answer for our
	// link-local address, LinkLocal(MAC).
	MAC  net.HardwareAddr
	Addr netip.Addr
	// Iface names the interface in errors ("veth0", "0000:03:00.0").
	Iface string
	// Retries is how many multicast solicitations a resolution sends
	// before giving up (MAX_MULTICAST_SOLICIT). Default 3.
	Retries int
	// Interval is how long a resolution or a probe waits for an
	// advertisement after each solicitation (RETRANS_TIMER). Default 1 s.
	Interval time.Duration
	// Reachable is how long a neighbour stays REACHABLE after it confirmed
	// its address (REACHABLE_TIME). Default 30 s.
	Reachable time.Duration
	// DelayFirstProbe is how long a STALE neighbour that was used stays in
	// DELAY before it is probed (DELAY_FIRST_PROBE_TIME). Default 5 s.
	DelayFirstProbe time.Duration
	// Probes is how many unicast probes a neighbour in PROBE gets before it
	// is removed (MAX_UNICAST_SOLICIT). Default 3.
	Probes int
	// CacheSize bounds the neighbour cache. When it is full, a new entry
	// replaces the one used longest ago. Default 256.
	CacheSize int
	// Kernel, when set, looks addr up in the kernel's neighbour table of
	// the interface (a vdev on a kernel interface has one): a resolution
	// starts there, and sends no solicitation when the kernel knows addr.
	// It must not wait for the network.
	Kernel func(addr netip.Addr) ([6]byte, bool)
}

// State is a neighbour cache entry's state (RFC 4861 §7.3.2). An address
// being resolved is INCOMPLETE; it has no MAC yet.
type State uint8

// The states.
const (
	Incomplete State = iota
	Reachable
	Stale
	Delay
	Probe
)

var stateNames = [...]string{"INCOMPLETE", "REACHABLE", "STALE", "DELAY", "PROBE"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "UNKNOWN"
}

// ErrNoReply is matched (errors.Is) by the *ResolveError of a resolution
// that got no advertisement.
var ErrNoReply = errors.New("no neighbor advertisement")

// ResolveError says that nobody answered our solicitations for Addr.
type ResolveError struct {
	// Addr is the address asked for; Iface the interface asked on.
	Addr  netip.Addr
	Iface string
	// Requests is how many solicitations were sent; Waited how long the
	// resolution took in all.
	Requests int
	Waited   time.Duration
}

// Error implements error.
func (e *ResolveError) Error() string {
	return fmt.Sprintf("ndp: no neighbor advertisement from %s on %s after %d solicitations in %v; check that the peer is up and on the same link, or set Config.DstMAC",
		e.Addr, e.Iface, e.Requests, e.Waited.Round(time.Millisecond))
}

// Unwrap returns ErrNoReply.
func (e *ResolveError) Unwrap() error { return ErrNoReply }

// entry is a neighbour with a MAC: REACHABLE, STALE, DELAY or PROBE.
type entry struct {
	mac    [6]byte
	state  State
	timer  time.Time // REACHABLE: until; DELAY: probe at; PROBE: next probe at
	probes int       // unicast probes sent in PROBE
	used   uint64    // order of last use, for replacing the oldest
}

// query is an INCOMPLETE address: solicitations sent, the next one due
// (after the last: when to give up), when the first left.
type query struct {
	sent        int
	next, start time.Time
}

// Handler speaks NDP for one address (and our link-local one) over a
// FrameIO.
//
// Threading: Handle, Resolve, Query and Poll use both sides of the
// FrameIO (they receive, answer and solicit), so they belong to the
// goroutine that drives it (the poll loop). Lookup, Learn, State and
// AppendLayers may be called from any goroutine.
type Handler struct {
	fio  frameio.FrameIO
	cfg  Config
	mac  [6]byte
	ll   netip.Addr // our link-local address
	tx   [FrameLen]byte
	kick bool

	mu      sync.Mutex
	cache   map[netip.Addr]*entry
	seq     uint64
	queries map[netip.Addr]*query // the poll loop's alone

	solicitsIn, solicitsOut, advertsIn, advertsOut atomic.Uint64
	probesOut, ignored, txFull, learned, timeouts  atomic.Uint64
	probeFailed, dupAddr, kernelHits, evicted      atomic.Uint64
	droppedResolving                               atomic.Uint64
	malformed                                      [numReasons]atomic.Uint64
}

// New returns a Handler for cfg.Addr at cfg.MAC over fio. It sends
// nothing.
func New(fio frameio.FrameIO, cfg Config) (*Handler, error) {
	if len(cfg.MAC) != 6 {
		return nil, fmt.Errorf("ndp: MAC %v is not an Ethernet address", cfg.MAC)
	}
	a := cfg.Addr
	if !a.Is6() || a.Is4In6() || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() {
		return nil, fmt.Errorf("ndp: address %v is not an IPv6 unicast address without zone", a)
	}
	if cfg.Retries <= 0 {
		cfg.Retries = DefaultRetries
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Reachable <= 0 {
		cfg.Reachable = DefaultReachable
	}
	if cfg.DelayFirstProbe <= 0 {
		cfg.DelayFirstProbe = DefaultDelayFirstProbe
	}
	if cfg.Probes <= 0 {
		cfg.Probes = DefaultProbes
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	h := &Handler{fio: fio, cfg: cfg, mac: [6]byte(cfg.MAC),
		cache: make(map[netip.Addr]*entry, cfg.CacheSize), queries: make(map[netip.Addr]*query)}
	h.cfg.MAC = net.HardwareAddr(h.mac[:])
	h.ll = LinkLocal(h.mac)
	return h, nil
}

// LinkLocal returns our link-local address, which the Handler answers
// solicitations for besides Config.Addr.
func (h *Handler) LinkLocal() netip.Addr { return h.ll }

// ours says whether a is one of our addresses.
func (h *Handler) ours(a netip.Addr) bool { return a == h.cfg.Addr || a == h.ll }

// Lookup returns the cached MAC of addr, in any state but INCOMPLETE.
func (h *Handler) Lookup(addr netip.Addr) ([6]byte, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.cache[addr]; ok {
		return e.mac, true
	}
	return [6]byte{}, false
}

// State returns addr's state: INCOMPLETE while it is being resolved, and
// false when the cache has no entry and no resolution runs.
func (h *Handler) State(addr netip.Addr) (State, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.cache[addr]; ok {
		return e.state, true
	}
	if _, ok := h.queries[addr]; ok {
		return Incomplete, true
	}
	return 0, false
}

// Learn puts addr at mac into the cache as STALE, as an unsolicited
// report of it would (§7.3.3): it is used, and verified when used.
func (h *Handler) Learn(addr netip.Addr, mac [6]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.setLocked(addr, mac, Stale, time.Time{})
}

// setLocked creates or updates addr's entry with mac in state st,
// replacing the entry used longest ago when the cache is full.
func (h *Handler) setLocked(addr netip.Addr, mac [6]byte, st State, timer time.Time) *entry {
	h.seq++
	e, ok := h.cache[addr]
	if !ok {
		if len(h.cache) >= h.cfg.CacheSize {
			var old netip.Addr
			var oldE *entry
			for a, x := range h.cache {
				if oldE == nil || x.used < oldE.used {
					old, oldE = a, x
				}
			}
			delete(h.cache, old)
			h.evicted.Add(1)
		}
		e = &entry{}
		h.cache[addr] = e
		h.learned.Add(1)
	}
	*e = entry{mac: mac, state: st, timer: timer, used: h.seq}
	return e
}

// Handle takes one received frame. It returns false, doing nothing, when
// the frame is not a solicitation or an advertisement (ParseFrame's
// NotNDP). Otherwise it counts the frame (malformed ones by reason), and:
//
//   - a solicitation for one of our addresses (RFC 4861 §7.2.3): the
//     solicitor is learnt from its source link-layer address option
//     (STALE when new or changed), and answered with an advertisement,
//     Solicited and Override set, to its address and MAC (§7.2.4), or to
//     all-nodes with Solicited clear when it came from the unspecified
//     address (duplicate address detection);
//   - an advertisement (§7.2.5): for an address being resolved, its MAC,
//     REACHABLE when Solicited, else STALE; for a cached one, the rules of
//     §7.2.5 on the Override and Solicited flags; for one we know nothing
//     of, nothing; for our own address, counted as dup_addr.
//
// Every NDP frame is counted once: solicits_in, adverts_in, ignored,
// dup_addr or malformed_*. Frames to another unicast MAC are ignored. An answer leaves at the next
// Kick: call Flush after the frames of a poll round (Raw does).
func (h *Handler) Handle(frame []byte) bool {
	m, why := ParseFrame(frame)
	if why == NotNDP {
		return false
	}
	if why != OK {
		h.malformed[why].Add(1)
		return true
	}
	if m.EthDst != h.mac && m.EthDst[0]&1 == 0 {
		h.ignored.Add(1)
		return true
	}
	now := time.Now()
	if m.Type == TypeNS {
		h.solicitation(&m)
		return true
	}
	h.advertisement(&m, now)
	return true
}

func (h *Handler) solicitation(m *Message) {
	if !h.ours(m.Target) {
		h.ignored.Add(1)
		return
	}
	h.solicitsIn.Add(1)
	to, ethTo, flags := m.Src, m.EthSrc, uint8(FlagSolicited|FlagOverride)
	if m.Src.IsUnspecified() {
		to, ethTo, flags = AllNodes, MulticastMAC(AllNodes), FlagOverride
	} else if m.HasLL {
		ethTo = m.LL
		h.mu.Lock()
		if e, ok := h.cache[m.Src]; !ok || e.mac != m.LL {
			h.setLocked(m.Src, m.LL, Stale, time.Time{})
		}
		h.mu.Unlock()
	}
	h.send(AppendNA(h.tx[:0], h.mac, m.Target, to, ethTo, flags), &h.advertsOut)
}

func (h *Handler) advertisement(m *Message, now time.Time) {
	if h.ours(m.Target) {
		h.dupAddr.Add(1) // someone else claims our address
		return
	}
	solicited, override := m.Flags&FlagSolicited != 0, m.Flags&FlagOverride != 0
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.cache[m.Target]
	if !ok {
		if _, asked := h.queries[m.Target]; !asked || !m.HasLL {
			h.ignored.Add(1) // §7.2.5: no entry, nothing to create
			return
		}
		h.advertsIn.Add(1)
		if solicited {
			h.setLocked(m.Target, m.LL, Reachable, now.Add(h.cfg.Reachable))
		} else {
			h.setLocked(m.Target, m.LL, Stale, time.Time{})
		}
		return
	}
	h.advertsIn.Add(1)
	changed := m.HasLL && m.LL != e.mac
	if !override && changed {
		if e.state == Reachable {
			e.state = Stale
		}
		return
	}
	if changed {
		e.mac = m.LL
	}
	switch {
	case solicited:
		e.state, e.timer, e.probes = Reachable, now.Add(h.cfg.Reachable), 0
	case changed:
		e.state = Stale
	}
}

// send gives frame to the FrameIO, counting it in c or as tx_full.
func (h *Handler) send(frame []byte, c *atomic.Uint64) {
	if h.fio.TxFrame(frame) {
		c.Add(1)
		h.kick = true
	} else {
		h.txFull.Add(1)
	}
}

// Flush kicks the FrameIO when Handle, Query or Poll gave it frames since
// the last Flush, and reports the Kick's error.
func (h *Handler) Flush() error {
	if !h.kick {
		return nil
	}
	h.kick = false
	return h.fio.Kick()
}

// Query returns addr's MAC and true when the cache has it: a REACHABLE
// entry past its time becomes STALE, and a STALE one used goes to DELAY,
// to be probed if nothing confirms it (§7.3.3). Otherwise it starts
// resolving addr without blocking (INCOMPLETE), unless that is in
// progress already: from the kernel's table when Config.Kernel knows it
// (then it returns the MAC at once, STALE), else with a multicast
// solicitation given to the FrameIO (it leaves at the next Flush), and
// returns false; Poll sends the next ones and reports the end. now is the
// current time. Like Handle, Query and Poll belong to the poll loop; the
// number of queries in progress is the caller's to bound (Pending).
func (h *Handler) Query(addr netip.Addr, now time.Time) ([6]byte, bool) {
	if mac, ok := h.use(addr, now); ok {
		return mac, true
	}
	if _, ok := h.queries[addr]; ok || !addr.Is6() || addr.Is4In6() {
		return [6]byte{}, false
	}
	if h.cfg.Kernel != nil {
		if mac, ok := h.cfg.Kernel(addr); ok {
			h.kernelHits.Add(1)
			h.mu.Lock()
			h.setLocked(addr, mac, Stale, time.Time{})
			h.mu.Unlock()
			return mac, true
		}
	}
	q := &query{start: now}
	h.queries[addr] = q
	h.solicit(addr, q, now)
	return [6]byte{}, false
}

// use returns addr's MAC when cached, advancing its state for a use.
func (h *Handler) use(addr netip.Addr, now time.Time) ([6]byte, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.cache[addr]
	if !ok {
		return [6]byte{}, false
	}
	h.seq++
	e.used = h.seq
	if e.state == Reachable && !now.Before(e.timer) {
		e.state = Stale // §7.3.3: ReachableTime passed without confirmation
	}
	if e.state == Stale {
		e.state, e.timer = Delay, now.Add(h.cfg.DelayFirstProbe)
	}
	return e.mac, true
}

// Poll sends the solicitations that are due and calls done for each query
// that ended since the last call: with the MAC once addr is in the cache
// (an advertisement, or a solicitation from it, went through Handle), or
// with a *ResolveError after Config.Retries solicitations went unanswered
// for Config.Interval each (counted in timeouts). It also runs the cache's
// timers: DELAY past its time goes to PROBE with a unicast solicitation,
// PROBE retransmits each Interval and, after Config.Probes unanswered, the
// entry is removed (probe_failed). It returns how many queries are still
// in progress. It never blocks; solicitations leave at the next Flush.
func (h *Handler) Poll(now time.Time, done func(addr netip.Addr, mac [6]byte, err error)) int {
	for addr, q := range h.queries {
		if mac, fin, err := h.step(addr, q, now); fin {
			delete(h.queries, addr)
			done(addr, mac, err)
		}
	}
	h.timers(now)
	return len(h.queries)
}

// timers advances DELAY and PROBE entries whose time came (§7.3.3).
func (h *Handler) timers(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for addr, e := range h.cache {
		if (e.state != Delay && e.state != Probe) || now.Before(e.timer) {
			continue
		}
		if e.state == Probe && e.probes >= h.cfg.Probes {
			delete(h.cache, addr)
			h.probeFailed.Add(1)
			continue
		}
		e.state, e.timer = Probe, now.Add(h.cfg.Interval)
		e.probes++
		mac := e.mac
		h.send(AppendNS(h.tx[:0], h.mac, h.cfg.Addr, addr, &mac), &h.probesOut)
	}
}

// Pending returns how many queries are in progress.
func (h *Handler) Pending() int { return len(h.queries) }

// step advances one query: fin with the MAC when addr is cached, fin with
// a *ResolveError when the last solicitation went unanswered, and the
// next solicitation when it is due.
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
	h.solicit(addr, q, now)
	return mac, false, nil
}

// solicit gives the next multicast solicitation for addr to the FrameIO.
// Its source is our link-local address for a link-local target, else
// Config.Addr (§7.2.2).
func (h *Handler) solicit(addr netip.Addr, q *query, now time.Time) {
	src := h.cfg.Addr
	if addr.IsLinkLocalUnicast() {
		src = h.ll
	}
	h.send(AppendNS(h.tx[:0], h.mac, src, addr, nil), &h.solicitsOut)
	q.sent++
	q.next = now.Add(h.cfg.Interval)
}

// Resolve returns addr's MAC: from the cache, or by soliciting it,
// Config.Retries solicitations Config.Interval apart, until an
// advertisement (or a solicitation from addr for us) arrives. It blocks,
// driving the FrameIO's receive side while it waits: NDP frames go to
// Handle, others to other when it is not nil, and are dropped and counted
// (dropped_while_resolving, a loss) otherwise. A poll loop that must not
// stop uses Query and Poll instead. Giving up returns a *ResolveError
// naming the address and the interface; a done ctx returns ctx.Err()
// wrapped.
func (h *Handler) Resolve(ctx context.Context, addr netip.Addr, other func(frame []byte)) ([6]byte, error) {
	if mac, ok := h.Query(addr, time.Now()); ok {
		return mac, nil
	}
	if _, ok := h.queries[addr]; !ok {
		return [6]byte{}, fmt.Errorf("ndp: resolve %v: not an IPv6 address", addr)
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
	defer delete(h.queries, addr) // gone already unless ctx ended it
	for {
		if err := h.Flush(); err != nil {
			return [6]byte{}, fmt.Errorf("ndp: resolve %s on %s: %w", addr, h.cfg.Iface, err)
		}
		for h.fio.RxFrames(64, deliver) > 0 {
		}
		now := time.Now()
		if mac, fin, err := h.step(addr, h.queries[addr], now); fin {
			return mac, err
		}
		if err := ctx.Err(); err != nil {
			return [6]byte{}, fmt.Errorf("ndp: resolve %s on %s: %w", addr, h.cfg.Iface, err)
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
				return [6]byte{}, fmt.Errorf("ndp: resolve %s on %s: %w", addr, h.cfg.Iface, err)
			}
		} else {
			time.Sleep(min(step, time.Millisecond))
		}
	}
}

// Counter names, as AppendLayers reports them under layer "ndp" (the
// malformed frames are counted by Reason, "malformed_" and its name).
const (
	CounterSolicitsIn  = "solicits_in"  // solicitations for our addresses, answered
	CounterSolicitsOut = "solicits_out" // our multicast solicitations (resolutions)
	CounterProbesOut   = "probes_out"   // our unicast solicitations (PROBE)
	CounterAdvertsIn   = "adverts_in"   // advertisements about neighbours we resolve or hold
	CounterAdvertsOut  = "adverts_out"  // our advertisements sent
	CounterIgnored     = "ignored"      // for other addresses or MACs, or about unknown neighbours
	CounterTxFull      = "tx_full"      // frames the TX ring refused
	CounterLearned     = "learned"      // cache entries added
	CounterEvicted     = "evicted"      // entries replaced in the full cache
	CounterTimeouts    = "timeouts"     // resolutions that got no advertisement
	CounterProbeFailed = "probe_failed" // entries removed after unanswered probes
	CounterDupAddr     = "dup_addr"     // advertisements of our own address from elsewhere
	CounterKernelHits  = "kernel_hits"  // resolutions answered by the kernel's table
	CounterDropped     = "dropped_while_resolving"
)

// AppendLayers appends the handler's counters, layer "ndp", to dst.
// dropped_while_resolving counts frames (datagrams, perhaps) that arrived
// while Resolve had the receive side and no one to give them to: Loss is
// true on it alone.
func (h *Handler) AppendLayers(dst []dgramio.Counter) []dgramio.Counter {
	c := func(name string, v *atomic.Uint64) dgramio.Counter {
		return dgramio.Counter{Layer: "ndp", Name: name, Value: v.Load()}
	}
	dst = append(dst,
		c(CounterSolicitsIn, &h.solicitsIn), c(CounterSolicitsOut, &h.solicitsOut),
		c(CounterProbesOut, &h.probesOut), c(CounterAdvertsIn, &h.advertsIn),
		c(CounterAdvertsOut, &h.advertsOut), c(CounterIgnored, &h.ignored),
		c(CounterTxFull, &h.txFull), c(CounterLearned, &h.learned), c(CounterEvicted, &h.evicted),
		c(CounterTimeouts, &h.timeouts), c(CounterProbeFailed, &h.probeFailed),
		c(CounterDupAddr, &h.dupAddr), c(CounterKernelHits, &h.kernelHits),
	)
	for r := Short; r < numReasons; r++ {
		dst = append(dst, c("malformed_"+r.String(), &h.malformed[r]))
	}
	return append(dst, dgramio.Counter{Layer: "ndp", Name: CounterDropped, Value: h.droppedResolving.Load(), Loss: true})
}
