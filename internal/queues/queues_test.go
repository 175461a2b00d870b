package queues

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/dgramio/dgramio"
)

func TestSlots(t *testing.T) {
	s := NewSlots(4)
	var ce *dgramio.ConfigError
	for _, q := range []int{-1, 4} {
		if err := s.Take("test", q); !errors.As(err, &ce) || ce.Field != "Queues" {
			t.Errorf("Take(%d) = %v, want a *ConfigError on Queues", q, err)
		}
	}
	if err := s.Take("test", 1); err != nil {
		t.Fatalf("Take(1): %v", err)
	}
	if err := s.Take("test", 1); err == nil || errors.As(err, &ce) {
		t.Errorf("Take(1) again = %v, want an error saying it is open already", err)
	}
	if got := s.TakeRest(); !slices.Equal(got, []int{0, 2, 3}) {
		t.Errorf("TakeRest = %v, want [0 2 3]", got)
	}
	if got := s.TakeRest(); len(got) != 0 {
		t.Errorf("TakeRest again = %v, want none", got)
	}
	if err := s.Take("test", 2); err == nil {
		t.Error("Take(2) after TakeRest succeeded")
	}
}

// Concurrent takers of one queue: exactly one wins.
func TestSlotsOneWinner(t *testing.T) {
	s := NewSlots(1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.Take("test", 0) == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d takers won queue 0, want 1", wins)
	}
}

// BaseMode is queue 0's, recorded when it opens; other queues' are not kept.
func TestSlotsBaseMode(t *testing.T) {
	s := NewSlots(2)
	if got := s.BaseMode(); got != "" {
		t.Errorf("BaseMode before queue 0 opened = %q, want empty", got)
	}
	s.Opened(1, "one")
	s.Opened(0, "zero")
	if got := s.BaseMode(); got != "zero" {
		t.Errorf("BaseMode = %q, want queue 0's %q", got, "zero")
	}
}
