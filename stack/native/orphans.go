package native

// Orphans returns how many connections the application closed (Close)
// still send: their FIN is queued or not acknowledged yet (ESTABLISHED
// or CLOSE-WAIT with the FIN behind data, FIN-WAIT-1, CLOSING,
// LAST-ACK). A program about to Close the Engine waits for them to reach
// zero to let the bytes already written arrive (tcp/netconn's linger),
// and resets those left with AbortOrphans. It looks at every slot of the
// table: call it when closing, not per poll.
func (e *Engine) Orphans() int {
	k := 0
	for i := range e.conns {
		if e.orphan(&e.conns[i]) {
			k++
		}
	}
	return k
}

// AbortOrphans resets every connection Orphans counts (RFC 9293 §3.10.4,
// ABORT: a RST to the peer, counted in tcp_aborts) and returns how many.
// Engine.Close sends nothing, so a program that closes the engine while
// orphans still send calls this first (and Flush after it), and their
// peers learn at once that the bytes in flight will not come, instead of
// retransmitting into a silence until their own timeouts.
func (e *Engine) AbortOrphans() int {
	k := 0
	for i := range e.conns {
		if c := &e.conns[i]; e.orphan(c) {
			c.Abort()
			k++
		}
	}
	return k
}

func (e *Engine) orphan(c *Conn) bool {
	if c.user || c.queued {
		return false
	}
	switch c.state {
	case Established, CloseWait, FinWait1, Closing, LastAck:
		return true
	}
	return false
}
