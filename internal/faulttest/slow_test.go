package faulttest

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
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
	forEachKind(t, testKinds, slowConsumer)
}

func slowConsumer(t *testing.T, kind string, p *testhost.Pair) {
	const size = 256
	magic := newMagic()
	scfg := serverConfig(kind, p.B)
	scfg.SockBuf = 256 << 10 // a small receive buffer fills quickly
	k := startSink(t, p.B, kind+" receiver", scfg, magic, size)
	var tr *traffic
	var cs dgramio.Stats
	var kA0, kB0 map[string]uint64
	var heap0, heap1, sentInPause, refusedInPause uint64
	onThread(t, p.A, func() error {
		ccfg := clientConfig(kind, p.A, p.B)
		ccfg.TCP.SendStall = time.Minute // wait out the pause without a stall report
		cl, err := openHere(ccfg)
		if err != nil {
			return err
		}
		defer cl.Close()
		tr = newTraffic(t, kind+" sender", cl, size, 1e9, magic)
		// One message through first, so that a stream server has accepted.
		if err := firstThrough(tr, k); err != nil {
			return err
		}
		kA0, kB0 = kernelCounters(t, p.A), kernelCounters(t, p.B)
		heap0 = heapInUse()

		// The receiver sleeps; the sender pushes.
		k.paused.Store(true)
		refusedBefore := tr.refused
		pushFor(tr, k, slowPause)
		heap1 = heapInUse()
		sentInPause, refusedInPause = tr.next-1, tr.refused-refusedBefore

		// The receiver reads again until everything is in (stream) or
		// nothing more comes (datagrams); the sender flushes what it has
		// staged.
		k.paused.Store(false)
		catchUp(cl, tr, k)
		cs = cl.Stats()
		k.stop(t) // before the sender closes: a stream receiver would see it go
		return nil
	})
	k.stop(t)
	ss := k.final
	y, _ := k.count()
	kA := diff(kA0, kernelCounters(t, p.A), kernelLossKeys)
	kB := diff(kB0, kernelCounters(t, p.B), kernelLossKeys)
	t.Logf("pause: %d messages accepted, Queue refused %d times; heap %d KiB before, %d KiB after",
		sentInPause, refusedInPause, heap0>>10, heap1>>10)
	t.Logf("sender: %v; counters %s", tr, allCounters(cs))
	t.Logf("receiver: got %d (dup %d, bad %d), %s; counters %s", y.got, y.dup, y.bad, k.errs.String(), allCounters(ss))
	t.Logf("%v; %v", &tr.c, &k.c)
	tr.c.check(t)
	k.c.check(t)
	if heap1 > heap0+heapSlack {
		t.Errorf("the heap grew from %d KiB to %d KiB while the receiver slept", heap0>>10, heap1>>10)
	}
	if y.dup != 0 || y.bad != 0 {
		t.Errorf("the receiver got %d duplicate and %d damaged or out-of-order messages", y.dup, y.bad)
	}
	if isStream(kind) {
		if refusedInPause == 0 || cs.TxBackpressure == 0 {
			t.Errorf("the sender never met back-pressure while the receiver slept (%d accepted)", sentInPause)
		}
		if y.got != tr.next {
			t.Errorf("%d of %d records arrived after the receiver woke up", y.got, tr.next)
		}
		if n := tr.errs.count() + k.errs.count(); n != 0 {
			t.Errorf("errors: sender %v; receiver %v", tr.errs.String(), k.errs.String())
		}
		return
	}
	l := leg{name: "sender→receiver", sent: tr.next, received: y.got, from: cs, to: ss, kfrom: kA, kto: kB}
	l.check(t)
	if y.got == tr.next {
		t.Errorf("nothing was lost: %d messages fit in the receiver's buffers, the test did not make a slow consumer", tr.next)
	}
}

// firstThrough sends tr's first message until the sink has it.
func firstThrough(tr *traffic, k *sink) error {
	tr.limit = 1
	for end := time.Now().Add(30 * time.Second); ; {
		if y, _ := k.count(); y.got == 1 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("the first message did not arrive: %v; receiver %v", tr, k.errs.String())
		}
		tr.send()
		time.Sleep(time.Millisecond)
	}
}

// pushFor sends as fast as tr's backend accepts, for d or until slowMax
// messages are out, and tells the sink how many to expect. On
// back-pressure it gives the stack a moment.
func pushFor(tr *traffic, k *sink, d time.Duration) {
	tr.limit = slowMax
	for end := time.Now().Add(d); time.Now().Before(end) && tr.next < slowMax; {
		r := tr.refused
		tr.send()
		k.limit.Store(tr.next)
		if tr.refused != r {
			time.Sleep(200 * time.Microsecond)
		} else {
			runtime.Gosched()
		}
	}
}

// catchUp flushes what the sender cl has staged and receives, until the sink
// has everything that was sent (stream) or nothing more arrives for two
// seconds (datagrams), for a minute at the most.
func catchUp(cl dgramio.Backend, tr *traffic, k *sink) {
	for end, start := time.Now().Add(60*time.Second), time.Now(); time.Now().Before(end); {
		y, last := k.count()
		if y.got+y.bad+y.dup >= tr.next || time.Since(maxTime(last, start)) > 2*time.Second {
			return
		}
		tr.c.begin(opFlush)
		err := cl.Flush()
		tr.c.end()
		if err != nil {
			tr.errs.add(err)
		}
		waitOrNap(context.Background(), cl, &tr.c, time.Millisecond, &tr.cannotWait)
		tr.recv()
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
