package afxdp

import "errors"

// cleanup is a stack of undo steps: set-up pushes one after each step that
// succeeded; on error, undo runs them in reverse; on success the owner keeps
// the stack and Close runs it.
type cleanup struct{ fns []func() error }

func (c *cleanup) add(fn func() error) { c.fns = append(c.fns, fn) }

// undo runs every step, last first, and returns their errors joined.
func (c *cleanup) undo() error {
	var errs []error
	for i := len(c.fns) - 1; i >= 0; i-- {
		if err := c.fns[i](); err != nil {
			errs = append(errs, err)
		}
	}
	c.fns = nil
	return errors.Join(errs...)
}
