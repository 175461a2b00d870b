// Package benchtest is an in-memory pair of dgramio.Backend for testing the
// measuring tools without a network: a client and a server joined by two
// wires, with a one-way delay, a slow server, a bounded wire, and drops that
// are injected on purpose, counted or not.
//
// It is a test double: it allocates per message and polls with short
// sleeps in Wait.
package benchtest

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/dgramio/dgramio"
)

// Options shape the pair's behaviour. The zero value is a lossless pair
// with no delay.
type Options struct {
	// Delay is the one-way latency of each wire: a message flushed at t is
	// visible to Rx at t+Delay.
	Delay time.Duration
	// ServerSpacing makes the server slow: its Rx delivers a message no
	// sooner than ServerSpacing after the previous one, so it handles at
	// most 1/ServerSpacing messages a second and a faster sender builds a
	// queue.
	ServerSpacing time.Duration
	// ClientFlushDelay makes the client's Flush sleep this long: a sender
	// that falls behind its schedule.
	ClientFlushDelay time.Duration
	// DropEvery, with DropMax, makes the server's Rx drop every DropEvery-th
	// message it takes from the wire, up to DropMax of them, counted in its
	// Stats as layer "fake" counter "injected_drops" (Loss).
	DropEvery, DropMax uint64
	// SilentEvery, with SilentMax, drops like DropEvery but counts nothing:
	// a loss no layer accounts for.
	SilentEvery, SilentMax uint64
	// SilentAtClose makes the silent drops appear in the server's Stats
	// after Close, as layer "fake" counter "silent_at_close" (Loss): a
	// loss that only Close can count, as AF_XDP's frames left unread in
	// the RX ring (rx_unread_at_close).
	SilentAtClose bool
	// MaxDatagram, when not 0, makes Queue and QueueTo refuse a longer
	// payload with dgramio.ErrTooLarge (TxOversize).
	MaxDatagram int
	// WireLimit bounds each wire to this many messages in flight; more are
	// dropped at Flush and counted as layer "fake" counter "wire_full"
	// (Loss) of the sender. 0: unbounded.
	WireLimit int
	// TxQueue is how many messages Queue holds before Flush. Default 256.
	TxQueue int
	// NoWait makes Wait return an error matching dgramio.ErrNotSupported.
	NoWait bool
}

// Addresses of the pair.
var (
	ClientAddr = netip.MustParseAddrPort("198.18.0.1:40000")
	ServerAddr = netip.MustParseAddrPort("198.18.0.2:5000")
)

type msg struct {
	data    []byte
	from    netip.AddrPort
	visible time.Time
}

type wire struct {
	mu sync.Mutex
	q  []msg
}

func (w *wire) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.q)
}

// Backend is one end of the pair.
type Backend struct {
	o      Options
	server bool
	local  netip.AddrPort
	peer   netip.AddrPort
	in     *wire
	out    *wire

	mu        sync.Mutex // guards everything below
	txq       []msg
	closed    bool
	stats     dgramio.Stats
	injected  uint64
	wireFull  uint64
	taken     uint64 // messages taken from the wire by Rx (server drop rule)
	silent    uint64
	lastServe time.Time
}

var _ dgramio.Backend = (*Backend)(nil)

// NewPair returns a client (which Queue sends to the server) and a server
// (which answers with QueueTo).
func NewPair(o Options) (client, server *Backend) {
	if o.TxQueue == 0 {
		o.TxQueue = dgramio.DefaultTxQueue
	}
	c2s, s2c := &wire{}, &wire{}
	client = &Backend{o: o, local: ClientAddr, peer: ServerAddr, in: s2c, out: c2s}
	server = &Backend{o: o, server: true, local: ServerAddr, peer: ClientAddr, in: c2s, out: s2c}
	client.stats = dgramio.Stats{Kind: "fake", Mode: "memory client"}
	server.stats = dgramio.Stats{Kind: "fake", Mode: "memory server"}
	return client, server
}

// Queue implements dgramio.Backend: the client sends to the server; the
// server has no default destination and refuses (dgramio.ErrNoRoute).
func (b *Backend) Queue(payload []byte) error {
	if b.server {
		return dgramio.ErrNoRoute
	}
	return b.QueueTo(payload, b.peer)
}

