package wire

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
)

// traceLen is how many TCP segments a direction's trace remembers.
const traceLen = 64

// segTrace is one TCP segment as the wire took it in and what it did.
type segTrace struct {
	at               int64 // arrival, ns on the wire's clock
	seq, ack         uint32
	win              uint16
	flags            uint8
	payload          int
	sport, dport     uint16
	drop, dup, fault bool // dropped, duplicated, corrupted
}

// tcpTrace is a ring of the last traceLen TCP segments of one direction,
// for the report of a stall: which segments the wire dropped or
// corrupted, and what each side last said (sequence, ACK, window). Safe
// for concurrent use.
type tcpTrace struct {
	mu   sync.Mutex
	ring [traceLen]segTrace
	n    int // segments seen
}

// note records the TCP segment of frame f (nothing for other frames),
// before the wire changes it.
func (t *tcpTrace) note(f []byte, at int64, d Decision) {
	off, n, ok := ipv4Span(f)
	if !ok || n < 20 || f[off+9] != 6 {
		return
	}
	ihl := int(f[off]&0x0f) * 4
	tcp := f[off+ihl : off+n]
	if ihl < 20 || len(tcp) < 20 || int(tcp[12]>>4)*4 > len(tcp) {
		return
	}
	s := segTrace{at: at,
		sport: binary.BigEndian.Uint16(tcp[0:]), dport: binary.BigEndian.Uint16(tcp[2:]),
		seq: binary.BigEndian.Uint32(tcp[4:]), ack: binary.BigEndian.Uint32(tcp[8:]),
		flags: tcp[13], win: binary.BigEndian.Uint16(tcp[14:]),
		payload: len(tcp) - int(tcp[12]>>4)*4,
		drop:    d.Drop, dup: d.Dup && !d.Drop, fault: d.Corrupt && !d.Drop}
	t.mu.Lock()
	t.ring[t.n%traceLen] = s
	t.n++
	t.mu.Unlock()
}

// String lists the remembered segments, oldest first, one a line: time
// since the first, ports, flags, sequence and ACK numbers, the window
// field (unscaled), the payload length and what the wire did.
func (t *tcpTrace) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	first := max(0, t.n-traceLen)
	var t0 int64
	for i := first; i < t.n; i++ {
		s := t.ring[i%traceLen]
		if i == first {
			t0 = s.at
		}
		fate := "forwarded"
		switch {
		case s.drop:
			fate = "dropped"
		case s.fault && s.dup:
			fate = "corrupted, duplicated"
		case s.fault:
			fate = "corrupted"
		case s.dup:
			fate = "duplicated"
		}
		fmt.Fprintf(&b, "%+10.3f ms %d>%d %s seq %d ack %d win %d len %d: %s\n",
			float64(s.at-t0)/1e6, s.sport, s.dport, tcpFlags(s.flags), s.seq, s.ack, s.win, s.payload, fate)
	}
	return b.String()
}

// tcpFlags names the flags of a TCP header's flag byte, as tcpdump does.
func tcpFlags(f uint8) string {
	var b []byte
	for i, c := range "FSRPAU" {
		if f&(1<<i) != 0 {
			b = append(b, byte(c))
		}
	}
	if len(b) == 0 {
		return "."
	}
	return string(b)
}
