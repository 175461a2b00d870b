package conformance

import (
	"strings"
	"testing"
)

// TestMutants runs the cases named for each mutant against it and asserts
// that they FAIL (the suite catches the defect), and that its control cases
// pass (the mutant is otherwise a working stack). The cases run against a
// Recorder, so their failures are results here, not failures of this test.
// The mutants run in parallel: each has its own in-memory wire and fake
// clock, and most of their time is spent waiting for answers that a
// defect keeps from coming.
func TestMutants(t *testing.T) {
	for _, m := range Mutants() {
		t.Run(m.Factory.Name(), func(t *testing.T) {
			t.Parallel()
			r, err := m.Run()
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range r.Caught {
				t.Logf("caught by %s: %s", c.Case, strings.Join(c.Failures, "; "))
			}
			for _, c := range r.Missed {
				t.Errorf("%s (%s): case %s %s; the suite does not catch the defect", m.Factory.Name(), m.Defect, c.Case, c.Outcome)
			}
			for _, c := range r.Broken {
				t.Errorf("control case %s %s on %s: %s", c.Case, c.Outcome, m.Factory.Name(), strings.Join(c.Failures, "; "))
			}
		})
	}
}
