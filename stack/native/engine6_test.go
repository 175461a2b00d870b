package native

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// newWorld6 is newWorld with IPv6 addresses (2001:2::1 and ::2) on both
// engines; dual keeps their IPv4 ones too (one engine, both families).
func newWorld6(t testing.TB, mo memio.Options, oa, ob Options, dual bool) *world {
	t.Helper()
	oa.Addr6, ob.Addr6 = addr6A, addr6B
	if dual {
		oa.Addr, ob.Addr = addrA, addrB
	}
	return startWorld(t, mo, oa, ob)
}

// exchange sends da from ca to cb and db back at once, each side closing
// after its data, and checks what each read.
func (w *world) exchange(ca, cb *Conn, da, db []byte) {
	w.t.Helper()
	p1, p2 := newPipe(ca, cb, da), newPipe(cb, ca, db)
	w.until(60*time.Second, "exchange", func() bool {
		p1.pump(w.t)
		p2.pump(w.t)
		return p1.done() && p2.done()
	})
	if !bytes.Equal(p1.got.Bytes(), da) || !bytes.Equal(p2.got.Bytes(), db) {
		w.t.Fatalf("data differs: got %d and %d bytes, want %d and %d", p1.got.Len(), p2.got.Len(), len(da), len(db))
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed
	}
	return b
}

// TestIPv6HandshakeDataClose: RFC 9293 §3.5 (handshake), §3.6 (close)
// and data between two IPv6-only engines, every segment's checksum over
// the IPv6 pseudo-header (RFC 8200 §8.1), each side announcing MTU-60
// (RFC 9293 §3.7.1, RFC 8200 §5) and the tuple going to TIME-WAIT on the
// side that closed first (§3.10.7.4).
func TestIPv6HandshakeDataClose(t *testing.T) {
	w := newWorld6(t, memio.Options{}, Options{}, Options{}, false)
	l, err := w.b.Listen(80, 0)
	if err != nil {
		t.Fatal(err)
	}
	ca, cb := w.connectTo(l, netip.AddrPortFrom(addr6B, 80))
	if got := cb.Peer(); got.Addr() != addr6A || got.Port() != ca.LocalPort() {
		t.Fatalf("accepted peer %v, want [%v]:%d", got, addr6A, ca.LocalPort())
	}
	if got := ca.Peer(); got != netip.AddrPortFrom(addr6B, 80) {
		t.Fatalf("dialled peer %v", got)
	}
	want := w.pa.MTU() - 60
	if ca.peerMSS != want || cb.peerMSS != want {
		t.Fatalf("MSS %d and %d, want MTU-60 = %d", ca.peerMSS, cb.peerMSS, want)
	}
	w.exchange(ca, cb, pattern(300<<10, 1), pattern(100<<10, 2))
	ca.Close()
	cb.Close()
	w.until(10*time.Second, "close", func() bool {
		return len(w.a.free) == w.a.o.MaxConns && len(w.b.free) == w.b.o.MaxConns
	})
	if w.a.TimeWaits()+w.b.TimeWaits() == 0 {
		t.Fatal("no side in TIME-WAIT")
	}
	for _, e := range []*Engine{w.a, w.b} {
		if n := counterOf(t, e, "tcp_checksum_errors"); n != 0 {
			t.Errorf("tcp_checksum_errors %d", n)
		}
		if n := counterOf(t, e, "ip6_delivered"); n == 0 {
			t.Errorf("no IPv6 packet delivered")
		}
	}
	// The TIME-WAIT record's alias lives until its 2 MSL ends; then no
	// alias is left.
	w.clk.Advance(2 * DefaultTimeWait)
	w.step()
	if w.a.TimeWaits()+w.b.TimeWaits() != 0 || len(w.a.six.byAddr) != 0 || len(w.b.six.byAddr) != 0 {
		t.Fatalf("after TIME-WAIT: %d records, %d and %d aliases", w.a.TimeWaits(), len(w.a.six.byAddr), len(w.b.six.byAddr))
	}
}

// RFC 5927 §5.1: an ICMP "fragmentation needed" quoting the tuple of a
// connection in a TIME-WAIT record (the table holds the record's
// negative index there) has nothing in flight to act on: it is counted
// and ignored. The lookup indexed the connection table with the
// record's index before, and panicked.
func TestFragNeededForTimeWaitRecordIgnoredRFC5927(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	ca, cb := w.connect(7000)
	lport := ca.LocalPort()
	ca.Close()
	w.until(10*time.Second, "FIN-WAIT-2", func() bool { return cb.State() == CloseWait })
	cb.Close()
	w.until(10*time.Second, "TIME-WAIT record", func() bool { return w.a.TimeWaits() == 1 })
	q := make([]byte, ipLen+8)
	putIPv4(q, 1, protoTCP, addrA.As4(), addrB.As4(), ipLen+tcpLen)
	binary.BigEndian.PutUint16(q[ipLen:], lport)
	binary.BigEndian.PutUint16(q[ipLen+2:], 7000)
	m := make([]byte, 8+len(q))
	m[0], m[1] = icmpUnreachable, icmpFragNeeded
	binary.BigEndian.PutUint16(m[6:], 1200)
	copy(m[8:], q)
	binary.BigEndian.PutUint16(m[2:], fold(csum(0, m)))
	f := make([]byte, ethLen+ipLen+len(m))
	putEth(f, w.a.mac, w.b.mac, etherIPv4)
	putIPv4(f[ethLen:], 9, protoICMP, addrB.As4(), addrA.As4(), ipLen+len(m))
	copy(f[ethLen+ipLen:], m)
	w.a.tick()
	w.a.input(f)
	if counterOf(t, w.a, "icmp_frag_needed_ignored") != 1 {
		t.Fatal("not counted as ignored")
	}
}
