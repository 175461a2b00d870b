// Package neigh is the neighbour table that internal/arp (RFC 826) and
// internal/ndp (RFC 4861) share: the cache of addresses and their MACs,
// the resolutions in progress with their retransmissions and give-up,
// RFC 4861 §7.3's reachability states and timers (for the families that
// keep them), the bound on the cache, the blocking Resolve that drives a
// FrameIO while it waits, and the counters of all that. The protocol
// packages keep their packet formats and say, through a Link, how a
// request, a probe and a failure look in their family.
//
// Addresses are netip.Addr and link-layer addresses Ethernet MACs. A
// Table without NUD (ARP) holds each entry with the MAC last heard until
// the cache is full; one with NUD (NDP) runs INCOMPLETE, REACHABLE,
// STALE, DELAY and PROBE, and removes a neighbour whose probes go
// unanswered.
package neigh

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
// RETRANS_TIMER (1 s, as the kernel's retrans_time_ms for ARP too),
// REACHABLE_TIME (30 s), DELAY_FIRST_PROBE_TIME (5 s) and
// MAX_UNICAST_SOLICIT (3).
const (
	DefaultRetries         = 3
	DefaultInterval        = time.Second
	DefaultReachable       = 30 * time.Second
	DefaultDelayFirstProbe = 5 * time.Second
	DefaultProbes          = 3
	DefaultCacheSize       = 256
)

// Config configures a Table. A number that is not positive takes its
// default.
type Config struct {
	// Proto prefixes the errors ("arp", "ndp"); Iface names the interface
	// in them.
	Proto, Iface string
	// IPv6 says the family a Table resolves: IPv6 without IPv4-mapped
	// addresses, else IPv4. Other addresses are never resolved.
	IPv6 bool
	// Retries is how many requests a resolution sends before giving up,
	// Interval apart (and how long a PROBE waits for each probe's answer).
	Retries  int
	Interval time.Duration
	// CacheSize bounds the cache: a new entry in a full one replaces the
	// one learnt longest ago (without NUD) or used longest ago (with NUD),
	// counted as evicted.
	CacheSize int
	// NUD turns on RFC 4861 §7.3's neighbour unreachability detection:
	// entries have states, a use moves STALE to DELAY, and Poll probes
	// DELAY entries. Reachable, DelayFirstProbe and Probes are its
	// REACHABLE_TIME, DELAY_FIRST_PROBE_TIME and MAX_UNICAST_SOLICIT.
	NUD             bool
	Reachable       time.Duration
	DelayFirstProbe time.Duration
	Probes          int
	// Kernel, when set, looks addr up in the kernel's neighbour table of
	// the interface: a resolution starts there, and sends no request when
	// the kernel knows addr (counted in kernel_hits). It must not wait for
	// the network.
	Kernel func(addr netip.Addr) ([6]byte, bool)
}

// Link is a protocol's side of a Table: what its frames look like.
type Link interface {
	// Handle takes one received frame, as the protocol's Handler does,
	// and reports whether it was the protocol's.
	Handle(frame []byte) bool
	// Solicit gives a resolution's request for addr to the Table's
	// FrameIO (Send): ARP's broadcast request, NDP's multicast
	// solicitation.
	Solicit(addr netip.Addr)
	// Probe gives a unicast request for addr, cached at mac, to the
	// FrameIO (NUD's PROBE). It is called with the Table's lock held and
	// must not call back into the Table but for Send.
	Probe(addr netip.Addr, mac [6]byte)
	// NoReply returns the error of a resolution of addr that sent
	// requests and got no answer in waited.
	NoReply(addr netip.Addr, requests int, waited time.Duration) error
}

// ResolveError says that nobody answered the requests for Addr. P gives
// the protocol's words: the protocol packages name their instance
// ResolveError.
type ResolveError[P Words] struct {
	// Addr is the address asked for; Iface the interface asked on.
	Addr  netip.Addr
	Iface string
	// Requests is how many requests were sent; Waited how long the
	// resolution took in all.
	Requests int
	Waited   time.Duration
}

