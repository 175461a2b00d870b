package native

import (
	"fmt"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// hsMSS is the segment size of the HyStart++ model connections.
const hsMSS = 1000

// hsConn is a connection of engine a of a fresh world with options o,
// not connected: its slow start is driven by hsRound, an ACK at a time.
func hsConn(t *testing.T, o Options) *Conn {
	t.Helper()
	w := newWorld(t, memio.Options{Seed: 1}, o, Options{})
	c := &Conn{e: w.a, smss: hsMSS, cwndLimited: true}
	c.cwnd, c.ssthresh = initialWindow(hsMSS), 1<<30
	c.sndUna, c.sndNxt, c.sndMax = 1000, 1000, 1000
	c.hystartInit()
	return c
}

// hsRound runs one round trip of c's slow start: the flight sent when it
// began (cwnd) is acknowledged two segments an ACK, each ACK with RTT
// rtt, the sender refilling cwnd as the ACKs come. It returns the ACKs.
func hsRound(c *Conn, rtt time.Duration) int {
	c.sndMax = c.sndUna + c.cwnd
	c.sndNxt = c.sndMax
	if c.hs.phase != hsOff {
		c.hs.windowEnd = c.sndMax // the round began here (§4.2 windowEnd = SND.NXT)
	}
	end, n := c.sndMax, 0
	for seqLT(c.sndUna, end) {
		acked := min(2*uint32(hsMSS), end-c.sndUna)
		c.sndUna += acked
		if c.hs.phase != hsOff {
			c.hystartAck(int64(rtt))
		}
		c.ccAck(acked)
		c.sndMax = max(c.sndMax, c.sndUna+c.cwnd)
		c.sndNxt = c.sndMax
		n++
	}
	return n
}

// TestHyStartRTTRiseEntersCSSRFC9406Sec4_2: a round whose minimum RTT
// is at least the last round's plus the threshold (an eighth of it,
// clamped to 4..16 ms) leaves slow start for CSS, once the round has
// N_RTT_SAMPLE samples; a smaller rise keeps slow start.
func TestHyStartRTTRiseEntersCSSRFC9406Sec4_2(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name       string
		base, rise time.Duration
		css        bool
	}{
		{"20ms+3ms, under MIN_RTT_THRESH", 20 * ms, 3 * ms, false},
		{"20ms+4ms, MIN_RTT_THRESH", 20 * ms, 4 * ms, true},
		{"80ms+9ms, under base/8", 80 * ms, 9 * ms, false},
		{"80ms+10ms, base/MIN_RTT_DIVISOR", 80 * ms, 10 * ms, true},
		{"200ms+15ms, under MAX_RTT_THRESH", 200 * ms, 15 * ms, false},
		{"200ms+16ms, MAX_RTT_THRESH", 200 * ms, 16 * ms, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hsConn(t, Options{Congestion: CUBIC})
			for range 3 {
				hsRound(c, tc.base)
			}
			if c.hs.phase != hsSlowStart {
				t.Fatalf("phase %d after steady rounds, want slow start", c.hs.phase)
			}
			hsRound(c, tc.base+tc.rise)
			if got := c.hs.phase == hsCSS; got != tc.css {
				t.Fatalf("in CSS %v after a rise of %v over %v, want %v", got, tc.rise, tc.base, tc.css)
			}
			if got := counterOf(t, c.e, "tcp_hystart_css_entries"); got != map[bool]uint64{false: 0, true: 1}[tc.css] {
				t.Errorf("tcp_hystart_css_entries %d", got)
			}
			if tc.css && c.hs.baseMin != uint32((tc.base+tc.rise)/time.Microsecond) {
				t.Errorf("cssBaselineMinRtt %d µs, want the round's minimum %v", c.hs.baseMin, tc.base+tc.rise)
			}
		})
	}
}

// TestHyStartNeedsNRTTSamplesRFC9406Sec4_2: a round with fewer than
// N_RTT_SAMPLE RTT samples does not leave slow start however the RTT
// rose.
func TestHyStartNeedsNRTTSamplesRFC9406Sec4_2(t *testing.T) {
	c := hsConn(t, Options{Congestion: CUBIC})
	hsRound(c, 20*time.Millisecond) // 5 ACKs of the initial window
	hsRound(c, 20*time.Millisecond) // 10
	c.hs.lastMin = 20000
	c.hs.curMin, c.hs.samples = hsInf, 0
	for i := 1; i < hsNRTTSample; i++ {
		c.hystartAck(int64(100 * time.Millisecond))
	}
	if c.hs.phase != hsSlowStart {
		t.Fatalf("left slow start after %d samples", hsNRTTSample-1)
	}
	c.hystartAck(int64(100 * time.Millisecond))
	if c.hs.phase != hsCSS {
		t.Fatalf("phase %d after %d samples of a 5-fold RTT, want CSS", c.hs.phase, hsNRTTSample)
	}
}

