package netconn

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/testutil"
)

var (
	ipA = netip.MustParseAddr("198.18.0.1")
	ipB = netip.MustParseAddr("198.18.0.2")
)

const testPort = 5000

// pair is two Services over a memio pair: A (198.18.0.1) and B
// (198.18.0.2), both closed at cleanup.
type pair struct {
	A, B   *Service
	pa, pb *memio.Port
}

// newPair starts two Services over a memio pair with options o (and mo
// for the wire); cfg, if given, is applied to both (LocalIP set here).
func newPair(t testing.TB, mo memio.Options, o Options, cfgs ...dgramio.Config) *pair {
	t.Helper()
	var cfg dgramio.Config
	if len(cfgs) > 0 {
		cfg = cfgs[0]
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 20 * time.Second
	}
	pa, pb := memio.NewPair(mo)
	ca, cb := cfg, cfg
	ca.LocalIP, cb.LocalIP = ipA, ipB
	a, err := NewOverFrameIO(ca, pa, o)
	if err != nil {
		t.Fatalf("service A: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := NewOverFrameIO(cb, pb, o)
	if err != nil {
		t.Fatalf("service B: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return &pair{A: a, B: b, pa: pa, pb: pb}
}

// waitFor waits until cond holds (testutil.Eventually); it fails the
// test with what() when d passes first.
func waitFor(t testing.TB, d time.Duration, cond func() bool, what func() string) {
	t.Helper()
	if !testutil.Eventually(d, cond) {
		t.Fatalf("after %v: %s", d, what())
	}
}

// dialB dials B's testPort from s within 20 s, failing the test
// otherwise; the connection is closed at cleanup.
func dialB(t testing.TB, s *Service) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := s.DialAddr(ctx, netip.AddrPortFrom(ipB, testPort))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// engines are the two engines a Service runs on; tests of the contract
// run on each (forEngines).
var engines = []dgramio.TCPStack{dgramio.TCPStackNative, dgramio.TCPStackNetstack}

// forEngines runs test as a subtest per engine.
func forEngines(t *testing.T, test func(t *testing.T, stk dgramio.TCPStack)) {
	for _, stk := range engines {
		t.Run(string(stk), func(t *testing.T) { test(t, stk) })
	}
}

// onEngine returns cfg (or the zero Config) on engine stk.
func onEngine(stk dgramio.TCPStack, cfg ...dgramio.Config) dgramio.Config {
	var c dgramio.Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	c.TCP.Stack = stk
	return c
}

// unread reports whether c has received bytes it has not read.
func unread(c *Conn) bool {
	if c.nc != nil {
		return c.nc.rx.len() > 0
	}
	return c.ep.Readiness(readMask) != 0
}
