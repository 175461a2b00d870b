package native

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// The tests of a hostile peer and a long life: blind injection, side
// channels, and connections that never end. Each names the RFC section
// or the Linux behaviour it follows.

// rawTCP is a segment from src:sport (on A's link, from A's MAC) to B:dport,
// with any header fields and data, and correct checksums.
func rawTCP(w *world, src [4]byte, sport, dport uint16, seq, ack uint32, flags uint8, wnd uint16, opts, data []byte) []byte {
	ol := (len(opts) + 3) &^ 3
	hl := tcpLen + ol
	fr := make([]byte, max(ethLen+ipLen+hl+len(data), 60))
	putEth(fr, w.b.mac, w.a.mac, etherIPv4)
	putIPv4(fr[ethLen:], 1, protoTCP, src, w.b.addr, ipLen+hl+len(data))
	tc := fr[ethLen+ipLen : ethLen+ipLen+hl+len(data)]
	putTCP(tc, sport, dport, seq, ack, hl, flags&0x3f, wnd)
	copy(tc[tcpLen:], opts)
	copy(tc[hl:], data)
	binary.BigEndian.PutUint16(tc[16:], fold(csum(pseudo(src, w.b.addr, protoTCP, hl+len(data)), tc)))
	return fr
}

// mssOpt is an MSS option of 1460.
var mssOpt = []byte{optMSS, 4, 0x05, 0xb4}

// sentBy takes the frames B put on the wire (before A polls them) and
// returns the TCP segments among them.
func sentBy(w *world) []segment {
	w.b.Flush()
	var out []segment
	w.pa.RxFrames(1024, func(f []byte) {
		p := ipv4(f[ethLen:])
		if len(f) < ethLen+ipLen || binary.BigEndian.Uint16(f[12:]) != etherIPv4 || p.check() != ipOK || p.proto() != protoTCP {
			return
		}
		var s segment
		if parseTCP(&s, p.src(), p.dst(), p.payload()) == tcpOK {
			s.payload = append([]byte(nil), s.payload...)
			out = append(out, s)
		}
	})
	return out
}

// slotsUsed is the connection slots of e in use.
func slotsUsed(e *Engine) int { return len(e.conns) - len(e.free) }

// TestForgedACKDoesNotFreezeWindow_RFC9293_3_10_7_4: a pure ACK with a
// sequence number right of RCV.NXT (inside the receive window, so
// acceptable), window 0 and an acceptable ACK number does not leave the
// send window shut: SND.WL1 stays at RCV.NXT, so the peer's next real ACK
// (at RCV.NXT) opens it again, and an ACK that moves SND.UNA updates the
// window too (Linux's tcp_may_update_window). Before, SND.WL1 went to the
// forged number and the sender persisted for ever.
func TestForgedACKDoesNotFreezeWindow_RFC9293_3_10_7_4(t *testing.T) {
	o := Options{MaxConns: 4, SendBuf: 64 << 10, RecvBuf: 64 << 10}
	w := newWorld(t, memio.Options{TxSlots: 256, RxSlots: 256}, o, o)
	ca, cb := w.connect(7000)
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt+1000, cb.sndUna, flagACK, 0, nil, nil))
	if cb.sndWnd != 0 {
		t.Fatal("set-up: the forged ACK's window was not taken")
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	p := newPipe(cb, ca, data)
	w.until(10*time.Minute, "1 MiB after a forged zero-window ACK", func() bool { p.pump(t); return p.done() })
	if !bytes.Equal(p.got.Bytes(), data) {
		t.Fatal("data differs")
	}
}

