package native

import (
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/pad"
)

// txSlots lets the engine build a TCP segment in the FrameIO's transmit
// slot (frameio.SlotWriter: an AF_XDP socket's UMEM frame, a memio slot)
// instead of in its own buffer that TxFrame then copies: on a bulk
// sender's path that copy was a second copy of every payload byte, after
// the one out of the send ring.
//
// Only emit (every segment of a connection) builds in a slot: it takes
// one before it writes the options, and send commits it. Everything else
// (ARP, ICMP, RSTs without a connection, IPv6's control messages) builds
// in the engine's buffer, which e.tx points at again after each send.
type txSlots struct {
	w   frameio.SlotWriter // nil: the FrameIO has no slots to build in
	own []byte             // the engine's own buffer
}

func (t *txSlots) init(fio frameio.FrameIO, own []byte) {
	t.own = own
	if w, ok := fio.(frameio.SlotWriter); ok {
		t.w = w
	}
}

// takeSlot points e.tx at a free transmit slot when the FrameIO has one
// large enough for any frame of ours; otherwise e.tx stays the engine's
// buffer (and send copies it with TxFrame, counting a full ring there).
func (e *Engine) takeSlot() {
	if e.txs.w == nil || e.txTaken {
		return
	}
	b := e.txs.w.TxSlot()
	if cap(b) < e.o.MTU+ethLen {
		return
	}
	e.tx, e.txTaken = b[:0], true
}

// sendSlot commits the frame built in the taken slot, padded as send
// pads, and points e.tx back at the engine's buffer. A full ring leaves
// the slot taken, for the next segment (counted tx_ring_full).
func (e *Engine) sendSlot() bool {
	f, _ := pad.InPlace(e.tx)
	e.tx, e.txTaken = e.txs.own, false
	if !e.txs.w.TxCommit(len(f)) {
		e.cnt[cTxRingFull]++
		return false
	}
	e.cnt[cTxFrames]++
	e.unkicked = true
	return true
}
