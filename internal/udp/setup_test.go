package udp

import (
	"slices"
	"testing"
)

// A constructor's setup undoes its steps last first on an error path,
// and nothing once it is set to nil; claim without CPUs claims nothing
// and adds its (harmless) release.
func TestSetupUndo(t *testing.T) {
	var got []int
	s := setup{}
	if _, err := s.claim(nil); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		s = append(s, func() { got = append(got, i) })
	}
	s.undo()
	if !slices.Equal(got, []int{2, 1, 0}) || len(s) != 4 {
		t.Fatalf("undone %v with %d steps, want [2 1 0] after the claim's release", got, len(s))
	}
	got = nil
	s = nil
	s.undo()
	if got != nil {
		t.Fatalf("a kept setup undid %v", got)
	}
}
