package native

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// Engine.Wait that returns because of its context returns an error
// matching ctx.Err(), and ctx.Err() is set then: on an idle engine and
// with a retransmission timer armed a little after the deadline (Wait
// sleeps on a context of its own for the timer).
func TestWaitReturnsCtxErr(t *testing.T) {
	pa, pb := memio.NewPair(memio.Options{})
	defer pa.Close()
	defer pb.Close()
	e, err := New(pa, Options{Addr: addrA, InitialRTO: time.Second,
		Neighbors: map[netip.Addr]net.HardwareAddr{addrB: pb.MAC()}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	check := func(what string) {
		for i := range 30 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
			err := e.Wait(ctx)
			for err == nil && ctx.Err() == nil { // a wake-up; sleep again
				err = e.Wait(ctx)
			}
			cerr := ctx.Err()
			cancel()
			if cerr == nil || !errors.Is(err, cerr) {
				t.Fatalf("%s, call %d: Wait returned %v while ctx.Err() was %v", what, i, err, cerr)
			}
		}
	}
	check("idle")
	if _, err := e.Dial(netip.AddrPortFrom(addrB, 7000), 0); err != nil {
		t.Fatal(err)
	}
	e.Flush() // the SYN leaves; its RTO (1 s) is armed
	if _, ok := e.NextTimer(); !ok {
		t.Fatal("no timer armed after a SYN")
	}
	check("timer armed")
}
