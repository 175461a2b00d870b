package udp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/arp"
	"github.com/dgramio/dgramio/internal/ndp"
)

// gatewayNextHop is the RawOptions.NextHop of cfg.DPDK.PrefixLen and
// cfg.DPDK.Gateway (validated by dgramio.Config): an address on LocalIP's
// link is its own next hop, any other goes to the gateway (or to itself
// without one, which Validate allows only when no Dest is off the link).
// nil when PrefixLen is 0: every address is on the link. It needs no
// lock and never waits.
func gatewayNextHop(cfg dgramio.Config) func(netip.Addr) netip.Addr {
	if cfg.DPDK.PrefixLen == 0 {
		return nil
	}
	link := netip.PrefixFrom(cfg.LocalIP, cfg.DPDK.PrefixLen).Masked()
	gw := cfg.DPDK.Gateway
	return func(addr netip.Addr) netip.Addr {
		if link.Contains(addr) || !gw.IsValid() {
			return addr
		}
		return gw
	}
}

// noRouteHint adds to a Dest that ARP found no one for, on a port with no
// next hop to ask (a PCI device without DPDK.PrefixLen), what to set if
// the peer is behind a router: there Validate cannot tell an off-link Dest.
func noRouteHint(err error, hop func(netip.Addr) netip.Addr) error {
	if hop != nil || !errors.Is(err, arp.ErrNoReply) && !errors.Is(err, ndp.ErrNoReply) {
		return err
	}
	return fmt.Errorf("%w (no routes to ask on this port: for a peer behind a router set DPDK.PrefixLen and DPDK.Gateway)", err)
}

// resolver finds peers' MACs for Raw without blocking the poll loop.
// start and poll are called by the poll loop only; close after it left.
type resolver interface {
	// start begins resolving addr (towards its next hop). It returns
	// false when it can take no more now.
	start(addr netip.Addr) bool
	// poll calls done for each resolution that ended since the last poll.
	poll(done func(addr netip.Addr, mac [6]byte, err error))
	// tick is how often poll must run while resolutions are in progress
	// (0: poll needs no clock; results wake Wait themselves).
	tick() time.Duration
	close()
}

// arpResolver resolves with an arp.Handler's Query and Poll: requests
// leave with the poll loop's next Kick, replies come in through Rx. It
// asks for the next hop (RawOptions.NextHop) of an address behind a router.
type arpResolver struct {
	h    neighbours                  // an arp.Handler or ndp.Handler
	hop  func(netip.Addr) netip.Addr // nil: every address is on the link
	via  map[netip.Addr][]netip.Addr // next hop → the addresses behind it asked for
	hits []arpHit                    // answered from the cache at start
}

type arpHit struct {
	addr netip.Addr
	mac  [6]byte
}

// arpTick is how often Wait wakes to retransmit ARP requests while some
// are outstanding (arp.Config.Interval is 1 s by default).
const arpTick = 10 * time.Millisecond

func (a *arpResolver) start(addr netip.Addr) bool {
	hop := addr
	if a.hop != nil {
		hop = a.hop(addr)
	}
	if mac, ok := a.h.Query(hop, time.Now()); ok {
		a.hits = append(a.hits, arpHit{addr, mac})
		return true
	}
	if hop != addr {
		if a.via == nil {
			a.via = make(map[netip.Addr][]netip.Addr)
		}
		a.via[hop] = append(a.via[hop], addr)
	}
	return true
}

func (a *arpResolver) poll(done func(netip.Addr, [6]byte, error)) {
	for _, h := range a.hits {
		done(h.addr, h.mac, nil)
	}
	a.hits = a.hits[:0]
	if a.h.Pending() > 0 {
		a.h.Poll(time.Now(), func(hop netip.Addr, mac [6]byte, err error) {
			done(hop, mac, err) // asked for itself, or harmless
			for _, addr := range a.via[hop] {
				done(addr, mac, err)
			}
			delete(a.via, hop)
		})
	}
}

func (a *arpResolver) tick() time.Duration { return arpTick }
func (a *arpResolver) close()              {}

// resolveWorkers is how many blocking resolutions run at once; resolveQueue
// how many more wait for a worker.
const (
	resolveWorkers = 4
	resolveQueue   = 256
)

// goResolver runs a blocking Resolver on worker goroutines (started at the
// first start), each resolution bounded by timeout; results are taken by
// poll, and wake (when set) ends the poll loop's Wait so that it sees them.
type goResolver struct {
	fn      Resolver
	timeout time.Duration
	wake    func()

	reqs    chan netip.Addr
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	results []goResult
	spare   []goResult
}

type goResult struct {
	addr netip.Addr
	mac  [6]byte
	err  error
}

func newGoResolver(fn Resolver, timeout time.Duration, wake func()) *goResolver {
	return &goResolver{fn: fn, timeout: timeout, wake: wake}
}

func (g *goResolver) start(addr netip.Addr) bool {
	if g.reqs == nil {
		g.reqs = make(chan netip.Addr, resolveQueue)
		g.ctx, g.cancel = context.WithCancel(context.Background())
		for i := 0; i < resolveWorkers; i++ {
			g.wg.Add(1)
			go g.work()
		}
	}
	select {
	case g.reqs <- addr:
		return true
	default:
		return false
	}
}

func (g *goResolver) work() {
	defer g.wg.Done()
	for addr := range g.reqs {
		ctx, cancel := context.WithTimeout(g.ctx, g.timeout)
		mac, err := g.fn(ctx, addr)
		cancel()
		g.mu.Lock()
		g.results = append(g.results, goResult{addr, mac, err})
		g.mu.Unlock()
		if g.wake != nil {
			g.wake()
		}
	}
}

func (g *goResolver) poll(done func(netip.Addr, [6]byte, error)) {
	g.mu.Lock()
	r := g.results
	g.results, g.spare = g.spare[:0], r
	g.mu.Unlock()
	for _, x := range r {
		done(x.addr, x.mac, x.err)
	}
}

func (g *goResolver) tick() time.Duration { return 0 }

func (g *goResolver) close() {
	if g.reqs == nil {
		return
	}
	g.cancel()
	close(g.reqs)
	g.wg.Wait()
}
