package wire

import (
	"encoding/binary"
	"strings"
	"testing"
)

// tcpFrame builds an Ethernet frame carrying a TCP segment from port 1000
// to 2000 with seq, ack, the ACK flag, window 7 and payload bytes.
func tcpFrame(seq, ack uint32, payload int) []byte {
	f := ipv4Frame(0, 20+payload)
	f[23] = 6
	tcp := f[etherHdr+20:]
	binary.BigEndian.PutUint16(tcp[0:], 1000)
	binary.BigEndian.PutUint16(tcp[2:], 2000)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	binary.BigEndian.PutUint32(tcp[8:], ack)
	tcp[12], tcp[13] = 5<<4, 0x10
	binary.BigEndian.PutUint16(tcp[14:], 7)
	return f
}

// TestTraceNamesEachSegmentsFate: the trace lists the TCP segments a
// direction took in, oldest first, with their numbers and what the wire
// did, keeps the last 64, and leaves other frames out.
func TestTraceNamesEachSegmentsFate(t *testing.T) {
	tp := newTestPipe(t, Impairment{}, 200)
	tp.in(tcpFrame(100, 5, 10), 0, Impairment{})
	tp.in(tcpFrame(110, 5, 0), ms, Impairment{Loss: 1})
	tp.in(arpFrame(), 2*ms, Impairment{})
	tp.in(ipv4Frame(9, 8), 2*ms, Impairment{})
	lines := strings.Split(strings.TrimSpace(tp.p.trace.String()), "\n")
	if len(lines) != 2 ||
		!strings.Contains(lines[0], "1000>2000 A seq 100 ack 5 win 7 len 10: forwarded") ||
		!strings.Contains(lines[1], "+1.000 ms 1000>2000 A seq 110 ack 5 win 7 len 0: dropped") {
		t.Fatalf("trace:\n%s", tp.p.trace.String())
	}
	for i := range 100 {
		tp.out(int64(i) * ms)
		tp.in(tcpFrame(uint32(1000+i), 5, 0), int64(3+i)*ms, Impairment{})
	}
	lines = strings.Split(strings.TrimSpace(tp.p.trace.String()), "\n")
	if len(lines) != traceLen || !strings.Contains(lines[0], "seq 1036 ") || !strings.Contains(lines[traceLen-1], "seq 1099 ") {
		t.Fatalf("after 102 segments the trace holds %d, from %q to %q", len(lines), lines[0], lines[len(lines)-1])
	}
}
