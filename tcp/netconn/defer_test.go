package netconn

import (
	"bytes"
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

// TestDeferredRound: a frame that wakes the poller while a Read that
// leads (woken by the same frame) or a Write holds the engine is left to
// that goroutine, and the poller goes back to sleep instead of waiting
// to run a round after it: a request/answer
// exchange over one connection, the kernel client's request arriving
// while the Service's Read leads, is byte-exact and, over many
// exchanges, the poller deferred some of its wake-ups so.
func TestDeferredRound(t *testing.T) {
	_, s, srv, cli := leadPair(t, 1)
	a, k := srv[0], cli[0]
	a.SetDeadline(time.Now().Add(2 * time.Minute))
	k.SetDeadline(time.Now().Add(2 * time.Minute))
	go io.Copy(a, a)
	buf := make([]byte, 64)
	for i := 0; i < 20000 && s.n.defers.Load() == 0 || i < 200; i++ {
		msg := []byte(fmt.Sprintf("request %05d", i))
		if _, err := k.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(k, buf[:len(msg)]); err != nil || !bytes.Equal(buf[:len(msg)], msg) {
			t.Fatalf("answer %d: %q, %v", i, buf[:len(msg)], err)
		}
	}
	if s.n.defers.Load() == 0 {
		t.Error("the poller never left a frame's round to the engine's holder")
	}
}
