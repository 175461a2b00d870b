//go:build linux

package uring

import (
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/sock"
	"github.com/dgramio/dgramio/internal/sock/socktest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
)

// TestReplySockets: a uring server's connected reply sockets over the
// veth pair, in both families (socktest.ReplySockets: a hot peer gets
// one, whose multishot receive shares the buffer ring, and is served
// through it with no loss at the switch; idle ones are cancelled and
// closed; more peers than sockets are all answered; -1 turns them off).
// Linux behaviour relied on: a UDP socket connected to the sender scores
// above an unconnected one bound to the same address and port, even in
// one SO_REUSEPORT group (udp4_lib_lookup2, udp6_lib_lookup2).
func TestReplySockets(t *testing.T) { socktest.ForFamilies(t, testReplySockets) }

func testReplySockets(t *testing.T, fam socktest.Family) {
	p := hosttest.New(t, testhost.Options{IPv6: fam.V6})
	a, b := fam.Pick(p.A.Addr, p.A.Addr6), fam.Pick(p.B.Addr, p.B.Addr6)
	serve := func(t *testing.T, cfg dgramio.Config) (live, stop func() dgramio.Stats) {
		srv, stop := vethEchoServer(t, p, cfg)
		return srv.Stats, stop
	}
	dial := func(cfg dgramio.Config) (dgramio.Backend, error) { return openIn(p.A, cfg) }
	socktest.ReplySockets(t, b, a, 5410, "uring", &sock.ReplyIdle, serve, dial, p.A.Do)
}
