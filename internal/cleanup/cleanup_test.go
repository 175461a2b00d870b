package cleanup

import (
	"errors"
	"testing"
)

func TestUndoOrder(t *testing.T) {
	var got []int
	var s Stack
	for i := 0; i < 3; i++ {
		s.Add(func() error { got = append(got, i); return nil })
	}
	s.Do(func() { got = append(got, 3) })
	s.Add(func() error { return errors.New("boom") })
	if err := s.Undo(); err == nil || err.Error() != "boom" {
		t.Errorf("undo error %v, want boom", err)
	}
	if len(got) != 4 || got[0] != 3 || got[1] != 2 || got[3] != 0 {
		t.Errorf("undo order %v, want [3 2 1 0]", got)
	}
	if err := s.Undo(); err != nil || len(got) != 4 {
		t.Error("second undo ran steps again")
	}
}
