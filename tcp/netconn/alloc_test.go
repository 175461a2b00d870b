package netconn

import (
	"io"
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/stack"
)

// The test's premise: memio's sleep can be ended without slicing it into
// contexts (stack.Endpoint.Sleep allocates one per slice otherwise).
var _ stack.Interrupter = (*memio.Port)(nil)

// TestNoAllocPerMessage: once warm, a 100-byte Write and the ReadFull of
// its echo allocate nothing on average, through both Services, netstack
// and their pollers, which sleep between messages on memio, a FrameIO
// with Interrupt (stack.Interrupter).
func TestNoAllocPerMessage(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under -race")
	}
	pa, pb := memio.NewPair(memio.Options{})
	a, err := NewOverFrameIO(dgramio.Config{LocalIP: ipA}, pa, Options{Poll: PollSleep})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewOverFrameIO(dgramio.Config{LocalIP: ipB}, pb, Options{Poll: PollSleep})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ln, err := b.Listen(testPort)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.AcceptConn()
		if err != nil {
			return
		}
		buf := make([]byte, 100)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				c.Close()
				return
			}
			if _, err := c.Write(buf); err != nil {
				c.Close()
				return
			}
		}
	}()
	c := dialB(t, a)
	msg, back := make([]byte, 100), make([]byte, 100)
	rt := func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, back); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 200; i++ {
		rt()
	}
	n := testing.AllocsPerRun(500, rt)
	st := a.Stats()
	t.Logf("%.2f allocations per round trip; A's poller slept %d times", n, counter(st, "netconn", "sleeps"))
	if n > 0.5 {
		t.Errorf("%.2f allocations per round trip, want none", n)
	}
}
