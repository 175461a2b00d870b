package tcp

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/dgramio/dgramio"
)

// An IPv6 client of several queues runs on the native engine (its queues
// share neighbour advertisements, and their source ports follow the IPv6
// RSS hash) and is refused on netstack, whose queues share ARP only; a
// server of several queues, or one queue, runs on either.
func TestCheckGroup6(t *testing.T) {
	v6 := netip.MustParseAddr("2001:2::4")
	for _, c := range []struct {
		role    dgramio.Role
		stk     dgramio.TCPStack
		queues  int
		refused bool
	}{
		{dgramio.RoleClient, dgramio.TCPStackNative, 2, false},
		{dgramio.RoleClient, dgramio.TCPStackNetstack, 2, true},
		{dgramio.RoleClient, dgramio.TCPStackNetstack, 1, false},
		{dgramio.RoleServer, dgramio.TCPStackNetstack, 2, false},
	} {
		cfg := dgramio.Config{Kind: dgramio.KindTCPXDP, Role: c.role, LocalIP: v6, Queues: c.queues, TCP: dgramio.TCPTuning{Stack: c.stk}}
		err := checkGroup6(cfg)
		var ce *dgramio.ConfigError
		if (err != nil) != c.refused || err != nil && (!errors.As(err, &ce) || ce.Field != "Queues") {
			t.Errorf("%v %s, %d queues: %v", c.role, c.stk, c.queues, err)
		}
		cfg.LocalIP = netip.MustParseAddr("198.18.0.4")
		if err := checkGroup6(cfg); err != nil {
			t.Errorf("IPv4 %v %s: %v", c.role, c.stk, err)
		}
	}
}
