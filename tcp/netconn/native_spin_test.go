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

// TestSpinGate: the gate opens only on CPU time left idle in the last
// period (5 % of the whole), stays as it is within a period, and stays
// shut when /proc/stat cannot be read or parsed.
func TestSpinGate(t *testing.T) {
	var line string
	g := &spinGate{read: func(b []byte) int { return copy(b, line) }}
	at := time.Unix(1000, 0)
	step := func(user, idle uint64) bool {
		line = fmt.Sprintf("cpu  %d 0 0 %d 0 0 0 0 0 0\ncpu0 1 2 3\n", user, idle)
		at = at.Add(gatePeriod)
		return g.open(at)
	}
	if step(1000, 1000) {
		t.Fatal("open before a period was measured")
	}
	if !step(1090, 1010) { // 10 of 100 idle
		t.Fatal("shut with 10% idle")
	}
	if step(1190, 1012) { // 2 of 102 idle
		t.Fatal("open with 2% idle")
	}
	line = "cpu  1 0 0 99999 0 0 0 0 0 0\n"
	if g.open(at.Add(gatePeriod / 2)) {
		t.Fatal("the gate moved within a period")
	}
	if !step(1200, 1100) {
		t.Fatal("shut with 88% idle")
	}
	g.read = func(b []byte) int { return 0 }
	at = at.Add(gatePeriod)
	if g.open(at) {
		t.Fatal("open with /proc/stat unreadable")
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
