package native

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// RFC 9293 §3.5: the three-way handshake, active on A, passive on B.
func TestHandshakeRFC9293Sec3_5(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	ca, cb := w.connect(7000)
	if cb.State() != Established || ca.Peer().Port() != 7000 || cb.Peer().Addr() != addrA {
		t.Fatalf("states %v %v peer %v %v", ca.State(), cb.State(), ca.Peer(), cb.Peer())
	}
	if got := counterOf(t, w.a, "tcp_active_opens"); got != 1 {
		t.Errorf("active opens %d", got)
	}
	if got := counterOf(t, w.b, "tcp_passive_opens"); got != 1 {
		t.Errorf("passive opens %d", got)
	}
	if w.a.conns[ca.idx].smss != 1500-40-12 {
		t.Errorf("MSS %d, want 1448 (1460 less timestamps, RFC 6691)", ca.smss)
	}
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Byte-exact both ways at once, then both FINs (RFC 9293 §3.6, §3.10.4).
func TestBothWaysAndClose(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	ca, cb := w.connect(7000)
	ab := newPipe(ca, cb, randBytes(1, 3<<20))
	ba := newPipe(cb, ca, randBytes(2, 2<<20))
	w.until(time.Minute, "transfer", func() bool {
		ab.pump(t)
		ba.pump(t)
		return ab.done() && ba.done()
	})
	if !bytes.Equal(ab.got.Bytes(), ab.data) || !bytes.Equal(ba.got.Bytes(), ba.data) {
		t.Fatalf("data differs: %d/%d %d/%d", ab.got.Len(), len(ab.data), ba.got.Len(), len(ba.data))
	}
	if _, err := ca.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after FIN: %v", err)
	}
	ca.Close()
	cb.Close()
	w.until(5*time.Minute, "close", func() bool { return len(w.a.table) == 0 && len(w.b.table) == 0 })
}

// 16 MiB byte-exact each way through a wire that loses, duplicates,
// reorders and corrupts (RFC 9293 §3.10.7.4 acceptability and
// reassembly, RFC 6298 retransmission, RFC 6675/6582 recovery, RFC 1071
// checksums catching the corruption).
func TestImpairedBulk(t *testing.T) {
	imp := memio.Impairment{Loss: 0.01, Duplicate: 0.01, Reorder: 0.05, Corrupt: 0.001}
	for name, o := range map[string]Options{"sack": {}, "newreno": {NoSACK: true}, "cubic": {Congestion: CUBIC}} {
		t.Run(name, func(t *testing.T) {
			seed := memio.Seed(t)
			w := newWorld(t, memio.Options{AtoB: imp, BtoA: imp, Seed: seed}, o, o)
			ca, cb := w.connect(7000)
			n := 16 << 20
			if testing.Short() {
				n = 2 << 20
			}
			ab := newPipe(ca, cb, randBytes(seed, n))
			ba := newPipe(cb, ca, randBytes(seed+1, n))
			w.until(30*time.Minute, "transfer", func() bool {
				ab.pump(t)
				ba.pump(t)
				return ab.done() && ba.done()
			})
			if !bytes.Equal(ab.got.Bytes(), ab.data) || !bytes.Equal(ba.got.Bytes(), ba.data) {
				t.Fatalf("data differs: %d/%d %d/%d", ab.got.Len(), len(ab.data), ba.got.Len(), len(ba.data))
			}
			for _, e := range []*Engine{w.a, w.b} {
				t.Logf("retransmits %d fast %d timeouts %d checksum %d ooo %d dup %d",
					counterOf(t, e, "tcp_retransmits"), counterOf(t, e, "tcp_fast_retransmits"),
					counterOf(t, e, "tcp_timeouts"), counterOf(t, e, "tcp_checksum_errors")+counterOf(t, e, "ip_bad_checksum"),
					counterOf(t, e, "tcp_out_of_order_queued"), counterOf(t, e, "tcp_duplicate_data"))
			}
			t.Logf("engine time %v, steps %d", w.clk.Now().Sub(time.Unix(1_000_000, 0)), w.steps)
		})
	}
}

// countingClock counts the reads of the clock it wraps.
type countingClock struct {
	Clock
	reads int
}

func (c *countingClock) Now() time.Time { c.reads++; return c.Clock.Now() }