// Words are a protocol's words for a resolution that got no answer.
type Words interface {
	// Words returns the sentinel that a ResolveError matches (errors.Is),
	// and the format of its message, whose verbs take Addr, Iface,
	// Requests and Waited (rounded to the millisecond).
	Words() (noReply error, format string)
}

// Error implements error.
func (e *ResolveError[P]) Error() string {
	var p P
	_, format := p.Words()
	return fmt.Sprintf(format, e.Addr, e.Iface, e.Requests, e.Waited.Round(time.Millisecond))
}

// Unwrap returns P's sentinel.
func (e *ResolveError[P]) Unwrap() error {
	var p P
	noReply, _ := p.Words()
	return noReply
}

// State is a cache entry's state (RFC 4861 §7.3.2). An address being
// resolved is INCOMPLETE; it has no MAC yet. A Table without NUD keeps its
// entries REACHABLE.
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

// entry is a neighbour with a MAC.
type entry struct {
	mac    [6]byte
	state  State
	timer  time.Time // REACHABLE: until; DELAY: probe at; PROBE: next probe at
	probes int       // unicast probes sent in PROBE
	seq    uint64    // order of learning (NUD: of last use), for replacing the oldest
}

// query is an INCOMPLETE address: requests sent, the next one due (after
// the last: when to give up), when the first left.
type query struct {
	sent        int
	next, start time.Time
}

// Table is a neighbour cache over a FrameIO, with the resolutions in
// progress.
//
// Threading: Query, Poll, Resolve, Send, Flush and Advertised belong to
// the goroutine that drives the FrameIO (the poll loop). Lookup, State,
// Learn, Merge, Len and Counter may be called from any goroutine.
type Table struct {
	fio  frameio.FrameIO
	link Link
	cfg  Config
	kick bool // frames given to TxFrame since the last Flush

	mu      sync.Mutex
	cache   map[netip.Addr]*entry
	seq     uint64
	queries map[netip.Addr]*query // the poll loop's alone

	counts [numCounters]atomic.Uint64
}

// New returns a Table for cfg over fio, speaking through link. It sends
// nothing.
func New(fio frameio.FrameIO, cfg Config, link Link) *Table {
	orDefault(&cfg.Retries, DefaultRetries)
	orDefault(&cfg.Probes, DefaultProbes)
	orDefault(&cfg.CacheSize, DefaultCacheSize)
	orDefault(&cfg.Interval, DefaultInterval)
	orDefault(&cfg.Reachable, DefaultReachable)
	orDefault(&cfg.DelayFirstProbe, DefaultDelayFirstProbe)
	return &Table{fio: fio, link: link, cfg: cfg,
		cache: make(map[netip.Addr]*entry, cfg.CacheSize), queries: make(map[netip.Addr]*query)}
}

// orDefault sets *v to d when it is not positive.
func orDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// valid says whether addr is of the Table's family.
func (t *Table) valid(addr netip.Addr) bool {
	if t.cfg.IPv6 {
		return addr.Is6() && !addr.Is4In6()
	}
	return addr.Is4()
}

// Lookup returns the cached MAC of addr, in any state but INCOMPLETE.
func (t *Table) Lookup(addr netip.Addr) ([6]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.cache[addr]; ok {
		return e.mac, true
	}
	return [6]byte{}, false
}

// State returns addr's state: INCOMPLETE while it is being resolved, and
// false when the cache has no entry and no resolution runs.
func (t *Table) State(addr netip.Addr) (State, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.cache[addr]; ok {
		return e.state, true
	}
	if _, ok := t.queries[addr]; ok {
		return Incomplete, true
	}
	return 0, false
}

// Len returns how many entries the cache holds (INCOMPLETE ones aside).
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.cache)
}

// Learn puts addr at mac into the cache, STALE with NUD, as an
// unsolicited report of it would (RFC 4861 §7.3.3): it is used, and
// verified when used. Without NUD it is Merge with add set.
func (t *Table) Learn(addr netip.Addr, mac [6]byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.setLocked(addr, mac, Stale, time.Time{})
}