// TestZeroWindowACKOnlyNearRcvNxt_RFC9293_3_10_7_4_RFC5961_5: while our
// receive window is zero, an ACK is taken at RCV.NXT (and, as
// zeroWindowACK explains, left of it or one past it), not anywhere up to
// a buffer's reach right of it: a blind attacker gets a handful of
// sequence numbers to hit, not RecvBuf of them.
func TestZeroWindowACKOnlyNearRcvNxt_RFC9293_3_10_7_4_RFC5961_5(t *testing.T) {
	o := Options{MaxConns: 4, SendBuf: 16 << 10, RecvBuf: 4 << 10}
	w := newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o)
	ca, cb := w.connect(7000)
	ca.Write(make([]byte, 8<<10))
	w.until(time.Minute, "B's window to close", func() bool { return cb.rLen == cb.rcvCap && cb.rcvWnd() == 0 })
	before := counterOf(t, w.b, "tcp_zero_window_acks_taken")
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt+100, cb.sndUna, flagACK, 0, nil, nil))
	if got := counterOf(t, w.b, "tcp_zero_window_acks_taken"); got != before {
		t.Errorf("an ACK 100 bytes right of RCV.NXT was taken with the window closed")
	}
	w.b.input(segFrame(w, ca, cb.rcvNxt+1, cb.sndUna, flagACK, 0, nil, nil))
	if got := counterOf(t, w.b, "tcp_zero_window_acks_taken"); got != before+1 {
		t.Errorf("the ACK after a zero-window probe byte (RCV.NXT+1) was not taken")
	}
}

// TestChallengeACKsNoSideChannel_RFC5961_7_CVE_2016_5696: the challenge
// ACKs an attacker's own connection gets do not tell whether a spoofed
// segment landed in another connection's window. With one budget for the
// engine, each challenge ACK the victim sent was one the attacker did not
// get; per connection (Linux since the CVE), the counts are the same.
func TestChallengeACKsNoSideChannel_RFC5961_7_CVE_2016_5696(t *testing.T) {
	answers := func(inWindow bool) uint64 {
		o := Options{MaxConns: 8, ChallengeACKLimit: 100}
		w := newWorld(t, memio.Options{TxSlots: 1024, RxSlots: 1024}, o, o)
		victimA, victimB := w.connect(7000)
		l, _ := w.b.Listen(7001, 0)
		atkA, err := w.a.Dial(netip.AddrPortFrom(addrB, 7001), 0)
		if err != nil {
			t.Fatal(err)
		}
		var atkB *Conn
		w.until(10*time.Second, "attacker's handshake", func() bool {
			if atkB == nil {
				atkB, _ = l.Accept()
			}
			return atkB != nil && atkA.State() == Established
		})
		w.b.tick()
		off := uint32(1 << 30) // out of the window: no challenge
		if inWindow {
			off = 10
		}
		w.b.input(segFrame(w, victimA, victimB.rcvNxt+off, 0, flagRST, 0, nil, nil))
		w.b.Flush()
		before := counterOf(t, w.b, "tcp_challenge_acks")
		for range 100 {
			w.b.input(segFrame(w, atkA, atkB.rcvNxt+10, 0, flagRST, 0, nil, nil))
			w.b.Flush()
		}
		return counterOf(t, w.b, "tcp_challenge_acks") - before
	}
	out, in := answers(false), answers(true)
	if out != in {
		t.Errorf("the attacker got %d challenge ACKs after an out-of-window probe, %d after an in-window one: a side channel", out, in)
	}
	if in == 0 {
		t.Error("no challenge ACK at all")
	}
}

// TestOutOfWindowSYNChallengeRateLimited_RFC5961_4_2: a SYN on a
// synchronized connection, in the window or out of it, gets a
// rate-limited challenge ACK: 100 of them get one answer, not 100.
func TestOutOfWindowSYNChallengeRateLimited_RFC5961_4_2(t *testing.T) {
	o := Options{MaxConns: 4}
	w := newWorld(t, memio.Options{TxSlots: 1024, RxSlots: 1024}, o, o)
	ca, cb := w.connect(7000)
	w.b.tick()
	w.b.Flush()
	tx := w.b.cnt[cTxFrames]
	for i := range 100 {
		w.b.input(segFrame(w, ca, cb.rcvNxt+1<<30+uint32(i), 0, flagSYN, 1000, nil, nil))
		w.b.Flush()
	}
	if n := w.b.cnt[cTxFrames] - tx; n > 1 {
		t.Errorf("100 out-of-window SYNs got %d answers, want 1 (rate-limited challenge ACK)", n)
	}
	if cb.State() != Established {
		t.Errorf("the connection is %v", cb.State())
	}
}

