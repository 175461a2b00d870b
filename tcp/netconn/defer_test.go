package netconn

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

// pattern is the byte at offset i of stream seed: each stream of the
// stress test has its own, so that a byte delivered to the wrong
// connection or out of order shows.
func pattern(seed, i int) byte { return byte(seed*131 + i*7 + i>>11) }

// sendPattern writes size bytes of stream seed to c in chunks of random
// sizes.
func sendPattern(c net.Conn, seed, size int, r *rand.Rand) error {
	buf := make([]byte, 16<<10)
	for off := 0; off < size; {
		k := min(1+r.IntN(len(buf)), size-off)
		for i := range k {
			buf[i] = pattern(seed, off+i)
		}
		if _, err := c.Write(buf[:k]); err != nil {
			return fmt.Errorf("write at %d: %w", off, err)
		}
		off += k
	}
	return nil
}

// checkPattern reads size bytes of stream seed from c, in reads of random
// sizes, and compares each byte.
func checkPattern(c net.Conn, seed, size int, r *rand.Rand) error {
	buf := make([]byte, 16<<10)
	for off := 0; off < size; {
		k, err := c.Read(buf[:min(1+r.IntN(len(buf)), size-off)])
		for i := range k {
			if buf[i] != pattern(seed, off+i) {
				return fmt.Errorf("byte %d is %#x, want %#x", off+i, buf[i], pattern(seed, off+i))
			}
		}
		off += k
		if err != nil {
			return fmt.Errorf("read at %d of %d: %w", off, size, err)
		}
	}
	return nil
}

// sendPatternAt writes bytes off to off+n of stream seed to c in one
// Write; checkPatternAt reads them back and compares.
func sendPatternAt(c net.Conn, seed, off, n int) error {
	b := make([]byte, n)
	for i := range b {
		b[i] = pattern(seed, off+i)
	}
	_, err := c.Write(b)
	return err
}

func checkPatternAt(c net.Conn, seed, off, n int) error {
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		return fmt.Errorf("echo of bytes %d to %d: %w", off, off+n, err)
	}
	for i := range b {
		if b[i] != pattern(seed, off+i) {
			return fmt.Errorf("echoed byte %d is %#x, want %#x", off+i, b[i], pattern(seed, off+i))
		}
	}
	return nil
}

// TestDeferredRoundsLoseNothing: several connections of a native Service
// on AF_XDP (the poller asleep in the netpoller, Reads that lead, Writes
// that send inline, the poller deferring the rounds of frames that come
// while one of those holds the engine) at once: two carry a stream each
// way, from two goroutines on each side, in reads and writes of random
// sizes; four carry small messages that the Service echoes (one Read
// leads, the others park) to kernel clients that send the next once the
// echo is back. Every byte arrives, in order, on its connection (a lost
// wake-up would stall one until the deadline).
func TestDeferredRoundsLoseNothing(t *testing.T) {
	const bulk, echo = 2, 4
	size, msgs := 4<<20, 2000
	if testing.Short() || raceEnabled {
		size, msgs = 1<<20, 500
	}
	_, s, srv, cli := leadPair(t, bulk+echo)
	deadline := time.Now().Add(2 * time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, 4*(bulk+echo))
	run := func(what string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				errs <- fmt.Errorf("%s: %w", what, err)
			}
		}()
	}
	for i := range bulk + echo {
		a, k := srv[i], cli[i]
		a.SetDeadline(deadline)
		k.SetDeadline(deadline)
		r := func(j int) *rand.Rand { return rand.New(rand.NewPCG(uint64(i), uint64(j))) }
		if i < bulk {
			run(fmt.Sprintf("conn %d, service → kernel, send", i), func() error { return sendPattern(a, 2*i, size, r(0)) })
			run(fmt.Sprintf("conn %d, service → kernel, receive", i), func() error { return checkPattern(k, 2*i, size, r(1)) })
			run(fmt.Sprintf("conn %d, kernel → service, send", i), func() error { return sendPattern(k, 2*i+1, size, r(2)) })
			run(fmt.Sprintf("conn %d, kernel → service, receive", i), func() error { return checkPattern(a, 2*i+1, size, r(3)) })
			continue
		}
		run(fmt.Sprintf("conn %d, echo", i), func() error {
			_, err := io.Copy(a, a)
			return err
		})
		run(fmt.Sprintf("conn %d, kernel client", i), func() error {
			defer k.Close()
			rr := r(4)
			off := 0
			for range msgs {
				n := 1 + rr.IntN(2000)
				if err := sendPatternAt(k, i, off, n); err != nil {
					return err
				}
				if err := checkPatternAt(k, i, off, n); err != nil {
					return err
				}
				off += n
			}
			return nil
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := s.Stats()
	t.Logf("rounds: poller %d, led %d, deferred %d (frames the poller deferred %d), inline sends %d",
		counter(st, "netconn", "poll_rounds"), s.nat.leadRounds.Load(),
		counter(st, "netconn", "deferred_rounds"), counter(st, "netconn", "poller_defers"),
		counter(st, "netconn", "inline_sends"))
}

// TestDeferredRound: a frame that wakes the poller while a Read or a
// Write holds the engine is left to that holder: the poller goes back to
// sleep (it does not wait to run a round after the holder's), and the
// holder runs the frame's round as it frees the engine. The test holds
// the engine as an inline Write would, lets a kernel client's bytes
// arrive, waits until the poller has deferred, and frees it: the round
// that free runs puts the bytes in the connection's ring.
func TestDeferredRound(t *testing.T) {
	_, s, srv, cli := leadPair(t, 1)
	a, k := srv[0], cli[0]
	n := s.nat
	for i := 0; i < 3; i++ {
		asleep(t, s)
		if !n.own.CompareAndSwap(ownFree, ownWriter) {
			continue // the poller woke meanwhile: try again
		}
		defers, rounds := n.s.n.defers.Load(), n.s.n.deferredRounds.Load()
		msg := fmt.Sprintf("deferred %d", i)
		if _, err := k.Write([]byte(msg)); err != nil {
			n.free(ownWriter)
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, func() bool { return n.s.n.defers.Load() > defers },
			func() string { return "the poller, woken by the frame, did not defer its round" })
		if !n.sleeping.Load() {
			t.Error("the poller did not go back to sleep after it deferred")
		}
		n.free(ownWriter)
		// free ran the round on this goroutine: the bytes are in the
		// ring already, with no reader and no poller round.
		if got := a.nc.rx.len(); got != len(msg) {
			t.Errorf("after the holder freed the engine, %d bytes in the receive ring, want %d", got, len(msg))
		}
		if got := n.s.n.deferredRounds.Load(); got <= rounds {
			t.Errorf("no deferred round ran (%d, %d before)", got, rounds)
		}
		expect(t, readAsync(a, len(msg)), msg)
	}
}
