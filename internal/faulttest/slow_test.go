package faulttest

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testutil"
)

// Slow consumer bounds: the receiver sleeps slowPause while the sender
// pushes at most slowMax messages; the heap may grow by heapSlack.
const (
	slowPause = 2 * time.Second
	slowMax   = 300000
	heapSlack = 32 << 20
)

// TestFaultSlowConsumer: a receiver (a server of the kind, on B) stops
// reading for two seconds while a client of the same kind on A pushes
// 256-byte messages as fast as it can, then reads again. The heap of the
// process (both ends live in it) grows by less than heapSlack: nothing
// buffers without bound. A stream kind meets back-pressure (Queue returns
// false) and loses nothing: every record it accepted arrives, in order,
// once the receiver reads again. A datagram kind loses what the
// receiver's buffers cannot hold, and every loss is counted (the
// receiving socket's drops, the XSK's rx_ring_full and rx_dropped, or the
// kernels' counters).
func TestFaultSlowConsumer(t *testing.T) {
	testutil.RequireRoot(t)
	for _, kind := range testKinds {
		t.Run(kind, func(t *testing.T) { slowConsumer(t, kind) })
	}
}

func slowConsumer(t *testing.T, kind string) {
	p := testhost.NewT(t, testhost.Options{})
	scfg := serverConfig(kind, p.B)
	scfg.SockBuf = 256 << 10 // a small receive buffer fills quickly
	srv := open(t, p.B, scfg)
	ccfg := clientConfig(kind, p.A, p.B.Addr)
	ccfg.TCP.SendStall = time.Minute // wait out the pause without a stall report
	cl := open(t, p.A, ccfg)
	const size = 256
	tr := newTraffic(t, kind+" sender", cl, size, 1e9)
	var rc calls
	rc.name = kind + " receiver"
	watch(t, &rc)
	sink := tally{magic: tr.magic, size: size, inOrder: isStream(kind)}
	pkts := make([]core.Packet, 64)
	var rxErrs errLog
	cannotWait := false
	read := func() int {
		total := 0
		for round := 0; round < 64; round++ {
			rc.begin(opRx)
			n, err := srv.Rx(pkts)
			rc.end()
			if err != nil {
				rxErrs.add(err)
			}
			for _, pk := range pkts[:n] {
				sink.take(pk.Data, tr.next)
			}
			total += n
			if n < len(pkts) {
				break
			}
		}
		return total
	}

	// One message through first, so that a stream server has accepted.
	tr.limit = 1
	for end := time.Now().Add(30 * time.Second); sink.got == 0; {
		if time.Now().After(end) {
			t.Fatalf("the first message did not arrive: %v; receiver %v", tr, rxErrs.String())
		}
		tr.send()
		if read() == 0 {
			waitOrNap(context.Background(), srv, &rc, time.Millisecond, &cannotWait)
		}
	}
	kA0, kB0 := kernelCounters(t, p.A), kernelCounters(t, p.B)
	heap0 := heapInUse()

	// The receiver sleeps; the sender pushes.
	tr.limit = slowMax
	refusedBefore := tr.refused
	for end := time.Now().Add(slowPause); time.Now().Before(end) && tr.next < slowMax; {
		r := tr.refused
		tr.send()
		if tr.refused != r {
			time.Sleep(200 * time.Microsecond) // back-pressure: give the stack a moment
		} else {
			runtime.Gosched()
		}
	}
	heap1 := heapInUse()
	sentInPause, refusedInPause := tr.next-1, tr.refused-refusedBefore

	// The receiver reads again until everything is in (stream) or nothing
	// more comes (datagrams).
	last := time.Now()
	for end := time.Now().Add(60 * time.Second); sink.got < tr.next && time.Now().Before(end) && time.Since(last) < 2*time.Second; {
		tr.c.begin(opFlush)
		if err := cl.Flush(); err != nil {
			tr.errs.add(err)
		}
		tr.c.end()
		if read() > 0 {
			last = time.Now()
		} else {
			waitOrNap(context.Background(), srv, &rc, time.Millisecond, &cannotWait)
		}
	}
	cs, ss := cl.Stats(), srv.Stats()
	kA := diff(kA0, kernelCounters(t, p.A), kernelLossKeys)
	kB := diff(kB0, kernelCounters(t, p.B), kernelLossKeys)
	t.Logf("pause: %d messages accepted, Queue refused %d times; heap %d KiB before, %d KiB after",
		sentInPause, refusedInPause, heap0>>10, heap1>>10)
	t.Logf("sender: %v; counters %s", tr, allCounters(cs))
	t.Logf("receiver: got %d (dup %d, bad %d), %s; counters %s", sink.got, sink.dup, sink.bad, rxErrs.String(), allCounters(ss))
	t.Logf("%v; %v", &tr.c, &rc)
	tr.c.check(t)
	rc.check(t)
	if heap1 > heap0+heapSlack {
		t.Errorf("the heap grew from %d KiB to %d KiB while the receiver slept", heap0>>10, heap1>>10)
	}
	if sink.dup != 0 || sink.bad != 0 {
		t.Errorf("the receiver got %d duplicate and %d damaged or out-of-order messages", sink.dup, sink.bad)
	}
	if isStream(kind) {
		if refusedInPause == 0 || cs.TxBackpressure == 0 {
			t.Errorf("the sender never met back-pressure while the receiver slept (%d accepted)", sentInPause)
		}
		if sink.got != tr.next {
			t.Errorf("%d of %d records arrived after the receiver woke up", sink.got, tr.next)
		}
		if n := tr.errs.count() + rxErrs.count(); n != 0 {
			t.Errorf("errors: sender %v; receiver %v", tr.errs.String(), rxErrs.String())
		}
		return
	}
	l := leg{name: "sender→receiver", sent: tr.next, received: sink.got, from: cs, to: ss, kfrom: kA, kto: kB}
	l.check(t)
	if sink.got == tr.next {
		t.Errorf("nothing was lost: %d messages fit in the receiver's buffers, the test did not make a slow consumer", tr.next)
	}
}
