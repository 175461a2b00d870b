package cli

import (
	"os"
	"testing"
)

// childEnv makes the test binary act as echo or loadgen, so Netbench can
// re-execute it.
const childEnv = "DGRAMIO_CLI_TEST_CHILD=1"

func TestMain(m *testing.M) {
	if os.Getenv("DGRAMIO_CLI_TEST_CHILD") == "1" && len(os.Args) > 1 {
		switch os.Args[1] {
		case "echo":
			os.Exit(EchoMain(os.Args[2:], os.Stdout, os.Stderr))
		case "loadgen":
			os.Exit(LoadgenMain(os.Args[2:], os.Stdout, os.Stderr))
		}
	}
	os.Exit(m.Run())
}
