package native

// Orphans returns how many connections the application closed (Close)
// still send: their FIN is queued or not acknowledged yet (ESTABLISHED
// or CLOSE-WAIT with the FIN behind data, FIN-WAIT-1, CLOSING, LAST-ACK). A program about to Close the Engine waits for them to reach
// zero to let the bytes already written arrive (tcp/netconn's linger).
// It looks at every slot of the table: call it when closing, not per
// poll.
func (e *Engine) Orphans() int {
	k := 0
	for i := range e.conns {
		c := &e.conns[i]
		if c.user || c.queued {
			continue
		}
		switch c.state {
		case Established, CloseWait, FinWait1, Closing, LastAck:
			k++
		}
	}
	return k
}