// TestKeepaliveNotFedByOutOfWindowSegments_RFC1122_4_2_3_6: only an
// acceptable segment shows the peer alive. An out-of-window segment every
// 50 s (anyone can send one with the right 4-tuple) does not keep a
// connection whose peer is gone from being found dead.
func TestKeepaliveNotFedByOutOfWindowSegments_RFC1122_4_2_3_6(t *testing.T) {
	o := Options{MaxConns: 4}
	w := newWorld(t, memio.Options{}, o, o)
	ca, cb := w.connect(7000)
	cb.SetKeepalive(60*time.Second, 10*time.Second, 3)
	w.pa.SetImpairment(memio.Impairment{Loss: 1})    // A is gone
	ghost := &Conn{lport: ca.lport, rport: ca.rport} // its 4-tuple, for the injected segments
	ca.Abort()
	for i := 0; i < 60 && cb.Err() == nil; i++ { // 10 minutes
		w.clk.Advance(10 * time.Second)
		if i%5 == 0 {
			w.b.tick()
			w.b.input(segFrame(w, ghost, cb.rcvNxt+1<<30, cb.sndUna, flagACK, 1000, nil, nil))
		}
		w.step()
	}
	if cb.Err() != ErrTimedOut {
		t.Fatalf("after 10 minutes with the peer gone: %v (%v), want ErrTimedOut from keepalive", cb.Err(), cb.State())
	}
}

// TestPAWSAfterLongIdle_RFC7323_5_5: after more than 24 days without a
// segment, TS.Recent is invalid and the next segment passes PAWS (its
// timestamp, 2^31 ms later, reads as older): the connection goes on.
func TestPAWSAfterLongIdle_RFC7323_5_5(t *testing.T) {
	o := Options{MaxConns: 4}
	w := newWorld(t, memio.Options{}, o, o)
	ca, cb := w.connect(7000)
	if !cb.tsOK {
		t.Fatal("set-up: no timestamps")
	}
	w.clk.Advance(25 * 24 * time.Hour)
	ca.Write([]byte("hello"))
	buf := make([]byte, 8)
	w.until(time.Minute, "data after 25 days idle", func() bool { n, _ := cb.Read(buf); return n == 5 })
	if counterOf(t, w.b, "tcp_paws_idle_accepted") == 0 {
		t.Error("tcp_paws_idle_accepted not counted")
	}
	cb.Write([]byte("world"))
	w.until(time.Minute, "the answer", func() bool { n, _ := ca.Read(buf); return n == 5 })
}

// TestPersistGivesUpOnVanishedPeer_Linux_tcp_probe_timer: a peer that
// vanishes with its window closed answers no zero-window probe; after
// MaxRetries unanswered probes the connection ends with ErrTimedOut
// (Linux: tcp_retries2 probes, RFC 1122 §4.2.2.17 keeps the connection
// open only while the receiver answers).
func TestPersistGivesUpOnVanishedPeer_Linux_tcp_probe_timer(t *testing.T) {
	o := Options{MaxConns: 4, SendBuf: 64 << 10, RecvBuf: 4 << 10}
	w := newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o)
	ca, cb := w.connect(7000)
	cb.Write(make([]byte, 32<<10))
	w.until(time.Minute, "A's window to close", func() bool { return ca.rcvWnd() == 0 && cb.tPersist != 0 })
	w.pa.SetImpairment(memio.Impairment{Loss: 1})
	w.until(24*time.Hour, "persist to give up", func() bool { return cb.Err() != nil })
	if cb.Err() != ErrTimedOut || counterOf(t, w.b, "tcp_persist_timeouts") != 1 {
		t.Errorf("err %v, tcp_persist_timeouts %d", cb.Err(), counterOf(t, w.b, "tcp_persist_timeouts"))
	}
}

// TestOrphanInPersistAborted_Linux_tcp_orphan_retries: a connection the
// application closed with data unsent, facing a peer that answers every
// probe with a closed window, is aborted after OrphanRetries probes: its
// slot and buffers come back (Linux bounds orphans the same way).
func TestOrphanInPersistAborted_Linux_tcp_orphan_retries(t *testing.T) {
	o := Options{MaxConns: 4, SendBuf: 64 << 10, RecvBuf: 4 << 10}
	w := newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o)
	ca, cb := w.connect(7000)
	cb.Write(make([]byte, 32<<10))
	w.until(time.Minute, "A's window to close", func() bool { return ca.rcvWnd() == 0 && cb.tPersist != 0 })
	cb.Close()
	w.until(24*time.Hour, "the orphan to go", func() bool { return slotsUsed(w.b) == 0 })
	if counterOf(t, w.b, "tcp_orphan_aborts") != 1 {
		t.Error("tcp_orphan_aborts not counted")
	}
	w.until(time.Minute, "A to see the RST", func() bool { return ca.Err() != nil })
}

