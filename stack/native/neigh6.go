package native

// The IPv6 neighbour cache (RFC 4861 §7.3.2) and its state machine
// (§7.2, §7.3.3, Appendix C): INCOMPLETE, REACHABLE, STALE, DELAY and
// PROBE, driven by explicit times in nanoseconds (the engine's clock), so
// that tests run without sleeping. Bounded: a full cache evicts an
// unreferenced entry, STALE ones and the least recently used first. It
// sends nothing itself: resolve and timers say which solicitation the
// caller sends (buildNS): engine6.go.

// neighState is the reachability state of an entry (RFC 4861 §7.3.2).
type neighState uint8

const (
	neighFree       neighState = iota // an unused slot
	neighIncomplete                   // resolution in progress: multicast solicitations sent
	neighReachable                    // confirmed within ReachableTime
	neighStale                        // not known to be reachable; used, it goes to DELAY
	neighDelay                        // used while STALE: waiting for upper-layer confirmation
	neighProbe                        // unicast solicitations sent
)

var neighStateNames = [...]string{"FREE", "INCOMPLETE", "REACHABLE", "STALE", "DELAY", "PROBE"}

func (s neighState) String() string {
	if int(s) < len(neighStateNames) {
		return neighStateNames[s]
	}
	return "?"
}

// neigh6Params are the protocol constants of RFC 4861 §10 (and §6.3.2's
// ReachableTime), in nanoseconds.
type neigh6Params struct {
	ReachableTime       int64 // REACHABLE lasts this long without confirmation
	RetransTimer        int64 // between solicitations
	DelayFirstProbe     int64 // DELAY lasts this long before probing
	MaxMulticastSolicit int   // solicitations before resolution fails
	MaxUnicastSolicit   int   // probes before a neighbour is given up
}

// defaultNeigh6Params are RFC 4861 §10's values. ReachableTime is the base
// value, not randomised between 0.5 and 1.5 times it as §6.3.2 asks of a
// host that shares a link with many: the caller may randomise it.
func defaultNeigh6Params() neigh6Params {
	return neigh6Params{ReachableTime: 30e9, RetransTimer: 1e9, DelayFirstProbe: 5e9,
		MaxMulticastSolicit: 3, MaxUnicastSolicit: 3}
}

// neigh6Entry is one neighbour.
type neigh6Entry struct {
	addr     ip6Addr
	mac      [6]byte
	state    neighState
	static   bool
	refs     int32 // holders (connections) that keep it from eviction
	probes   int   // solicitations sent in INCOMPLETE or PROBE
	deadline int64 // INCOMPLETE, PROBE: next solicitation; REACHABLE: turns STALE; DELAY: turns PROBE
	used     int64 // last resolve, for eviction
}

// neighTx is a solicitation the caller sends: to addr's solicited-node
// multicast address (mcast), or unicast to mac (a probe, §7.3.3).
type neighTx struct {
	addr  ip6Addr
	mac   [6]byte
	mcast bool
}

// neighResult is what resolve found.
type neighResult int

const (
	neighHit     neighResult = iota // the MAC is known: send
	neighSolicit                    // a new INCOMPLETE entry: send a multicast solicitation now
	neighPending                    // resolution in progress: queue or drop (counted by the caller)
	neighFull                       // no entry free nor evictable: drop (counted by the caller)
)

// neigh6 is the cache: n entries at most, allocated by init.
type neigh6 struct {
	p       neigh6Params
	m       map[ip6Addr]int32
	e       []neigh6Entry
	free    []int32
	evicted uint64 // entries evicted for room: the counter ndp_neigh_evicted
	failed  uint64 // resolutions and probes unanswered: ndp_neigh_failed
}

func (c *neigh6) init(n int, p neigh6Params) {
	c.p = p
	c.m = make(map[ip6Addr]int32, n)
	c.e = make([]neigh6Entry, n)
	c.free = make([]int32, n)
	for i := range c.free {
		c.free[i] = int32(n - 1 - i)
	}
}

// get returns a's entry, or nil.
func (c *neigh6) get(a ip6Addr) *neigh6Entry {
	if i, ok := c.m[a]; ok {
		return &c.e[i]
	}
	return nil
}

// add makes an entry for a (which has none), evicting one if the cache is
// full; nil when every entry is referenced or static.
func (c *neigh6) add(a ip6Addr, now int64) *neigh6Entry {
	if len(c.free) == 0 && !c.evict() {
		return nil
	}
	i := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	c.m[a] = i
	c.e[i] = neigh6Entry{addr: a, used: now}
	return &c.e[i]
}

// evict frees the unreferenced, non-static entry that matters least: a
// STALE one before a resolved one before one being resolved, the least
// recently used of a kind.
func (c *neigh6) evict() bool {
	rank := func(s neighState) int {
		switch s {
		case neighStale:
			return 0
		case neighIncomplete:
			return 2
		}
		return 1
	}
	v := -1
	for i := range c.e {
		en := &c.e[i]
		if en.state == neighFree || en.static || en.refs > 0 {
			continue
		}
		if v < 0 || rank(en.state) < rank(c.e[v].state) ||
			rank(en.state) == rank(c.e[v].state) && en.used < c.e[v].used {
			v = i
		}
	}
	if v < 0 {
		return false
	}
	c.remove(&c.e[v])
	c.evicted++
	return true
}

func (c *neigh6) remove(en *neigh6Entry) {
	i := c.m[en.addr]
	delete(c.m, en.addr)
	*en = neigh6Entry{}
	c.free = append(c.free, i)
}

