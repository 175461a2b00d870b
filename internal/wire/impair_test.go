package wire

import (
	"math"
	"testing"
	"time"
)

// The generator is splitmix64 as published (Vigna, splitmix64.c): from
// state 1234567 its first outputs are these reference values. A seed thus
// replays the same way whatever the Go version.
func TestSplitmix64Reference(t *testing.T) {
	dc := &Decider{state: 1234567}
	for i, want := range []uint64{6457827717110365317, 3203168211198807973, 9817491932198370423} {
		if got := dc.next64(); got != want {
			t.Fatalf("output %d: %d, want %d", i, got, want)
		}
	}
}

func decisions(seed uint64, d Direction, im Impairment, n int) []Decision {
	dc := NewDecider(seed, d, im)
	out := make([]Decision, n)
	for i := range out {
		out[i] = dc.Next()
	}
	return out
}

var everything = Impairment{Loss: 0.1, Dup: 0.1, Reorder: 0.1, Corrupt: 0.1,
	Delay: time.Millisecond, Jitter: 500 * time.Microsecond}

func TestDeciderDeterministic(t *testing.T) {
	const n = 5000
	a := decisions(42, AtoB, everything, n)
	b := decisions(42, AtoB, everything, n)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 42, frame %d: %+v then %+v", i, a[i], b[i])
		}
	}
	for _, other := range []struct {
		name string
		d    []Decision
	}{
		{"seed 43", decisions(43, AtoB, everything, n)},
		{"direction B→A", decisions(42, BtoA, everything, n)},
	} {
		same := 0
		for i := range a {
			if a[i] == other.d[i] {
				same++
			}
		}
		// Decisions with all flags false and the same jitter are rare
		// (jitter has 10^6 values); a shared stream would match all.
		if same > n/100 {
			t.Errorf("%s: %d of %d decisions equal to seed 42 A→B", other.name, same, n)
		}
	}
}

func TestDeciderRates(t *testing.T) {
	const n = 200000
	im := Impairment{Loss: 0.01, Dup: 0.05, Reorder: 0.2, Corrupt: 0.5, Jitter: time.Millisecond}
	var drop, dup, reorder, corrupt int
	var jmin, jmax time.Duration
	var jsum float64
	dc := NewDecider(7, AtoB, im)
	for range n {
		d := dc.Next()
		if d.Drop {
			drop++
		}
		if d.Dup {
			dup++
		}
		if d.Reorder {
			reorder++
		}
		if d.Corrupt {
			corrupt++
		}
		if d.CorruptMask == 0 {
			t.Fatal("corrupt mask 0 would change nothing")
		}
		jmin, jmax = min(jmin, d.Jitter), max(jmax, d.Jitter)
		jsum += float64(d.Jitter)
	}
	if dc.Frames() != n {
		t.Errorf("Frames() = %d, want %d", dc.Frames(), n)
	}
	for _, c := range []struct {
		name string
		got  int
		p    float64
	}{{"loss", drop, im.Loss}, {"dup", dup, im.Dup}, {"reorder", reorder, im.Reorder}, {"corrupt", corrupt, im.Corrupt}} {
		mean := c.p * n
		sd := math.Sqrt(n * c.p * (1 - c.p))
		if math.Abs(float64(c.got)-mean) > 6*sd {
			t.Errorf("%s: %d of %d, want about %.0f (p=%v)", c.name, c.got, n, mean, c.p)
		}
	}
	if jmin < -im.Jitter || jmax > im.Jitter || jmin > -im.Jitter*99/100 || jmax < im.Jitter*99/100 {
		t.Errorf("jitter in [%v, %v], want it to fill [-%v, %v]", jmin, jmax, im.Jitter, im.Jitter)
	}
	if mean := time.Duration(jsum / n); mean.Abs() > im.Jitter/50 {
		t.Errorf("mean jitter %v, want about 0", mean)
	}
}

func TestDeciderEdges(t *testing.T) {
	all := decisions(1, AtoB, Impairment{Loss: 1, Dup: 1, Reorder: 1, Corrupt: 1}, 1000)
	none := decisions(1, AtoB, Impairment{}, 1000)
	for i := range all {
		if a := all[i]; !a.Drop || !a.Dup || !a.Reorder || !a.Corrupt {
			t.Fatalf("p=1, frame %d: %+v", i, a)
		}
		if d := none[i]; d.Drop || d.Dup || d.Reorder || d.Corrupt || d.Jitter != 0 {
			t.Fatalf("p=0, frame %d: %+v", i, d)
		}
	}
}

// Changing the impairment in the middle of a run changes the decisions
// that follow, but not the random words they are drawn from: the frames
// after the change get what a decider with the new impairment from the
// start gives them.
func TestDeciderSetImpairmentKeepsStream(t *testing.T) {
	const n, at = 3000, 1000
	other := Impairment{Loss: 0.5, Dup: 0.3, Corrupt: 0.2, Jitter: 2 * time.Millisecond}
	ref := decisions(99, BtoA, other, n)
	dc := NewDecider(99, BtoA, everything)
	for range at {
		dc.Next()
	}
	dc.SetImpairment(other)
	if dc.Impairment() != other {
		t.Fatalf("Impairment() = %+v", dc.Impairment())
	}
	for i := at; i < n; i++ {
		if d := dc.Next(); d != ref[i] {
			t.Fatalf("frame %d: %+v, want %+v", i, d, ref[i])
		}
	}
}

func TestValidate(t *testing.T) {
	for _, im := range []Impairment{
		{Loss: -0.1}, {Dup: 1.5}, {Reorder: math.NaN()}, {Corrupt: 2},
		{Delay: -time.Millisecond}, {Jitter: -1},
	} {
		if im.Validate() == nil {
			t.Errorf("%+v accepted", im)
		}
	}
	for _, im := range []Impairment{{}, everything, {Loss: 1, Dup: 1, Reorder: 1, Corrupt: 1, Rate: 1}} {
		if err := im.Validate(); err != nil {
			t.Errorf("%+v: %v", im, err)
		}
	}
}

func TestDirectionString(t *testing.T) {
	if AtoB.String() != "A→B" || BtoA.String() != "B→A" || Direction(5).String() != "Direction(5)" {
		t.Errorf("%v %v %v", AtoB, BtoA, Direction(5))
	}
}
