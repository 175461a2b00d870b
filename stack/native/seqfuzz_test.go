package native

import (
	"encoding/binary"
	"net/netip"
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

// seqFamily is one column of the sequence fuzz targets: the targets
// without a suffix run over IPv4, those with 6 over IPv6, one program
// each (liveProg, listenerProg).
type seqFamily struct {
	newWorld func(t *testing.T, mo memio.Options, o Options) *world
	// addrB is B's address of the family with port.
	addrB func(w *world, port uint16) netip.AddrPort
	// addrA is A's address of the family.
	addrA func(w *world) netip.Addr
	// peer is the address of the listener target's fake client src (0
	// to 3).
	peer func(src uint8) netip.Addr
	// seg builds the frames of a TCP segment from src:sport on A's link
	// to B:dport, with correct checksums; over IPv6, ext 1 sends it
	// through a Destination Options header and 2 in two fragments
	// (fragment id), IPv4 has neither.
	seg func(w *world, src netip.Addr, sport, dport uint16, seq, ack uint32, flags uint8, wnd uint16, opts, data []byte, ext int, id uint32) [][]byte
	// sentBy takes the frames B put on the wire and returns its TCP
	// segments.
	sentBy func(w *world) []segment
	// leaks fails when e holds anything after every connection ended.
	leaks func(t *testing.T, name string, e *Engine)
}

var seqIPv4 = seqFamily{
	newWorld: func(t *testing.T, mo memio.Options, o Options) *world { return newWorld(t, mo, o, o) },
	addrB:    func(w *world, port uint16) netip.AddrPort { return netip.AddrPortFrom(addrB, port) },
	addrA:    func(w *world) netip.Addr { return netip.AddrFrom4(w.a.addr) },
	peer:     func(src uint8) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, 0, 100 + src}) },
	seg: func(w *world, src netip.Addr, sport, dport uint16, seq, ack uint32, flags uint8, wnd uint16, opts, data []byte, _ int, _ uint32) [][]byte {
		return [][]byte{rawTCP(w, src.As4(), sport, dport, seq, ack, flags, wnd, opts, data)}
	},
	sentBy: sentBy,
	leaks:  leaks,
}

var seqIPv6 = seqFamily{
	newWorld: func(t *testing.T, mo memio.Options, o Options) *world { return newWorld6(t, mo, o, o, false) },
	addrB:    func(w *world, port uint16) netip.AddrPort { return w.b.peerAddrPort(port) },
	addrA:    func(w *world) netip.Addr { return netip.AddrFrom16(w.a.six.addr) },
	peer: func(src uint8) netip.Addr {
		if src == 3 {
			return netip.AddrFrom16(linkLocal6([6]byte{2, 0, 0, 0, 0, 3})) // a link-local peer: a scope mismatch
		}
		return netip.AddrFrom16(ip6Addr{0x20, 0x01, 0, 2, 14: 1, 15: 100 + src})
	},
	seg: func(w *world, src netip.Addr, sport, dport uint16, seq, ack uint32, flags uint8, wnd uint16, opts, data []byte, ext int, id uint32) [][]byte {
		return tcp6Frame(w, src.As16(), sport, dport, seq, ack, flags, wnd, opts, data, ext, id)
	},
	sentBy: sentBy6,
	leaks:  leaks6,
}

// aliases is the number of IPv6 aliases e holds (none without IPv6).
func aliases(e *Engine) int {
	if e.six == nil {
		return 0
	}
	return len(e.six.byAddr)
}