// resolve looks a up to send to it at now (RFC 4861 §7.2.2, §7.3.3):
// known, the MAC is returned (a STALE entry goes to DELAY); unknown, an
// INCOMPLETE entry is made and the caller sends the first multicast
// solicitation.
func (c *neigh6) resolve(a ip6Addr, now int64) ([6]byte, neighResult) {
	en := c.get(a)
	if en == nil {
		if en = c.add(a, now); en == nil {
			return [6]byte{}, neighFull
		}
		en.state, en.probes, en.deadline = neighIncomplete, 1, now+c.p.RetransTimer
		return [6]byte{}, neighSolicit
	}
	en.used = now
	switch en.state {
	case neighIncomplete:
		return [6]byte{}, neighPending
	case neighStale:
		en.state, en.deadline = neighDelay, now+c.p.DelayFirstProbe
	}
	return en.mac, neighHit
}

// solicited learns from a solicitation from a carrying a source
// link-layer address mac (RFC 4861 §7.2.3): a new entry is STALE; an
// entry with another MAC takes it and goes STALE; an INCOMPLETE entry
// takes it and goes STALE (its queued packets may go: true). The same
// MAC changes nothing.
func (c *neigh6) solicited(a ip6Addr, mac [6]byte, now int64) bool {
	en := c.get(a)
	if en == nil {
		if en = c.add(a, now); en == nil {
			return false
		}
	} else if en.static || en.state != neighIncomplete && en.mac == mac {
		return false
	}
	was := en.state
	en.mac, en.state, en.probes = mac, neighStale, 0
	return was == neighIncomplete
}

// advert applies advertisement nd, for target nd.target, at now (RFC
// 4861 §7.2.5, Appendix C). Without an entry it is ignored. It returns
// true when an INCOMPLETE entry was resolved (its queued packets may go).
func (c *neigh6) advert(nd *ndMsg, now int64) bool {
	en := c.get(nd.target)
	if en == nil || en.static {
		return false
	}
	if en.state == neighIncomplete {
		if !nd.hasLL {
			return false
		}
		en.mac, en.probes = nd.ll, 0
		if nd.solicited {
			en.state, en.deadline = neighReachable, now+c.p.ReachableTime
		} else {
			en.state = neighStale
		}
		return true
	}
	differs := nd.hasLL && nd.ll != en.mac
	if !nd.override && differs {
		if en.state == neighReachable {
			en.state = neighStale // §7.2.5 (a): keep the MAC
		}
		return false // (b): ignored
	}
	if differs {
		en.mac = nd.ll
	}
	switch {
	case nd.solicited:
		en.state, en.deadline, en.probes = neighReachable, now+c.p.ReachableTime, 0
	case differs:
		en.state, en.probes = neighStale, 0
	}
	return false
}

// confirm records upper-layer proof that a is reachable (RFC 4861
// §7.3.1: new data acknowledged by TCP) at now.
func (c *neigh6) confirm(a ip6Addr, now int64) {
	if en := c.get(a); en != nil && !en.static && en.state != neighIncomplete {
		en.state, en.deadline, en.probes = neighReachable, now+c.p.ReachableTime, 0
	}
}

// setStatic makes a permanent entry for a (never evicted, never changed
// by what arrives); false when the cache has no room.
func (c *neigh6) setStatic(a ip6Addr, mac [6]byte, now int64) bool {
	en := c.get(a)
	if en == nil {
		if en = c.add(a, now); en == nil {
			return false
		}
	}
	en.mac, en.state, en.static, en.probes = mac, neighReachable, true, 0
	return true
}

// ref and unref count a holder of a's entry: a referenced entry is never
// evicted (it may still fail and be removed).
func (c *neigh6) ref(a ip6Addr) {
	if en := c.get(a); en != nil {
		en.refs++
	}
}

func (c *neigh6) unref(a ip6Addr) {
	if en := c.get(a); en != nil && en.refs > 0 {
		en.refs--
	}
}

// timers runs the entries' timers due at now and appends to out the
// solicitations to send (RFC 4861 §7.2.2, §7.3.3): INCOMPLETE entries are
// asked again up to MaxMulticastSolicit times, then removed; REACHABLE
// ones go STALE; DELAY ones go PROBE with a first unicast probe; PROBE
// ones are probed up to MaxUnicastSolicit times, then removed. It returns
// out and the number of entries removed unanswered (added to failed).
func (c *neigh6) timers(now int64, out []neighTx) ([]neighTx, int) {
	failed := 0
	for i := range c.e {
		en := &c.e[i]
		if en.state == neighFree || en.static || en.state == neighStale || en.deadline > now {
			continue
		}
		switch en.state {
		case neighIncomplete:
			if en.probes >= c.p.MaxMulticastSolicit {
				c.remove(en)
				failed++
				continue
			}
			en.probes++
			en.deadline = now + c.p.RetransTimer
			out = append(out, neighTx{addr: en.addr, mcast: true})
		case neighReachable:
			en.state = neighStale
		case neighDelay:
			en.state, en.probes, en.deadline = neighProbe, 1, now+c.p.RetransTimer
			out = append(out, neighTx{addr: en.addr, mac: en.mac})
		case neighProbe:
			if en.probes >= c.p.MaxUnicastSolicit {
				c.remove(en)
				failed++
				continue
			}
			en.probes++
			en.deadline = now + c.p.RetransTimer
			out = append(out, neighTx{addr: en.addr, mac: en.mac})
		}
	}
	c.failed += uint64(failed)
	return out, failed
}

// next returns the earliest time timers has work.
func (c *neigh6) next() (int64, bool) {
	at, ok := int64(0), false
	for i := range c.e {
		en := &c.e[i]
		if en.state == neighFree || en.static || en.state == neighStale {
			continue
		}
		if !ok || en.deadline < at {
			at, ok = en.deadline, true
		}
	}
	return at, ok
}