// TestUserTimeoutAppliesToPersist_RFC5482_Linux_TCP_USER_TIMEOUT: with
// Options.UserTimeout, a connection whose data makes no progress for that
// long ends with ErrTimedOut, a peer answering its probes with a closed
// window included.
func TestUserTimeoutAppliesToPersist_RFC5482_Linux_TCP_USER_TIMEOUT(t *testing.T) {
	o := Options{MaxConns: 4, SendBuf: 64 << 10, RecvBuf: 4 << 10}
	ob := o
	ob.UserTimeout = 5 * time.Minute
	w := newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, ob)
	ca, cb := w.connect(7000)
	cb.Write(make([]byte, 32<<10))
	w.until(time.Minute, "A's window to close", func() bool { return ca.rcvWnd() == 0 && cb.tPersist != 0 })
	start := w.clk.Now()
	w.until(time.Hour, "the user timeout", func() bool { return cb.Err() != nil })
	if cb.Err() != ErrTimedOut || counterOf(t, w.b, "tcp_user_timeouts") != 1 {
		t.Errorf("err %v, tcp_user_timeouts %d", cb.Err(), counterOf(t, w.b, "tcp_user_timeouts"))
	}
	if d := w.clk.Now().Sub(start); d < 5*time.Minute || d > 7*time.Minute {
		t.Errorf("ended %v after persist began, want about UserTimeout (5m)", d)
	}
}

// TestEphemeralPortsPerDestination_RFC6056_3_3_4: the local ports chosen
// towards one destination tell nothing of those towards another (RFC
// 6056's double-hash algorithm): consecutive Dials to different
// destinations do not get consecutive ports, as one sequential counter
// gave them.
func TestEphemeralPortsPerDestination_RFC6056_3_3_4(t *testing.T) {
	o := Options{MaxConns: 64, ISNSecret: [16]byte{1, 2, 3}}
	w := newWorld(t, memio.Options{}, o, o)
	var ports []uint16
	for i := range 16 {
		c, err := w.a.Dial(netip.AddrPortFrom(addrB, uint16(9000+i)), 0)
		if err != nil {
			t.Fatal(err)
		}
		if p := c.LocalPort(); p < 32768 || p > 60999 {
			t.Fatalf("port %d outside the ephemeral range", p)
		}
		ports = append(ports, c.LocalPort())
	}
	adjacent := 0
	for i := 1; i < len(ports); i++ {
		if d := int(ports[i]) - int(ports[i-1]); d >= -1 && d <= 1 {
			adjacent++
		}
	}
	if adjacent > 1 {
		t.Errorf("ports %v: %d of 15 follow the one before: guessable", ports, adjacent)
	}
	// Towards one destination, a port is not reused before the range
	// goes round.
	seen := map[uint16]bool{}
	for range 64 - 16 {
		c, err := w.a.Dial(netip.AddrPortFrom(addrB, 9000), 0)
		if err != nil {
			t.Fatal(err)
		}
		if seen[c.LocalPort()] {
			t.Fatalf("port %d given twice towards one destination", c.LocalPort())
		}
		seen[c.LocalPort()] = true
		c.Abort()
	}
}

// synToB is a SYN with an MSS option from src:sport to B:dport.
func synToB(w *world, src [4]byte, sport, dport uint16, seq uint32) []byte {
	return rawTCP(w, src, sport, dport, seq, 0, flagSYN, 65535, mssOpt, nil)
}

