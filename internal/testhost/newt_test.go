//go:build linux

package testhost

import (
	"testing"

	"github.com/dgramio/dgramio/internal/testutil"
)

// newT is hosttest.New for this package's own tests, which cannot import
// hosttest (it imports this package).
func newT(t testing.TB, o Options) *Pair {
	t.Helper()
	testutil.RequireRoot(t)
	p, err := New(o)
	testutil.SkipIfUnavailable(t, err)
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("testhost: close: %v", err)
		}
	})
	return p
}