// tcp6Frame builds an IPv6 TCP frame from src to dst (B's engine), with
// options and data; ext 1: through a Destination Options header, 2: in
// two fragments (when there is data to cut).
func tcp6Frame(w *world, src ip6Addr, sport, dport uint16, seq, ack uint32, flags uint8, wnd uint16, opts, data []byte, ext int, id uint32) [][]byte {
	dst := w.b.six.addr
	ol := (len(opts) + 3) &^ 3
	hl := tcpLen + ol
	tc := make([]byte, hl+len(data))
	putTCP(tc, sport, dport, seq, ack, hl, flags&0x3f, wnd)
	copy(tc[tcpLen:], opts)
	copy(tc[hl:], data)
	binary.BigEndian.PutUint16(tc[16:], checksum6(src, dst, protoTCP, tc))
	var pkts [][]byte
	switch {
	case ext == 1:
		pkts = append(pkts, pkt6(src, dst, 64, []ext6{optsHdr(extDestOpts)}, protoTCP, tc))
	case ext == 2 && len(tc) > 16:
		cut := len(tc) / 2 &^ 7
		pkts = append(pkts, pkt6(src, dst, 64, []ext6{fragHdr(cut, false, id)}, protoTCP, tc[cut:]),
			pkt6(src, dst, 64, []ext6{fragHdr(0, true, id)}, protoTCP, tc[:cut]))
	default:
		pkts = append(pkts, pkt6(src, dst, 64, nil, protoTCP, tc))
	}
	out := make([][]byte, len(pkts))
	for i, p := range pkts {
		f := make([]byte, max(ethLen+len(p), 60))
		putEth(f, w.b.mac, w.a.mac, etherIPv6)
		copy(f[ethLen:], p)
		out[i] = f
	}
	return out
}

// sentBy6 takes the frames B put on the wire and returns its TCP
// segments over IPv6.
func sentBy6(w *world) []segment {
	w.b.Flush()
	var out []segment
	w.pa.RxFrames(1024, func(f []byte) {
		var h ip6Hdr
		if binary.BigEndian.Uint16(f[12:]) != etherIPv6 || parseIPv6(f[ethLen:], &h) != ip6OK || h.proto != protoTCP {
			return
		}
		var s segment
		if parseTCPSum(&s, pseudo6(h.src, h.dst, protoTCP, 0), h.payload(f[ethLen:])) == tcpOK {
			s.payload = append([]byte(nil), s.payload...)
			out = append(out, s)
		}
	})
	return out
}

// leaks6 is leaks with the IPv6 aliases and reassembly.
func leaks6(t *testing.T, name string, e *Engine) {
	t.Helper()
	leaks(t, name, e)
	if n := len(e.six.byAddr); n != 0 {
		t.Fatalf("%s: %d IPv6 aliases left", name, n)
	}
}

// peerAddrPort is e's IPv6 address with port.
func (e *Engine) peerAddrPort(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom16(e.six.addr), port)
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
	f.Fuzz(func(t *testing.T, prog []byte) { liveProg(t, seqIPv4, prog) })
}

// FuzzSegmentSequenceOnLiveConnection6 is
// FuzzSegmentSequenceOnLiveConnection between two IPv6 engines, with
// segments that sometimes travel through a Destination Options header
// or in two fragments; afterwards no alias is left either.
func FuzzSegmentSequenceOnLiveConnection6(f *testing.F) {
	f.Add([]byte{0, 0x03, 0xe8, 0, 0, flagACK, 0, 0, 0, 0})
	f.Add([]byte{0, 0x80, 0, 0x40, 0, 0, 0, 0, 0, flagSYN, 0xff, 0xff, 0, 0, 1})
	f.Add([]byte{0, 0, 0, 0, 0, flagRST, 0, 0, 0, 0, 1, 0, 5, 0, 0, flagACK, 1, 0})
	f.Add([]byte{0x12, 0, 0, 0, 0, flagFIN | flagACK, 0x10, 0, 4, 30})
	f.Add([]byte{0x20, 0, 0, 0, 0, flagACK, 0x10, 0, 40, 0, 0x40, 0, 0, 0, 0, flagACK, 0x10, 0, 40})
	f.Fuzz(func(t *testing.T, prog []byte) { liveProg(t, seqIPv6, prog) })
}

