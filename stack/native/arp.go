package native

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/dgramio/dgramio/internal/arp"
)

// The neighbour cache follows RFC 4861 §7.3's model of neighbour
// states, as Linux's neighbour table applies it to ARP:
//
//   - INCOMPLETE: asked for by broadcast requests (ARPRetries,
//     ARPTimeout apart), no MAC yet; unanswered, FAILED.
//   - REACHABLE: answered within ARPReachable; used as is.
//   - STALE: its MAC known but not confirmed lately (learnt from a
//     request, gratuitous ARP, or REACHABLE that aged); used as is, and
//     the first use that needs it (a Dial, a connection's retransmission
//     after a timeout) moves it to PROBE.
//   - PROBE: unicast requests to the MAC it has, still used; an answer
//     makes it REACHABLE, silence sends broadcast requests (the neighbour
//     may have moved to another MAC, as a gateway does in a failover),
//     and after them it is FAILED.
//
// Entries are made only from ARP: a request addressed to us (RFC 826's
// merge rule, STALE as Linux makes it) and the answers to our own
// requests; a reply or gratuitous ARP updates a neighbour we hold and
// makes none (Linux's arp_accept=0). TCP makes none and changes none (a
// SYN's frame source MAC is the connection's first MAC, not the
// neighbour's). When a neighbour's MAC changes, the connections through
// it send to the new one from their next segment (arpEpoch).
//
// The cache is bounded (ARPEntries). A new neighbour with it full evicts
// one chosen by the clock algorithm, a second-chance approximation of
// least recently used: entries with a request in flight and static ones
// stay, the rest are taken when the hand finds them unused since it last
// passed. The hand looks at a bounded number of entries, so a new sender
// costs the same whatever the table holds.
type nudState uint8

const (
	nudFree nudState = iota
	nudIncomplete
	nudReachable
	nudStale
	nudProbe
	nudFailed
	nudStatic
)

// arpEntry is a neighbour.
type arpEntry struct {
	ip       [4]byte
	mac      [6]byte
	state    nudState
	ref      bool // used since the clock hand passed
	tries    int  // requests of the current INCOMPLETE or PROBE
	deadline int64
	// INCOMPLETE, PROBE: the next request; REACHABLE: until when
}

// hasMAC reports whether the entry's MAC may be used.
func (en *arpEntry) hasMAC() bool {
	return en.state == nudReachable || en.state == nudStale || en.state == nudProbe || en.state == nudStatic
}

// arpTable is the neighbour cache: bounded, no allocation after init.
type arpTable struct {
	m         map[[4]byte]int32
	buf       []arpEntry
	hand      int
	asking    int // entries with a request in flight (next has work)
	reachable int64
}

// arpScan bounds the entries the clock hand looks at for one eviction.
const arpScan = 64

func (t *arpTable) init(n int, reachable int64) {
	t.m = make(map[[4]byte]int32, n)
	t.buf = make([]arpEntry, 0, n)
	t.reachable = reachable
}

// get returns a's entry, nil when there is none.
func (t *arpTable) get(a [4]byte) *arpEntry {
	if i, ok := t.m[a]; ok {
		return &t.buf[i]
	}
	return nil
}

// add makes an entry for a (which has none); nil when the cache is full
// of entries that must stay. ok reports whether one was evicted for it.
func (t *arpTable) add(a [4]byte) (*arpEntry, bool) {
	if len(t.buf) < cap(t.buf) {
		t.buf = append(t.buf, arpEntry{ip: a})
		t.m[a] = int32(len(t.buf) - 1)
		return &t.buf[len(t.buf)-1], false
	}
	n := len(t.buf)
	victim := -1
	for range min(n, arpScan) {
		i := t.hand
		t.hand++
		if t.hand == n {
			t.hand = 0
		}
		en := &t.buf[i]
		if en.state == nudStatic || en.tries > 0 {
			continue
		}
		if victim < 0 {
			victim = i // if every entry looked at was used, the first of them
		}
		if en.ref && en.state != nudFailed {
			en.ref = false // a second chance
			continue
		}
		victim = i
		break
	}
	if victim < 0 {
		return nil, false
	}
	en := &t.buf[victim]
	delete(t.m, en.ip)
	*en = arpEntry{ip: a}
	t.m[a] = int32(victim)
	return en, true
}

// ask starts or repeats a request for en: the next falls due at deadline.
func (t *arpTable) ask(en *arpEntry, deadline int64) {
	if en.tries == 0 {
		t.asking++
	}
	en.tries++
	en.deadline = deadline
}

// stopAsking ends en's requests.
func (t *arpTable) stopAsking(en *arpEntry) {
	if en.tries > 0 {
		t.asking--
	}
	en.tries = 0
}

