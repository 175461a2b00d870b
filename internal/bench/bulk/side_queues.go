package bulk

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/tcp"
	"github.com/dgramio/dgramio/stack/native"
)

// queueSide is one queue of a native side over several queues: its
// engine, its FrameIO and the connections whose segments arrive on it.
type queueSide struct {
	q     int
	e     *native.Engine
	fio   frameio.FrameIO
	ports func(netip.AddrPort) []uint16
	conns []*native.Conn
	fl    []*flow
	// c0, c1 are the queue's counters when the transfer starts and ends
	// (taken on its own goroutine), rt0, rt1 its retransmissions.
	c0, c1   map[string]uint64
	rt0, rt1 uint64
}

// runNativeQueues is runNative over spec.Queues interface queues: one
// XDP program, an AF_XDP socket, a native engine and a poll loop per
// queue (tcp.OpenXDPQueues, as a netconn Service of several queues runs
// them), each loop on a goroutine pinned to spec.CPUs[q]. The client
// dials connection i on queue i mod Queues, from a source port of that
// queue's share; on veth a frame arrives on the queue it was sent from,
// so each connection stays on one queue at both ends. The server accepts
// on every queue. The side's result adds the queues up.
func (s *side) runNativeQueues(ctx context.Context) error {
	sp := s.spec
	n := sp.Queues
	if len(sp.CPUs) != n {
		return fmt.Errorf("%d queues need %d CPUs, given %v", n, n, sp.CPUs)
	}
	cfg := s.nativeConfig()
	cfg.Queues = n // the loops pin themselves (the group's CPUs stay unset)
	g, err := tcp.OpenXDPQueues(cfg)
	if err != nil {
		return err
	}
	defer g.Close()
	arp := new(native.ARPShare)
	var cc native.Congestion
	qs := make([]*queueSide, n)
	for q := range n {
		fio, to, err := g.Open(q)
		if err != nil {
			return err
		}
		release := to.Close
		if release == nil {
			release = fio.Close
		}
		defer release()
		// Each engine's table holds the connections of its queue; the
		// server's queue is the one the client sent them on, so give each
		// room for them all.
		o := cellOptions(cfg.WithDefaults(), to, sp.Conns)
		o.ARPShare = arp
		cc = o.Congestion
		e, err := native.New(fio, o)
		if err != nil {
			return fmt.Errorf("native engine of queue %d: %w", q, err)
		}
		defer e.Close()
		qs[q] = &queueSide{q: q, e: e, fio: fio, ports: to.SourcePorts}
	}

	// The loops run on their goroutines from the connections' set-up to
	// the parent's end of the cell. This goroutine waits for every
	// connection to be up, starts the transfer (the flows, the start
	// time) and waits for every queue to be done.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	setup, begin := context.WithCancel(ctx)
	defer begin()
	var (
		up      atomic.Int64
		allUp   = make(chan struct{})
		doneQ   = make(chan struct{}, n)
		errOnce sync.Once
		runErr  error
		wg      sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { runErr = err })
		cancel()
	}
	var ln []*native.Listener
	if sp.Server {
		for _, qs := range qs {
			l, err := qs.e.Listen(sp.Port, MaxConns)
			if err != nil {
				return fmt.Errorf("listen on queue %d: %w", qs.q, err)
			}
			ln = append(ln, l)
		}
	} else {
		peer := netip.AddrPortFrom(sp.Peer, sp.Port)
		for i := range sp.Conns {
			qs := qs[i%n]
			var port uint16
			if qs.ports != nil {
				ports := qs.ports(peer)
				k := len(qs.conns)
				if k >= len(ports) {
					return fmt.Errorf("queue %d: %d source ports for %d connections", qs.q, len(ports), k+1)
				}
				port = ports[k]
			}
			c, err := qs.e.Dial(peer, port)
			if err != nil {
				return fmt.Errorf("dial on queue %d: %w", qs.q, err)
			}
			qs.conns = append(qs.conns, c)
		}
	}
	for _, q := range qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cpu.Pin(sp.CPUs[q.q]); err != nil {
				fail(fmt.Errorf("queue %d: %w", q.q, err))
				return
			}
			defer cpu.Unpin()
			var l *native.Listener
			if ln != nil {
				l = ln[q.q]
			}
			if err := s.queueLoop(ctx, setup, q, l, &up, allUp, doneQ); err != nil {
				fail(fmt.Errorf("queue %d: %w", q.q, err))
			}
		}()
	}
	if sp.Server {
		s.ready()
	}
	var ru0 syscall.Rusage
	var start time.Time
	var fl []*flow
	timeout := time.NewTimer(connectTimeout)
	defer timeout.Stop()
	select {
	case <-allUp:
	case <-timeout.C:
		fail(fmt.Errorf("%d of %d connections established in %v", up.Load(), sp.Conns, connectTimeout))
	case <-ctx.Done():
	}
	if ctx.Err() == nil {
		// Every queue has appended its connections before the count
		// reached Conns (atomic.Int64 orders them before allUp).
		ru0 = rusage()
		start = time.Now()
		fl = s.newFlows(start)
		k := 0
		for _, q := range qs {
			q.fl = fl[k : k+len(q.conns)]
			k += len(q.conns)
		}
		begin() // the loops see the flows after this
		for range n {
			select {
			case <-doneQ:
			case <-ctx.Done():
			}
		}
	}
	end := time.Now()
	if ctx.Err() != nil {
		cancel()
		wg.Wait()
		if runErr != nil {
			return runErr
		}
		return ctx.Err()
	}
	r := SideResult{Counters: map[string]uint64{}}
	for _, q := range qs {
		for k, v := range moved(q.c0, q.c1) {
			r.Counters[k] += v
		}
		r.Retransmits += q.rt1 - q.rt0
	}
	r.Counters = filterLossy(r.Counters)
	mode := fmt.Sprintf("%d queues (%s), a poll loop per queue pinned to CPUs %s", n, g.Mode(), cpu.FormatList(sp.CPUs))
	r.Runs = "the engine of tcp-xdp's Backend, driven directly, one per queue: " + mode + " (" + s.loopWords() + "; reads in place with Peek; congestion control " + string(cc) + ")"
	s.finish(&r, fl, start, ru0, end)
	// Keep the engines running until the parent ends the cell, so that our
	// last segments and FIN are acknowledged and retransmitted if lost.
	wg.Wait()
	return nil
}