// liveProg is the program of FuzzSegmentSequenceOnLiveConnection[6] in
// the family fam.
func liveProg(t *testing.T, fam seqFamily, prog []byte) {
	if len(prog) > 400 {
		return
	}
	o := Options{MaxConns: 4, SendBuf: 16 << 10, RecvBuf: 16 << 10}
	w := fam.newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o)
	l, err := w.b.Listen(7000, 0)
	if err != nil {
		t.Fatal(err)
	}
	ca, cb := w.connectTo(l, fam.addrB(w, 7000))
	from := fam.addrA(w)
	ca.Write(make([]byte, 3000))
	cb.Write(make([]byte, 3000))
	buf := make([]byte, 4096)
	p := &ops{prog}
	for id := uint32(1); p.more(); id++ {
		kind := p.u8()
		dseq, dack := p.near(), p.near()
		flags, wnd, n := p.u8()&0x3f, p.u16(), int(p.u8())
		var opts []byte
		if kind&1 != 0 {
			opts = tsOpt(cb.tsRecent+uint32(int8(p.u8())), 0)
		}
		w.b.tick()
		for _, fr := range fam.seg(w, from, ca.lport, ca.rport, cb.rcvNxt+dseq, cb.sndUna+dack, flags, wnd, opts, make([]byte, n), int(kind>>4&3), id) {
			w.b.input(fr)
		}
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
	l.Close() // a connection the sequence opened anew, never accepted, goes too
	drained(t, w, 24*time.Hour)
	fam.leaks(t, "A", w.a)
	fam.leaks(t, "B", w.b)
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
	f.Fuzz(func(t *testing.T, prog []byte) { listenerProg(t, seqIPv4, prog) })
}

// FuzzSegmentSequenceOnListener6 is FuzzSegmentSequenceOnListener with
// IPv6 sources (one of them link-local: a scope mismatch), segments
// sometimes through a Destination Options header or in two fragments;
// the aliases stay within the slots and records, and none is left.
func FuzzSegmentSequenceOnListener6(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5})
	f.Add([]byte{1, 3, 0, 0, 0, 9, 0, 1, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0x10, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x21, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 30})
	f.Fuzz(func(t *testing.T, prog []byte) { listenerProg(t, seqIPv6, prog) })
}

// listenerProg is the program of FuzzSegmentSequenceOnListener[6] in the
// family fam.
func listenerProg(t *testing.T, fam seqFamily, prog []byte) {
	if len(prog) > 600 {
		return
	}
	o := Options{MaxConns: 6, SYNBacklog: 1, SendBuf: 8 << 10, RecvBuf: 8 << 10}
	w := fam.newWorld(t, memio.Options{TxSlots: 256, RxSlots: 256}, o)
	l, err := w.b.Listen(7000, 2)
	if err != nil {
		t.Fatal(err)
	}
	type synack struct{ seq, ack uint32 }
	last := map[uint16]synack{} // by the source port they answered
	var held []*Conn
	p := &ops{prog}
	for id := uint32(1); p.more(); id++ {
		kind, src := p.u8(), p.u8()&3
		sport := 40000 + uint16(src)
		from := fam.peer(src)
		dseq, dack := p.u32()&0xff, p.near()
		data := make([]byte, p.u8()&0x3f)
		ext := int(kind >> 4 & 3)
		w.b.tick()
		seg := func(seq, ack uint32, flags uint8, wnd uint16, opts, data []byte) {
			for _, fr := range fam.seg(w, from, sport, 7000, seq, ack, flags, wnd, opts, data, ext, id) {
				w.b.input(fr)
			}
		}
		switch kind & 7 {
		case 0, 7: // SYN (7: the SYN again, a retransmission)
			seg(dseq<<20, 0, flagSYN, 65535, mssOpt, nil)
		case 1: // ACK of the last SYN-ACK to this source, shifted by dack
			sa := last[sport]
			seg(sa.ack, sa.seq+1+dack, flagACK, 1000, nil, data)
		case 2: // a guess: any ACK
			seg(dseq, dack, flagACK|flagPSH, 1000, nil, data)
		case 3: // RST
			sa := last[sport]
			seg(sa.ack+dseq, 0, flagRST, 0, nil, nil)
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
			seg(sa.ack, sa.seq+1, flagFIN|flagACK, 1000, nil, nil)
		}
		for _, s := range fam.sentBy(w) {
			if s.flags == flagSYN|flagACK {
				last[s.dport] = synack{s.seq, s.ack}
			}
		}
		if w.b.synRcvd > o.SYNBacklog || l.synRcvd > o.SYNBacklog || len(l.queue) > l.backlog ||
			w.b.synRcvd > w.b.o.MaxSYNReceived || slotsUsed(w.b) > o.MaxConns || aliases(w.b) > slotsUsed(w.b)+w.b.TimeWaits() {
			t.Fatalf("bounds: SYN-RECEIVED %d (listener %d), queue %d, slots %d, aliases %d", w.b.synRcvd, l.synRcvd, len(l.queue), slotsUsed(w.b), aliases(w.b))
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
		fam.sentBy(w)
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
	fam.leaks(t, "B", w.b)
}
