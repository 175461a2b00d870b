package native

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// tcpFrame returns the TCP header of an IPv4/TCP frame, or nil.
func tcpFrame(f []byte) []byte {
	if len(f) < ethLen+ipLen+tcpLen || binary.BigEndian.Uint16(f[12:]) != etherIPv4 || f[ethLen+9] != protoTCP {
		return nil
	}
	return f[ethLen+ipLen:]
}

// dataLen is the payload length of a TCP frame.
func dataLen(f []byte) int {
	tot := int(binary.BigEndian.Uint16(f[ethLen+2:]))
	t := tcpFrame(f)
	return tot - ipLen - int(t[12]>>4)*4
}

// tap records the time of every frame one port sends that match.
type tap struct {
	clk   *memio.FakeClock
	match func(f []byte) bool
	times []time.Time
}

func (tp *tap) fn(dir memio.Dir, f []byte) {
	if dir == memio.AtoB && tp.match != nil && tp.match(f) {
		tp.times = append(tp.times, tp.clk.Now())
	}
}

// RFC 6298 §5.5: each retransmission doubles the RTO (from MinRTO here:
// no RTT sample before the loss would leave InitialRTO), up to MaxRTO, and
// the connection gives up after MaxRetries (RFC 1122 §4.2.3.5). NoRACK:
// no tail loss probe before the first timeout (RFC 8985 §7.2).
func TestRTOBackoffRFC6298Sec5_5(t *testing.T) {
	tp := &tap{match: func(f []byte) bool { t := tcpFrame(f); return t != nil && dataLen(f) > 0 }}
	mo := memio.Options{Tap: tp.fn}
	oa := Options{MinRTO: 100 * time.Millisecond, MaxRTO: 2 * time.Second, MaxRetries: 6, NoRACK: true}
	w := newWorld(t, mo, oa, Options{})
	tp.clk = w.clk
	ca, _ := w.connect(7000)
	w.pa.SetImpairment(memio.Impairment{Loss: 1})
	ca.Write([]byte("lost"))
	w.until(time.Minute, "give up", func() bool { return ca.Err() != nil })
	if !errors.Is(ca.Err(), ErrTimedOut) {
		t.Fatalf("err %v, want ErrTimedOut", ca.Err())
	}
	if len(tp.times) != 7 {
		t.Fatalf("%d transmissions, want 1 + MaxRetries(6)", len(tp.times))
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 2000}
	for i := 1; i < len(tp.times); i++ {
		gap := tp.times[i].Sub(tp.times[i-1])
		if gap != want[i-1]*time.Millisecond {
			t.Errorf("gap %d: %v, want %v ms", i, gap, want[i-1])
		}
	}
	if got := counterOf(t, w.a, "tcp_timeouts"); got != 6 {
		t.Errorf("tcp_timeouts %d, want 6", got)
	}
}

// dropper is a FrameIO that loses the frames drop picks on their way out.
type dropper struct {
	*memio.Port
	drop    func(f []byte) bool
	dropped int
}

func (d *dropper) TxFrame(f []byte) bool {
	if d.drop(f) {
		d.dropped++
		return true
	}
	return d.Port.TxFrame(f)
}

// TxCommit loses the frame built in the slot as TxFrame loses a copy:
// the slot stays the port's, for the next frame.
func (d *dropper) TxCommit(n int) bool {
	if f := d.Port.TxSlot(); f != nil && n > 0 && n <= cap(f) && d.drop(f[:n]) {
		d.dropped++
		return true
	}
	return d.Port.TxCommit(n)
}

// newLossyWorld is newWorld with A's frames passing through a dropper.
func newLossyWorld(t *testing.T, drop func(f []byte) bool, oa, ob Options) (*world, *dropper) {
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	d := &dropper{Port: w.pa, drop: func([]byte) bool { return false }}
	oa.Addr, oa.Clock = addrA, w.clk
	a, err := New(d, oa)
	if err != nil {
		t.Fatal(err)
	}
	ob.Addr, ob.Clock = addrB, w.clk
	b, err := New(w.pb, ob)
	if err != nil {
		t.Fatal(err)
	}
	w.a.Close()
	w.b.Close()
	w.a, w.b = a, b
	t.Cleanup(func() { a.Close(); b.Close() })
	d.drop = drop
	return w, d
}

