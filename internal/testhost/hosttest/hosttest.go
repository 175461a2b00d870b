//go:build linux

// Package hosttest makes the test hosts of package testhost for tests: it
// skips a test that cannot have them (fails it when CI=true) and removes
// them when the test ends. It is the only part of the test hosts that
// needs package testing, so the tools that make test hosts (netbench) do
// not link it.
package hosttest

import (
	"testing"

	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testutil"
)

// New makes a Pair for a test: it skips the test (fails it when CI=true)
// unless it runs as root or when the host lacks a needed feature or
// privilege, fails it on any other error, and closes the Pair in t.Cleanup.
func New(t testing.TB, o testhost.Options) *testhost.Pair {
	t.Helper()
	testutil.RequireRoot(t)
	p, err := testhost.New(o)
	testutil.SkipIfUnavailable(t, err)
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("testhost: close: %v", err)
		}
	})
	return p
}