// QueueTo implements dgramio.Backend. It copies payload. The one address it
// sends to is the other end's; any other is dgramio.ErrNoRoute.
func (b *Backend) QueueTo(payload []byte, to netip.AddrPort) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return dgramio.ErrClosed
	case to != b.peer:
		return dgramio.ErrNoRoute
	case b.o.MaxDatagram > 0 && len(payload) > b.o.MaxDatagram:
		b.stats.TxOversize++
		return dgramio.ErrTooLarge
	}
	if len(b.txq) >= b.o.TxQueue {
		b.stats.TxBackpressure++
		return dgramio.ErrBackPressure
	}
	b.txq = append(b.txq, msg{data: append([]byte(nil), payload...), from: b.local})
	b.stats.TxQueued++
	return nil
}

// Flush implements dgramio.Backend: the queued messages enter the wire.
func (b *Backend) Flush() error {
	if !b.server && b.o.ClientFlushDelay > 0 {
		time.Sleep(b.o.ClientFlushDelay)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return net.ErrClosed
	}
	b.stats.Syscalls++
	now := time.Now()
	b.out.mu.Lock()
	for _, m := range b.txq {
		if b.o.WireLimit > 0 && len(b.out.q) >= b.o.WireLimit {
			b.wireFull++
			continue
		}
		m.visible = now.Add(b.o.Delay)
		b.out.q = append(b.out.q, m)
		b.stats.TxSent++
		b.stats.TxBytes += uint64(len(m.data))
	}
	b.out.mu.Unlock()
	b.txq = b.txq[:0]
	return nil
}

// Rx implements dgramio.Backend. pkts[i].Data is valid until the next Rx.
func (b *Backend) Rx(pkts []dgramio.Packet) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, net.ErrClosed
	}
	b.stats.Syscalls++
	now := time.Now()
	n := 0
	b.in.mu.Lock()
	defer b.in.mu.Unlock()
	for n < len(pkts) && len(b.in.q) > 0 {
		m := b.in.q[0]
		if m.visible.After(now) {
			break
		}
		if b.server && b.o.ServerSpacing > 0 {
			if !b.lastServe.IsZero() && now.Sub(b.lastServe) < b.o.ServerSpacing {
				break
			}
			b.lastServe = now
		}
		b.in.q = b.in.q[1:]
		if b.server {
			b.taken++
			if b.o.DropEvery > 0 && b.injected < b.o.DropMax && b.taken%b.o.DropEvery == 0 {
				b.injected++
				continue
			}
			if b.o.SilentEvery > 0 && b.silent < b.o.SilentMax && b.taken%b.o.SilentEvery == 0 {
				b.silent++
				continue
			}
		}
		pkts[n] = dgramio.Packet{Data: m.data, From: m.from}
		b.stats.RxDelivered++
		b.stats.RxBytes += uint64(len(m.data))
		n++
		if b.server && b.o.ServerSpacing > 0 {
			break // one per spacing
		}
	}
	return n, nil
}

// Wait implements dgramio.Backend by polling every 50 µs.
func (b *Backend) Wait(ctx context.Context) error {
	if b.o.NoWait {
		return dgramio.NotSupported("Wait on the fake", "", "configured with NoWait", nil)
	}
	for {
		b.mu.Lock()
		closed := b.closed
		b.mu.Unlock()
		if closed {
			return net.ErrClosed
		}
		now := time.Now()
		b.mu.Lock()
		ready := !b.server || b.o.ServerSpacing == 0 || b.lastServe.IsZero() || now.Sub(b.lastServe) >= b.o.ServerSpacing
		b.mu.Unlock()
		b.in.mu.Lock()
		ready = ready && len(b.in.q) > 0 && !b.in.q[0].visible.After(now)
		b.in.mu.Unlock()
		if ready {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// Stats implements dgramio.Backend.
func (b *Backend) Stats() dgramio.Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.stats
	s.Layers = []dgramio.Counter{
		{Layer: "fake", Name: "injected_drops", Value: b.injected, Loss: true},
		{Layer: "fake", Name: "wire_full", Value: b.wireFull, Loss: true},
		{Layer: "fake", Name: "wire_backlog", Value: uint64(b.in.len())},
	}
	if b.o.SilentAtClose && b.server {
		var v uint64
		if b.closed {
			v = b.silent
		}
		s.Layers = append(s.Layers, dgramio.Counter{Layer: "fake", Name: "silent_at_close", Value: v, Loss: true})
	}
	return s
}

// Silent returns how many messages were dropped without a counter.
func (b *Backend) Silent() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.silent
}

// Close implements dgramio.Backend.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return nil
}