// Merge takes addr at mac as heard from the wire: a neighbour in the
// cache gets mac (RFC 826's merge; with NUD, a changed MAC makes the
// entry STALE, RFC 4861 §7.2.3 and §7.3.3, and the same one changes
// nothing), and one not in it is added (STALE with NUD) only when add is
// set: for ARP, when the packet was meant for us (RFC 826).
func (t *Table) Merge(addr netip.Addr, mac [6]byte, add bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.cache[addr]
	if !ok && !add || ok && e.mac == mac && t.cfg.NUD {
		return
	}
	t.setLocked(addr, mac, Stale, time.Time{})
}

// setLocked creates or updates addr's entry with mac. With NUD the entry
// becomes st until timer and counts as used now; without, it keeps its
// state (REACHABLE) and place in the order of learning. A new entry in a
// full cache replaces the oldest one.
func (t *Table) setLocked(addr netip.Addr, mac [6]byte, st State, timer time.Time) {
	e, ok := t.cache[addr]
	if ok && !t.cfg.NUD {
		e.mac = mac
		return
	}
	if !t.cfg.NUD {
		st, timer = Reachable, time.Time{}
	}
	if !ok {
		if len(t.cache) >= t.cfg.CacheSize {
			var old netip.Addr
			var oldE *entry
			for a, x := range t.cache {
				if oldE == nil || x.seq < oldE.seq {
					old, oldE = a, x
				}
			}
			delete(t.cache, old)
			t.count(evicted)
		}
		e = &entry{}
		t.cache[addr] = e
		t.count(learned)
	}
	t.seq++
	*e = entry{mac: mac, state: st, timer: timer, seq: t.seq}
}

// Advertised takes an answer about target (RFC 4861 §7.2.5, NUD only):
// its MAC when hasLL, its Solicited and Override flags. For an address
// being resolved it makes the entry, REACHABLE when solicited, else
// STALE; for a cached one it follows §7.2.5's rules; for one neither
// cached nor resolved (or resolved, but without a MAC) it does nothing
// and returns false, true otherwise.
func (t *Table) Advertised(target netip.Addr, mac [6]byte, hasLL, solicited, override bool, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.cache[target]
	if !ok {
		if _, asked := t.queries[target]; !asked || !hasLL {
			return false // §7.2.5: no entry, nothing to create
		}
		if solicited {
			t.setLocked(target, mac, Reachable, now.Add(t.cfg.Reachable))
		} else {
			t.setLocked(target, mac, Stale, time.Time{})
		}
		return true
	}
	changed := hasLL && mac != e.mac
	if !override && changed {
		if e.state == Reachable {
			e.state = Stale
		}
		return true
	}
	if changed {
		e.mac = mac
	}
	switch {
	case solicited:
		e.state, e.timer, e.probes = Reachable, now.Add(t.cfg.Reachable), 0
	case changed:
		e.state = Stale
	}
	return true
}

// Send gives frame to the FrameIO, counting it in c, or in tx_full when
// the TX ring refuses it. It leaves at the next Flush.
func (t *Table) Send(frame []byte, c *atomic.Uint64) {
	if t.fio.TxFrame(frame) {
		c.Add(1)
		t.kick = true
	} else {
		t.count(txFull)
	}
}

// Flush kicks the FrameIO when frames were given to it (Send) since the
// last Flush, and reports the Kick's error.
func (t *Table) Flush() error {
	if !t.kick {
		return nil
	}
	t.kick = false
	return t.fio.Kick()
}

