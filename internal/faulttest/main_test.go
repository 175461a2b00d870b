package faulttest

import (
	"os"
	"testing"

	"github.com/dgramio/dgramio/internal/bench/cli"
)

// childEnv makes the test binary act as one of the tools (or as a probe of
// this package) instead of running tests: the process-level tests start it
// as "<test binary> echo --kind xdp ..." inside a test namespace.
const childEnv = "DGRAMIO_FAULTTEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" && len(os.Args) > 1 {
		args := os.Args[2:]
		switch os.Args[1] {
		case "echo":
			os.Exit(cli.EchoMain(args, os.Stdout, os.Stderr))
		case "loadgen":
			os.Exit(cli.LoadgenMain(args, os.Stdout, os.Stderr))
		case "netbench":
			os.Exit(cli.NetbenchMain(args, os.Stdout, os.Stderr))
		case "privprobe":
			os.Exit(privProbe(args, os.Stdout))
		}
	}
	os.Exit(m.Run())
}
