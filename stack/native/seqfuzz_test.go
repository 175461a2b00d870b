package native

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// ops decodes a fuzzer's bytes into a sequence of operations, a fixed
// number of bytes each; what is short at the end reads as zeros.
type ops struct{ b []byte }

func (o *ops) more() bool { return len(o.b) > 0 }

func (o *ops) u8() uint8 {
	if len(o.b) == 0 {
		return 0
	}
	v := o.b[0]
	o.b = o.b[1:]
	return v
}

func (o *ops) u16() uint16 { return uint16(o.u8())<<8 | uint16(o.u8()) }

func (o *ops) u32() uint32 { return uint32(o.u16())<<16 | uint32(o.u16()) }

// near is a sequence offset the fuzzer mostly keeps close to its base
// (where the windows are), sometimes anywhere.
func (o *ops) near() uint32 {
	v := o.u16()
	if v&0x8000 != 0 {
		return o.u32()
	}
	return uint32(int32(int16(v<<1)) / 2)
}

// drained runs the world until neither engine has a timer left (every
// connection ended, every TIME-WAIT over), failing after limit.
func drained(t *testing.T, w *world, limit time.Duration) {
	t.Helper()
	end := w.clk.Now().Add(limit)
	for w.clk.Now().Before(end) {
		if w.step() == 0 && len(w.a.dirty) == 0 && len(w.b.dirty) == 0 && !w.idle() {
			return
		}
	}
	t.Fatalf("timers still armed after %v: A %d slots %d records, B %d slots %d records",
		limit, slotsUsed(w.a), w.a.TimeWaits(), slotsUsed(w.b), w.b.TimeWaits())
}

// leaks fails when e holds anything after every connection ended and
// every timer ran: a slot, a TIME-WAIT record, a table entry, a heap
// entry, a SYN-RECEIVED count.
func leaks(t *testing.T, name string, e *Engine) {
	t.Helper()
	if slotsUsed(e) != 0 || e.TimeWaits() != 0 || len(e.table) != 0 || len(e.heap) != 0 || e.synRcvd != 0 {
		for i := range e.conns {
			if c := &e.conns[i]; c.state != Closed || c.user {
				t.Logf("slot %d: %v user %v queued %v una %d nxt %d max %d sLen %d wnd %d fin q/s/a %v %v %v err %v",
					i, c.state, c.user, c.queued, c.sndUna, c.sndNxt, c.sndMax, c.sLen, c.sndWnd, c.finQueued, c.finSent, c.finAcked, c.err)
			}
		}
		t.Fatalf("%s after the timeouts: %d slots, %d TIME-WAIT records, %d table entries, %d timers, %d SYN-RECEIVED",
			name, slotsUsed(e), e.TimeWaits(), len(e.table), len(e.heap), e.synRcvd)
	}
	for _, l := range e.listeners {
		if l.synRcvd != 0 || len(l.queue) != 0 {
			t.Fatalf("%s: listener %d holds %d SYN-RECEIVED, %d queued", name, l.port, l.synRcvd, len(l.queue))
		}
	}
}

// FuzzSegmentSequenceOnLiveConnection drives a sequence of segments,
// each with fields near the connection's state or anywhere, interleaved
// with the two engines' own traffic and with time passing, into a live
// connection whose both ends carry data. After each segment the
// connection's invariants hold (SND.UNA <= SND.NXT <= SND.MAX, buffers,
// out-of-order blocks); afterwards the real peer's segments still open
// the window (a forged one does not freeze it: data flows, unless the
// connection ended by a rule or PAWS holds it); and once both ends close
// and every timeout ran, no slot, record or timer is left.
func FuzzSegmentSequenceOnLiveConnection(f *testing.F) {
	f.Add([]byte{0, 0x03, 0xe8, 0, 0, flagACK, 0, 0, 0, 0})                         // forged zero-window ACK right of RCV.NXT
	f.Add([]byte{0, 0x80, 0, 0x40, 0, 0, 0, 0, 0, flagSYN, 0xff, 0xff, 0, 0, 1})    // out-of-window SYN
	f.Add([]byte{0, 0, 0, 0, 0, flagRST, 0, 0, 0, 0, 1, 0, 5, 0, 0, flagACK, 1, 0}) // RST, then data
	f.Add([]byte{2, 0, 0, 0, 0, flagFIN | flagACK, 0x10, 0, 4, 30})
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 400 {
			return
		}
		o := Options{MaxConns: 4, SendBuf: 16 << 10, RecvBuf: 16 << 10}
		w := newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o)
		ca, cb := w.connect(7000)
		peer := &Conn{lport: ca.lport, rport: ca.rport}
		ca.Write(make([]byte, 3000))
		cb.Write(make([]byte, 3000))
		buf := make([]byte, 4096)
		p := &ops{prog}
		for p.more() {
			kind := p.u8()
			dseq, dack := p.near(), p.near()
			flags, wnd, n := p.u8()&0x3f, p.u16(), int(p.u8())
			var opts []byte
			if kind&1 != 0 {
				opts = tsOpt(cb.tsRecent+uint32(int8(p.u8())), 0)
			}
			w.b.tick()
			w.b.input(segFrame(w, peer, cb.rcvNxt+dseq, cb.sndUna+dack, flags, wnd, opts, make([]byte, n)))
			checkConn(t, cb)
			switch kind >> 1 & 3 {
			case 1: // the engines' own traffic
				for range 4 {
					w.step()
					checkConn(t, cb)
				}
			case 2: // time passes
				w.clk.Advance(time.Duration(p.u8()) * 100 * time.Millisecond)
				w.step()
				checkConn(t, cb)
			case 3: // the applications read
				ca.Read(buf)
				cb.Read(buf)
			}
		}
		held := cb.tsOK && seqLT(ca.tsNow(), cb.tsRecent-pawsSlack)
		if cb.State() == Established && ca.State() == Established && !held {
			w.until(30*time.Minute, "data after the sequence", func() bool {
				ca.Read(buf)
				cb.Read(buf)
				checkConn(t, cb)
				return cb.sLen == 0 || cb.Err() != nil || ca.Err() != nil || w.b.cnt[cTCPPAWS] > 0
			})
		}
		ca.Close()
		cb.Close()
		w.b.listeners[7000].Close() // a connection the sequence opened anew, never accepted, goes too
		drained(t, w, 24*time.Hour)
		leaks(t, "A", w.a)
		leaks(t, "B", w.b)
	})
}

