// Package queues holds what every kind's dgramio.QueueGroup needs to keep
// its contract: which queues have been opened (each once), and queue 0's
// mode for the group's Stats.Mode.
package queues

import (
	"fmt"
	"sync"

	"github.com/dgramio/dgramio"
)

// Slots keeps dgramio.QueueGroup's rule that each queue is opened once, and
// queue 0's base mode (dgramio.QueueGroup.BaseMode). Safe for concurrent use.
type Slots struct {
	mu    sync.Mutex
	taken []bool
	base  string
}

// NewSlots returns the slots of n queues, none taken.
func NewSlots(n int) *Slots { return &Slots{taken: make([]bool, n)} }

// Take marks queue q taken. It returns a *dgramio.ConfigError naming Queues
// when the group has no queue q, and an error prefixed who when q was
// taken before.
func (s *Slots) Take(who string, q int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q < 0 || q >= len(s.taken) {
		return &dgramio.ConfigError{Field: "Queues", Value: len(s.taken), Reason: fmt.Sprintf("queue %d does not exist", q)}
	}
	if s.taken[q] {
		return fmt.Errorf("%s: queue %d is open already", who, q)
	}
	s.taken[q] = true
	return nil
}

// TakeRest marks every queue not taken yet and returns them in order: the
// queues a group's Close releases because nobody opened them.
func (s *Slots) TakeRest() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rest []int
	for q, t := range s.taken {
		if !t {
			s.taken[q] = true
			rest = append(rest, q)
		}
	}
	return rest
}

// Opened records that queue q opened with Stats.Mode base before its
// queue note; queue 0's is BaseMode.
func (s *Slots) Opened(q int, base string) {
	if q != 0 {
		return
	}
	s.mu.Lock()
	s.base = base
	s.mu.Unlock()
}

// BaseMode returns what Opened recorded for queue 0, "" before.
func (s *Slots) BaseMode() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.base
}
