package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dgramio/dgramio/internal/testutil"
)

// TestDemo: --demo serves over tcp-xdp on a test host and a kernel client
// gets the answer of the unchanged net/http handler.
func TestDemo(t *testing.T) {
	testutil.RequireRoot(t)
	var out, errOut bytes.Buffer
	if rc := run([]string{"--demo"}, &out, &errOut); rc != 0 {
		if strings.Contains(errOut.String(), "not supported") {
			testutil.Skip(t, errOut.String())
		}
		t.Fatalf("rc %d: %s", rc, errOut.String())
	}
	if !strings.Contains(out.String(), "200 OK") || !strings.Contains(out.String(), "from net/http") {
		t.Fatalf("demo output:\n%s", out.String())
	}
}

// TestBench: --bench with a few requests prints a row for each path and
// round, with no errors.
func TestBench(t *testing.T) {
	testutil.RequireRoot(t)
	var out, errOut bytes.Buffer
	if rc := run([]string{"--bench", "--requests", "200", "--conns", "2", "--rounds", "1", "--poll", "sleep"}, &out, &errOut); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errOut.String())
	}
	rows := 0
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "| kernel tcp | 1 | 200 |") || strings.HasPrefix(l, "| tcp-xdp | 1 | 200 |") {
			rows++
			if !strings.HasSuffix(l, "| 0 |") {
				t.Errorf("errors in %q", l)
			}
		}
	}
	if rows != 2 {
		t.Fatalf("want a kernel and a tcp-xdp row:\n%s", out.String())
	}
}

// TestFlags: bad flags are refused with exit status 2, serve mode without
// an interface with 1.
func TestFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if rc := run([]string{"--poll", "busy"}, &out, &errOut); rc != 2 {
		t.Errorf("--poll busy: rc %d", rc)
	}
	if rc := run(nil, &out, &errOut); rc != 1 || !strings.Contains(errOut.String(), "--iface") {
		t.Errorf("no flags: rc %d, %q", rc, errOut.String())
	}
}
