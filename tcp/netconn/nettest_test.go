package netconn

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/net/nettest"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
)

// makePipe returns nettest's MakePipe over p: c1 is dialled from A, c2
// accepted on B.
func makePipe(t *testing.T, p *pair) nettest.MakePipe {
	ln, err := p.B.Listen(testPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return acceptDialPipe(ln, func(ctx context.Context) (net.Conn, error) {
		return p.A.Dial(ctx, fmt.Sprintf("%s:%d", ipB, testPort))
	})
}

// acceptDialPipe is a nettest.MakePipe whose c1 is dial's end and c2 the
// connection ln accepts for it; each dial has 20 s.
func acceptDialPipe(ln net.Listener, dial func(ctx context.Context) (net.Conn, error)) nettest.MakePipe {
	return func() (c1, c2 net.Conn, stop func(), err error) {
		type res struct {
			c   net.Conn
			err error
		}
		ch := make(chan res, 1)
		go func() {
			c, err := ln.Accept()
			ch <- res{c, err}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		d, err := dial(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		r := <-ch
		if r.err != nil {
			d.Close()
			return nil, nil, nil, r.err
		}
		return d, r.c, func() { d.Close(); r.c.Close() }, nil
	}
}

// TestNetTestConn runs x/net/nettest's conformance test for net.Conn over
// two Services joined in memory, on each engine, for each poller mode.
func TestNetTestConn(t *testing.T) {
	forEngines(t, func(t *testing.T, stk dgramio.TCPStack) {
		for _, mode := range []PollMode{PollAdaptive, PollSleep, PollSpin} {
			t.Run(mode.String(), func(t *testing.T) {
				if mode == PollSpin && testing.Short() {
					t.Skip("two spinning pollers; -short")
				}
				p := newPair(t, memio.Options{}, Options{Poll: mode}, onEngine(stk))
				nettest.TestConn(t, makePipe(t, p))
			})
		}
	})
}
