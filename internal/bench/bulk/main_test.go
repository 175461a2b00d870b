package bulk

import (
	"os"
	"testing"
)

// TestMain lets the test binary be a side of a cell: Run starts
// "<test binary> side SPEC" (and ConnRateMain "connrate-side SPEC") as
// dgramio-bulk starts itself.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "side" {
		os.Exit(SideMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "connrate-side" {
		os.Exit(ConnRateSideMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
