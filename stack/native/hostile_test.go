package native

import (
	"net/netip"
	"testing"

	"github.com/dgramio/dgramio/frameio/memio"
)

// TestSYNReceivedNewSYNReturnsToListen_RFC9293_3_10_7_4: in SYN-RECEIVED
// of a passive open, a SYN with another initial sequence number inside
// the window returns the connection to LISTEN (RFC 9293 §3.10.7.4,
// fourth): the half-open connection is dropped and the SYN answered with
// <SEQ=0><ACK=SEG.SEQ+1><CTL=RST,ACK>, as Linux and netstack answer it;
// the ACK of the abandoned SYN-ACK then finds only the listener and gets
// a RST. Before, the engine challenged the SYN (RFC 5961 §4.2, which is
// for synchronized states) and kept the half-open connection, which that
// ACK then completed. The peer's own SYN again (SEG.SEQ = IRS) still only
// has the SYN-ACK sent again.
func TestSYNReceivedNewSYNReturnsToListen_RFC9293_3_10_7_4(t *testing.T) {
	o := Options{MaxConns: 4}
	w := newWorld(t, memio.Options{}, o, o)
	l, err := w.b.Listen(7000, 0)
	if err != nil {
		t.Fatal(err)
	}
	src := [4]byte{198, 18, 0, 77}
	sentBy(w)
	w.b.tick()
	w.b.input(synToB(w, src, 40000, 7000, 1234))
	out := sentBy(w)
	if len(out) != 1 || out[0].flags != flagSYN|flagACK {
		t.Fatalf("answer to the SYN: %+v, want one SYN-ACK", out)
	}
	iss := out[0].seq
	w.b.input(synToB(w, src, 40000, 7000, 1234)) // the same SYN again
	if out := sentBy(w); len(out) != 1 || out[0].flags != flagSYN|flagACK || out[0].seq != iss {
		t.Fatalf("answer to the SYN sent again: %+v, want the SYN-ACK again", out)
	}
	w.b.input(synToB(w, src, 40000, 7000, 1234+100))
	out = sentBy(w)
	if len(out) != 1 || out[0].flags != flagRST|flagACK || out[0].seq != 0 || out[0].ack != 1234+101 {
		t.Fatalf("answer to a SYN with another ISN: %+v, want RST,ACK seq 0 ack %d", out, 1234+101)
	}
	if slotsUsed(w.b) != 0 || l.synRcvd != 0 || w.b.synRcvd != 0 {
		t.Fatalf("half-open connection kept: %d slots, %d/%d in SYN-RECEIVED", slotsUsed(w.b), l.synRcvd, w.b.synRcvd)
	}
	if counterOf(t, w.b, "tcp_synrcvd_new_syn") != 1 {
		t.Error("tcp_synrcvd_new_syn did not count it")
	}
	w.b.input(rawTCP(w, src, 40000, 7000, 1235, iss+1, flagACK, 65535, nil, nil))
	out = sentBy(w)
	if len(out) != 1 || out[0].flags != flagRST || out[0].seq != iss+1 {
		t.Fatalf("answer to the ACK of the abandoned SYN-ACK: %+v, want RST seq %d", out, iss+1)
	}
	if _, ok := l.Accept(); ok {
		t.Error("the abandoned handshake was accepted")
	}
}

// TestSimultaneousOpenSYNACKCompletes_RFC9293_3_5: in a simultaneous
// open (RFC 9293 §3.5 figure 8) the peer's SYN-ACK, which carries its SYN
// again, completes SYN-RECEIVED at once, as Linux takes it: it was judged
// left of RCV.NXT and only answered with an ACK, so the connection waited
// for its SYN-ACK's retransmission (a second, the initial RTO) to be
// challenged into ESTABLISHED. Data the application wrote meanwhile
// leaves with the handshake's end, not with the next segment that
// happens to come.
func TestSimultaneousOpenSYNACKCompletes_RFC9293_3_5(t *testing.T) {
	o := Options{MaxConns: 4}
	w := newWorld(t, memio.Options{}, o, o)
	w.connect(7000) // B learns A's MAC
	sentBy(w)
	w.b.tick()
	c, err := w.b.Dial(netip.AddrPortFrom(addrA, 7001), 40000)
	if err != nil {
		t.Fatal(err)
	}
	w.b.tick()
	out := sentBy(w)
	if len(out) != 1 || out[0].flags != flagSYN {
		t.Fatalf("B sent %+v, want its SYN", out)
	}
	iss := out[0].seq
	src := addrA.As4()
	w.b.input(rawTCP(w, src, 7001, 40000, 5000, 0, flagSYN, 65535, mssOpt, nil)) // the SYNs cross
	out = sentBy(w)
	if len(out) != 1 || out[0].flags != flagSYN|flagACK || out[0].seq != iss || out[0].ack != 5001 {
		t.Fatalf("answer to the crossing SYN: %+v, want SYN-ACK seq %d ack 5001", out, iss)
	}
	if c.State() != SynReceived {
		t.Fatalf("state %v, want SYN-RECEIVED", c.State())
	}
	if n := c.Write([]byte("early")); n != 5 {
		t.Fatalf("write in SYN-RECEIVED took %d bytes, want 5", n)
	}
	if out := sentBy(w); len(out) != 0 { // a Flush in between, as a poll loop has
		t.Fatalf("B sent %+v in SYN-RECEIVED after the write, want nothing", out)
	}
	w.b.input(rawTCP(w, src, 7001, 40000, 5000, iss+1, flagSYN|flagACK, 65535, mssOpt, nil))
	out = sentBy(w)
	if c.State() != Established {
		t.Fatalf("state %v after the peer's SYN-ACK, want ESTABLISHED", c.State())
	}
	if len(out) != 1 || string(out[0].payload) != "early" || out[0].seq != iss+1 || out[0].ack != 5001 {
		t.Fatalf("after the peer's SYN-ACK B sent %+v, want the data written in SYN-RECEIVED at %d", out, iss+1)
	}
}

