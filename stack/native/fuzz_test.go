package native

import (
	"encoding/binary"
	"reflect"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// FuzzParseTCP: the TCP header and option parser never panics, and what
// it accepts stays inside the bytes it was given.
func FuzzParseTCP(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0x80, 0x02, 0xff, 0xff, 0, 0, 0, 0,
		2, 4, 5, 0xb4, 1, 3, 3, 7, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0x60, 0x10, 0xff, 0xff, 0, 0, 0, 0, 5, 10, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var s segment
		src, dst := [4]byte{198, 18, 0, 2}, [4]byte{198, 18, 0, 1}
		// Give every input a correct checksum so the parser goes on.
		if len(b) >= tcpLen {
			b[16], b[17] = 0, 0
			binary.BigEndian.PutUint16(b[16:], fold(csum(pseudo(src, dst, protoTCP, len(b)), b)))
		}
		if parseTCP(&s, src, dst, b) != tcpOK {
			return
		}
		if len(s.payload) > len(b) || s.nsack > len(s.sacks) || s.wscale > 14 {
			t.Fatalf("parsed beyond the input: %+v", s)
		}
	})
}

// FuzzIPv4: the IPv4 header check never panics and a valid datagram's
// payload is within the frame.
func FuzzIPv4(f *testing.F) {
	f.Add([]byte{0x45, 0, 0, 20, 0, 0, 0x40, 0, 64, 6, 0, 0, 198, 18, 0, 2, 198, 18, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		p := ipv4(b)
		if len(b) >= ipLen && b[0]&0x0f == 5 {
			b[10], b[11] = 0, 0
			binary.BigEndian.PutUint16(b[10:], fold(csum(0, b[:ipLen])))
		}
		if p.check() == ipOK && len(p.payload()) > len(b) {
			t.Fatal("payload beyond the frame")
		}
	})
}

// FuzzSegmentOnLiveConnection feeds arbitrary TCP headers, options and
// data, addressed to a live connection (right tuple, right checksums), to
// its engine, then checks the engine is still sound: its invariants hold
// and the connection still carries data, or it ended by a rule.
func FuzzSegmentOnLiveConnection(f *testing.F) {
	f.Add(uint32(0), uint32(0), uint8(flagACK), uint16(65535), []byte{}, []byte("data"))
	f.Add(uint32(1), uint32(0), uint8(flagRST), uint16(0), []byte{}, []byte{})
	f.Add(uint32(0), uint32(1<<31), uint8(flagSYN|flagACK), uint16(1), []byte{5, 10, 0, 0, 0, 0, 0, 0, 0, 9}, []byte{})
	f.Add(uint32(100), uint32(5), uint8(flagFIN|flagACK|flagPSH), uint16(0), []byte{8, 10, 0, 0, 0, 1, 0, 0, 0, 0}, []byte("x"))
	f.Fuzz(func(t *testing.T, dseq, dack uint32, flags uint8, wnd uint16, opts, data []byte) {
		if len(opts) > 40 || len(data) > 1400 {
			return
		}
		o := Options{MaxConns: 4, SendBuf: 16 << 10, RecvBuf: 16 << 10}
		w := newWorld(t, memio.Options{TxSlots: 32, RxSlots: 32}, o, o)
		ca, cb := w.connect(7000)
		ca.Write([]byte("before"))
		w.until(time.Second, "first", func() bool { return ca.sndUna == ca.sndMax })
		w.b.tick()
		w.b.input(segFrame(w, ca, cb.rcvNxt+dseq, cb.sndUna+dack, flags, wnd, opts, data))
		checkConn(t, cb)
		// A timestamp ahead of A's clock in an acceptable segment becomes
		// B's TS.Recent (RFC 7323 §5.3 R3), and B then rejects every
		// segment of A as old until A's clock passes it (R1), as Linux
		// does: the connection is held by that rule, not wedged.
		held := cb.tsOK && seqLT(ca.tsNow(), cb.tsRecent-pawsSlack)
		for range 50 {
			w.step()
			checkConn(t, cb)
		}
		if cb.State() == Established && ca.State() == Established {
			cb.Write([]byte("after"))
			buf := make([]byte, 64)
			got := 0
			w.until(10*time.Minute, "after", func() bool {
				n, err := ca.Read(buf)
				got += n
				return got >= 5 || err != nil || ca.State() != Established || cb.State() != Established ||
					held && w.b.cnt[cTCPPAWS] > 0
			})
		}
	})
}