// nthData drops the n-th data segment (counting from 1) once.
func nthData(n int) func(f []byte) bool {
	seen := 0
	return func(f []byte) bool {
		if tcpFrame(f) == nil || dataLen(f) == 0 {
			return false
		}
		seen++
		return seen == n
	}
}

// RFC 6675 §5 (and RFC 2018): one lost segment in a flight is found from
// the SACK blocks and retransmitted without waiting for the RTO.
func TestSACKFastRetransmitRFC6675Sec5(t *testing.T) {
	for _, sack := range []bool{true, false} {
		t.Run(map[bool]string{true: "sack", false: "newreno-rfc6582"}[sack], func(t *testing.T) {
			o := Options{NoSACK: !sack, MinRTO: time.Second}
			w, d := newLossyWorld(t, nthData(2), o, o)
			ca, cb := w.connect(7000)
			start := w.clk.Now()
			p := newPipe(ca, cb, randBytes(3, 20*1448))
			w.until(10*time.Second, "transfer", func() bool { p.pump(t); return p.done() })
			if !bytes.Equal(p.got.Bytes(), p.data) {
				t.Fatal("data differs")
			}
			if d.dropped != 1 {
				t.Fatalf("dropped %d", d.dropped)
			}
			if got := counterOf(t, w.a, "tcp_fast_retransmits"); got != 1 {
				t.Errorf("fast retransmits %d, want 1", got)
			}
			if got := counterOf(t, w.a, "tcp_timeouts"); got != 0 {
				t.Errorf("timeouts %d, want 0", got)
			}
			if el := w.clk.Now().Sub(start); el >= time.Second {
				t.Errorf("took %v of engine time: the RTO (1 s) ran", el)
			}
		})
	}
}

// copyEcho is io.Copy(c, c) on the engine's API: read a chunk, then write
// all of it before reading again.
type copyEcho struct {
	c        *Conn
	buf      []byte
	pend     []byte
	eof      bool
	shutDown bool
}

func (e *copyEcho) pump(t testing.TB) {
	for {
		if len(e.pend) > 0 {
			n := e.c.Write(e.pend)
			e.pend = e.pend[n:]
			if len(e.pend) > 0 {
				return // blocked writing: does not read
			}
		}
		if e.eof {
			if !e.shutDown {
				e.c.CloseWrite()
				e.shutDown = true
			}
			return
		}
		n, err := e.c.Read(e.buf)
		if err != nil {
			e.eof = true
			continue
		}
		if n == 0 {
			return
		}
		e.pend = e.buf[:n]
	}
}

// RFC 9293 §3.10.7.4 allows an ACK to be taken while the receive window
// is zero. The io.Copy echo blocks in both directions at once: the client
// writes 16 MiB while it reads the echo back, the echo writes what it
// reads and stops reading while its writes wait. Each side's window is
// closed by the other at times; the ACKs that open them must be taken or
// the transfer stalls for good. Over a lossy wire too.
func TestIOCopyNoStallRFC9293Sec3_10_7_4(t *testing.T) {
	for _, imp := range []memio.Impairment{{}, {Loss: 0.01, Duplicate: 0.01, Reorder: 0.05, Corrupt: 0.001}} {
		t.Run(map[bool]string{true: "lossy", false: "clean"}[imp.Loss > 0], func(t *testing.T) {
			seed := memio.Seed(t)
			o := Options{SendBuf: 32 << 10, RecvBuf: 32 << 10}
			w := newWorld(t, memio.Options{AtoB: imp, BtoA: imp, Seed: seed}, o, o)
			ca, cb := w.connect(7000)
			n := 16 << 20
			if testing.Short() {
				n = 2 << 20
			}
			cl := newPipe(ca, ca, randBytes(seed, n))
			echo := &copyEcho{c: cb, buf: make([]byte, 32<<10)}
			w.until(time.Hour, "echo", func() bool {
				cl.pump(t)
				echo.pump(t)
				return cl.done()
			})
			if !bytes.Equal(cl.got.Bytes(), cl.data) {
				t.Fatalf("echo differs: %d of %d bytes", cl.got.Len(), len(cl.data))
			}
			t.Logf("engine time %v; zero-window probes %d/%d", w.clk.Now().Sub(time.Unix(1_000_000, 0)),
				counterOf(t, w.a, "tcp_persist_probes"), counterOf(t, w.b, "tcp_persist_probes"))
		})
	}
}

