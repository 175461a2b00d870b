// Package cleanup is the undo stack of set-up that takes several steps
// (a socket, a mapping, a device, a program): each step that acquired
// something pushes what releases it; on error the stack runs, last step
// first; on success its owner keeps it, and Close runs it. Not API.
package cleanup

import "errors"

// Stack is a stack of undo steps. The zero value is empty and ready. Not
// safe for concurrent use.
type Stack struct{ fns []func() error }

// Add pushes a step that may fail.
func (s *Stack) Add(fn func() error) { s.fns = append(s.fns, fn) }

// Do pushes a step that cannot fail.
func (s *Stack) Do(fn func()) { s.fns = append(s.fns, func() error { fn(); return nil }) }

// Undo runs every step, last first, empties the stack and returns the
// steps' errors joined. A second Undo runs nothing.
func (s *Stack) Undo() error {
	var errs []error
	for i := len(s.fns) - 1; i >= 0; i-- {
		if err := s.fns[i](); err != nil {
			errs = append(errs, err)
		}
	}
	s.fns = nil
	return errors.Join(errs...)
}
