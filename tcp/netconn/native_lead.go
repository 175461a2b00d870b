package netconn

import (
	"os"
	"syscall"
	"time"
)

// A Read that would park, where the poller sleeps in the Go netpoller,
// leads instead (lead): it waits in the netpoller itself, on a second
// duplicate of the FrameIO's fd (rf), so that the frame that brings its
// bytes readies the reader's goroutine directly, as a kernel socket's
// does, and the reader runs the poller's round itself (leadRound) instead
// of waiting for the poller to run it and ready the reader (one goroutine
// hop). The invariants (docs/ARCHITECTURE.md, "A Read that leads"):
//
//   - Every frame is followed by a round: the poller still sleeps on pf
//     with its timer, but woken by a frame while a Read or Write holds
//     the engine it leaves the round to that holder (deferRound), which
//     runs it when it frees the engine (free), and sleeps again. Its
//     timer and wakes (work, requests, Close) are never deferred.
//   - One reader leads at a time (leader); it waits on rf only after
//     storing itself as leader, setting rf's deadline and looking once
//     more for its bytes, its end and a token in rdCh. Whatever would
//     wake a parked reader (the poller filling its ring, its end, Close,
//     CloseRead, a deadline set or passing) signals rdCh and then, if the
//     reader leads, ends its wait (kickRead): a wake before the reader's
//     last look is seen by that look, one after it ends the wait.
//   - The reader runs a round only if it takes the free engine
//     (ownFree -> ownReader, as an inline Write does); it frees it after,
//     moving the poller's wake-up (rearm) and handing the engine to a
//     poller that waits for it (handCh). If it cannot take the engine,
//     its holder does the round and wakes the reader through rdCh.

// ownReader: a leading Read runs a round (leadRound).
const ownReader = 3

// openLeadFD registers a second duplicate of the FrameIO's fd, on which a
// leading reader waits (n.pf set).
func (n *nativeSvc) openLeadFD() error {
	pfd := n.fio.(PollFDer)
	fd, err := syscall.Dup(pfd.PollFD())
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), "frameio-lead")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	n.rf, n.rrc = f, rc
	n.leadFn = func(uintptr) bool {
		// As the poller's readFn: a frame that came before the Read
		// cleared the fd's readiness is polled now, when the engine is
		// free (a holder's round, or the poller's, covers it otherwise).
		if n.leadFirst {
			n.leadFirst = false
			return n.rxReady != nil && n.own.Load() == ownFree && n.rxReady()
		}
		return true
	}
	return nil
}

// lead is a Read's wait for c's bytes when the poller sleeps in the
// netpoller: it waits on rf and, woken by a frame, runs a round if the
// engine is free. A reader leads whether or not the poller sleeps at
// that moment: while it runs, its round fills the ring and ends the wait
// (kickRead) as it would signal a parked reader. lead returns false
// without waiting when it may not lead (no rf, the poller spins, another
// reader leads, the Service stops): the caller parks on rdCh. True: look
// again.
func (n *nativeSvc) lead(c *nconn, conn *Conn) bool {
	if n.rf == nil || n.s.opts.Poll == PollSpin || n.stop.Load() {
		return false
	}
	// While the poller spins it sees the frame first: park on rdCh
	// (the poller wakes this reader to lead before it sleeps).
	if n.spinning.Load() && n.parkedInSpin(c) {
		return false
	}
	if !n.leader.CompareAndSwap(nil, c) {
		return false
	}
	defer n.leader.Store(nil)
	n.rf.SetReadDeadline(time.Time{}) // the Read's deadline kicks, as any wake
	select {
	case <-c.rdCh:
		return true
	default:
	}
	if c.rx.len() > 0 || c.end.Load() != 0 || c.rdShut.Load() || conn.closed() ||
		conn.rdDL.passed() || n.stop.Load() {
		return true
	}
	n.leadFirst = true
	if err := n.rrc.Read(n.leadFn); err != nil {
		return true // a kick (a deadline in the past) or rf closed
	}
	n.leadRound()
	return true
}

// leadRound runs the poller's round from a leading reader, if the engine
// is free.
func (n *nativeSvc) leadRound() {
	if !n.own.CompareAndSwap(ownFree, ownReader) {
		return // its holder runs the round
	}
	n.round()
	n.leadRounds.Add(1)
	n.free(ownReader)
}

// kickRead tells c's reader to look again: rdCh, and the end of its wait
// on rf if it leads.
func (c *nconn) kickRead() {
	signal(c.rdCh)
	c.kickLead()
}

// kickLead ends the wait on rf of c's reader if it leads (after rdCh was
// signalled).
func (c *nconn) kickLead() {
	if n := c.n; n.leader.Load() == c {
		n.rf.SetReadDeadline(longAgo)
	}
}
