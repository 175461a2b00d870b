package netconn

import (
	"fmt"
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
// activity and the poller then sleeps in the netpoller: an idle
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

// TestSpinGate: the gate probes a period with the spin off, then opens
// for a run only if during the probe the CPUs left idle, or gave this
// process, nine tenths of one CPU's time; within a run it does not move
// (whatever the spin's own use of the CPUs), and it stays shut when
// /proc/stat cannot be read or parsed.
func TestSpinGate(t *testing.T) {
	var idle uint64 // ticks, 100 a second
	var own time.Duration
	g := &spinGate{
		read: func(b []byte) int {
			return copy(b, fmt.Sprintf("cpu  %d 0 0 %d 0 0 0 0 0 0\ncpu0 1 2 3\n", 1000, idle))
		},
		cpu: func() time.Duration { return own },
	}
	at := time.Unix(1000, 0)
	// probe runs a probe of gateProbe in which the CPUs idle di ticks and
	// the process uses du, and returns the gate after it.
	probe := func(di uint64, du time.Duration) bool {
		if g.open(at) {
			t.Fatal("open at a probe's start")
		}
		idle += di
		own += du
		at = at.Add(gateProbe)
		return g.open(at)
	}
	// A run: open or shut throughout, whatever the CPUs do.
	run := func(want bool) {
		for d := time.Duration(0); d < gateRun; d += gateRun / 10 {
			if g.open(at.Add(d)) != want {
				t.Fatalf("the gate moved %v into a run", d)
			}
		}
		at = at.Add(gateRun)
	}
	if !probe(10, 0) { // a whole CPU idle for the 100 ms
		t.Fatal("shut after a probe with a CPU idle")
	}
	run(true)
	if !probe(4, 60*time.Millisecond) { // 40 ms idle, 60 ms ours
		t.Fatal("shut after a probe where idle and ours made a CPU")
	}
	run(true)
	if probe(3, 40*time.Millisecond) { // 30 + 40 of 100 ms
		t.Fatal("open after a probe where the others took most of the CPUs")
	}
	run(false)
	g.read = func(b []byte) int { return 0 }
	for i := 0; i < 3; i++ {
		if g.open(at) {
			t.Fatal("open with /proc/stat unreadable")
		}
		at = at.Add(gateRun)
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
