package faulttest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/bench/cli"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testutil"
)

// proc is a child process: this test binary acting as one of the tools
// (see TestMain), started inside a test namespace.
type proc struct {
	name   string
	cmd    *exec.Cmd
	lines  chan string // standard output, line by line
	stderr testutil.LockedBuffer
	done   chan struct{}
	err    error // Wait's, valid once done is closed
}

// startChild starts "<this test binary> mode args..." inside h's namespace.
// The process gets SIGKILL when the test's pair is closed or this process
// dies; t.Cleanup kills it too.
func startChild(t testing.TB, h *testhost.Host, mode string, args ...string) *proc {
	t.Helper()
	p, err := startChildErr(h, mode, args...)
	if err != nil {
		t.Fatal(err)
	}
	p.killAtEnd(t)
	return p
}

// killAtEnd kills the process when the test ends (if it still runs) and
// waits for it.
func (p *proc) killAtEnd(t testing.TB) {
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
}

// startChildErr is startChild for any goroutine; the caller ends the
// process.
func startChildErr(h *testhost.Host, mode string, args ...string) (*proc, error) {
	p := &proc{name: mode, lines: make(chan string, 64), done: make(chan struct{})}
	p.cmd = h.Command(os.Args[0], append([]string{mode}, args...)...)
	p.cmd.Env = append(os.Environ(), childEnv+"=1")
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := h.Start(p.cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", mode, err)
	}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			select {
			case p.lines <- s.Text():
			default: // nobody reads: drop
			}
		}
		io.Copy(io.Discard, out)
		close(p.lines)
	}()
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// line returns the next line of standard output, or false after d or at
// the end of the output.
func (p *proc) line(d time.Duration) (string, bool) {
	select {
	case l, ok := <-p.lines:
		return l, ok
	case <-time.After(d):
		return "", false
	}
}

// wait waits up to d for the process to exit: exited is false when it did
// not in time, err is Wait's.
func (p *proc) wait(d time.Duration) (exited bool, err error) {
	select {
	case <-p.done:
		return true, p.err
	case <-time.After(d):
		return false, nil
	}
}

// signal sends sig to the process.
func (p *proc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, p.name, err)
	}
}

// startEchoProc starts the echo tool of kind as a server on h (in yielding
// mode: the machine is shared) and waits until it says it is ready. A kind
// this build does not reach, or a feature the host lacks, skips the test
// (fails it in CI); any other failure fails it. extra are more flags.
func startEchoProc(t testing.TB, h *testhost.Host, kind string, extra ...string) *proc {
	t.Helper()
	p, err := startEchoProcErr(h, kind, extra...)
	var se *skipError
	if errors.As(err, &se) {
		testutil.Skip(t, se.reason)
	}
	if err != nil {
		t.Fatal(err)
	}
	p.killAtEnd(t)
	return p
}

// startEchoProcErr is startEchoProc for any goroutine: it returns a
// *skipError or another error instead of ending the test. The caller
// kills the process in the end (stopEchoProc, or Pdeathsig when the pair
// is closed).
func startEchoProcErr(h *testhost.Host, kind string, extra ...string) (*proc, error) {
	args := append([]string{"--kind", kind, "--local", addrFor(kind, h).String(), "--port", fmt.Sprint(port),
		"--iface", h.Iface, "--wait"}, extra...)
	p, err := startChildErr(h, "echo", args...)
	if err != nil {
		return nil, err
	}
	l, ok := p.line(60 * time.Second)
	switch {
	case ok && strings.HasPrefix(l, "ready"):
		return p, nil
	case strings.HasPrefix(l, "failed "+cli.ClassNotBuilt+":"), strings.HasPrefix(l, "failed "+cli.ClassNotSupported+":"):
		p.wait(10 * time.Second)
		return nil, &skipError{fmt.Sprintf("echo of kind %s: %s", kind, l)}
	}
	p.cmd.Process.Kill()
	p.wait(10 * time.Second)
	return nil, fmt.Errorf("echo of kind %s did not get ready: %q; stderr:\n%s", kind, l, p.stderr.String())
}
