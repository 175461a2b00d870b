package netconn

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/kindcfg"
	"github.com/dgramio/dgramio/internal/tcp"
	"github.com/dgramio/dgramio/stack/native"
)

// A Service over several queues (Config.Queues > 1, kind tcp-xdp, the
// native engine) runs one engine and one poller per interface queue, over
// one XDP program and an AF_XDP socket per queue (tcp.OpenXDPQueues, as
// dgramio.NewGroup's tcp-xdp). Every engine holds Config.LocalIP and they
// share the ARP replies they learn. A Listener listens on every queue and
// its Accept returns the connections of all of them; a dial picks the
// queues in turn and dials from a source port whose answers the device
// puts on that queue (RSS; on veth, where the queue is the sender's CPU,
// every port of the queue's share: see dgramio's Group doc). A connection
// lives on its queue's engine and poller from its first segment to its
// last.

// startNativeQueues opens cfg.Queues queues of kind tcp-xdp (cfg prepared,
// opts checked) and starts a native engine and poller on each.
func startNativeQueues(cfg dgramio.Config, opts Options) (*Service, error) {
	tune, err := nativeTuning(cfg)
	if err != nil {
		return nil, err
	}
	g, err := tcp.OpenXDPQueuesDual(cfg, opts.LocalIP6)
	if err != nil {
		return nil, err
	}
	s := newNativeService(cfg, opts, tune, nil, "", g.Close, 0)
	s.group = g
	fail := func(err error) (*Service, error) {
		var errs []error
		for _, n := range s.nats {
			errs = append(errs, n.shutdown())
		}
		errs = append(errs, g.Close())
		return nil, errors.Join(append([]error{err}, errs...)...)
	}
	arp := new(native.ARPShare)
	for q := 0; q < cfg.Queues; q++ {
		qc := kindcfg.ForQueue(cfg, q)
		fio, to, err := g.Open(q)
		if err != nil {
			return fail(err)
		}
		release := to.Close
		if release == nil {
			release = fio.Close
		}
		e, err := newEngine(qc, tune, opts, fio, arp)
		if err != nil {
			return fail(errors.Join(err, release()))
		}
		if err := s.startQueue(q, qc.CPUs, e, fio, release, to.SourcePorts); err != nil {
			return fail(errors.Join(err, release()))
		}
		if q == 0 {
			s.fio = fio
			s.mode = to.Mode
		}
	}
	s.mode = fmt.Sprintf("native over %d queues: %s", cfg.Queues, g.Mode())
	return s, nil
}

// nativeShutdown stops every queue (each lingers at most Options.Linger,
// all at once) and then releases the Service's own (queue 0's FrameIO, or
// the group's program).
func (s *Service) nativeShutdown() error {
	errs := make([]error, len(s.nats))
	var wg sync.WaitGroup
	for i, n := range s.nats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.shutdown()
		}()
	}
	wg.Wait()
	s.stop.Store(true)
	return errors.Join(append(errs, s.release())...)
}

// nativeCounters adds up the queues' engine counters.
func (s *Service) nativeCounters(dst []dgramio.Counter) []dgramio.Counter {
	if len(s.nats) == 1 {
		return s.nat.appendCounters(dst)
	}
	qs := make([]dgramio.Stats, len(s.nats))
	for i, n := range s.nats {
		qs[i].Layers = n.appendCounters(nil)
	}
	return append(dst, dgramio.SumStats(qs).Layers...)
}

// fioStats is the FrameIO's Stats, added up over the queues (with the
// group's program counters).
func (s *Service) fioStats() frameio.Stats {
	if len(s.nats) <= 1 {
		return s.fio.Stats()
	}
	var out frameio.Stats
	qs := make([]dgramio.Stats, len(s.nats))
	for i, n := range s.nats {
		fs := n.fio.Stats()
		if i == 0 {
			out.Mode = fs.Mode
		}
		out.RxFrames += fs.RxFrames
		out.TxFrames += fs.TxFrames
		out.RxBytes += fs.RxBytes
		out.TxBytes += fs.TxBytes
		out.TxRingFull += fs.TxRingFull
		out.TxDropped += fs.TxDropped
		out.RxDropped += fs.RxDropped
		out.Syscalls += fs.Syscalls
		qs[i].Layers = fs.Layers
	}
	out.Layers = s.group.AppendCounters(dgramio.SumStats(qs).Layers)
	return out
}

// dialQueue is the queue the next dial runs on, in turn.
func (s *Service) dialQueue() *nativeSvc {
	if len(s.nats) == 1 {
		return s.nat
	}
	return s.nats[int(s.nextQ.Add(1)-1)%len(s.nats)]
}

// dialFrom opens an engine connection to peer on n (the poller's), from a
// port of n.srcPorts when it has them.
func (n *nativeSvc) dialFrom(peer netip.AddrPort) (*native.Conn, error) {
	if n.srcPorts == nil {
		return n.e.Dial(peer, 0)
	}
	ports := n.srcPorts(peer)
	for _, p := range ports {
		ec, err := n.e.Dial(peer, p)
		if !errors.Is(err, native.ErrPortInUse) {
			return ec, err
		}
	}
	return nil, native.ErrPortInUse
}