// next returns the earliest pending request's deadline.
func (t *arpTable) next() (int64, bool) {
	at, ok := int64(0), false
	if t.asking == 0 {
		return at, ok
	}
	for i := range t.buf {
		en := &t.buf[i]
		if en.tries > 0 && (!ok || en.deadline < at) {
			at, ok = en.deadline, true
		}
	}
	return at, ok
}

// neighbour returns a's entry, making one when there is none; nil (counted)
// when the cache is full of entries that must stay.
func (e *Engine) neighbour(a [4]byte) *arpEntry {
	if en := e.arp.get(a); en != nil {
		return en
	}
	en, evicted := e.arp.add(a)
	if evicted {
		e.cnt[cARPEvicted]++
	}
	if en == nil {
		e.cnt[cARPTableFull]++
	}
	return en
}

// setStatic makes a a permanent neighbour at mac (Options.Neighbors).
func (e *Engine) setStatic(a [4]byte, mac [6]byte) {
	if en := e.neighbour(a); en != nil {
		*en = arpEntry{ip: a, mac: mac, state: nudStatic}
	}
}

// arpInput answers requests for our address, learns from requests
// addressed to us and from the answers to our own requests, and takes
// what a gratuitous ARP (sender and target the same address, RFC 5227
// §3's announcement) or any other ARP says of a neighbour already held.
func (e *Engine) arpInput(f []byte) {
	m, err := arp.ParseARP(f)
	if err != nil {
		e.cnt[cARPMalformed]++
		return
	}
	src, tgt := m.SenderIP.As4(), m.TargetIP.As4()
	switch {
	case src == e.addr:
		// Our own address as the sender: a conflict, or our own
		// request looped back. Nothing to learn or answer.
		e.cnt[cRxNotForUs]++
		return
	case tgt != e.addr:
		// RFC 826's merge: what any ARP says of a neighbour we hold is
		// taken (a gratuitous one, sender and target the same, is how a
		// host or a failed-over gateway announces a new MAC).
		if e.arp.get(src) != nil {
			if src == tgt {
				e.cnt[cARPGratuitous]++
			}
			e.learn(src, m.SenderMAC, false)
			return
		}
		e.cnt[cRxNotForUs]++
		return
	case src == [4]byte{}:
		// An RFC 5227 probe for our address: answered, nothing learnt.
	default:
		en := e.arp.get(src)
		switch {
		case en != nil:
			solicited := m.Op == arp.OpReply && (en.state == nudIncomplete || en.state == nudProbe)
			e.learn(src, m.SenderMAC, solicited)
		case m.Op == arp.OpRequest:
			e.learn(src, m.SenderMAC, false) // RFC 826: the asker is a neighbour
		case e.share == nil:
			e.cnt[cARPUnsolicited]++
		}
		if m.Op == arp.OpReply && e.share != nil {
			// Perhaps the answer to another queue's request: the
			// engines that asked take it (takeShared).
			e.share.publish(e, src, m.SenderMAC)
		}
	}
	if m.Op == arp.OpRequest {
		e.tx = arp.AppendReply(e.tx[:0], net.HardwareAddr(e.mac[:]), addrOf(e.addr), net.HardwareAddr(m.SenderMAC[:]), m.SenderIP)
		if e.send() {
			e.cnt[cARPRepliesSent]++
		}
	}
}

// learn takes mac for neighbour a: REACHABLE when it answers our request
// (confirmed), otherwise STALE when it is new or its MAC changed. A MAC
// change moves every connection through a to the new one; the
// connections that waited for a send.
func (e *Engine) learn(a [4]byte, mac [6]byte, confirmed bool) {
	en := e.neighbour(a)
	if en == nil || en.state == nudStatic {
		return
	}
	had := en.hasMAC() || en.state == nudIncomplete && en.mac != [6]byte{}
	changed := had && en.mac != mac
	if changed {
		e.cnt[cARPMACChanged]++
	}
	if changed || confirmed && !had {
		// Connections through a may hold another MAC: a SYN's, for
		// one whose neighbour was first asked for after a timeout.
		e.arpEpoch++
	}
	wasWaiting := en.state == nudIncomplete
	en.mac = mac
	switch {
	case confirmed:
		e.arp.stopAsking(en)
		en.state, en.deadline = nudReachable, e.now+e.arp.reachable
	case en.state == nudIncomplete || en.state == nudFree || en.state == nudFailed:
		e.arp.stopAsking(en)
		en.state = nudStale
	case changed && en.state == nudReachable:
		en.state = nudStale
	}
	if wasWaiting && len(e.arpWait) > 0 {
		e.arpResolved(a)
	}
}

