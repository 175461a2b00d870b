package core

import (
	"errors"
	"slices"
	"sync"
	"testing"
)

func TestQueueSlots(t *testing.T) {
	s := NewQueueSlots(4)
	var ce *ConfigError
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
func TestQueueSlotsOneWinner(t *testing.T) {
	s := NewQueueSlots(1)
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