// hsToCSS runs c through two rounds of 20 ms and one of 30 ms: in CSS.
func hsToCSS(t *testing.T, c *Conn) {
	t.Helper()
	hsRound(c, 20*time.Millisecond)
	hsRound(c, 20*time.Millisecond)
	hsRound(c, 20*time.Millisecond)
	hsRound(c, 30*time.Millisecond)
	if c.hs.phase != hsCSS {
		t.Fatalf("phase %d, want CSS", c.hs.phase)
	}
}

// TestHyStartCSSGrowsAQuarterRFC9406Sec4_2: in CSS an ACK grows cwnd by
// what it acknowledged over CSS_GROWTH_DIVISOR (the L limit applied
// first); in slow start by all of it.
func TestHyStartCSSGrowsAQuarterRFC9406Sec4_2(t *testing.T) {
	c := hsConn(t, Options{Congestion: CUBIC})
	before := c.cwnd
	c.sndUna += 2 * hsMSS
	c.ccAck(2 * hsMSS)
	if d := c.cwnd - before; d != 2*hsMSS {
		t.Fatalf("slow start grew cwnd by %d for two segments, want %d", d, 2*hsMSS)
	}
	hsToCSS(t, c)
	before = c.cwnd
	c.ccAck(2 * hsMSS)
	if d := c.cwnd - before; d != 2*hsMSS/hsCSSGrowthDiv {
		t.Fatalf("CSS grew cwnd by %d for two segments, want %d", d, 2*hsMSS/hsCSSGrowthDiv)
	}
	before = c.cwnd
	c.ccAck(8 * hsMSS) // a stretch ACK: L = 2 segments, then the quarter
	if d := c.cwnd - before; d != 2*hsMSS/hsCSSGrowthDiv {
		t.Fatalf("CSS grew cwnd by %d for a stretch ACK, want %d", d, 2*hsMSS/hsCSSGrowthDiv)
	}
	// A round of CSS grows cwnd by a quarter of slow start's doubling.
	before = c.cwnd
	hsRound(c, 30*time.Millisecond)
	if g := float64(c.cwnd) / float64(before); g < 1.2 || g > 1.3 {
		t.Fatalf("a round of CSS grew cwnd %.3f-fold, want 1.25", g)
	}
}

// TestHyStartCSSSpuriousBackToSlowStartRFC9406Sec4_2: in CSS, once a
// round has N_RTT_SAMPLE samples and its minimum RTT is below the
// baseline that started CSS, the rise was jitter: slow start resumes,
// at its full growth, and HyStart++ keeps watching.
func TestHyStartCSSSpuriousBackToSlowStartRFC9406Sec4_2(t *testing.T) {
	c := hsConn(t, Options{Congestion: CUBIC})
	hsToCSS(t, c)
	hsRound(c, 20*time.Millisecond)
	if c.hs.phase != hsSlowStart {
		t.Fatalf("phase %d after a round under the CSS baseline, want slow start", c.hs.phase)
	}
	if n := counterOf(t, c.e, "tcp_hystart_css_exits_spurious"); n != 1 {
		t.Fatalf("tcp_hystart_css_exits_spurious %d, want 1", n)
	}
	before := c.cwnd
	c.ccAck(2 * hsMSS)
	if d := c.cwnd - before; d != 2*hsMSS {
		t.Fatalf("slow start again grew cwnd by %d for two segments, want %d", d, 2*hsMSS)
	}
	hsRound(c, 20*time.Millisecond)
	hsRound(c, 30*time.Millisecond)
	if c.hs.phase != hsCSS {
		t.Fatalf("phase %d after a second rise, want CSS", c.hs.phase)
	}
	if n := counterOf(t, c.e, "tcp_hystart_css_entries"); n != 2 {
		t.Fatalf("tcp_hystart_css_entries %d, want 2", n)
	}
}

