// Package testutil holds the helpers tests share: skipping for a missing
// privilege or kernel feature, and failing instead when CI=true, so that in
// CI nothing passes by being skipped; waiting with a generous deadline
// (Eventually); and small fixtures that tests of several packages use
// (EchoUDP, LockedBuffer, NetnsInode and NetnsRefs).
package testutil

import (
	"errors"
	"os"
	"testing"

	"github.com/dgramio/dgramio"
)

// InCI reports whether the environment variable CI is "true".
func InCI() bool { return os.Getenv("CI") == "true" }

// Skip skips the test with reason, or fails it when running in CI.
func Skip(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("would skip, but CI=true: %s", reason)
	}
	t.Skip(reason)
}

// RequireRoot skips (fails in CI) unless the test runs as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skip(t, "needs root (run: sudo go test, or make test as root)")
	}
}

// SkipIfNotSupported skips (fails in CI) when err matches
// dgramio.ErrNotSupported, and fails the test on any other non-nil error.
func SkipIfNotSupported(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, dgramio.ErrNotSupported) {
		Skip(t, err.Error())
		return
	}
	t.Fatal(err)
}

// SkipIfUnavailable is SkipIfNotSupported that also skips (fails in CI) on
// a *dgramio.PrivilegeError: for set-up that needs privileges a root user may
// still lack (a container without CAP_SYS_ADMIN), such as test hosts in
// network namespaces. Any other non-nil error fails the test.
func SkipIfUnavailable(t testing.TB, err error) {
	t.Helper()
	var pe *dgramio.PrivilegeError
	if errors.As(err, &pe) {
		Skip(t, err.Error())
		return
	}
	SkipIfNotSupported(t, err)
}
