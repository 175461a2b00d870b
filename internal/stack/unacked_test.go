package stack

import (
	"testing"

	"github.com/google/gopacket/layers"
)

// TestUnackedFromACKs: what of netstack's stream (A, initial sequence
// number 4999 in its SYN-ACK) the peer has not acknowledged is the
// distance from the highest ACK number the peer sent (RFC 9293 §3.4:
// SND.UNA) to the end of what was written, the SYN's sequence number not
// counted; an older ACK arriving late does not move it back, the FIN's
// acknowledgement ends it at zero, and a reset leaves it readable.
func TestUnackedFromACKs(t *testing.T) {
	var a ackSalvage
	buf := make([]byte, 200)
	k := flowKey{lport: 5000, rport: 40000}
	la, ra := addrA.As4(), addrB.As4()
	copy(k.local[:], la[:])
	copy(k.remote[:], ra[:])
	if _, ok := a.unacked(k, 100); ok {
		t.Fatal("a connection never seen: ok")
	}
	a.sent(view(t, synFrameX(t, true, 4999, 1000, 1, 2, true)))
	a.sent(view(t, seg(t, true, 5000, 1000, 100, 100, nil))) // 100 bytes written
	steps := []struct {
		name  string
		frame []byte
		want  uint64
	}{
		{"nothing acknowledged", nil, 100},
		{"40 acknowledged", seg(t, false, 1000, 5040, 100, 0, nil), 60},
		{"an older ACK late", seg(t, false, 1000, 5010, 100, 0, nil), 60},
		{"all of it", seg(t, false, 1000, 5100, 100, 0, nil), 0},
		{"and the FIN", seg(t, false, 1000, 5101, 100, 0, nil), 0},
		{"then a reset", seg(t, false, 1000, 5101, 0, 0, func(c *layers.TCP) { c.RST, c.ACK = true, false }), 0},
	}
	for _, s := range steps {
		if s.frame != nil {
			a.received(view(t, s.frame), buf)
		}
		if got, ok := a.unacked(k, 100); !ok || got != s.want {
			t.Errorf("%s: unacked %d (ok %v), want %d", s.name, got, ok, s.want)
		}
	}
}
