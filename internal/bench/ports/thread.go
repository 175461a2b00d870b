package ports

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"syscall"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// thread is an OS thread that stays inside one network namespace and runs
// functions there: sockets, netlink and ethtool calls made on it, and
// processes forked from it, belong to that namespace. It is never handed
// back to the Go runtime: when stop ends it, the runtime ends the thread,
// and the processes started with Pdeathsig from it get their signal.
type thread struct {
	fns  chan func()
	done chan struct{}
	// ns is the namespace, an open descriptor owned by the thread.
	ns netns.NsHandle
}

// errThreadGone is returned by do after stop.
var errThreadGone = errors.New("ports: namespace thread stopped")

// startThread starts a thread that runs enter (setns or unshare) and, if
// that succeeds, serves do until stop. It never runs on the process's main
// thread, whose namespace /proc/self/ns/net names and which the runtime
// cannot end: if the new goroutine lands there, it holds the main thread,
// unchanged, while a goroutine it starts (which then cannot run on the main
// thread) becomes the namespace's thread.
func startThread(enter func() error) (*thread, error) {
	t := &thread{fns: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	serve := func() {
		// Locked and never unlocked: the thread is discarded when this
		// goroutine returns, whatever state enter left it in.
		runtime.LockOSThread()
		if err := enter(); err != nil {
			ready <- err
			return
		}
		ns, err := netns.Get()
		if err != nil {
			ready <- fmt.Errorf("ports: open own namespace: %w", err)
			return
		}
		t.ns = ns
		ready <- nil
		for f := range t.fns {
			f()
		}
		ns.Close()
		close(t.done)
	}
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			serve()
			return
		}
		held := make(chan struct{})
		go func() { defer close(held); serve() }()
		<-held
		runtime.UnlockOSThread() // the main thread was never changed
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return t, nil
}

// do runs fn on the thread and returns its error.
func (t *thread) do(fn func() error) (err error) {
	errc := make(chan error, 1)
	select {
	case <-t.done:
		return errThreadGone
	default:
	}
	defer func() {
		if recover() != nil { // send on a closed channel: stopped meanwhile
			err = errThreadGone
		}
	}()
	t.fns <- func() {
		defer func() {
			if p := recover(); p != nil {
				errc <- fmt.Errorf("ports: panic in namespace thread: %v", p)
			}
		}()
		errc <- fn()
	}
	return <-errc
}

// start starts cmd from the thread, so it runs in the namespace, with
// SIGKILL as its parent-death signal (the thread's end).
func (t *thread) start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if cmd.SysProcAttr.Pdeathsig == 0 {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	return t.do(cmd.Start)
}

// stop ends the thread. Safe to call more than once.
func (t *thread) stop() {
	select {
	case <-t.done:
		return
	default:
	}
	func() {
		defer func() { _ = recover() }() // closed already by a concurrent stop
		close(t.fns)
	}()
	<-t.done
}

// enterNS returns an enter function that joins the namespace ns.
func enterNS(ns netns.NsHandle) func() error {
	return func() error {
		if err := unix.Setns(int(ns), unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("ports: setns: %w", err)
		}
		return nil
	}
}

// newNS is an enter function that makes a new network namespace.
func newNS() error {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("ports: unshare(CLONE_NEWNET): %w", err)
	}
	return nil
}
