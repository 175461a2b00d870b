package udp

import (
	"context"
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/sock"
	"github.com/dgramio/dgramio/internal/sock/socktest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
)

// TestReplySockets: a udp server's connected reply sockets over the veth
// pair, in both families (socktest.ReplySockets: a hot peer gets one and
// is served through it, with no loss at the switch; idle ones close;
// more peers than sockets are all answered; -1 turns them off). Linux
// behaviour relied on: a UDP socket connected to the sender scores above
// an unconnected one bound to the same address and port, even in one
// SO_REUSEPORT group (udp4_lib_lookup2, udp6_lib_lookup2).
func TestReplySockets(t *testing.T) { socktest.ForFamilies(t, testReplySockets) }

func testReplySockets(t *testing.T, fam socktest.Family) {
	p := hosttest.New(t, testhost.Options{IPv6: fam.V6})
	a, b := fam.Pick(p.A.Addr, p.A.Addr6), fam.Pick(p.B.Addr, p.B.Addr6)
	serve := func(t *testing.T, cfg dgramio.Config) (live, stop func() dgramio.Stats) {
		var srv dgramio.Backend
		if err := p.B.Do(func() (err error) { srv, err = New(cfg); return err }); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- socktest.Echo(ctx, srv) }()
		var st dgramio.Stats
		stopped := false
		stop = func() dgramio.Stats {
			if !stopped {
				stopped = true
				cancel()
				if err := <-done; err != nil {
					t.Errorf("echo server: %v", err)
				}
				if err := srv.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
				st = srv.Stats()
			}
			return st
		}
		t.Cleanup(func() { stop() })
		return srv.Stats, stop
	}
	dial := func(cfg dgramio.Config) (dgramio.Backend, error) {
		var c dgramio.Backend
		err := p.A.Do(func() (err error) { c, err = New(cfg); return err })
		return c, err
	}
	socktest.ReplySockets(t, b, a, 5310, "udp", &sock.ReplyIdle, serve, dial, p.A.Do)
}