// TestSYNReceivedCappedGlobally_Linux: the connections in SYN-RECEIVED
// are bounded over all listeners (MaxSYNReceived, default MaxConns/4),
// not only per listener: listeners enough to hold the table in half-open
// connections (three of SYNBacklog 16 in a table of 64) leave room for
// real ones; beyond the bound SYNs get cookies.
func TestSYNReceivedCappedGlobally_Linux(t *testing.T) {
	o := Options{MaxConns: 64, SYNBacklog: 16}
	w := newWorld(t, memio.Options{TxSlots: 1024, RxSlots: 1024}, o, o)
	for p := uint16(7000); p < 7003; p++ {
		if _, err := w.b.Listen(p, 0); err != nil {
			t.Fatal(err)
		}
	}
	w.b.tick()
	for i := range 48 {
		src := [4]byte{198, 18, 0, byte(10 + i)}
		w.b.input(synToB(w, src, 40000, 7000+uint16(i%3), uint32(i)*7919))
	}
	half := 0
	for i := range w.b.conns {
		if w.b.conns[i].state == SynReceived {
			half++
		}
	}
	if half > 16 {
		t.Errorf("%d connections in SYN-RECEIVED, want at most MaxConns/4 = 16", half)
	}
	if counterOf(t, w.b, "tcp_syncookies_sent") == 0 || counterOf(t, w.b, "tcp_syn_received_overflow") == 0 {
		t.Error("no cookie past the global bound")
	}
}

// TestSYNACKRetriesLikeLinux_63s: a passive open whose handshake never
// completes gives its slot back after five SYN-ACK retransmissions from a
// 1 s RTO, about 63 s (Linux's tcp_synack_retries), not 127 s.
func TestSYNACKRetriesLikeLinux_63s(t *testing.T) {
	o := Options{MaxConns: 4}
	w := newWorld(t, memio.Options{}, o, o)
	if _, err := w.b.Listen(7000, 0); err != nil {
		t.Fatal(err)
	}
	start := w.clk.Now()
	w.b.tick()
	w.b.input(synToB(w, [4]byte{198, 18, 0, 77}, 40000, 7000, 1234))
	w.until(5*time.Minute, "the half-open slot to go", func() bool { return slotsUsed(w.b) == 0 })
	if d := w.clk.Now().Sub(start); d < 60*time.Second || d > 70*time.Second {
		t.Errorf("SYN-RECEIVED held the slot %v, want about 63 s", d)
	}
}

// cookieFor has B answer SYN seq from src:sport on port with a cookie
// (the listener must be past its backlog) and returns the cookie.
func cookieFor(t *testing.T, w *world, src [4]byte, sport, port uint16, seq uint32) uint32 {
	t.Helper()
	sentBy(w)
	w.b.tick()
	w.b.input(synToB(w, src, sport, port, seq))
	for _, s := range sentBy(w) {
		if s.flags == flagSYN|flagACK && s.dport == sport && s.ack == seq+1 {
			return s.seq
		}
	}
	t.Fatal("no cookie SYN-ACK")
	return 0
}

// TestSYNCookieReplayAndMSSRejected_Linux_syncookies: a cookie is good
// for two counter steps and no longer, with its counter bits rewritten
// (and the ACK's number shifted to match) or without; its MSS index
// cannot be changed. Linux keeps the counter inside the hash with a
// maximum age and checks the MSS index the same way.
func TestSYNCookieReplayAndMSSRejected_Linux_syncookies(t *testing.T) {
	o := Options{MaxConns: 16, SYNBacklog: 1}
	w := newWorld(t, memio.Options{TxSlots: 1024, RxSlots: 1024}, o, o)
	l, _ := w.b.Listen(7000, 0)
	src := [4]byte{198, 18, 0, 50}
	w.b.tick()
	w.b.input(synToB(w, src, 1, 7000, 99)) // takes the one SYN-RECEIVED place
	const seq = 5000
	ck := cookieFor(t, w, src, 40000, 7000, seq)
	ack := func(seq, ack uint32) {
		w.b.tick()
		w.b.input(rawTCP(w, src, 40000, 7000, seq, ack, flagACK|flagPSH, 1000, nil, []byte("injected")))
	}
	// The MSS index changed: refused.
	ack(seq+1, ck^1<<24+1)
	if l.Pending() != 0 {
		t.Fatal("a cookie with its MSS bits changed was taken")
	}
	// An hour later, still flooded (a fresh cookie went out), the old
	// cookie is refused as it is and with its counter bits rewritten.
	w.clk.Advance(time.Hour)
	cookieFor(t, w, src, 40001, 7000, 1)
	ack(seq+1, ck+1)
	tOld, tNow := ck>>27, uint32(w.b.wall()/cookieStep)&31
	ack((seq^(tOld^tNow))+1, (ck&^(31<<27)|tNow<<27)+1)
	if l.Pending() != 0 {
		t.Fatal("a cookie replayed an hour later opened a connection")
	}
	// A fresh cookie, unchanged, is good.
	ck = cookieFor(t, w, src, 40002, 7000, seq)
	w.b.tick()
	w.b.input(rawTCP(w, src, 40002, 7000, seq+1, ck+1, flagACK, 1000, nil, nil))
	if l.Pending() != 1 {
		t.Fatal("a fresh cookie was refused")
	}
}