// TestHyStartCSSRoundsEnterCongestionAvoidanceRFC9406Sec4_2: after
// CSS_ROUNDS rounds of CSS the connection enters congestion avoidance
// with ssthresh = cwnd, and HyStart++ is over.
func TestHyStartCSSRoundsEnterCongestionAvoidanceRFC9406Sec4_2(t *testing.T) {
	for _, cc := range []Congestion{CUBIC} {
		t.Run(string(cc), func(t *testing.T) {
			c := hsConn(t, Options{Congestion: cc})
			hsToCSS(t, c) // the round that entered CSS counts as its first (as the RFC's windowEnd has it)
			for i := 1; i < hsCSSRounds; i++ {
				if c.cwnd >= c.ssthresh || c.hs.phase != hsCSS {
					t.Fatalf("after %d rounds of CSS: phase %d, cwnd %d ssthresh %d", i, c.hs.phase, c.cwnd, c.ssthresh)
				}
				hsRound(c, 30*time.Millisecond)
			}
			if c.hs.phase != hsOff || c.cwnd < c.ssthresh || c.cwnd-c.ssthresh > hsMSS {
				t.Fatalf("after %d rounds of CSS: phase %d, cwnd %d ssthresh %d; want congestion avoidance, ssthresh = cwnd (at the round's last ACK)",
					hsCSSRounds, c.hs.phase, c.cwnd, c.ssthresh)
			}
			if n := counterOf(t, c.e, "tcp_hystart_ca_entries"); n != 1 {
				t.Fatalf("tcp_hystart_ca_entries %d, want 1", n)
			}
			before := c.cwnd
			hsRound(c, 30*time.Millisecond)
			if g := float64(c.cwnd) / float64(before); g > 1.1 {
				t.Fatalf("a round of congestion avoidance grew cwnd %.3f-fold", g)
			}
		})
	}
}

// TestHyStartLossEndsCSSLikeSlowStartRFC9406Sec4_2: a loss in CSS is a
// congestion event as in slow start: the same ssthresh as without
// HyStart++ at that cwnd, and HyStart++ is over (§4.3: only the first
// slow start runs it), so a later slow start after a timeout does not
// go back to CSS however the RTT rises.
func TestHyStartLossEndsCSSLikeSlowStartRFC9406Sec4_2(t *testing.T) {
	for _, cc := range []Congestion{CUBIC} {
		t.Run(string(cc), func(t *testing.T) {
			c := hsConn(t, Options{Congestion: cc})
			hsToCSS(t, c)
			ref := hsConn(t, Options{Congestion: cc, NoHyStart: true})
			ref.cwnd, ref.sndUna, ref.sndMax = c.cwnd, c.sndUna, c.sndMax
			want := ref.lossThreshold()
			if got := c.lossThreshold(); got != want {
				t.Fatalf("ssthresh %d after a loss in CSS, %d in slow start", got, want)
			}
			if c.hs.phase != hsOff {
				t.Fatalf("phase %d after a loss, want HyStart++ over", c.hs.phase)
			}
			c.ssthresh, c.cwnd = 1<<30, initialWindow(hsMSS) // as an undone timeout could leave it
			hsRound(c, 20*time.Millisecond)
			hsRound(c, 20*time.Millisecond)
			hsRound(c, 60*time.Millisecond)
			if c.hs.phase != hsOff || counterOf(t, c.e, "tcp_hystart_css_entries") != 1 {
				t.Fatalf("a later slow start ran HyStart++ (phase %d)", c.hs.phase)
			}
		})
	}
}

// TestHyStartOffRFC9406Sec4_3: Options.NoHyStart, NewReno (which, as
// Linux's reno, has no HyStart) and BBR (its own Startup) leave slow
// start as it was: cwnd doubles a round whatever the RTT does.
func TestHyStartOffRFC9406Sec4_3(t *testing.T) {
	for _, o := range []Options{{}, {Congestion: NewReno}, {Congestion: CUBIC, NoHyStart: true}, {Congestion: BBR}} {
		c := hsConn(t, o)
		if c.hs.phase != hsOff {
			t.Fatalf("%+v: HyStart++ runs", o)
		}
		if o.Congestion == BBR {
			continue // bbrAck sets cwnd; the engine-level test below runs it
		}
		for _, rtt := range []time.Duration{20, 20, 40, 80} {
			before := c.cwnd
			hsRound(c, rtt*time.Millisecond)
			if c.cwnd != 2*before {
				t.Fatalf("%+v: cwnd %d after a round from %d, want doubled", o, c.cwnd, before)
			}
		}
	}
}

// hsLink is a bulk transfer of 16 MiB over 100 Mbit/s with 10 ms each
// way and a drop-tail wire of slots frames (about 80 of them are the
// delay's; the rest is the bottleneck's queue).
func hsLink(o Options, slots int) bbrLink {
	o.SendBuf, o.RecvBuf = 4<<20, 4<<20
	return bbrLink{
		o:   o,
		imp: memio.Impairment{Rate: 100e6 / 8, Delay: 10 * time.Millisecond}, n: 16 << 20,
		limit: 30 * time.Second, quantum: 10 * time.Microsecond, slots: slots,
	}
}

