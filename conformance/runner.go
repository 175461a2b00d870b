package conformance

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testutil"
)

// TB is the part of testing.TB a case uses. *testing.T implements it; so
// does the Recorder that RunCase runs cases with outside go test.
type TB interface {
	Helper()
	Name() string
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Failed() bool
	Cleanup(func())
}

// Case is one conformance case: an RFC requirement, checked packet by
// packet on one DUT.
type Case struct {
	// Name is the subtest name (TestConformance/<dut>/<Name>).
	Name string
	// RFC is the section that requires the behaviour ("RFC 9293 §3.10.7.1").
	RFC string
	// Title says in one line what is asserted.
	Title string
	// Needs are the capabilities the case needs of the DUT; on a DUT that
	// lacks one the case does not apply (Info.Lacks says why).
	Needs []Cap
	// Setup is what the case asks of the DUT.
	Setup Setup
	// Run sends, expects and asserts. It fails through e (Errorf, Fatalf).
	Run func(e *Env)
}

// Applies reports whether the case applies to a DUT described by info, and
// if not, why.
func (c *Case) Applies(info Info) (bool, string) {
	for _, n := range c.Needs {
		if why, ok := info.Lacks[n]; ok {
			return false, fmt.Sprintf("needs %s: %s", n, why)
		}
	}
	return true, ""
}

var (
	casesMu sync.Mutex
	cases   []Case
)

// register adds cases to the suite (called from the cases_*.go files' init).
func register(cs ...Case) {
	casesMu.Lock()
	defer casesMu.Unlock()
	cases = append(cases, cs...)
}

