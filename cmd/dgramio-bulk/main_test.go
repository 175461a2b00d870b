package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain lets the test binary be the command: with DGRAMIO_BULK_MAIN=1
// it runs main.
func TestMain(m *testing.M) {
	if os.Getenv("DGRAMIO_BULK_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestExitStatus: the process exits 2 with a message for a bad flag and
// for a side without its spec, 0 for --help, before anything starts.
func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"--conns", "0"}, 2, "--conns"},
		{[]string{"--loss", "2"}, 2, "--loss"},
		{[]string{"side"}, 2, "usage: dgramio-bulk side"},
		{[]string{"side", "{not json"}, 2, "dgramio-bulk side"},
		{[]string{"compare", "a.json"}, 2, "usage: dgramio-bulk compare"},
		{[]string{"--help"}, 0, "usage: dgramio-bulk"},
	} {
		cmd := exec.Command(os.Args[0], tc.args...)
		cmd.Env = append(os.Environ(), "DGRAMIO_BULK_MAIN=1")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		status := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			status = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if status != tc.status || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: status %d, stderr %q; want %d and %q", tc.args, status, stderr.String(), tc.status, tc.want)
		}
	}
}
