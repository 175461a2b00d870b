package native

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// The sequence fuzz targets of seqfuzz_test.go over IPv6: the same
// programs, with segments that sometimes travel through a Destination
// Options header or in two fragments, from peers named by aliases
// (engine6.go). Afterwards no alias is left either.

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

// input6 runs frames through B's engine.
func input6(w *world, fs [][]byte) {
	for _, f := range fs {
		w.b.input(f)
	}
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

// FuzzSegmentSequenceOnLiveConnection6 is
// FuzzSegmentSequenceOnLiveConnection between two IPv6 engines.
func FuzzSegmentSequenceOnLiveConnection6(f *testing.F) {
	f.Add([]byte{0, 0x03, 0xe8, 0, 0, flagACK, 0, 0, 0, 0})
	f.Add([]byte{0, 0x80, 0, 0x40, 0, 0, 0, 0, 0, flagSYN, 0xff, 0xff, 0, 0, 1})
	f.Add([]byte{0, 0, 0, 0, 0, flagRST, 0, 0, 0, 0, 1, 0, 5, 0, 0, flagACK, 1, 0})
	f.Add([]byte{0x12, 0, 0, 0, 0, flagFIN | flagACK, 0x10, 0, 4, 30})
	f.Add([]byte{0x20, 0, 0, 0, 0, flagACK, 0x10, 0, 40, 0, 0x40, 0, 0, 0, 0, flagACK, 0x10, 0, 40})
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 400 {
			return
		}
		o := Options{MaxConns: 4, SendBuf: 16 << 10, RecvBuf: 16 << 10}
		w := newWorld6(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o, false)
		l, err := w.b.Listen(7000, 0)
		if err != nil {
			t.Fatal(err)
		}
		ca, cb := w.connectTo(l, w.b.peerAddrPort(7000))
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
			input6(w, tcp6Frame(w, w.a.six.addr, ca.lport, ca.rport, cb.rcvNxt+dseq, cb.sndUna+dack, flags, wnd, opts, make([]byte, n), int(kind>>4&3), id))
			checkConn(t, cb)
			switch kind >> 1 & 3 {
			case 1:
				for range 4 {
					w.step()
					checkConn(t, cb)
				}
			case 2:
				w.clk.Advance(time.Duration(p.u8()) * 100 * time.Millisecond)
				w.step()
				checkConn(t, cb)
			case 3:
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
		l.Close()
		drained(t, w, 24*time.Hour)
		leaks6(t, "A", w.a)
		leaks6(t, "B", w.b)
	})
}

// peerAddrPort is e's IPv6 address with port.
func (e *Engine) peerAddrPort(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom16(e.six.addr), port)
}

// FuzzSegmentSequenceOnListener6 is FuzzSegmentSequenceOnListener with
// IPv6 sources: SYNs, ACKs of SYN-ACKs and cookies, guesses, RSTs and
// FINs from four IPv6 peers to a listener with cookies on.
func FuzzSegmentSequenceOnListener6(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5})
	f.Add([]byte{1, 3, 0, 0, 0, 9, 0, 1, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0x10, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x21, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 30})
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 600 {
			return
		}
		o := Options{MaxConns: 6, SYNBacklog: 1, SendBuf: 8 << 10, RecvBuf: 8 << 10}
		w := newWorld6(t, memio.Options{TxSlots: 256, RxSlots: 256}, o, o, false)
		l, err := w.b.Listen(7000, 2)
		if err != nil {
			t.Fatal(err)
		}
		type synack struct{ seq, ack uint32 }
		last := map[uint16]synack{}
		var held []*Conn
		p := &ops{prog}
		for id := uint32(1); p.more(); id++ {
			kind, src := p.u8(), p.u8()&3
			sport := 40000 + uint16(src)
			from := ip6Addr{0x20, 0x01, 0, 2, 14: 1, 15: 100 + src}
			if src == 3 {
				from = linkLocal6([6]byte{2, 0, 0, 0, 0, 3}) // a link-local peer: a scope mismatch
			}
			dseq, dack := p.u32()&0xff, p.near()
			data := make([]byte, p.u8()&0x3f)
			ext := int(kind >> 4 & 3)
			w.b.tick()
			seg := func(seq, ack uint32, flags uint8, wnd uint16, opts, data []byte) {
				input6(w, tcp6Frame(w, from, sport, 7000, seq, ack, flags, wnd, opts, data, ext, id))
			}
			switch kind & 7 {
			case 0, 7:
				seg(dseq<<20, 0, flagSYN, 65535, mssOpt, nil)
			case 1:
				sa := last[sport]
				seg(sa.ack, sa.seq+1+dack, flagACK, 1000, nil, data)
			case 2:
				seg(dseq, dack, flagACK|flagPSH, 1000, nil, data)
			case 3:
				sa := last[sport]
				seg(sa.ack+dseq, 0, flagRST, 0, nil, nil)
			case 4:
				w.clk.Advance(time.Duration(dseq) * 500 * time.Millisecond)
				w.b.Poll(0)
			case 5:
				if c, ok := l.Accept(); ok {
					if dseq&1 == 0 {
						c.Close()
					} else {
						held = append(held, c)
					}
				}
			case 6:
				sa := last[sport]
				seg(sa.ack, sa.seq+1, flagFIN|flagACK, 1000, nil, nil)
			}
			for _, s := range sentBy6(w) {
				if s.flags == flagSYN|flagACK {
					last[s.dport] = synack{s.seq, s.ack}
				}
			}
			if w.b.synRcvd > o.SYNBacklog || l.synRcvd > o.SYNBacklog || len(l.queue) > l.backlog ||
				slotsUsed(w.b) > o.MaxConns || len(w.b.six.byAddr) > slotsUsed(w.b)+w.b.TimeWaits() {
				t.Fatalf("bounds: SYN-RECEIVED %d, queue %d, slots %d, aliases %d", w.b.synRcvd, len(l.queue), slotsUsed(w.b), len(w.b.six.byAddr))
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
		end := w.clk.Now().Add(24 * time.Hour)
		for still := 0; w.clk.Now().Before(end); still++ {
			w.b.Flush()
			sentBy6(w)
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
		leaks6(t, "B", w.b)
	})
}