// TestBareACKNotCheckedAsCookieWithoutOverflow_Linux: a listener that
// sent no cookie lately does not try a bare ACK as one (Linux's
// tcp_synq_no_recent_overflow): even a right guess (here computed with
// the key) gets a RST, not a connection with its data delivered.
func TestBareACKNotCheckedAsCookieWithoutOverflow_Linux(t *testing.T) {
	o := Options{MaxConns: 16}
	w := newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o)
	l, _ := w.b.Listen(7000, 0)
	src := [4]byte{198, 18, 0, 50}
	w.b.tick()
	syn := segment{src: src, sport: 40000, dport: 7000, seq: 5000}
	ck := w.b.cookie(&syn, 1460)
	w.b.input(rawTCP(w, src, 40000, 7000, 5001, ck+1, flagACK|flagPSH, 1000, nil, []byte("injected")))
	if l.Pending() != 0 {
		t.Fatal("a bare ACK to a listener that sent no cookie opened a connection")
	}
	if counterOf(t, w.b, "tcp_syncookies_unsolicited") != 1 || counterOf(t, w.b, "tcp_resets_sent") != 1 {
		t.Error("not counted, or not reset")
	}
}

// closeFromServer runs one connection from A to B's listener l in which
// B closes first: B answers "x" and closes, A reads it and the EOF and
// closes. B's end goes to TIME-WAIT.
func closeFromServer(t *testing.T, w *world, l *Listener, port uint16) {
	t.Helper()
	ca, err := w.a.Dial(netip.AddrPortFrom(addrB, port), 0)
	if err != nil {
		t.Fatal(err)
	}
	var cb *Conn
	buf := make([]byte, 8)
	got := 0
	w.until(10*time.Second, "a connection closed by the server", func() bool {
		if cb == nil {
			if cb, _ = l.Accept(); cb != nil {
				cb.Write([]byte("x"))
				cb.Close()
			}
		}
		n, err := ca.Read(buf)
		got += n
		if err != nil && err.Error() == "EOF" && got == 1 {
			ca.Close()
			return true
		}
		if err != nil {
			t.Fatalf("client: %v", err)
		}
		return false
	})
}

// TestTimeWaitLeavesSlot_Linux_tw_buckets: the side that closes first
// keeps TIME-WAIT in a small record and gives the connection slot back
// at once (Linux's inet_timewait_sock), so a server of MaxConns 4 serves
// twelve connections it closes within 2 MSL; the records go when 2 MSL
// is over.
func TestTimeWaitLeavesSlot_Linux_tw_buckets(t *testing.T) {
	o := Options{MaxConns: 4}
	w := newWorld(t, memio.Options{TxSlots: 256, RxSlots: 256}, o, o)
	l, _ := w.b.Listen(7000, 0)
	for range 12 {
		closeFromServer(t, w, l, 7000)
	}
	w.until(time.Second, "the last close", func() bool { return slotsUsed(w.b) == 0 })
	if n := counterOf(t, w.b, "tcp_timewait_records"); n != 12 {
		t.Errorf("tcp_timewait_records %d, want 12", n)
	}
	w.until(2*time.Minute, "2 MSL to pass", func() bool { return len(w.b.table) == 0 && slotsUsed(w.b) == 0 })
}

// TestTimeWaitBounded_Linux_tcp_max_tw_buckets: past MaxTimeWait records
// (here 8), a connection skips TIME-WAIT, counted.
func TestTimeWaitBounded_Linux_tcp_max_tw_buckets(t *testing.T) {
	o := Options{MaxConns: 2, MaxTimeWait: 8}
	w := newWorld(t, memio.Options{TxSlots: 256, RxSlots: 256}, o, o)
	l, _ := w.b.Listen(7000, 0)
	for range 10 {
		closeFromServer(t, w, l, 7000)
	}
	w.until(time.Second, "the last close", func() bool { return slotsUsed(w.b) == 0 })
	if n, over := counterOf(t, w.b, "tcp_timewait_records"), counterOf(t, w.b, "tcp_timewait_overflow"); n != 8 || over != 2 {
		t.Errorf("tcp_timewait_records %d, tcp_timewait_overflow %d, want 8 and 2", n, over)
	}
}

