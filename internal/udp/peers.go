package udp

import (
	"net/netip"
	"sync/atomic"
)

// peerChunk is how many peers one allocation of the table holds. The
// table grows a chunk at a time and a peer never moves (its Template
// points into itself).
const peerChunk = 1024

// noPeer ends the recency list and the wait chains.
const noPeer int32 = -1

// waitPerPeer bounds the answers that wait for one peer's resolution;
// more are dropped and counted (tx_resolve_overflow), as the kernel's
// unres_qlen does.
const waitPerPeer = 4

// peer is one entry of the peer table: the template of the frames to it
// and its place in the table.
type peer struct {
	tmpl Template
	key  netip.AddrPort
	// prev and next link the learnt peers, most recent first. Dests and
	// peers being resolved are not on the list.
	prev, next int32
	dest       bool // one of Config.Dests: never replaced
	// waiting: the MAC is being resolved; the frames built for it wait
	// in the wait pool, qhead first, chained through waitPool.next.
	waiting      bool
	qhead, qtail int32
	qlen         int32
}

// peerTable holds the peers that QueueTo answers: a map from address to
// index, the peers in chunks, and the recency list of the learnt ones.
// Every operation is O(1). When more than max peers were learnt, the one
// heard from or answered longest ago (the list's tail) is replaced: the
// peers of the last Rx are at the head, and max is at least RxBatch, so
// none of them is ever replaced before its answer is queued.
//
// Memory: about 330 bytes per peer (the entry and its map slot; measured
// by TestPeerTableMemory), allocated as the table fills: 64k peers (the
// default Config.Peers) take about 20 MiB.
type peerTable struct {
	idx        map[netip.AddrPort]int32
	chunks     [][]peer
	n          int32   // indices handed out
	free       []int32 // indices given back (a resolution that failed)
	head, tail int32
	listed     int // peers on the list
	max        int
	replaced   atomic.Uint64 // peers replaced by a newer one (Stats reads it)
}

func newPeerTable(max int) peerTable {
	return peerTable{idx: make(map[netip.AddrPort]int32), head: noPeer, tail: noPeer, max: max}
}

// at returns the peer at index i.
func (t *peerTable) at(i int32) *peer { return &t.chunks[i/peerChunk][i%peerChunk] }

// find returns the index of to, or noPeer.
func (t *peerTable) find(to netip.AddrPort) int32 {
	if i, ok := t.idx[to]; ok {
		return i
	}
	return noPeer
}

// add gives to an entry, off the list (the caller lists it with touch or
// marks it dest or waiting). The entry's Template is not prepared.
func (t *peerTable) add(to netip.AddrPort) int32 {
	var i int32
	switch {
	case len(t.free) > 0:
		i = t.free[len(t.free)-1]
		t.free = t.free[:len(t.free)-1]
	default:
		if int(t.n) == len(t.chunks)*peerChunk {
			t.chunks = append(t.chunks, make([]peer, peerChunk))
		}
		i = t.n
		t.n++
	}
	p := t.at(i)
	*p = peer{key: to, prev: noPeer, next: noPeer, qhead: noPeer, qtail: noPeer}
	t.idx[to] = i
	return i
}

// remove takes entry i (off the list) out of the table.
func (t *peerTable) remove(i int32) {
	delete(t.idx, t.at(i).key)
	t.free = append(t.free, i)
}

// touch puts the learnt peer i at the head of the list, listing it when it
// is not, and replaces the tail when that makes the list longer than max.
func (t *peerTable) touch(i int32) {
	if t.head == i {
		return
	}
	p := t.at(i)
	if p.prev != noPeer || t.tail == i { // listed: unlink
		t.unlink(i)
	} else if t.listed >= t.max {
		old := t.tail
		t.unlink(old)
		t.remove(old)
		t.replaced.Add(1)
	}
	p.prev, p.next = noPeer, t.head
	if t.head != noPeer {
		t.at(t.head).prev = i
	}
	t.head = i
	if t.tail == noPeer {
		t.tail = i
	}
	t.listed++
}

// unlink takes the listed peer i off the list.
func (t *peerTable) unlink(i int32) {
	p := t.at(i)
	if p.prev != noPeer {
		t.at(p.prev).next = p.next
	} else {
		t.head = p.next
	}
	if p.next != noPeer {
		t.at(p.next).prev = p.prev
	} else {
		t.tail = p.prev
	}
	p.prev, p.next = noPeer, noPeer
	t.listed--
}

// waitPool holds the frames built for peers whose MAC is being resolved,
// Config.TxQueue of them in all (allocated at the first use): frame i is
// buf[i*slot:][:len[i]], next[i] chains a peer's frames.
type waitPool struct {
	slot int
	buf  []byte
	len  []int
	pay  []int
	next []int32
	free []int32
}

// take returns a free slot, or noPeer when none is.
func (w *waitPool) take(n, slot int) int32 {
	if w.buf == nil {
		w.slot = slot
		w.buf = make([]byte, n*slot)
		w.len, w.pay, w.next = make([]int, n), make([]int, n), make([]int32, n)
		w.free = make([]int32, n)
		for i := range w.free {
			w.free[i] = int32(n - 1 - i)
		}
	}
	if len(w.free) == 0 {
		return noPeer
	}
	i := w.free[len(w.free)-1]
	w.free = w.free[:len(w.free)-1]
	w.next[i] = noPeer
	return i
}

// frame returns the frame in slot i.
func (w *waitPool) frame(i int32) []byte { return w.buf[int(i)*w.slot:][:w.len[i]] }
