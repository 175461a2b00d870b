package native

import (
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// cookieWorld dials n connections at a listener of SYN backlog 1 on b, so
// that all but the first are made from SYN cookies, exchanges data of
// size each way on every one, and returns both ends of each.
func cookieWorld(t *testing.T, oa, ob Options, n, size int) (w *world, dialed, accepted []*Conn) {
	t.Helper()
	ob.SYNBacklog = 1
	w = newWorld(t, memio.Options{}, oa, ob)
	l, err := w.b.Listen(7000, 64)
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		c, err := w.a.Dial(netip.AddrPortFrom(addrB, 7000), 0)
		if err != nil {
			t.Fatal(err)
		}
		dialed = append(dialed, c)
	}
	w.until(10*time.Second, "accept", func() bool {
		for c, ok := l.Accept(); ok; c, ok = l.Accept() {
			accepted = append(accepted, c)
		}
		return len(accepted) == n
	})
	if got := counterOf(t, w.b, "tcp_syncookies_ok"); got < uint64(n-1) {
		t.Fatalf("%d cookie handshakes of %d connections; want all but one", got, n)
	}
	// The accepted connections in the order of the dials, by port.
	byPort := map[uint16]*Conn{}
	for _, c := range accepted {
		byPort[c.Peer().Port()] = c
	}
	accepted = accepted[:0]
	for _, c := range dialed {
		accepted = append(accepted, byPort[c.LocalPort()])
	}
	for i := range dialed {
		w.exchange(dialed[i], accepted[i], pattern(size, byte(i)), pattern(size, byte(i+100)))
	}
	return w, dialed, accepted
}

// RFC 4987 §3.6: a SYN cookie keeps no state, and so loses the options of
// the SYN; RFC 7323 §3.2 has every segment after the SYN-ACK echo its
// TSval. A cookie SYN-ACK to a SYN with timestamps offers the window
// scale, SACK and timestamps the SYN offered, its TSval's low bits say
// which, and the ACK's echo gives them back: both ends of a cookie
// connection agree on every option, as on one made with state, and a
// window of more than 64 KiB opens.
func TestSYNCookieKeepsOptionsRFC4987Sec3_6(t *testing.T) {
	w, dialed, accepted := cookieWorld(t, Options{RecvBuf: 1 << 20}, Options{RecvBuf: 1 << 20}, 4, 512<<10)
	for i, a := range dialed {
		b := accepted[i]
		if !a.wsOK || !b.wsOK || !a.sackOK || !b.sackOK || !a.tsOK || !b.tsOK {
			t.Errorf("connection %d: options dialer ws %v sack %v ts %v, listener ws %v sack %v ts %v; want all on",
				i, a.wsOK, a.sackOK, a.tsOK, b.wsOK, b.sackOK, b.tsOK)
		}
		if a.sndWS != b.rcvWS || b.sndWS != a.rcvWS || b.rcvWS != wscaleFor(1<<20) {
			t.Errorf("connection %d: window scales dialer send %d receive %d, listener send %d receive %d",
				i, a.sndWS, a.rcvWS, b.sndWS, b.rcvWS)
		}
		if a.smss != b.rmss || b.smss != a.rmss {
			t.Errorf("connection %d: segment sizes dialer %d/%d, listener %d/%d (timestamps counted on one side only)", i, a.smss, a.rmss, b.smss, b.rmss)
		}
		if i > 0 && a.maxSndWnd <= 0xffff {
			t.Errorf("connection %d (a cookie's): the dialer's send window never passed %d", i, a.maxSndWnd)
		}
	}
	if got, ok := counterOf(t, w.b, "tcp_syncookies_ts_options"), counterOf(t, w.b, "tcp_syncookies_ok"); got != ok {
		t.Errorf("tcp_syncookies_ts_options %d, want %d (every cookie connection)", got, ok)
	}
}

// RFC 4987 §3.6 and RFC 7323 §3.2: a cookie SYN-ACK offers only what the
// SYN offered and the listener takes: without timestamps in the SYN the
// cookie holds the MSS alone (no window scale, no SACK, as Linux); a
// listener without window scaling or SACK leaves those out and keeps
// timestamps.
func TestSYNCookieOptionsOfferedRFC7323Sec1_3(t *testing.T) {
	for _, tc := range []struct {
		name           string
		oa, ob         Options
		ws, sack, ts   bool
		wantTSOptsConn bool
	}{
		{"dialer without timestamps", Options{NoTimestamps: true}, Options{}, false, false, false, false},
		{"listener without window scaling", Options{}, Options{NoWindowScale: true}, false, true, true, true},
		{"listener without SACK", Options{}, Options{NoSACK: true}, true, false, true, true},
		{"dialer without window scaling or SACK", Options{NoWindowScale: true, NoSACK: true}, Options{}, false, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, dialed, accepted := cookieWorld(t, tc.oa, tc.ob, 3, 100<<10)
			for i := 1; i < len(dialed); i++ { // the cookies'
				a, b := dialed[i], accepted[i]
				if a.wsOK != tc.ws || b.wsOK != tc.ws || a.sackOK != tc.sack || b.sackOK != tc.sack || a.tsOK != tc.ts || b.tsOK != tc.ts {
					t.Errorf("connection %d: dialer ws %v sack %v ts %v, listener ws %v sack %v ts %v; want %v %v %v",
						i, a.wsOK, a.sackOK, a.tsOK, b.wsOK, b.sackOK, b.tsOK, tc.ws, tc.sack, tc.ts)
				}
				if !tc.ws && (a.sndWS != 0 || b.sndWS != 0 || b.rcvWS != 0) {
					t.Errorf("connection %d: window scales %d/%d/%d without the option", i, a.sndWS, b.sndWS, b.rcvWS)
				}
			}
			if got := counterOf(t, w.b, "tcp_syncookies_ts_options") > 0; got != tc.wantTSOptsConn {
				t.Errorf("tcp_syncookies_ts_options counted %v, want %v", got, tc.wantTSOptsConn)
			}
		})
	}
}