// Query returns addr's MAC and true when the cache has it; with NUD, a
// REACHABLE entry past its time becomes STALE, and a STALE one used goes
// to DELAY, to be probed if nothing confirms it (RFC 4861 §7.3.3).
// Otherwise it starts resolving addr without blocking (INCOMPLETE), unless
// that is in progress already or addr is not of the family: from the
// kernel's table when Config.Kernel knows it (then it returns the MAC at
// once, STALE), else with a request (Link.Solicit), and returns false;
// Poll sends the next ones and reports the end. now is the current time.
// The number of queries in progress is the caller's to bound (Pending).
func (t *Table) Query(addr netip.Addr, now time.Time) ([6]byte, bool) {
	if mac, ok := t.use(addr, now); ok {
		return mac, true
	}
	if _, ok := t.queries[addr]; ok || !t.valid(addr) {
		return [6]byte{}, false
	}
	if t.cfg.Kernel != nil {
		if mac, ok := t.cfg.Kernel(addr); ok {
			t.count(kernelHits)
			t.mu.Lock()
			t.setLocked(addr, mac, Stale, time.Time{})
			t.mu.Unlock()
			return mac, true
		}
	}
	q := &query{start: now}
	t.queries[addr] = q
	t.solicit(addr, q, now)
	return [6]byte{}, false
}

// use returns addr's MAC when cached, advancing its state for a use when
// the Table runs NUD.
func (t *Table) use(addr netip.Addr, now time.Time) ([6]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.cache[addr]
	if !ok {
		return [6]byte{}, false
	}
	if !t.cfg.NUD {
		return e.mac, true
	}
	t.seq++
	e.seq = t.seq
	if e.state == Reachable && !now.Before(e.timer) {
		e.state = Stale // §7.3.3: ReachableTime passed without confirmation
	}
	if e.state == Stale {
		e.state, e.timer = Delay, now.Add(t.cfg.DelayFirstProbe)
	}
	return e.mac, true
}

// Poll sends the requests that are due and calls done for each query that
// ended since the last call: with the MAC once addr is in the cache, or
// with Link.NoReply's error after Config.Retries requests went unanswered
// for Config.Interval each (counted in timeouts). With NUD it also runs
// the cache's timers (RFC 4861 §7.3.3): DELAY past its time goes to PROBE
// with a unicast probe (Link.Probe), PROBE probes again each Interval
// and, after Config.Probes unanswered, the entry is removed
// (probe_failed). It returns how many queries are still in progress. It
// never blocks; requests leave at the next Flush.
func (t *Table) Poll(now time.Time, done func(addr netip.Addr, mac [6]byte, err error)) int {
	for addr, q := range t.queries {
		if mac, fin, err := t.step(addr, q, now); fin {
			delete(t.queries, addr)
			done(addr, mac, err)
		}
	}
	if t.cfg.NUD {
		t.timers(now)
	}
	return len(t.queries)
}

// Pending returns how many queries are in progress.
func (t *Table) Pending() int { return len(t.queries) }

// timers advances DELAY and PROBE entries whose time came (§7.3.3).
func (t *Table) timers(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for addr, e := range t.cache {
		if (e.state != Delay && e.state != Probe) || now.Before(e.timer) {
			continue
		}
		if e.state == Probe && e.probes >= t.cfg.Probes {
			delete(t.cache, addr)
			t.count(probeFailed)
			continue
		}
		e.state, e.timer = Probe, now.Add(t.cfg.Interval)
		e.probes++
		t.link.Probe(addr, e.mac)
	}
}

// step advances one query: fin with the MAC when addr is cached, fin with
// Link.NoReply's error when the last request went unanswered, and the
// next request when it is due.
func (t *Table) step(addr netip.Addr, q *query, now time.Time) (mac [6]byte, fin bool, err error) {
	if mac, ok := t.Lookup(addr); ok {
		return mac, true, nil
	}
	if now.Before(q.next) {
		return mac, false, nil
	}
	if q.sent >= t.cfg.Retries {
		t.count(timeouts)
		return mac, true, t.link.NoReply(addr, q.sent, now.Sub(q.start))
	}
	t.solicit(addr, q, now)
	return mac, false, nil
}

// solicit sends the next request for addr.
func (t *Table) solicit(addr netip.Addr, q *query, now time.Time) {
	t.link.Solicit(addr)
	q.sent++
	q.next = now.Add(t.cfg.Interval)
}

