package conformance

import (
	"strings"
	"testing"
)

// TestMutants runs the cases named for each mutant against it and asserts
// that they FAIL (the suite catches the defect), and that its control cases
// pass (the mutant is otherwise a working stack). The cases run against a
// Recorder, so their failures are results here, not failures of this test.
func TestMutants(t *testing.T) {
	for _, m := range Mutants() {
		t.Run(m.Factory.Name(), func(t *testing.T) {
			info, err := Probe(m.Factory)
			if err != nil {
				t.Fatalf("make mutant: %v", err)
			}
			run := func(name string) Result {
				c, ok := CaseByName(name)
				if !ok {
					t.Fatalf("no case %q", name)
				}
				if d, xfail := expectedFailure(name, KindOurs); xfail {
					t.Fatalf("%s fails on our stack already (%s): it cannot show the mutant's defect", name, d.RFC)
				}
				return RunCase(m.Factory, c, info)
			}
			for _, name := range m.Fails {
				r := run(name)
				if r.Outcome != Fail {
					t.Errorf("%s (%s): case %s %s; the suite does not catch the defect", m.Factory.Name(), m.Defect, name, r.Outcome)
					continue
				}
				t.Logf("caught by %s: %s", name, strings.Join(r.Failures, "; "))
			}
			for _, name := range m.Control {
				if r := run(name); r.Outcome != Pass {
					t.Errorf("control case %s %s on %s: %s", name, r.Outcome, m.Factory.Name(), strings.Join(r.Failures, "; "))
				}
			}
		})
	}
}