// RFC 7323 §5.4 keys the timestamp clock by the flow: an ACK whose echo is
// no TSval of ours (a peer that never saw our SYN-ACK's timestamps) makes
// a connection from a valid cookie with the MSS alone, as before the
// options rode on the echo.
func TestSYNCookieForeignEchoRFC7323Sec5_4(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{SYNBacklog: 1})
	l, _ := w.b.Listen(7000, 64)
	syn := segment{src: addrA.As4(), sport: 1233, dport: 7000, seq: 4000, flags: flagSYN,
		hasMSS: true, mss: 1460, hasWS: true, wscale: 7, sackOK: true, hasTS: true, tsVal: 77}
	syn.srcMAC = [6]byte(w.pa.MAC())
	w.b.tick()
	w.b.listeners[7000].input(&syn) // takes the SYN backlog
	syn.sport, syn.seq = 1234, 5000
	w.b.listeners[7000].input(&syn) // answered with a cookie
	if counterOf(t, w.b, "tcp_syncookies_sent") != 1 {
		t.Fatal("the second SYN was not answered with a cookie")
	}
	iss := w.b.cookie(&syn, 1460)
	ts := w.b.cookieTS(&syn)
	if ts&0xf != 7 || ts&cookieSACK == 0 {
		t.Fatalf("cookie TSval %#x does not carry window scale 7 and SACK", ts)
	}
	ack := segment{src: syn.src, sport: syn.sport, dport: 7000, seq: 5001, ack: iss + 1, flags: flagACK,
		hasTS: true, tsVal: 78, tsEcr: ts + 1<<31, wnd: 100}
	ack.srcMAC = syn.srcMAC
	w.b.listeners[7000].input(&ack)
	c, ok := l.Accept()
	if !ok {
		t.Fatal("a valid cookie with a foreign echo made no connection")
	}
	if c.wsOK || c.sackOK || c.tsOK || c.sndWS != 0 || c.rcvWS != 0 {
		t.Errorf("options from a foreign echo: ws %v (%d/%d) sack %v ts %v", c.wsOK, c.sndWS, c.rcvWS, c.sackOK, c.tsOK)
	}
	if counterOf(t, w.b, "tcp_syncookies_ts_options") != 0 {
		t.Error("a foreign echo counted as options")
	}
}

// RFC 7323 §5.3: TSval never goes back. A cookie SYN-ACK's TSval carries
// the options in its low bits and is never ahead of the clock the
// connection then sends with, whatever the clock's own low bits.
func TestCookieTSNeverAheadRFC7323Sec5_3(t *testing.T) {
	w := newWorld(t, memio.Options{}, Options{}, Options{})
	e := w.b
	syn := segment{src: addrA.As4(), sport: 1234, dport: 7000, seq: 5000, flags: flagSYN, hasTS: true, tsVal: 1}
	for step := range 70 {
		w.clk.Advance(time.Millisecond)
		e.tick()
		clock := uint32(e.wall()/1e6) + e.tsOffset(syn.src, syn.dport, syn.sport)
		for ws := -1; ws <= 14; ws++ {
			for _, sack := range []bool{false, true} {
				syn.hasWS, syn.wscale, syn.sackOK = ws >= 0, uint8(max(ws, 0)), sack
				ts := e.cookieTS(&syn)
				want := uint32(cookieNoWS)
				if ws >= 0 {
					want = uint32(ws)
				}
				if sack {
					want |= cookieSACK
				}
				if ts&cookieTSMask != want || seqGT(ts, clock) || clock-ts > 2*cookieTSMask+1 {
					t.Fatalf("step %d, ws %d, sack %v: TSval %#x (bits %#x, want %#x) against the clock %#x", step, ws, sack, ts, ts&cookieTSMask, want, clock)
				}
			}
		}
	}
}

// AlwaysSYNCookies (Linux's tcp_syncookies = 2, RFC 4987 §3.6) answers
// every SYN with a cookie, the first to an idle listener too; with
// NoSYNCookies the listener keeps state as before.
func TestAlwaysSYNCookiesRFC4987Sec3_6(t *testing.T) {
	for _, tc := range []struct {
		name    string
		o       Options
		cookies bool
	}{{"always", Options{AlwaysSYNCookies: true}, true}, {"never wins", Options{AlwaysSYNCookies: true, NoSYNCookies: true}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, memio.Options{}, Options{}, tc.o)
			l, _ := w.b.Listen(7000, 64)
			ca, cb := w.connectTo(l, netip.AddrPortFrom(addrB, 7000))
			w.exchange(ca, cb, pattern(3000, 1), pattern(3000, 2))
			if got := counterOf(t, w.b, "tcp_syncookies_ok") == 1; got != tc.cookies {
				t.Errorf("connection made from a cookie: %v, want %v", got, tc.cookies)
			}
			if !cb.wsOK || !cb.sackOK || !cb.tsOK {
				t.Errorf("options ws %v sack %v ts %v, want all on", cb.wsOK, cb.sackOK, cb.tsOK)
			}
		})
	}
}
