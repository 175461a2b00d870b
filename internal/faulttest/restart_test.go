package faulttest

import (
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
)

// TestFaultPeerRestart kills the echo process (SIGKILL) in the middle of a
// run and starts it again. A datagram client carries on with the same
// backend: after the restart the messages it sends are answered again, and
// what was sent while the echo was dead is counted by the echo's kernel
// (UDP NoPorts) or lost inside the killed process (logged: a process that
// dies takes its socket buffer with it). A stream client delivers the
// broken connection's end once, as an event of Rx (EventReset or
// EventPeerFIN, never an error), and a new backend connects to the
// restarted echo and carries traffic.
func TestFaultPeerRestart(t *testing.T) {
	forEachKind(t, testKinds, peerRestart)
}

func peerRestart(t *testing.T, kind string, p *testhost.Pair) {
	e1 := startEchoProc(t, p.B, kind)
	kB0 := kernelCounters(t, p.B)
	var e2 *proc
	var tr, tr2 *traffic
	var cs dgramio.Stats
	var carried bool
	var killedAt, restartedAt uint64
	onThread(t, p.A, func() error {
		cl, c, err := warmClient(t, kind, p)
		tr = c
		if err != nil {
			return fmt.Errorf("before the restart: %w; echo stderr:\n%s", err, e1.stderr.String())
		}
		defer cl.Close()
		if err := e1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			return err
		}
		if exited, _ := e1.wait(30 * time.Second); !exited {
			return fmt.Errorf("the echo did not die of SIGKILL")
		}
		killedAt = tr.next
		dead := time.Now()
		tr.runUntil(func() bool { return time.Since(dead) > 300*time.Millisecond }, time.Minute)
		var err2 error
		if e2, err2 = startEchoProcErr(p.B, kind); err2 != nil {
			return err2
		}
		restartedAt = tr.next
		tr.mark()
		if !isStream(kind) {
			carried = tr.runUntil(func() bool { return tr.gotFrom >= 200 }, 30*time.Second)
			tr.drain(time.Second, 10*time.Second)
			cs = cl.Stats()
			return nil
		}
		// The stream: the broken connection is reported once.
		carried = tr.runUntil(func() bool { return len(tr.errs.peers()) > 0 }, 60*time.Second)
		if carried {
			// A few more rounds: the loss is reported once, not again.
			tr.runUntil(func() bool { return false }, 200*time.Millisecond)
		}
		cs = cl.Stats()
		if err := cl.Close(); err != nil {
			return fmt.Errorf("close the broken client: %w", err)
		}
		if !carried {
			return nil
		}
		// A new backend reconnects.
		cl2, err := openHere(clientConfig(kind, p.A, p.B))
		if err != nil {
			return fmt.Errorf("reconnect: %w", err)
		}
		defer cl2.Close()
		tr2 = newTraffic(t, kind+" new client", cl2, 64, 2000, newMagic())
		tr2.runUntil(func() bool { return tr2.got >= 200 }, 30*time.Second)
		tr2.drain(time.Second, 30*time.Second)
		return nil
	})
	t.Logf("client: %v", tr)
	t.Logf("client counters: %s", allCounters(cs))
	tr.c.check(t)
	if e2 != nil {
		defer stopEchoProc(t, e2)
	}
	if !isStream(kind) {
		kB := diff(kB0, kernelCounters(t, p.B), kernelLossKeys)
		checkDatagramRestart(t, tr, cs, kB, carried, restartedAt-killedAt)
		return
	}
	checkStreamRestart(t, tr, tr2, carried, addrFor(kind, p.B))
}

// checkDatagramRestart checks a datagram client across its echo's restart:
// it carried on (carried: messages sent after the restart came back) with
// no error. It logs how many messages were lost in all, how many of them
// the counters explain (the client's losses, the echo kernel's counters
// kB) and how many died in the killed process, deadSent having been sent
// while the echo was dead.
func checkDatagramRestart(t *testing.T, tr *traffic, cs dgramio.Stats, kB map[string]uint64, carried bool, deadSent uint64) {
	t.Logf("echo's kernel: %s", formatCounters(kB))
	if !carried {
		t.Fatalf("the client did not carry on: %d of the messages sent after the restart came back in 30 s", tr.gotFrom)
	}
	if n := tr.errs.count(); n != 0 {
		t.Errorf("a datagram client got errors from a peer restart: %v", tr.errs.String())
	}
	lost := tr.next - tr.got
	counted := cs.Lost() + kB["udp.no_ports"] + kB["link.rx_dropped"]
	t.Logf("%d sent while the echo was dead, %d lost in all, %d counted (NoPorts at the echo's kernel and the client's losses), %d lost with the killed process",
		deadSent, lost, counted, int64(lost)-int64(counted))
}

// checkStreamRestart checks a stream client across its echo's restart: it
// reported the broken connection (carried) once, as a PeerError naming the
// echo at echoAddr, and a new client tr2 carried every record to the
// restarted echo.
func checkStreamRestart(t *testing.T, tr, tr2 *traffic, carried bool, echoAddr netip.Addr) {
	if !carried {
		t.Fatalf("the stream client did not report the killed peer in 60 s: %v", tr.errs.String())
	}
	peers := tr.errs.peers()
	pe := peers[0]
	if pe.Peer.Addr() != echoAddr {
		t.Errorf("PeerError %v does not name the echo %v", pe, echoAddr)
	}
	t.Logf("reported: %v (reset %v)", pe, pe.Reset)
	if len(peers) != 1 {
		t.Errorf("the peer's loss was reported %d times: %v", len(peers), tr.errs.String())
	}
	t.Logf("new client: %v", tr2)
	tr2.c.check(t)
	if tr2.got < 200 || tr2.got != tr2.next || tr2.errs.count() != 0 {
		t.Errorf("the new connection did not carry every record: %v", tr2)
	}
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