// Cases returns every case of the suite, sorted by name. The slice is the
// caller's.
func Cases() []Case {
	casesMu.Lock()
	defer casesMu.Unlock()
	out := append([]Case(nil), cases...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// CaseByName returns the named case.
func CaseByName(name string) (Case, bool) {
	for _, c := range Cases() {
		if c.Name == name {
			return c, true
		}
	}
	return Case{}, false
}

// Env is what a case runs with: the TB it fails through, the DUT, and the
// bench that talks to it.
type Env struct {
	TB
	*Bench
	// DUT is the device under test, Info its description.
	DUT  DUT
	Info Info
	// Case is the case running.
	Case *Case

	counters0 map[string]uint64
}

// Outcome is the result of one case on one DUT.
type Outcome string

// Outcomes.
const (
	Pass    Outcome = "pass"
	Fail    Outcome = "FAIL"
	NA      Outcome = "n/a"  // the case does not apply (Result.Why)
	Skipped Outcome = "skip" // the DUT cannot be made here (not root)
)

// Result is what RunCase found.
type Result struct {
	Case    string
	DUT     string
	Outcome Outcome
	// Why is the reason of n/a or skip; Failures the messages of a failure.
	Why      string
	Failures []string
	// Log is everything the case logged (frames received, notes).
	Log      []string
	Duration time.Duration
}

// runOn runs c against a fresh DUT from f, failing and logging through tb.
func runOn(tb TB, f Factory, c *Case) {
	tb.Helper()
	d, ok := newDUT(tb, f, c.Setup)
	if !ok {
		return
	}
	tb.Cleanup(func() {
		if err := d.Close(); err != nil {
			tb.Errorf("close DUT: %v", err)
		}
	})
	info := d.Info()
	if ok, why := c.Applies(info); !ok {
		tb.Fatalf("case %s does not apply to %s (%s): the runner should not have run it", c.Name, info.Name, why)
		return
	}
	e := &Env{TB: tb, DUT: d, Info: info, Case: c}
	e.Bench = newBench(tb, d)
	if cs, err := d.Counters(); err == nil {
		e.counters0 = cs
	} else {
		tb.Logf("counters before: %v", err)
	}
	tb.Logf("%s on %s: %s (%s)", c.Name, info.Name, c.Title, c.RFC)
	tb.Cleanup(e.Bench.dumpOnFailure)
	c.Run(e)
}

// newDUT makes a DUT from f for s. A DUT this host cannot make (not
// supported, not privileged) skips through tb; any other error fails tb.
// ok is false when there is no DUT.
func newDUT(tb TB, f Factory, s Setup) (d DUT, ok bool) {
	tb.Helper()
	d, err := f.New(tb, s)
	if err == nil {
		return d, true
	}
	var pe *dgramio.PrivilegeError
	if errors.Is(err, dgramio.ErrNotSupported) || errors.As(err, &pe) {
		skip(tb, fmt.Sprintf("DUT %s: %v", f.Name(), err))
		return nil, false
	}
	tb.Fatalf("make DUT %s: %v", f.Name(), err)
	return nil, false
}

// skip skips through testutil when tb is a *testing.T (failing in CI),
// and records a skip on a Recorder.
func skip(tb TB, reason string) {
	tb.Helper()
	switch t := tb.(type) {
	case testing.TB:
		testutil.Skip(t, reason)
	case *Recorder:
		t.skip(reason)
	default:
		tb.Fatalf("cannot skip: %s", reason)
	}
}

// Run runs every case that applies to f's DUTs as a subtest of t named
// <f.Name()>/<case> (so TestConformance/<dut>/<case>). Cases that do not
// apply get no subtest; they are logged with the reason. Run probes the
// DUT's Info once with a throwaway DUT to decide.
func Run(t *testing.T, f Factory) {
	t.Run(f.Name(), func(t *testing.T) {
		info, ok := probe(t, f)
		if !ok {
			return
		}
		for _, c := range Cases() {
			c := c
			if ok, why := c.Applies(info); !ok {
				t.Logf("%s: n/a: %s", c.Name, why)
				storeResult(Result{Case: c.Name, DUT: f.Name(), Outcome: NA, Why: why})
				continue
			}
			d, xfail := expectedFailure(c.Name, info.Kind)
			t.Run(c.Name, func(t *testing.T) {
				if xfail {
					runExpectingFailure(t, f, c, info, d)
					return
				}
				defer recordResult(f.Name(), c.Name, t)
				runOn(t, f, &c)
			})
		}
	})
}

// expectedFailure returns the accepted difference that says c fails on
// DUTs of kind k.
func expectedFailure(c string, k Kind) (Difference, bool) {
	d, ok := acceptedFor(c)
	switch {
	case !ok:
		return d, false
	case k == KindOurs:
		return d, d.Ours == Fail
	case k == KindLinux:
		return d, d.Linux == Fail
	}
	return d, false
}

// runExpectingFailure runs a case that an accepted difference says fails
// on this DUT (as packetimpact marks a test as an expected failure on a
// platform): the case runs against a Recorder, its failure is logged with
// the accepted reason and the subtest passes; if the case passes, the
// difference is gone and the subtest fails, so that Accepted is updated.
func runExpectingFailure(t *testing.T, f Factory, c Case, info Info, d Difference) {
	t.Helper()
	res := RunCase(f, c, info)
	for _, l := range res.Log {
		t.Log(l)
	}
	storeResult(res)
	switch res.Outcome {
	case Skipped:
		testutil.Skip(t, res.Why)
	case Fail:
		t.Logf("fails as accepted (%s): %s", d.RFC, d.Reason)
	default:
		t.Errorf("%s was expected to fail on %s (accepted difference, %s) but %s: remove or fix the entry in Accepted",
			c.Name, info.Name, d.RFC, res.Outcome)
	}
}

// probe makes one DUT to read its Info, and closes it.
func probe(tb TB, f Factory) (Info, bool) {
	tb.Helper()
	d, ok := newDUT(tb, f, Setup{})
	if !ok {
		return Info{}, false
	}
	info := d.Info()
	if err := d.Close(); err != nil {
		tb.Errorf("close DUT: %v", err)
	}
	return info, true
}

// results keeps what Run's subtests found, for a comparison in the same
// test binary (TestDifferences after TestConformance).
var (
	resultsMu sync.Mutex
	results   = map[string]map[string]Result{} // dut → case → result
)

// recordResult stores a subtest's outcome (deferred: it runs after a
// Fatal or Skip too; a Skip that is still unwinding reads as not failed).
func recordResult(dut, c string, t *testing.T) {
	r := Result{Case: c, DUT: dut, Outcome: Pass}
	switch {
	case t.Failed():
		r.Outcome = Fail
	case t.Skipped():
		r.Outcome = Skipped
	}
	storeResult(r)
}

func storeResult(r Result) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if results[r.DUT] == nil {
		results[r.DUT] = map[string]Result{}
	}
	results[r.DUT][r.Case] = r
}

// recorded returns Run's results for dut when it recorded every case.
func recorded(dut string) (map[string]Result, bool) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	m := results[dut]
	for _, c := range Cases() {
		if _, ok := m[c.Name]; !ok {
			return nil, false
		}
	}
	out := make(map[string]Result, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out, true
}

// Recorder is a TB that records instead of failing a test: RunCase runs a
// case with it, the report command and TestMutants read the Result.
type Recorder struct {
	name string
	mu   sync.Mutex
	res  Result
	done bool
	// cleanups run in reverse order when the case ends.
	cleanups []func()
}

// Helper implements TB.
func (r *Recorder) Helper() {}

// Name implements TB.
func (r *Recorder) Name() string { return r.name }

// Logf implements TB.
func (r *Recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Log = append(r.res.Log, fmt.Sprintf(format, args...))
}

// Errorf implements TB: the case fails and goes on.
func (r *Recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	r.res.Failures = append(r.res.Failures, msg)
	r.res.Log = append(r.res.Log, msg)
}

// Fatalf implements TB: the case fails and stops (runtime.Goexit, as
// testing does; RunCase runs the case on its own goroutine).
func (r *Recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// Failed implements TB.
func (r *Recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.res.Failures) > 0
}

// Cleanup implements TB.
func (r *Recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *Recorder) skip(reason string) {
	r.mu.Lock()
	r.res.Outcome = Skipped
	r.res.Why = reason
	r.mu.Unlock()
	runtime.Goexit()
}

// run calls fn on a goroutine of its own, as testing runs a test: Fatalf
// and skip end it (runtime.Goexit), a panic is recorded as a failure, and
// the cleanups run in reverse order before run returns.
func (r *Recorder) run(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			for i := len(r.cleanups) - 1; i >= 0; i-- {
				r.cleanups[i]()
			}
		}()
		defer func() {
			if p := recover(); p != nil {
				r.Errorf("panic: %v", p)
			}
		}()
		fn()
	}()
	<-done
}

// RunCase runs c on a fresh DUT from f outside go test and returns what
// happened. A case that does not apply is not run (n/a).
func RunCase(f Factory, c Case, info Info) Result {
	res := Result{Case: c.Name, DUT: f.Name()}
	if ok, why := c.Applies(info); !ok {
		res.Outcome, res.Why = NA, why
		return res
	}
	r := &Recorder{name: f.Name() + "/" + c.Name}
	start := time.Now()
	r.run(func() { runOn(r, f, &c) })
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.res
	out.Case, out.DUT = c.Name, f.Name()
	out.Duration = time.Since(start)
	switch {
	case out.Outcome == Skipped:
	case len(out.Failures) > 0:
		out.Outcome = Fail
	default:
		out.Outcome = Pass
	}
	return out
}

// Probe makes one DUT from f to read its Info, outside go test. A DUT that
// cannot be made here returns the reason.
func Probe(f Factory) (Info, error) {
	r := &Recorder{name: f.Name()}
	var info Info
	var ok bool
	r.run(func() { info, ok = probe(r, f) })
	if ok {
		return info, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.res.Why != "" {
		return Info{}, errors.New(r.res.Why)
	}
	return Info{}, errors.New(strings.Join(r.res.Failures, "; "))
}
