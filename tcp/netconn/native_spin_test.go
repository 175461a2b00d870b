package netconn

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/testutil"
)

// openGate makes every Service's spin gate open (true) or shut for the
// rest of the test.
func openGate(t *testing.T, open bool) {
	f := func() bool { return open }
	gateHook.Store(&f)
	t.Cleanup(func() { gateHook.Store(nil) })
}

// TestSpinWindowEndsAndThePollerSleeps: with the CPUs idle (the gate
// open), the adaptive poller in the netpoller spins after a busy round,
// looking at the RX ring, and a Read made during the spin gets its bytes
// from the poller's round; the window ends SpinFor after the last
// activity and the poller then sleeps in the netpoller (the gate counts
// the queue's frames for its trials): an idle
// Service's poller runs no round (no busy loop), and the Read that
// parked during the spin leads while it sleeps.
func TestSpinWindowEndsAndThePollerSleeps(t *testing.T) {
	openGate(t, true)
	_, s, srv, cli := leadPair(t, 1)
	if s.nat.rxReady == nil {
		testutil.Skip(t, "the Service cannot look at its RX ring")
	}
	a, k := srv[0], cli[0]
	for i := 0; i < 20; i++ {
		ch := readAsync(a, 7)
		msg := fmt.Sprintf("ping %02d", i)
		if _, err := k.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		expect(t, ch, msg)
		if _, err := a.Write([]byte("pong")); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 4)
		if _, err := k.Read(b); err != nil || string(b) != "pong" {
			t.Fatalf("read %q, %v", b, err)
		}
	}
	if n := counter(s.Stats(), "netconn", "spins"); n == 0 {
		t.Fatal("the poller never spun after a busy round with the gate open")
	}
	// The gate's trial measures the queue's frames (every round's):
	// the 20 pings at least.
	if f := s.nat.gate.count(); f < 20 || f > s.n.frames.Load() {
		t.Fatalf("the gate counts %d frames of the queue's %d", f, s.n.frames.Load())
	}
	// Idle: the window ends and the poller sleeps, and a Read that
	// blocks now leads.
	ch := readAsync(a, 4)
	leading(t, s, a)
	asleep(t, s)
	// Asleep it stays, but for the engine's timers (a delayed ACK): a
	// spin that did not end would show as a poller awake at every look.
	r0, awake := s.n.rounds.Load(), 0
	for i := 0; i < 20; i++ {
		time.Sleep(10 * time.Millisecond)
		if !s.nat.sleeping.Load() || s.nat.spinning.Load() {
			awake++
		}
	}
	if r := s.n.rounds.Load() - r0; awake > 5 || r > 10 {
		t.Fatalf("the idle poller was awake at %d of 20 looks and ran %d rounds in 200 ms", awake, r)
	}
	if _, err := k.Write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, "last")
}

// TestSpinGateShut: with the CPUs busy (the gate shut), the poller sleeps
// at once after a busy round, as without a spin, and counts the windows
// it skipped; the exchange is unchanged.
func TestSpinGateShut(t *testing.T) {
	openGate(t, false)
	_, s, srv, cli := leadPair(t, 1)
	a, k := srv[0], cli[0]
	for i := 0; i < 10; i++ {
		ch := readAsync(a, 7)
		msg := fmt.Sprintf("ping %02d", i)
		if _, err := k.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		expect(t, ch, msg)
	}
	st := s.Stats()
	if n := counter(st, "netconn", "spins"); n != 0 {
		t.Fatalf("%d spins with the gate shut", n)
	}
	if counter(st, "netconn", "spins_skipped") == 0 {
		t.Fatal("no window counted as skipped")
	}
}