// FuzzSegmentSequenceOnListener drives a sequence of SYNs, ACKs (of the
// SYN-ACKs and cookies the listener sent, exact or shifted, or guessed),
// RSTs and data from a few sources to a listener with SYN cookies on and
// a backlog of one, with time passing and connections accepted and
// closed. Throughout, SYN-RECEIVED stays within its bounds and the
// accept queue within the backlog; afterwards, with every connection
// closed and every timeout run, no slot, record, timer or SYN-RECEIVED
// count is left.
func FuzzSegmentSequenceOnListener(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5})
	f.Add([]byte{1, 3, 0, 0, 0, 9, 0, 1, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(listenerProg)
}

func listenerProg(t *testing.T, prog []byte) {
	{
		if len(prog) > 600 {
			return
		}
		o := Options{MaxConns: 6, SYNBacklog: 1, SendBuf: 8 << 10, RecvBuf: 8 << 10}
		w := newWorld(t, memio.Options{TxSlots: 256, RxSlots: 256}, o, o)
		l, err := w.b.Listen(7000, 2)
		if err != nil {
			t.Fatal(err)
		}
		type synack struct{ seq, ack uint32 }
		last := map[uint16]synack{} // by the source port they answered
		var held []*Conn
		p := &ops{prog}
		for p.more() {
			kind, src := p.u8(), p.u8()&3
			sport := 40000 + uint16(src)
			from := [4]byte{198, 18, 0, 100 + src}
			dseq, dack := p.u32()&0xff, p.near()
			data := make([]byte, p.u8()&0x3f)
			w.b.tick()
			switch kind & 7 {
			case 0: // SYN
				w.b.input(synToB(w, from, sport, 7000, dseq<<20))
			case 1: // ACK of the last SYN-ACK to this source, shifted by dack
				sa := last[sport]
				w.b.input(rawTCP(w, from, sport, 7000, sa.ack, sa.seq+1+dack, flagACK, 1000, nil, data))
			case 2: // a guess: any ACK
				w.b.input(rawTCP(w, from, sport, 7000, dseq, dack, flagACK|flagPSH, 1000, nil, data))
			case 3: // RST
				sa := last[sport]
				w.b.input(rawTCP(w, from, sport, 7000, sa.ack+dseq, 0, flagRST, 0, nil, nil))
			case 4: // time passes
				w.clk.Advance(time.Duration(dseq) * 500 * time.Millisecond)
				w.b.Poll(0)
			case 5: // accept, and close some
				if c, ok := l.Accept(); ok {
					if dseq&1 == 0 {
						c.Close()
					} else {
						held = append(held, c)
					}
				}
			case 6: // a FIN
				sa := last[sport]
				w.b.input(rawTCP(w, from, sport, 7000, sa.ack, sa.seq+1, flagFIN|flagACK, 1000, nil, nil))
			case 7: // the SYN again (a retransmission)
				w.b.input(synToB(w, from, sport, 7000, dseq<<20))
			}
			for _, s := range sentBy(w) {
				if s.flags == flagSYN|flagACK {
					last[s.dport] = synack{s.seq, s.ack}
				}
			}
			if w.b.synRcvd > o.SYNBacklog || l.synRcvd > o.SYNBacklog || len(l.queue) > l.backlog ||
				w.b.synRcvd > w.b.o.MaxSYNReceived || slotsUsed(w.b) > o.MaxConns {
				t.Fatalf("bounds: SYN-RECEIVED %d (listener %d), queue %d, slots %d", w.b.synRcvd, l.synRcvd, len(l.queue), slotsUsed(w.b))
			}
			for i := range w.b.conns {
				checkConn(t, &w.b.conns[i])
			}
		}
		for c, ok := l.Accept(); ok; c, ok = l.Accept() {
			c.Close()
		}
		for _, c := range held {
			c.Close()
		}
		// The fake clients never answer again: what is left times out.
		end := w.clk.Now().Add(24 * time.Hour)
		for still := 0; w.clk.Now().Before(end); still++ {
			w.b.Flush()
			sentBy(w)
			at, ok := w.b.NextTimer()
			if !ok {
				break
			}
			if d := at.Sub(w.clk.Now()); d > 0 {
				w.clk.Advance(d)
				still = 0
			}
			if still > 1000 {
				t.Fatalf("the server has work due that never gets done: %d dirty", len(w.b.dirty))
			}
			w.b.Poll(0)
		}
		l.Close()
		leaks(t, "B", w.b)
		_ = binary.BigEndian
	}
}