// queueLoop drives queue q's engine from set-up to the end of the cell:
// until setup is done it accepts (l not nil) or waits for its dials,
// adding each connection up to up (the one that makes it spec.Conns
// closes allUp); then it moves its flows (q.fl, set before setup ended),
// taking its counters before and after, and says so on doneQ; then it
// keeps the engine running until ctx ends.
func (s *side) queueLoop(ctx, setup context.Context, q *queueSide, l *native.Listener, up *atomic.Int64, allUp chan struct{}, doneQ chan<- struct{}) error {
	e := q.e
	counted := 0
	for setup.Err() == nil {
		e.Poll(256)
		if l != nil {
			for {
				c, ok := l.Accept()
				if !ok {
					break
				}
				q.conns = append(q.conns, c)
			}
		}
		for _, c := range q.conns[counted:] {
			if err := c.Err(); err != nil {
				return fmt.Errorf("connection to %s: %w", c.Peer(), err)
			}
			if c.State() == native.SynSent || c.State() == native.SynReceived {
				break
			}
			counted++
			if up.Add(1) == int64(s.spec.Conns) {
				close(allUp)
			}
		}
		if err := e.Flush(); err != nil {
			return fmt.Errorf("flush: %w", err)
		}
		if err := e.Wait(setup); err != nil && setup.Err() == nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil // the side failed elsewhere, or the parent ended it
	}
	if counted != len(q.conns) {
		return errors.New("connections accepted after the transfer began")
	}
	q.c0, q.rt0 = engineCounters(e, q.fio)
	if err := s.moveLoop(ctx, e, q.conns, q.fl); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	q.c1, q.rt1 = engineCounters(e, q.fio)
	doneQ <- struct{}{}
	linger(ctx, e, q.conns)
	return nil
}
