package faulttest

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testutil"
)

// TestFaultPeerRestart kills the echo process (SIGKILL) in the middle of a
// run and starts it again. A datagram client carries on with the same
// backend: after the restart the messages it sends are answered again, and
// what was sent while the echo was dead is counted by the echo's kernel
// (UDP NoPorts) or lost inside the killed process (logged: a process that
// dies takes its socket buffer with it). A stream client reports the broken
// connection once, as a *core.PeerError from Rx or Flush, and a new backend
// connects to the restarted echo and carries traffic.
func TestFaultPeerRestart(t *testing.T) {
	testutil.RequireRoot(t)
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) { peerRestart(t, kind) })
	}
}

func peerRestart(t *testing.T, kind string) {
	p := testhost.NewT(t, testhost.Options{})
	e1 := startEchoProc(t, p.B, kind)
	cl := open(t, p.A, clientConfig(kind, p.A, p.B.Addr))
	tr := newTraffic(t, kind+" client", cl, 64, 2000)
	kB0 := kernelCounters(t, p.B)
	if !tr.runUntil(func() bool { return tr.got >= 200 }, 30*time.Second) {
		t.Fatalf("no traffic before the restart: %v; echo stderr:\n%s", tr, e1.stderr.String())
	}

	e1.signal(t, syscall.SIGKILL)
	if exited, _ := e1.wait(30 * time.Second); !exited {
		t.Fatal("the echo did not die of SIGKILL")
	}
	killedAt := tr.next
	dead := time.Now()
	tr.runUntil(func() bool { return time.Since(dead) > 300*time.Millisecond }, time.Minute)

	e2 := startEchoProc(t, p.B, kind)
	restartedAt := tr.next
	tr.mark()

	if !isStream(kind) {
		ok := tr.runUntil(func() bool { return tr.gotFrom >= 200 }, 30*time.Second)
		tr.drain(time.Second, 10*time.Second)
		kB := diff(kB0, kernelCounters(t, p.B), kernelLossKeys)
		cs := cl.Stats()
		t.Logf("client: %v", tr)
		t.Logf("client counters: %s", allCounters(cs))
		t.Logf("echo's kernel: %s", formatCounters(kB))
		tr.c.check(t)
		if !ok {
			t.Fatalf("the client did not carry on: %d of the messages sent after the restart came back in 30 s", tr.gotFrom)
		}
		if n := tr.errs.count(); n != 0 {
			t.Errorf("a datagram client got errors from a peer restart: %v", tr.errs.String())
		}
		lost := tr.next - tr.got
		counted := cs.Lost() + kB["udp.no_ports"] + kB["link.rx_dropped"]
		t.Logf("%d sent while the echo was dead, %d lost in all, %d counted (NoPorts at the echo's kernel and the client's losses), %d lost with the killed process",
			restartedAt-killedAt, lost, counted, int64(lost)-int64(counted))
		stopEchoProc(t, e2)
		return
	}

	// The stream: the broken connection is reported once.
	reported := tr.runUntil(func() bool { return len(tr.errs.peers()) > 0 }, 30*time.Second)
	t.Logf("old client: %v", tr)
	t.Logf("old client counters: %s", allCounters(cl.Stats()))
	if !reported {
		t.Fatalf("the stream client did not report the killed peer in 30 s: %v", tr.errs.String())
	}
	pe := tr.errs.peers()[0]
	var want *core.PeerError
	if !errors.As(error(pe), &want) || want.Peer.Addr() != p.B.Addr {
		t.Errorf("PeerError %v does not name the echo %v", pe, p.B.Addr)
	}
	t.Logf("reported: %v (reset %v)", pe, pe.Reset)
	// A few more rounds: the loss is reported once, not again and again.
	n := len(tr.errs.peers())
	tr.runUntil(func() bool { return false }, 200*time.Millisecond)
	if m := len(tr.errs.peers()); m != n {
		t.Errorf("the peer's loss was reported %d times", m)
	}
	if err := cl.Close(); err != nil {
		t.Errorf("close the broken client: %v", err)
	}

	// A new backend reconnects.
	cl2 := open(t, p.A, clientConfig(kind, p.A, p.B.Addr))
	tr2 := newTraffic(t, kind+" new client", cl2, 64, 2000)
	if !tr2.runUntil(func() bool { return tr2.got >= 200 }, 30*time.Second) {
		t.Fatalf("no traffic through the new client: %v; echo stderr:\n%s", tr2, e2.stderr.String())
	}
	tr2.drain(time.Second, 30*time.Second)
	t.Logf("new client: %v", tr2)
	tr.c.check(t)
	tr2.c.check(t)
	if tr2.got != tr2.next || tr2.errs.count() != 0 {
		t.Errorf("the new connection lost records or failed: %v", tr2)
	}
	stopEchoProc(t, e2)
}

// stopEchoProc stops an echo process with SIGTERM and checks that it
// exits cleanly.
func stopEchoProc(t testing.TB, e *proc) {
	t.Helper()
	e.signal(t, syscall.SIGTERM)
	exited, err := e.wait(30 * time.Second)
	if !exited || err != nil {
		t.Errorf("echo after SIGTERM: exited %v, %v; stderr:\n%s", exited, err, e.stderr.String())
	}
}
