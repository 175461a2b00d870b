package faulttest

import (
	"fmt"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
)

// flapDown is how long the echo's veth stays down.
const flapDown = 500 * time.Millisecond

// TestFaultLinkFlap takes the echo's veth down for half a second and up
// again while a client of the same kind sends 2000 messages a second to an
// in-process echo. It checks that no Queue, Flush or Rx blocks (each
// returns within callLimit, and the watchdog catches a hang), that traffic
// flows again after the link is back (messages sent afterwards are
// answered), and that what did not come back is explained: for stream kinds
// nothing may be missing (TCP retransmits across the flap); for datagram
// kinds the messages missing are at most what the counters of both
// backends (Stats.Lost, the echo's refusals) and of both kernels (link
// drops, IP and UDP discards) count.
func TestFaultLinkFlap(t *testing.T) {
	forEachKind(t, testKinds, linkFlap)
}

func linkFlap(t *testing.T, kind string, p *testhost.Pair) {
	// Each kernel knows the other end for good. A learnt entry that the
	// flap finds being re-confirmed goes to FAILED, and the kernel then
	// frees the datagrams queued on it with no counter of any namespace
	// (seen: 252 lost, two ICMP errors and no other count). That is the
	// kernel's neighbour layer, not the backends this test is about; their
	// recovery from a lost neighbour is what the ARP tests check.
	if err := p.A.AddNeigh(p.B.Addr, p.B.MAC); err != nil {
		t.Fatal(err)
	}
	if err := p.B.AddNeigh(p.A.Addr, p.A.MAC); err != nil {
		t.Fatal(err)
	}
	e := startEcho(t, p.B, kind+" echo", serverConfig(kind, p.B))
	kA0, kB0, arp0 := kernelCounters(t, p.A), kernelCounters(t, p.B), arpDiscards(t)
	var tr *traffic
	var cs dgramio.Stats
	var recovered bool
	var sentDuring uint64
	onThread(t, p.A, func() error {
		cl, c, err := warmClient(t, kind, p)
		tr = c
		if err != nil {
			return fmt.Errorf("before the flap: %w; echo: %v", err, e.errs.String())
		}
		defer cl.Close()
		flap := make(chan error, 1)
		go func() {
			if err := p.B.SetLinkUp(false); err != nil {
				flap <- err
				return
			}
			time.Sleep(flapDown)
			flap <- p.B.SetLinkUp(true)
		}()
		var flapErr error
		flapped := tr.runUntil(func() bool {
			select {
			case flapErr = <-flap:
				return true
			default:
				return false
			}
		}, 30*time.Second)
		if !flapped || flapErr != nil {
			return fmt.Errorf("link flap: done %v, %v", flapped, flapErr)
		}
		sentDuring = tr.next
		tr.mark()
		recovered = tr.runUntil(func() bool { return tr.gotFrom >= 200 }, 30*time.Second)
		tr.drain(2*time.Second, 30*time.Second)
		cs = cl.Stats()
		e.stop(t) // before the client closes: a stream echo would see it go
		return nil
	})
	e.stop(t)
	es := e.stats()
	kA := diff(kA0, kernelCounters(t, p.A), kernelLossKeys)
	kB := diff(kB0, kernelCounters(t, p.B), kernelLossKeys)
	arp := arpDiscards(t) - arp0
	t.Logf("client: %v", tr)
	t.Logf("client losses: %s; echo losses: %s, echo refused %d; %s", lossBreakdown(cs), lossBreakdown(es), e.dropped.Load(), e.errs.String())
	t.Logf("kernel A: %s; kernel B: %s; the kernel's neighbour layer (all namespaces): unresolved_discards=%d", formatCounters(kA), formatCounters(kB), arp)
	t.Logf("%v; %v", &tr.c, &e.c)
	t.Logf("client counters: %s", allCounters(cs))
	t.Logf("echo counters: %s", allCounters(es))
	tr.c.check(t)
	e.c.check(t)
	if !recovered {
		t.Fatalf("no recovery: %d of the messages sent after the link came back were answered within 30 s (%d sent by the end of the flap)",
			tr.gotFrom, sentDuring)
	}
	if tr.bad != 0 || tr.dup != 0 {
		t.Errorf("%d damaged or foreign and %d duplicate messages came back", tr.bad, tr.dup)
	}
	lost := tr.next - tr.got
	if isStream(kind) {
		// A raw kind's Flush may report the link that is down (ENETDOWN
		// from the kick); TCP retransmits. A broken connection is a
		// failure.
		if n := len(tr.errs.peers()) + len(e.errs.peers()); n != 0 {
			t.Errorf("a half-second flap broke the stream: client %s; echo %s", tr.errs.String(), e.errs.String())
		}
		if lost != 0 {
			t.Errorf("%d of %d records did not come back over TCP", lost, tr.next)
		}
		return
	}
	// Should the kernel still queue for a neighbour, what overflows that
	// queue is counted only in the kernel-wide unresolved_discards. It
	// belongs to the client's leg: the echo sends only what it received,
	// after the link is back.
	legs := []leg{
		{name: "client→echo", sent: tr.next, received: e.rx.Load(), from: cs, to: es, kfrom: kA, kto: kB, extra: arp},
		{name: "echo→client", sent: e.back.Load(), received: tr.got + tr.dup, from: es, to: cs, kfrom: kB, kto: kA},
	}
	for i := range legs {
		legs[i].check(t)
	}
	if d := e.dropped.Load(); d != 0 {
		t.Logf("the echo could not queue %d messages back (counted by the echo)", d)
	}
}