// TestOutOfOrderBeyondFINDropped_RFC9293_3_10_7_4: data held out of
// order beyond the point where the peer's FIN then lands is dropped when
// the FIN is taken (§3.10.7.4 eighth: the FIN ends the stream; Linux's
// tcp_fin drops its out-of-order queue). It was kept as a block at
// RCV.NXT that no segment would merge any more (found by
// FuzzSegmentSequenceOnLiveConnection): the application reads the bytes
// before the FIN, then EOF, and the block's bytes never.
func TestOutOfOrderBeyondFINDropped_RFC9293_3_10_7_4(t *testing.T) {
	o := Options{MaxConns: 4}
	w := newWorld(t, memio.Options{}, o, o)
	ca, cb := w.connect(7000)
	w.b.tick()
	w.b.input(segFrame(w, ca, cb.rcvNxt+49, cb.sndUna, flagACK, 65535, nil, make([]byte, 48)))
	if cb.nooo != 1 {
		t.Fatalf("set-up: %d out-of-order blocks, want 1", cb.nooo)
	}
	w.b.input(segFrame(w, ca, cb.rcvNxt, cb.sndUna, flagACK|flagFIN, 65535, nil, []byte("before the FIN")))
	if cb.State() != CloseWait || cb.nooo != 0 {
		t.Fatalf("state %v with %d out-of-order blocks, want CLOSE-WAIT and none", cb.State(), cb.nooo)
	}
	checkConn(t, cb)
	if counterOf(t, w.b, "tcp_ooo_after_fin") != 1 {
		t.Error("tcp_ooo_after_fin did not count it")
	}
	buf := make([]byte, 256)
	if n, err := cb.Read(buf); n != 14 || err != nil || string(buf[:n]) != "before the FIN" {
		t.Fatalf("read %q, %v; want the bytes before the FIN", buf[:n], err)
	}
	if n, err := cb.Read(buf); n != 0 || err == nil {
		t.Fatalf("read after the FIN: %d bytes, %v; want EOF", n, err)
	}
}

// TestPeerMSSZeroAsAbsent_RFC9293_3_7_1: a SYN whose MSS option says 0
// is taken as one without the option: a send MSS of 536 (RFC 9293
// §3.7.1, RFC 6691), as Linux takes it, not the 64-byte floor a tiny MSS
// gets.
func TestPeerMSSZeroAsAbsent_RFC9293_3_7_1(t *testing.T) {
	o := Options{MaxConns: 8, MaxSYNReceived: 8}
	w := newWorld(t, memio.Options{}, o, o)
	if _, err := w.b.Listen(7000, 0); err != nil {
		t.Fatal(err)
	}
	src := [4]byte{198, 18, 0, 77}
	for _, c := range []struct {
		opts []byte
		want int
	}{{[]byte{optMSS, 4, 0, 0}, 536}, {nil, 536}, {[]byte{optMSS, 4, 0, 10}, 64}, {mssOpt, 1460}} {
		sentBy(w)
		w.b.tick()
		sport := uint16(40000 + c.want + len(c.opts))
		w.b.input(rawTCP(w, src, sport, 7000, 1234, 0, flagSYN, 65535, c.opts, nil))
		var got *Conn
		for i := range w.b.conns {
			if k := &w.b.conns[i]; k.state == SynReceived && k.rport == sport {
				got = k
			}
		}
		if got == nil {
			t.Fatalf("SYN with options %v opened nothing", c.opts)
		}
		if got.peerMSS != c.want {
			t.Errorf("SYN with options %v: send MSS %d, want %d", c.opts, got.peerMSS, c.want)
		}
	}
}
