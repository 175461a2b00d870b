package udp

import "github.com/dgramio/dgramio/internal/cpu"

// setup is the undo stack of a kind's constructor (NewDPDK,
// openXDPQueue): each step it took adds how to undo it, and on an error
// path undo, deferred, undoes them last step first; the constructor sets
// it to nil once the Backend owns everything.
type setup []func()

// undo undoes the steps taken, last first.
func (s *setup) undo() {
	for i := len(*s) - 1; i >= 0; i-- {
		(*s)[i]()
	}
}

// claim pins the calling goroutine's thread to cpus[0] (cpu.Claim, which
// leaves a pin the caller made itself alone, and does nothing without
// cpus) and adds its release to s.
func (s *setup) claim(cpus []int) (cpu.Thread, error) {
	th, err := cpu.Claim(cpus, false)
	if err != nil {
		return cpu.Thread{}, err
	}
	*s = append(*s, func() { _ = th.Release() })
	return th, nil
}
