package native

import "sync"

// An ARPShare passes neighbour advertisements too (RFC 4861 §7.2.5): a
// NIC hashes ICMPv6, which has no ports, by its addresses alone, so the
// advertisement that answers one queue's solicitation may reach another
// queue, whose engine holds no INCOMPLETE entry for it and would drop it;
// the engine that asked would solicit again and fail its connections with
// ErrHostUnreachable. With a share, an advertisement one engine takes is
// applied by every other, as if it had arrived there too: an engine that
// holds no entry for its target ignores it (§7.2.5: "If no entry exists,
// the advertisement SHOULD be silently discarded"), one that solicited it
// resolves.

// ndpInbox holds the advertisements the other engines of a share took,
// until the owner's next Poll applies them. Its size bounds the distinct
// targets shared between two Polls; beyond it an advertisement is not
// shared (the engine then solicits again itself, RetransTimer later).
type ndpInbox struct {
	mu  sync.Mutex
	n   int
	msg [ndpInboxSize]ndMsg
}

const ndpInboxSize = 16

// publish6 hands advertisement nd, taken by from, to every other member
// with an IPv6 address.
func (s *ARPShare) publish6(from *Engine, nd *ndMsg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.members {
		if o == from || o.six == nil || !o.six.inbox.put(nd) {
			continue
		}
		o.inbox.pending.Store(true) // the ARP inbox's flag: Poll calls takeShared
		if o.irq != nil {
			o.irq.Interrupt()
		}
	}
}

// put adds nd (replacing an earlier one for its target); false when the
// inbox is full.
func (b *ndpInbox) put(nd *ndMsg) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := 0
	for i < b.n && b.msg[i].target != nd.target {
		i++
	}
	if i == ndpInboxSize {
		return false
	}
	if i == b.n {
		b.n++
	}
	b.msg[i] = *nd
	return true
}

// takeShared6 applies the advertisements the other engines of the share
// took since the last call (takeShared calls it after it cleared the
// pending flag, so that one published later sets it again).
func (e *Engine) takeShared6() {
	s := e.six
	if s == nil {
		return
	}
	b := &s.inbox
	b.mu.Lock()
	n := b.n
	msg := b.msg
	b.n = 0
	b.mu.Unlock()
	for i := range n {
		if s.neigh.get(msg[i].target) == nil {
			continue // a neighbour this engine does not hold: nothing to learn
		}
		e.advert6(&msg[i])
		s.cnt[c6NAShared]++
	}
}
