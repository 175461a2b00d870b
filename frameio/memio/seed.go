package memio

import (
	"os"
	"strconv"
	"time"
)

// SeedEnv is the environment variable Seed reads a seed from.
const SeedEnv = "MEMIO_SEED"

// TB is the part of testing.TB that Seed uses.
type TB interface {
	Helper()
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	Failed() bool
	Name() string
}

// Seed returns a seed for Options.Seed: MEMIO_SEED when it is set, else one
// taken from the clock. It logs the seed, and logs it again when the test
// fails, with the command line that repeats the run.
func Seed(t TB) uint64 {
	t.Helper()
	var seed uint64
	if v := os.Getenv(SeedEnv); v != "" {
		s, err := strconv.ParseUint(v, 0, 64)
		if err != nil {
			t.Fatalf("memio: %s=%q is not an unsigned integer: %v", SeedEnv, v, err)
		}
		seed = s
	} else {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("memio seed %d", seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("memio seed was %d; repeat with: %s=%d go test -run '^%s$'", seed, SeedEnv, seed, t.Name())
		}
	})
	return seed
}