// TestTimeWaitRecordAcksFIN_RFC9293_3_10_7_4: a TIME-WAIT record answers
// the peer's retransmitted FIN with an ACK (with timestamps, as the
// connection had them) and restarts 2 MSL.
func TestTimeWaitRecordAcksFIN_RFC9293_3_10_7_4(t *testing.T) {
	o := Options{MaxConns: 4}
	w := newWorld(t, memio.Options{TxSlots: 256, RxSlots: 256}, o, o)
	ca, cb := w.connect(7000)
	peer := &Conn{lport: ca.lport, rport: ca.rport}
	finSeq := ca.sndMax
	cb.Close()
	w.until(time.Second, "A's EOF", func() bool { _, err := ca.Read(nil); return err != nil })
	ca.Close()
	w.until(time.Second, "B's TIME-WAIT record", func() bool { return w.b.TimeWaits() == 1 && slotsUsed(w.b) == 0 })
	w.clk.Advance(30 * time.Second)
	sentBy(w)
	w.b.tick()
	w.b.input(segFrame(w, peer, finSeq, 0, flagFIN|flagACK, 1000, tsOpt(ca.tsNow(), 0), nil))
	acks := sentBy(w)
	if len(acks) != 1 || acks[0].flags != flagACK || acks[0].ack != finSeq+1 || !acks[0].hasTS {
		t.Fatalf("answers %+v, want one ACK of the FIN with timestamps", acks)
	}
	w.clk.Advance(45 * time.Second) // 75 s after TIME-WAIT began, 45 after the FIN
	w.b.Poll(0)
	if w.b.TimeWaits() != 1 {
		t.Fatal("2 MSL was not restarted by the FIN")
	}
	w.clk.Advance(20 * time.Second)
	w.b.Poll(0)
	if w.b.TimeWaits() != 0 || len(w.b.table) != 0 {
		t.Fatal("the record outlived 2 MSL")
	}
}

// TestCookieACKWithTableFull_Linux_tcp_abort_on_overflow: a SYN
// answered with a cookie because the table is full, whose ACK still finds
// no slot, is dropped and counted (Linux's default, tcp_abort_on_overflow
// 0): the client gets in on a retransmission once a slot frees; and when
// none does, it learns so by a RST once the cookie is past its two
// counter steps, instead of sending into nothing.
func TestCookieACKWithTableFull_Linux_tcp_abort_on_overflow(t *testing.T) {
	o := Options{MaxConns: 2}
	w := newWorld(t, memio.Options{TxSlots: 256, RxSlots: 256}, Options{}, o)
	_, first := w.connect(7000)
	l := w.b.listeners[7000]
	c2, err := w.a.Dial(netip.AddrPortFrom(addrB, 7000), 0)
	if err != nil {
		t.Fatal(err)
	}
	w.until(10*time.Second, "second", func() bool { return l.Pending() == 1 && c2.State() == Established })
	l.Accept()
	dial := func() *Conn {
		c, err := w.a.Dial(netip.AddrPortFrom(addrB, 7000), 0)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("hello"))
		return c
	}
	// A slot frees 20 s later: the client's retransmission gets in.
	c3 := dial()
	later := w.clk.Now().Add(20 * time.Second)
	w.until(time.Minute, "20 s", func() bool { return !w.clk.Now().Before(later) })
	if counterOf(t, w.b, "tcp_syncookies_no_slot") == 0 {
		t.Fatal("set-up: the cookie ACK found a slot")
	}
	first.Abort()
	var got *Conn
	w.until(2*time.Minute, "the client to get in", func() bool {
		if got == nil {
			got, _ = l.Accept()
		}
		return got != nil && got.Readable()
	})
	if c3.Err() != nil {
		t.Fatal(c3.Err())
	}
	// No slot ever frees: the client learns by a RST within the cookie's
	// life and one retransmission.
	c4 := dial()
	w.until(10*time.Minute, "the client to learn", func() bool { return c4.Err() != nil })
}