// segFrame builds a segment of connection ca (A's end) to B, with any
// header fields, options and data, and correct checksums.
func segFrame(w *world, ca *Conn, seq, ack uint32, flags uint8, wnd uint16, opts, data []byte) []byte {
	ol := (len(opts) + 3) &^ 3
	hl := tcpLen + ol
	fr := make([]byte, ethLen+ipLen+hl+len(data))
	putEth(fr, w.b.mac, w.a.mac, etherIPv4)
	putIPv4(fr[ethLen:], 1, protoTCP, w.a.addr, w.b.addr, ipLen+hl+len(data))
	tc := fr[ethLen+ipLen:]
	putTCP(tc, ca.lport, ca.rport, seq, ack, hl, flags&0x3f, wnd)
	copy(tc[tcpLen:], opts)
	copy(tc[hl:], data)
	binary.BigEndian.PutUint16(tc[16:], fold(csum(pseudo(w.a.addr, w.b.addr, protoTCP, hl+len(data)), tc)))
	return fr
}

// checkConn asserts the connection's invariants.
func checkConn(t *testing.T, c *Conn) {
	t.Helper()
	if c.state == Closed {
		return
	}
	if c.sLen < 0 || c.sLen > len(c.sbuf) || c.rLen < 0 || c.rLen > c.rcvCap+rcvSlack(c.rcvCap) || c.rLen > len(c.rbuf) {
		t.Fatalf("buffers: sLen %d rLen %d", c.sLen, c.rLen)
	}
	if seqGT(c.sndUna, c.sndMax) || seqGT(c.sndNxt, c.sndMax) || seqLT(c.sndNxt, c.sndUna) {
		t.Fatalf("send sequence: una %d nxt %d max %d", c.sndUna, c.sndNxt, c.sndMax)
	}
	if c.nooo < 0 || c.nooo > len(c.ooo) || c.nsacked > len(c.sacked) {
		t.Fatalf("queues: ooo %d sacked %d", c.nooo, c.nsacked)
	}
	for i := 0; i < c.nooo; i++ {
		if !seqLT(c.ooo[i].start, c.ooo[i].end) || !seqGT(c.ooo[i].start, c.rcvNxt) {
			t.Fatalf("out-of-order block %d %+v at RCV.NXT %d", i, c.ooo[i], c.rcvNxt)
		}
		if int(c.ooo[i].end-c.rcvNxt) > max(c.rcvCap-c.rLen, len(c.rbuf)-c.rLen) {
			t.Fatalf("out-of-order block %d beyond the buffer", i)
		}
	}
}

// FuzzParseOptionsLayouts: the timestamps layout parseOptions reads
// without its loop (RFC 7323 Appendix A) gives what the loop gives, for
// every option bytes, that layout and its near misses included.
func FuzzParseOptionsLayouts(f *testing.F) {
	f.Add([]byte{1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9})
	f.Add([]byte{1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0})
	f.Add([]byte{1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9, 1, 1, 5, 10, 0, 0, 0, 1, 0, 0, 0, 2})
	f.Add([]byte{1, 1, 8, 9, 0, 0, 0, 7, 0, 0, 0, 9})
	f.Add([]byte{8, 10, 0, 0, 0, 7, 0, 0, 0, 9, 1, 1})
	f.Fuzz(func(t *testing.T, o []byte) {
		dirty := segment{hasMSS: true, hasWS: true, sackOK: true, hasTS: true, nsack: 3, tsVal: 1, tsEcr: 2}
		fast, slow := dirty, segment{tsVal: 1, tsEcr: 2}
		okFast := parseOptions(&fast, o)
		okSlow := parseAnyOptions(&slow, o)
		if okFast != okSlow {
			t.Fatalf("% x: parseOptions %v, parseAnyOptions %v", o, okFast, okSlow)
		}
		if okFast && !reflect.DeepEqual(fast, slow) {
			t.Fatalf("% x: parseOptions %+v, parseAnyOptions %+v", o, fast, slow)
		}
	})
}
