package native

import (
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