// TestSpinGate: the gate probes a period with the spin off, then tries
// the spin only if during the probe the CPUs left idle, or gave this
// process, nine tenths of one CPU's time; the run after a trial spins
// only if the trial moved at least gatePay of the probe's frames a
// second (a client in the same process moves fewer with the spin), and
// a trial lost skips the next free cycles' trials, one, then twice as
// many after each loss in a row, until a trial is won; a loss while
// other processes took three quarters of a CPU's time or more, or in a
// trial that outlasted twice its length, leaves the backoff as it was.
// Within a run it does not move (whatever the spin's own use of the
// CPUs), and it stays shut when /proc/stat cannot be read or parsed.
func TestSpinGate(t *testing.T) {
	var idle, others uint64 // ticks, 100 a second
	var own time.Duration
	var frames uint64
	var trials, lost atomic.Uint64
	g := &spinGate{
		read: func(b []byte) int {
			return copy(b, fmt.Sprintf("cpu  %d 0 0 %d 0 0 0 0 0 0\ncpu0 1 2 3\n", 1000+others, idle))
		},
		cpu:    func() time.Duration { return own },
		count:  func() uint64 { return frames },
		trials: &trials,
		lost:   &lost,
	}
	at := time.Unix(1000, 0)
	// probe runs a probe of gateProbe in which the CPUs idle di ticks,
	// the process uses du and the queue polls pr frames a second, and
	// returns the gate after it.
	probe := func(di uint64, du time.Duration, pr float64) bool {
		if g.open(at) {
			t.Fatal("open at a probe's start")
		}
		idle += di
		own += du
		frames += uint64(pr * gateProbe.Seconds())
		at = at.Add(gateProbe)
		return g.open(at)
	}
	// trial runs a trial of gateTrial (open throughout) in which the
	// queue polls tr frames a second, and returns the gate after it.
	trial := func(tr float64) bool {
		for d := time.Duration(0); d < gateTrial; d += gateTrial / 4 {
			if !g.open(at.Add(d)) {
				t.Fatalf("shut %v into a trial", d)
			}
		}
		frames += uint64(tr * gateTrial.Seconds())
		at = at.Add(gateTrial)
		return g.open(at)
	}
	// A run of d: open or shut throughout, whatever the CPUs and the
	// frames do.
	run := func(d time.Duration, want bool) {
		for e := time.Duration(0); e < d; e += d / 10 {
			if g.open(at.Add(e)) != want {
				t.Fatalf("the gate moved %v into a run", e)
			}
			frames += 1000
			idle = 0 // whatever the CPUs do (a reading that went back)
		}
		at = at.Add(d)
	}
	const afterTrial = gateCycle - gateProbe - gateTrial
	const afterProbe = gateCycle - gateProbe
	if !probe(10, 0, 10000) { // a whole CPU idle for the 100 ms
		t.Fatal("no trial after a probe with a CPU idle")
	}
	if !trial(15000) { // the spin moved more
		t.Fatal("shut after a trial in which the spin moved more frames")
	}
	run(afterTrial, true)
	if !probe(4, 60*time.Millisecond, 10000) { // 40 ms idle, 60 ms ours
		t.Fatal("no trial after a probe where idle and ours made a CPU")
	}
	if !trial(9600) { // within gatePay
		t.Fatal("shut after a trial that moved 0.96 of the probe's frames")
	}
	run(afterTrial, true)
	if !probe(10, 0, 10000) {
		t.Fatal("no trial after a probe with a CPU idle")
	}
	if trial(5000) { // a client in the process, starved by the spin
		t.Fatal("open after a trial in which the spin moved half the frames")
	}
	run(afterTrial, false)
	if probe(3, 40*time.Millisecond, 10000) { // 30 + 40 of 100 ms
		t.Fatal("a trial after a probe where the others took most of the CPUs")
	}
	run(afterProbe, false)
	// Lost trials back off: the next free cycle has none, and after a
	// second loss in a row the next two have none.
	if probe(10, 0, 10000) {
		t.Fatal("a trial in the cycle after a trial lost")
	}
	run(afterProbe, false)
	if !probe(10, 0, 10000) || trial(4000) {
		t.Fatal("no trial lost after one cycle skipped")
	}
	run(afterTrial, false)
	for i := 0; i < 2; i++ {
		if probe(10, 0, 10000) {
			t.Fatalf("a trial in cycle %d after two lost in a row", i+1)
		}
		run(afterProbe, false)
	}
	if !probe(10, 0, 0) || !trial(0) { // idle: the spin costs nothing
		t.Fatal("shut with a CPU idle and no frames either way")
	}
	run(afterTrial, true)
	// A trial won ends the backoff: after the next loss, one cycle.
	if !probe(10, 0, 10000) || trial(1000) {
		t.Fatal("no trial lost")
	}
	run(afterTrial, false)
	if probe(10, 0, 10000) {
		t.Fatal("a trial in the cycle after a trial lost")
	}
	run(afterProbe, false)
	if !probe(10, 0, 10000) || !trial(10000) {
		t.Fatal("shut after a trial that moved as many frames")
	}
	run(afterTrial, true)
	// A trial lost while other processes took a CPU's time (a client
	// outside the process, a load) may be theirs: the run does not spin,
	// but the backoff stays as it was: after a loss, then such a loss,
	// then a loss, two cycles go without a trial.
	if !probe(10, 0, 10000) || trial(3000) {
		t.Fatal("no trial lost")
	}
	run(afterTrial, false)
	if probe(10, 0, 10000) {
		t.Fatal("a trial in the cycle after a trial lost")
	}
	run(afterProbe, false)
	if !probe(10, 0, 10000) {
		t.Fatal("no trial after a probe with a CPU idle")
	}
	others += uint64(gateTrial.Seconds() * userHZ)
	if trial(3000) {
		t.Fatal("open after a trial lost while other processes took a CPU")
	}
	run(afterTrial, false)
	if !probe(10, 0, 10000) || trial(3000) {
		t.Fatal("no trial in the cycle after a loss that others' CPU time voided")
	}
	run(afterTrial, false)
	for i := 0; i < 2; i++ {
		if probe(10, 0, 10000) {
			t.Fatalf("a trial in cycle %d after two lost in a row", i+1)
		}
		run(afterProbe, false)
	}
	if !probe(10, 0, 0) || !trial(0) {
		t.Fatal("shut with a CPU idle and no frames either way")
	}
	run(afterTrial, true)
	// A trial that outlasted its length (the queue paused: the gate is
	// asked after busy rounds only) measured the pause: lost, without a
	// backoff.
	if !probe(10, 0, 10000) {
		t.Fatal("no trial after a probe with a CPU idle")
	}
	frames += 100
	at = at.Add(5 * time.Second)
	if g.open(at) {
		t.Fatal("open after a trial of 5 s with 20 frames a second")
	}
	run(afterTrial, false)
	if !probe(10, 0, 10000) || trial(3000) {
		t.Fatal("no trial in the cycle after one that outlasted its length")
	}
	run(afterTrial, false)
	if probe(10, 0, 10000) {
		t.Fatal("a trial in the cycle after a trial lost")
	}
	run(afterProbe, false)
	if n, l := trials.Load(), lost.Load(); n != 13 || l != 8 {
		t.Fatalf("%d trials, %d lost; want 13, 8", n, l)
	}
	g.read = func(b []byte) int { return 0 }
	for i := 0; i < 3; i++ {
		if g.open(at) {
			t.Fatal("open with /proc/stat unreadable")
		}
		at = at.Add(gateCycle)
	}
	// The real file, where there is one: it parses.
	var buf [256]byte
	if k := readProcStat(buf[:]); k > 0 {
		if _, _, ok := parseCPUStat(buf[:k]); !ok {
			t.Fatalf("/proc/stat's first line does not parse: %q", buf[:k])
		}
	}
}