// passiveHop sets the next hop of c, opened by SYN s: s's source, or the
// gateway for an off-link one. The SYN's frame source MAC is where the
// answers go first; the neighbour cache is not written (a SYN proves
// nothing of who owns an address), and a later change of the
// neighbour's MAC there moves the connection on.
func (e *Engine) passiveHop(c *Conn, s *segment) {
	c.hop = s.src
	if h, ok := e.nextHop(s.src); ok {
		c.hop = h
	}
	c.mac, c.macOK, c.arpEpoch = s.srcMAC, true, e.arpEpoch
}

// resolve returns the MAC for next hop a when it may be used, starting a
// request when it is not known and a probe when it is STALE.
func (e *Engine) resolve(a [4]byte) ([6]byte, bool) {
	if a[0] == 0 {
		return e.resolve6(a) // an IPv6 next hop's alias (engine6.go)
	}
	en := e.neighbour(a)
	if en == nil {
		return [6]byte{}, false
	}
	en.ref = true
	e.arpUse(en)
	if en.hasMAC() {
		return en.mac, true
	}
	return [6]byte{}, false
}

// arpUse moves an entry that a sender needs on: a REACHABLE one past its
// time is STALE (RFC 4861 §7.3.3), a STALE one is probed, one without a
// MAC and no request in flight is asked for.
func (e *Engine) arpUse(en *arpEntry) {
	if en.state == nudReachable && e.now >= en.deadline {
		en.state = nudStale
	}
	switch en.state {
	case nudStale:
		en.state = nudProbe
		e.arp.ask(en, e.now+int64(e.o.ARPTimeout))
		e.arpProbe(en)
	case nudFree, nudFailed:
		en.state = nudIncomplete
		e.arp.ask(en, e.now+int64(e.o.ARPTimeout))
		e.arpRequest(en.ip)
	}
}

// neighbourSuspect is called for a connection's retransmission after a
// timeout: the neighbour it sends through may have gone (a gateway
// failover), so a STALE or aged entry is probed, a missing one asked
// for. A connection whose ACKs come in never gets here: the data path
// pays nothing.
func (c *Conn) neighbourSuspect() {
	e := c.e
	if c.hop[0] == 0 {
		e.resolve6(c.hop) // IPv6: a STALE neighbour goes to DELAY, then PROBE
		return
	}
	if en := e.neighbour(c.hop); en != nil {
		e.arpUse(en)
	}
}

// refreshMAC takes the connection's next hop's MAC after some
// neighbour's MAC changed.
func (c *Conn) refreshMAC() {
	e := c.e
	c.arpEpoch = e.arpEpoch
	if c.hop[0] == 0 {
		e.refreshMAC6(c)
		return
	}
	if en := e.arp.get(c.hop); en != nil && en.hasMAC() {
		c.mac = en.mac
	}
}

func (e *Engine) arpRequest(a [4]byte) {
	e.tx = arp.AppendRequest(e.tx[:0], net.HardwareAddr(e.mac[:]), addrOf(e.addr), addrOf(a))
	if e.send() {
		e.cnt[cARPRequestsSent]++
	}
}

// arpProbe sends a unicast request to en's MAC (RFC 1122 §2.3.2.1's
// unicast poll; Linux's ucast_probes).
func (e *Engine) arpProbe(en *arpEntry) {
	e.tx = arp.AppendRequest(e.tx[:0], net.HardwareAddr(e.mac[:]), addrOf(e.addr), addrOf(en.ip))
	copy(e.tx[0:6], en.mac[:])
	if e.send() {
		e.cnt[cARPRequestsSent]++
		e.cnt[cARPProbes]++
	}
}

// arpTimers repeats requests: an INCOMPLETE entry fails the connections
// waiting for it after ARPRetries requests; a PROBE entry that its
// unicast requests did not confirm is asked for by broadcast, which
// finds it at a new MAC.
func (e *Engine) arpTimers() {
	for i := range e.arp.buf {
		en := &e.arp.buf[i]
		if en.tries == 0 || en.deadline > e.now {
			continue
		}
		if en.tries >= e.o.ARPRetries {
			e.arp.stopAsking(en)
			if en.state == nudProbe {
				en.state = nudIncomplete
				e.arp.ask(en, e.now+int64(e.o.ARPTimeout))
				e.arpRequest(en.ip)
				continue
			}
			en.state = nudFailed
			e.cnt[cARPUnresolved]++
			e.arpFailed(en.ip)
			continue
		}
		e.arp.ask(en, e.now+int64(e.o.ARPTimeout))
		if en.state == nudProbe {
			e.arpProbe(en)
		} else {
			e.arpRequest(en.ip)
		}
	}
}

// waiting reports whether connection i still waits for neighbour a: it
// sends its SYN once a is known (a slot closed while waiting, or reused
// since, does not).
func (e *Engine) waiting(i int32, a [4]byte) bool {
	c := &e.conns[i]
	return c.hop == a && !c.macOK && c.needSyn && (c.state == SynSent || c.state == SynReceived)
}