// Resolve returns addr's MAC: from the cache (Query), or by requests,
// Config.Retries of them Config.Interval apart, until an answer arrives.
// It blocks, driving the FrameIO's receive side while it waits: the
// protocol's frames go to Link.Handle, others to other when it is not nil,
// and are dropped and counted (dropped_while_resolving, a loss) otherwise.
// A poll loop that must not stop uses Query and Poll instead. Giving up
// returns Link.NoReply's error; a done ctx returns ctx.Err() wrapped.
func (t *Table) Resolve(ctx context.Context, addr netip.Addr, other func(frame []byte)) ([6]byte, error) {
	if mac, ok := t.Query(addr, time.Now()); ok {
		return mac, nil
	}
	if _, ok := t.queries[addr]; !ok {
		family := "IPv4"
		if t.cfg.IPv6 {
			family = "IPv6"
		}
		return [6]byte{}, fmt.Errorf("%s: resolve %v: not an %s address", t.cfg.Proto, addr, family)
	}
	deliver := func(frame []byte) {
		if t.link.Handle(frame) {
			return
		}
		if other != nil {
			other(frame)
		} else {
			t.count(dropped)
		}
	}
	waiter, _ := t.fio.(frameio.Waiter)
	defer delete(t.queries, addr) // gone already unless ctx ended it
	for {
		if err := t.Flush(); err != nil {
			return [6]byte{}, t.resolveErr(addr, err)
		}
		for t.fio.RxFrames(64, deliver) > 0 {
		}
		// Answers to requests that arrived meanwhile leave at the next Flush.
		now := time.Now()
		if mac, fin, err := t.step(addr, t.queries[addr], now); fin {
			return mac, err
		}
		if err := ctx.Err(); err != nil {
			return [6]byte{}, t.resolveErr(addr, err)
		}
		step := min(t.queries[addr].next.Sub(now), 10*time.Millisecond)
		if step <= 0 {
			continue
		}
		if waiter != nil {
			wctx, cancel := context.WithTimeout(ctx, step)
			err := waiter.Wait(wctx)
			cancel()
			if errors.Is(err, net.ErrClosed) {
				return [6]byte{}, t.resolveErr(addr, err)
			}
		} else {
			time.Sleep(min(step, time.Millisecond))
		}
	}
}

func (t *Table) resolveErr(addr netip.Addr, err error) error {
	return fmt.Errorf("%s: resolve %s on %s: %w", t.cfg.Proto, addr, t.cfg.Iface, err)
}

// Counter names of a Table, as the protocol packages report them.
const (
	CounterTxFull      = "tx_full"      // frames the TX ring refused (Send)
	CounterLearned     = "learned"      // cache entries added
	CounterEvicted     = "evicted"      // entries replaced in the full cache
	CounterTimeouts    = "timeouts"     // resolutions that got no answer
	CounterProbeFailed = "probe_failed" // entries removed after unanswered probes (NUD)
	CounterKernelHits  = "kernel_hits"  // resolutions answered by Config.Kernel
	// CounterDropped counts the frames that arrived while Resolve had the
	// receive side and no one to give them to: a loss.
	CounterDropped = "dropped_while_resolving"
)

// counter indexes a Table's counts, in the order of counterNames.
type counter int

const (
	txFull counter = iota
	learned
	evicted
	timeouts
	probeFailed
	kernelHits
	dropped
	numCounters
)

var counterNames = [numCounters]string{CounterTxFull, CounterLearned, CounterEvicted,
	CounterTimeouts, CounterProbeFailed, CounterKernelHits, CounterDropped}

// count adds 1 to counter c.
func (t *Table) count(c counter) { t.counts[c].Add(1) }

// Counter returns the Table's counter name (one of the Counter
// constants), in layer; Loss is set on dropped_while_resolving alone. An
// unknown name reads 0.
func (t *Table) Counter(layer, name string) dgramio.Counter {
	for c, n := range counterNames {
		if n == name {
			return dgramio.Counter{Layer: layer, Name: name, Value: t.counts[c].Load(), Loss: counter(c) == dropped}
		}
	}
	return dgramio.Counter{Layer: layer, Name: name}
}