// TestHyStartLongPathFewerLossesRFC9406Sec4_2: on a clean path whose
// bottleneck queue is two to twelve round trips deep, slow start with
// HyStart++ sees the queue grow in the RTT and slows to CSS before the
// queue overflows, where slow start alone doubles into it and loses a
// hundred segments and more. (With a queue of one round trip
// HyStart++ does not pay: BENCHMARKS.md.) BBR runs no HyStart++ over
// the same path.
func TestHyStartLongPathFewerLossesRFC9406Sec4_2(t *testing.T) {
	for _, cc := range []Congestion{CUBIC} {
		for _, slots := range []int{512, 2048} {
			t.Run(fmt.Sprintf("%s/%d", cc, slots), func(t *testing.T) {
				var rtx [2]uint64
				for i, off := range []bool{false, true} {
					l := hsLink(Options{Congestion: cc, NoHyStart: off}, slots)
					w, got, el := l.run(t)
					if got != l.n {
						t.Fatalf("NoHyStart %v: delivered %d of %d bytes in %v", off, got, l.n, el)
					}
					rtx[i] = counterOf(t, w.a, "tcp_retransmits")
					css := counterOf(t, w.a, "tcp_hystart_css_entries")
					t.Logf("NoHyStart %v: %v, retransmits %d, recoveries %d, timeouts %d, CSS %d, spurious %d, CA %d",
						off, el, rtx[i], counterOf(t, w.a, "tcp_fast_retransmits"), counterOf(t, w.a, "tcp_timeouts"),
						css, counterOf(t, w.a, "tcp_hystart_css_exits_spurious"), counterOf(t, w.a, "tcp_hystart_ca_entries"))
					if off == (css != 0) {
						t.Errorf("NoHyStart %v: tcp_hystart_css_entries %d", off, css)
					}
				}
				if rtx[1] < 100 || rtx[0]*4 > rtx[1] {
					t.Errorf("retransmissions %d with HyStart++, %d without: want a quarter at most", rtx[0], rtx[1])
				}
			})
		}
	}
	t.Run("bbr", func(t *testing.T) {
		l := hsLink(Options{Congestion: BBR}, 512)
		l.n = 4 << 20
		w, got, _ := l.run(t)
		if got != l.n {
			t.Fatalf("delivered %d of %d bytes", got, l.n)
		}
		for _, n := range []string{"tcp_hystart_css_entries", "tcp_hystart_css_exits_spurious", "tcp_hystart_ca_entries"} {
			if v := counterOf(t, w.a, n); v != 0 {
				t.Errorf("%s %d under BBR", n, v)
			}
		}
	})
}

// BenchmarkHyStart is hsLink with and without HyStart++ over queues of
// 256 to 2,048 frames: retransmissions, recoveries and timeouts of the
// transfer, its rate in engine time, and HyStart++'s counters.
//
//	go test -run '^$' -bench BenchmarkHyStart -benchtime 1x ./stack/native/
func BenchmarkHyStart(b *testing.B) {
	for _, cc := range []Congestion{CUBIC} {
		for _, slots := range []int{256, 512, 1024, 2048} {
			for _, off := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/slots=%d/NoHyStart=%v", cc, slots, off), func(b *testing.B) {
					for range b.N {
						l := hsLink(Options{Congestion: cc, NoHyStart: off}, slots)
						w, got, el := l.run(b)
						b.ReportMetric(float64(got)*8/el.Seconds()/1e6, "Mbit/s")
						b.ReportMetric(float64(counterOf(b, w.a, "tcp_retransmits")), "rtx")
						b.ReportMetric(float64(counterOf(b, w.a, "tcp_fast_retransmits")), "recoveries")
						b.ReportMetric(float64(counterOf(b, w.a, "tcp_timeouts")), "RTOs")
						b.ReportMetric(float64(counterOf(b, w.a, "tcp_hystart_css_entries")), "CSS")
						b.ReportMetric(float64(counterOf(b, w.a, "tcp_hystart_css_exits_spurious")), "CSS-spurious")
						b.ReportMetric(float64(counterOf(b, w.a, "tcp_hystart_ca_entries")), "CSS-to-CA")
					}
				})
			}
		}
	}
}

// TestHyStartNeedsTimestampsRFC9406Sec4_2: without timestamps a round
// has one RTT sample (the timed segment), never N_RTT_SAMPLE, so slow
// start never leaves for CSS and ends at the first loss as before.
func TestHyStartNeedsTimestampsRFC9406Sec4_2(t *testing.T) {
	var rtx [2]uint64
	for i, off := range []bool{false, true} {
		l := hsLink(Options{Congestion: CUBIC, NoTimestamps: true, NoHyStart: off}, 512)
		w, got, el := l.run(t)
		if got != l.n {
			t.Fatalf("NoHyStart %v: delivered %d of %d bytes in %v", off, got, l.n, el)
		}
		if n := counterOf(t, w.a, "tcp_hystart_css_entries"); n != 0 {
			t.Fatalf("NoHyStart %v: tcp_hystart_css_entries %d without timestamps", off, n)
		}
		rtx[i] = counterOf(t, w.a, "tcp_retransmits")
	}
	if rtx[0] != rtx[1] {
		t.Errorf("retransmissions %d with HyStart++ and %d without: not the same run", rtx[0], rtx[1])
	}
}