// arpAwait puts c in the list of connections waiting for a neighbour,
// once, dropping from it those that no longer wait (closed while their
// request was in flight).
func (e *Engine) arpAwait(c *Conn) {
	w := e.arpWait[:0]
	for _, i := range e.arpWait {
		if i != c.idx && e.waiting(i, e.conns[i].hop) {
			w = append(w, i)
		}
	}
	e.arpWait = append(w, c.idx)
}

// arpResolved makes the connections waiting for a send.
func (e *Engine) arpResolved(a [4]byte) {
	en := e.arp.get(a)
	w := e.arpWait[:0]
	for _, i := range e.arpWait {
		c := &e.conns[i]
		if !e.waiting(i, c.hop) {
			continue
		}
		if c.hop == a && en != nil && en.hasMAC() {
			c.mac, c.macOK, c.arpEpoch = en.mac, true, e.arpEpoch
			e.markDirty(c)
			continue
		}
		w = append(w, i)
	}
	e.arpWait = w
}

// arpFailed fails the connections waiting for a.
func (e *Engine) arpFailed(a [4]byte) {
	w := e.arpWait[:0]
	for _, i := range e.arpWait {
		c := &e.conns[i]
		if !e.waiting(i, c.hop) {
			continue
		}
		if c.hop == a {
			c.fail(ErrHostUnreachable)
			continue
		}
		w = append(w, i)
	}
	e.arpWait = w
}

// ARPShare passes the ARP replies that one engine of a group receives to
// the other engines of the group, which hold the same address and MAC (the
// queues of one interface): a NIC hashes ARP, which has no ports, to one
// queue, so an engine whose own request is answered on another queue
// would never learn the answer, and its connections would fail with
// ErrHostUnreachable. With a share, a reply learnt on one queue is known
// to all: each engine takes what the others learnt at its next Poll.
//
// The engines run on their own goroutines; the share is the one thing
// they touch together. It is control traffic, rare: publishing takes a
// lock (and interrupts the other engines' Waits, on a FrameIO that can);
// an engine's Poll pays one atomic load when nothing was shared.
// The zero value is ready for use; pass the same *ARPShare in the
// Options of every engine of the group. New joins it, Close leaves it.
type ARPShare struct {
	mu      sync.Mutex
	members []*Engine
}

// arpInbox holds the replies the other engines of a share learnt, until
// the owner's next Poll takes them. Its size bounds the distinct
// neighbours shared between two Polls; beyond it a reply is not shared
// (the engine then asks again itself, ARPTimeout later).
type arpInbox struct {
	pending atomic.Bool
	mu      sync.Mutex
	n       int
	ips     [arpInboxSize][4]byte
	macs    [arpInboxSize][6]byte
}

const arpInboxSize = 64

func (s *ARPShare) join(e *Engine) {
	s.mu.Lock()
	s.members = append(s.members, e)
	s.mu.Unlock()
}

func (s *ARPShare) leave(e *Engine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, o := range s.members {
		if o == e {
			s.members = append(s.members[:i], s.members[i+1:]...)
			return
		}
	}
}

// publish hands a's MAC, learnt by from, to every other member.
func (s *ARPShare) publish(from *Engine, a [4]byte, mac [6]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.members {
		if o != from && o.inbox.put(a, mac) && o.irq != nil {
			o.irq.Interrupt() // a Wait in progress returns: Poll takes it
		}
	}
}

// put adds (or updates) a's MAC; false when the inbox is full.
func (b *arpInbox) put(a [4]byte, mac [6]byte) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := 0
	for i < b.n && b.ips[i] != a {
		i++
	}
	if i == arpInboxSize {
		return false
	}
	if i == b.n {
		b.n++
	}
	b.ips[i], b.macs[i] = a, mac
	b.pending.Store(true)
	return true
}

// takeShared learns what the other engines of the share learnt since the
// last call.
func (e *Engine) takeShared() {
	if !e.inbox.pending.Load() {
		return
	}
	b := &e.inbox
	b.mu.Lock()
	n := b.n
	ips, macs := b.ips, b.macs
	b.n = 0
	b.pending.Store(false)
	b.mu.Unlock()
	for i := range n {
		// Another queue's answer to a request: ours too when we asked,
		// else a neighbour as a request to us would make it.
		en := e.arp.get(ips[i])
		if en == nil {
			continue // a neighbour this engine does not hold: nothing to learn
		}
		e.learn(ips[i], macs[i], en.state == nudIncomplete || en.state == nudProbe)
		e.cnt[cARPShared]++
	}
	e.takeShared6()
}
