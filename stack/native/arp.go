package native

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/dgramio/dgramio/arp"
)

// arpEntry is a neighbour: resolved (mac valid), being asked for (tries
// above 0), or failed (neither: reusable, and asked again when needed).
type arpEntry struct {
	mac      [6]byte
	ok       bool
	static   bool
	tries    int
	deadline int64 // next request or, resolved, expiry
}

// arpTable is the neighbour cache: bounded, no allocation after init.
type arpTable struct {
	m      map[[4]byte]*arpEntry
	buf    []arpEntry
	max    int
	asking int // entries with a request in flight (next has work)
}

// arpLifetime is how long a learnt neighbour is kept (Linux's
// base_reachable_time is 30 s; re-learning costs one request).
const arpLifetime = int64(60e9)

func (t *arpTable) init(n int) {
	t.m = make(map[[4]byte]*arpEntry, n)
	t.buf = make([]arpEntry, 0, n)
	t.max = n
}

// entry returns the entry of a, making it when add is set and there is
// room (an expired entry's slot is reused).
func (t *arpTable) entry(a [4]byte, add bool, now int64) *arpEntry {
	if en := t.m[a]; en != nil || !add {
		return en
	}
	if len(t.buf) < t.max {
		t.buf = append(t.buf, arpEntry{})
		en := &t.buf[len(t.buf)-1]
		t.m[a] = en
		return en
	}
	for k, en := range t.m {
		if !en.static && (en.ok && en.deadline < now || !en.ok && en.tries == 0) {
			delete(t.m, k)
			*en = arpEntry{}
			t.m[a] = en
			return en
		}
	}
	return nil
}

// ask starts or repeats a request for en: the next falls due at deadline.
func (t *arpTable) ask(en *arpEntry, deadline int64) {
	if en.tries == 0 {
		t.asking++
	}
	en.tries++
	en.deadline = deadline
}

// fail ends en's requests unanswered: it stays, failed, until reused.
func (t *arpTable) fail(en *arpEntry) {
	if en.tries > 0 {
		t.asking--
	}
	en.tries = 0
}

func (t *arpTable) set(a [4]byte, mac [6]byte, static bool, now int64) {
	en := t.entry(a, true, now)
	if en == nil || en.static && !static {
		return
	}
	if !en.ok {
		t.fail(en) // answered: no longer asking
	}
	*en = arpEntry{mac: mac, ok: true, static: static, deadline: now + arpLifetime}
}

// lookup returns a's MAC when it is known.
func (t *arpTable) lookup(a [4]byte) ([6]byte, bool) {
	if en := t.m[a]; en != nil && en.ok {
		return en.mac, true
	}
	return [6]byte{}, false
}

// next returns the earliest pending request's deadline.
func (t *arpTable) next() (int64, bool) {
	at, ok := int64(0), false
	if t.asking == 0 {
		return at, ok
	}
	for i := range t.buf {
		en := &t.buf[i]
		if !en.ok && en.tries > 0 && (!ok || en.deadline < at) {
			at, ok = en.deadline, true
		}
	}
	return at, ok
}

// arpInput answers requests for our address and learns from requests and
// replies addressed to us (RFC 826's merge rule, limited to our own
// conversations).
func (e *Engine) arpInput(f []byte) {
	m, err := arp.ParseARP(f)
	if err != nil {
		e.cnt[cARPMalformed]++
		return
	}
	if m.TargetIP.As4() != e.addr {
		e.cnt[cRxNotForUs]++
		return
	}
	src := m.SenderIP.As4()
	if en := e.arp.m[src]; en != nil || m.Op == arp.OpReply || m.Op == arp.OpRequest {
		e.learn(src, m.SenderMAC, en != nil)
		if m.Op == arp.OpReply && e.share != nil {
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

// resolve returns the MAC for next hop a, starting a request when it is
// not known.
func (e *Engine) resolve(a [4]byte) ([6]byte, bool) {
	if mac, ok := e.arp.lookup(a); ok {
		return mac, true
	}
	en := e.arp.entry(a, true, e.now)
	if en == nil {
		e.cnt[cARPUnresolved]++
		return [6]byte{}, false
	}
	if en.tries == 0 {
		e.arp.ask(en, e.now+int64(e.o.ARPTimeout))
		e.arpRequest(a)
	}
	return [6]byte{}, false
}

func (e *Engine) arpRequest(a [4]byte) {
	e.tx = arp.AppendRequest(e.tx[:0], net.HardwareAddr(e.mac[:]), addrOf(e.addr), addrOf(a))
	if e.send() {
		e.cnt[cARPRequestsSent]++
	}
}

// arpTimers repeats requests and fails the connections waiting for a
// neighbour that did not answer ARPRetries requests.
func (e *Engine) arpTimers() {
	for i := range e.arp.buf {
		en := &e.arp.buf[i]
		if en.ok || en.tries == 0 || en.deadline > e.now {
			continue
		}
		var a [4]byte
		for k, v := range e.arp.m {
			if v == en {
				a = k
			}
		}
		if en.tries >= e.o.ARPRetries {
			e.arp.fail(en)
			e.cnt[cARPUnresolved]++
			e.arpFailed(a)
			continue
		}
		e.arp.ask(en, e.now+int64(e.o.ARPTimeout))
		e.arpRequest(a)
	}
}

// arpResolved makes the connections waiting for a send.
func (e *Engine) arpResolved(a [4]byte) {
	mac, _ := e.arp.lookup(a)
	w := e.arpWait[:0]
	for _, i := range e.arpWait {
		c := &e.conns[i]
		if c.hop == a && !c.macOK {
			c.mac, c.macOK = mac, true
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
		if c.hop == a && !c.macOK {
			c.fail(ErrHostUnreachable)
			continue
		}
		w = append(w, i)
	}
	e.arpWait = w
}

// learn sets a's MAC and sends what waited for it (asked: a had an entry,
// possibly a request in flight).
func (e *Engine) learn(a [4]byte, mac [6]byte, asked bool) {
	e.arp.set(a, mac, false, e.now)
	if asked && len(e.arpWait) > 0 {
		e.arpResolved(a)
	}
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
		_, asked := e.arp.m[ips[i]]
		e.learn(ips[i], macs[i], asked)
		e.cnt[cARPShared]++
	}
}