// RFC 9293 §3.8.6.1 and RFC 1122 §4.2.2.17: a sender facing a zero
// window probes it with backed-off intervals for as long as the receiver
// answers, and goes on when it opens.
func TestZeroWindowProbesRFC9293Sec3_8_6_1(t *testing.T) {
	tp := &tap{match: func(f []byte) bool { return tcpFrame(f) != nil && dataLen(f) == 1 }}
	o := Options{RecvBuf: 8 << 10, MinRTO: 200 * time.Millisecond, MaxRTO: 10 * time.Second, MaxRetries: 3}
	w := newWorld(t, memio.Options{Tap: tp.fn}, o, o)
	tp.clk = w.clk
	ca, cb := w.connect(7000)
	data := randBytes(4, 20<<10)
	sent := ca.Write(data)
	w.until(time.Minute, "probes", func() bool { return len(tp.times) >= 8 })
	for i := 2; i < len(tp.times); i++ {
		g0, g1 := tp.times[i-1].Sub(tp.times[i-2]), tp.times[i].Sub(tp.times[i-1])
		if g1 < g0 {
			t.Errorf("probe gap %d shrank: %v after %v", i, g1, g0)
		}
	}
	if ca.Err() != nil {
		t.Fatalf("prober gave up: %v (probes are answered; MaxRetries must not apply)", ca.Err())
	}
	p := newPipe(ca, cb, data)
	p.sent = sent
	if sent == len(data) {
		ca.CloseWrite()
	}
	w.until(time.Minute, "rest", func() bool { p.pump(t); return p.done() })
	if !bytes.Equal(p.got.Bytes(), data) {
		t.Fatal("data differs after the window opened")
	}
}

// RFC 9293 §3.6 figure 13 / RFC 6191: a new connection on the tuple of
// one in TIME-WAIT, from both sides: the active closer dials again from
// the same port, and the passive side's listener takes a SYN on a tuple
// it holds in TIME-WAIT.
func TestTimeWaitReuseRFC6191(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	l, _ := w.b.Listen(7000, 0)
	dial := func(port uint16) (*Conn, *Conn) {
		ca, err := w.a.Dial(netip.AddrPortFrom(addrB, 7000), port)
		if err != nil {
			i := w.a.table[tuple{addrB.As4(), port, 7000}]
			t.Fatalf("dial: %v (%v)", err, w.a.conns[i].State())
		}
		var cb *Conn
		w.until(10*time.Second, "handshake", func() bool {
			if cb == nil {
				cb, _ = l.Accept()
			}
			return cb != nil && ca.State() == Established
		})
		return ca, cb
	}
	// A closed connection waits its 2 MSL in a TIME-WAIT record
	// (timewait.go): its tuple is in the table under a negative index.
	inTimeWait := func(e *Engine, t tuple) bool { i, ok := e.table[t]; return ok && i < 0 }
	ca, cb := dial(40000)
	ca.Close()
	w.until(time.Second, "fin", func() bool { _, err := cb.Read(nil); return err != nil })
	cb.Close()
	w.until(time.Second, "time-wait", func() bool { return inTimeWait(w.a, tuple{addrB.As4(), 40000, 7000}) })
	ca, cb = dial(40000) // A's TIME-WAIT on 40000 ends for the new connection
	cb.Close()
	w.until(time.Second, "fin", func() bool { _, err := ca.Read(nil); return err != nil })
	ca.Close()
	w.until(time.Second, "time-wait on B", func() bool {
		return inTimeWait(w.b, tuple{addrA.As4(), 7000, 40000}) && len(w.a.table) == 0
	})
	ca, _ = dial(40000) // B's TIME-WAIT ends for the new SYN
	if ca.State() != Established {
		t.Fatal("no connection")
	}
}