// TestParseCPUStat: the first line of /proc/stat, whole or cut.
func TestParseCPUStat(t *testing.T) {
	for _, c := range []struct {
		in          string
		idle, total uint64
		ok          bool
	}{
		{"cpu  10 1 5 100 7 0 2 3 0 0\ncpu0 ...", 107, 128, true},
		{"cpu  10 1 5 100 7 0 2 3\n", 107, 128, true},
		{"cpu  10 1 5 100\n", 100, 116, true},
		{"cpu  10 1 5 10", 0, 0, false}, // cut: the last value may be short
		{"cpu  10 1\n", 0, 0, false},
		{"cpu0 10 1 5 100 7 0 2 3\n", 0, 0, false},
		{"", 0, 0, false},
		{"intr 1 2 3\n", 0, 0, false},
	} {
		idle, total, ok := parseCPUStat([]byte(c.in))
		if idle != c.idle || total != c.total || ok != c.ok {
			t.Errorf("parseCPUStat(%q) = %d, %d, %v; want %d, %d, %v", c.in, idle, total, ok, c.idle, c.total, c.ok)
		}
	}
}

func FuzzParseCPUStat(f *testing.F) {
	f.Add([]byte("cpu  10 1 5 100 7 0 2 3 0 0\n"))
	f.Add([]byte("cpu  18446744073709551615 1 5 100 7 0 2 3 0 0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		idle, total, ok := parseCPUStat(b)
		if !ok && (idle != 0 || total != 0) {
			t.Fatalf("not ok but %d, %d", idle, total)
		}
	})
}