// One clock reading per step: Tick reads the clock once, PollAt and
// FlushAt read it not at all and fire the timers due at the reading they
// are given, and a stale reading never moves the engine's time back. The
// timer is the delayed ACK (RFC 1122 §4.2.3.2): it must fire from FlushAt
// once a reading past its deadline is passed, and not before.
func TestTickOnePerStepRFC1122Sec4_2_3_2(t *testing.T) {
	const delack = 5 * time.Millisecond
	w := newWorld(t, memio.Options{}, Options{}, Options{DelayedACK: delack})
	ca, cb := w.connect(7000)
	buf := make([]byte, 200)
	for range 2 { // the quick ACKs after the handshake
		ca.Write(make([]byte, 100))
		got := 0
		w.until(time.Second, "quick-ACKed segment", func() bool {
			n, _ := cb.Read(buf)
			got += n
			return got == 100 && ca.Buffered() == 0
		})
	}
	clk := &countingClock{Clock: w.clk}
	w.b.clock = clk
	if ca.Write(make([]byte, 100)) != 100 {
		t.Fatal("write refused")
	}
	if err := w.a.Flush(); err != nil {
		t.Fatal(err)
	}
	segs := func() uint64 { return counterOf(t, w.b, "tcp_segments_out") }
	before := segs()
	t0 := w.b.Tick()
	if n := w.b.PollAt(t0, 64); n != 1 {
		t.Fatalf("PollAt took %d frames, want the one data segment", n)
	}
	if err := w.b.FlushAt(t0); err != nil {
		t.Fatal(err)
	}
	if clk.reads != 1 {
		t.Errorf("Tick, PollAt, FlushAt read the clock %d times, want 1", clk.reads)
	}
	if got := segs(); got != before {
		t.Fatalf("%d segments out before the delayed ACK's time, want none", got-before)
	}
	w.clk.Advance(delack)
	if err := w.b.FlushAt(t0); err != nil { // stale: the ACK is not due at t0
		t.Fatal(err)
	}
	if got := segs(); got != before {
		t.Fatalf("FlushAt(stale reading) sent %d segments", got-before)
	}
	t1 := w.b.Tick()
	if err := w.b.FlushAt(t1); err != nil {
		t.Fatal(err)
	}
	if got := segs(); got != before+1 {
		t.Fatalf("FlushAt past the delayed ACK's deadline sent %d segments, want the ACK", got-before)
	}
	w.b.PollAt(t0, 64)
	if w.b.now != int64(t1) {
		t.Errorf("PollAt(stale) moved the engine's time from %d to %d", t1, w.b.now)
	}
	if clk.reads != 2 {
		t.Errorf("clock read %d times, want 2 (the two Ticks)", clk.reads)
	}
}

// An ACK of everything in flight, for a connection with nothing more to
// send, leaves the connection out of the next Flush (nothing for output
// to do); one that opens room for data waiting in the send buffer puts it
// in, and the data leaves at that Flush (RFC 9293 §3.10.7.4's ACK step,
// the send side of §3.8.6.2.1).
func TestACKMarksOnlyWhatCanSend(t *testing.T) {
	w, ca, cb := lossWorld(t)
	una, mss := inFlight(t, w, cb, 2)
	w.pb.SetImpairment(memio.Impairment{})
	ackB(w, ca, cb, una+2*mss)
	if cb.sndUna != cb.sndMax || len(w.b.dirty) != 0 {
		t.Fatalf("after the ACK of all in flight: una %d max %d, %d dirty connections, want none", cb.sndUna, cb.sndMax, len(w.b.dirty))
	}

	// Two segments more than the peer's window takes: the ACK that opens
	// it lets them out.
	cb.sndWnd = 0
	una = cb.sndUna
	cb.Write(make([]byte, 2*int(mss)))
	if err := w.b.Flush(); err != nil {
		t.Fatal(err)
	}
	if cb.sndMax != una {
		t.Fatalf("sent %d bytes into a zero window", cb.sndMax-una)
	}
	ackB(w, ca, cb, una)
	if !cb.inDirty {
		t.Fatal("the ACK that opened the window left the waiting data out of the next Flush")
	}
	if err := w.b.Flush(); err != nil {
		t.Fatal(err)
	}
	if cb.sndMax != una+2*mss {
		t.Errorf("after the window opened: %d bytes sent, want %d", cb.sndMax-una, 2*mss)
	}
}

// TestIdle: the engine is idle when nothing waits for TakeReadable or
// Flush: not after a Write (something to send), not after a Poll that
// took data (readable) until TakeReadable, not when a timer's segment
// waits for its kick; idle again once those were taken and flushed.
func TestIdle(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{DelayedACK: 10 * time.Millisecond})
	ca, cb := w.connect(80)
	settle := func() {
		for w.step() > 0 {
		}
		w.a.TakeReadable(func(*Conn) {})
		w.b.TakeReadable(func(*Conn) {})
	}
	settle()
	// Past the quick ACKs that follow the handshake (two), so that the
	// next data's ACK is delayed.
	buf := make([]byte, 8)
	for range 3 {
		ca.Write([]byte("x"))
		settle()
		cb.Read(buf)
		settle()
	}
	if !w.a.Idle() || !w.b.Idle() {
		t.Fatalf("after the handshake settled: idle %v, %v; want both", w.a.Idle(), w.b.Idle())
	}
	if ca.Write([]byte("ping")) != 4 || w.a.Idle() {
		t.Fatal("idle with a Write waiting for Flush")
	}
	if err := w.a.Flush(); err != nil {
		t.Fatal(err)
	}
	if !w.a.Idle() {
		t.Fatal("not idle after the Flush that sent the write")
	}
	if w.b.Poll(64) != 1 || w.b.Idle() {
		t.Fatal("idle after a Poll that took data, before TakeReadable")
	}
	w.b.TakeReadable(func(*Conn) {})
	if !w.b.Idle() {
		t.Fatal("not idle after TakeReadable, with the ACK delayed")
	}
	// The delayed ACK's timer (RFC 1122 §4.2.3.2) fires in a Poll and
	// leaves the engine with an ACK to send.
	w.clk.Advance(20 * time.Millisecond)
	if w.b.Poll(64) != 0 || w.b.Idle() {
		t.Fatal("idle after the delayed ACK's timer fired, before Flush")
	}
	if err := w.b.Flush(); err != nil {
		t.Fatal(err)
	}
	if !w.b.Idle() {
		t.Fatal("not idle after the Flush that sent the delayed ACK")
	}
	if n, _ := cb.Read(buf); string(buf[:n]) != "ping" {
		t.Fatalf("read %q, want ping", buf[:n])
	}
}