// RFC 9293 §3.5 figure 7: simultaneous open, both ends SYN-SENT ->
// SYN-RECEIVED -> ESTABLISHED; and §3.6 figure 13: simultaneous close
// through CLOSING into TIME-WAIT on both.
func TestSimultaneousOpenCloseRFC9293Sec3_5(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	ca, err := w.a.Dial(netip.AddrPortFrom(addrB, 6000), 5000)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := w.b.Dial(netip.AddrPortFrom(addrA, 5000), 6000)
	if err != nil {
		t.Fatal(err)
	}
	w.until(10*time.Second, "open", func() bool { return ca.State() == Established && cb.State() == Established })
	ca.Write([]byte("ping"))
	buf := make([]byte, 8)
	w.until(time.Second, "data", func() bool { n, _ := cb.Read(buf); return n == 4 })
	ca.CloseWrite()
	cb.CloseWrite()
	seen := map[State]bool{}
	w.until(time.Second, "time-wait", func() bool {
		seen[ca.State()], seen[cb.State()] = true, true
		return ca.State() == TimeWait && cb.State() == TimeWait
	})
	if !seen[FinWait1] || !seen[Closing] {
		t.Errorf("states seen %v, want FIN-WAIT-1 and CLOSING on the way", seen)
	}
}

// RFC 9293 §3.10.7.1: a SYN to a port nobody listens on is answered by a
// RST, which refuses the connection (§3.10.7.3).
func TestRefusedRFC9293Sec3_10_7_1(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	ca, err := w.a.Dial(netip.AddrPortFrom(addrB, 9), 0)
	if err != nil {
		t.Fatal(err)
	}
	w.until(10*time.Second, "refused", func() bool { return ca.Err() != nil })
	if !errors.Is(ca.Err(), ErrRefused) {
		t.Fatalf("err %v", ca.Err())
	}
	if counterOf(t, w.b, "tcp_resets_sent") != 1 || counterOf(t, w.b, "tcp_no_connection") != 1 {
		t.Error("the RST is not counted")
	}
	ca.Close()
	if len(w.a.free) != len(w.a.conns) {
		t.Error("the slot was not given back")
	}
}

// RFC 4987 §3.6: beyond the SYN backlog, SYN cookies: the listener keeps
// no state for the SYN and still makes the connection from the ACK.
func TestSYNCookiesRFC4987Sec3_6(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{SYNBacklog: 1})
	l, _ := w.b.Listen(7000, 64)
	var cs []*Conn
	for range 8 {
		c, err := w.a.Dial(netip.AddrPortFrom(addrB, 7000), 0)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	var acc []*Conn
	w.until(10*time.Second, "accept", func() bool {
		for c, ok := l.Accept(); ok; c, ok = l.Accept() {
			acc = append(acc, c)
		}
		return len(acc) == len(cs)
	})
	if got := counterOf(t, w.b, "tcp_syncookies_sent"); got < 6 {
		t.Errorf("cookies sent %d, want at least 6", got)
	}
	if got := counterOf(t, w.b, "tcp_syncookies_ok"); got < 6 {
		t.Errorf("cookie handshakes %d", got)
	}
	for i, c := range cs {
		c.Write([]byte{byte(i)})
	}
	buf := make([]byte, 4)
	for _, c := range acc {
		w.until(time.Second, "data", func() bool { n, _ := c.Read(buf); return n == 1 })
	}
	// A forged ACK is not a cookie: RST, no connection.
	bad0 := counterOf(t, w.b, "tcp_syncookies_failed")
	s := segment{src: addrA.As4(), sport: 1234, dport: 7000, seq: 1, ack: 12345, flags: flagACK}
	s.srcMAC = [6]byte(w.pa.MAC())
	w.b.tick()
	w.b.listeners[7000].input(&s)
	if counterOf(t, w.b, "tcp_syncookies_failed") != bad0+1 || len(l.queue) != 0 {
		t.Error("a forged cookie ACK was taken")
	}
}
