package tcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	nstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	ntcp "gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/stack"
)

// Options are what NewOverFrameIO needs beyond core.Config: what the
// backend's kind-specific constructor (NewXDP, the DPDK one) knows.
type Options struct {
	// Mode is Stats.Mode, e.g. "netstack over xdp driver copy".
	Mode string
	// Close releases the FrameIO and whatever came with it (an XDP
	// program); Backend.Close calls it once netstack is down. nil: the
	// FrameIO's own Close.
	Close func() error
	// PrefixLen is LocalIP's subnet length for netstack (0: 32; every peer
	// is on the link either way).
	PrefixLen int
	// Clock is netstack's clock; nil is the system clock. For tests.
	Clock tcpip.Clock
	// Linger bounds how long Close drives the stack so that FINs and their
	// ACKs get through before what is left is reset. Default 200 ms.
	Linger time.Duration
	// SourcePorts, when set and Config.LocalPort is 0, gives the local
	// ports a client may connect to peer from, in the order to try them
	// (one in use is skipped): a group's queue passes the ports whose
	// answers come back on its own queue (stack.SourcePorts). nil: an
	// ephemeral port of netstack's choice.
	SourcePorts func(peer netip.AddrPort) []uint16
	// OwnerKicks makes the poll loop the only goroutine that kicks the
	// FrameIO (stack.Endpoint.SetOwnerKicks): a group's queue sets it, so
	// that every frame leaves from the queue's pinned CPU.
	OwnerKicks bool
	// ARPShare, when set, is the group whose netstacks pass each other
	// the ARP replies they receive (see ARPShare).
	ARPShare *ARPShare
}

// ARPShare passes the ARP replies that one queue's netstack receives to
// the netstacks of the other queues of a group, which hold the same
// address and MAC (stack.Endpoint.SetARPTap, InjectFrame): a NIC hashes
// ARP, which has no ports, to one queue, so a stack whose own request is
// answered on another queue would never learn the answer. It is control
// traffic, rare: the lock it takes is not on the data path. The zero value
// is ready for use; a group passes one in every queue's Options.
type ARPShare struct {
	mu  sync.RWMutex
	eps []*stack.Endpoint
}

// join adds ep and makes it pass its ARP replies to the others.
func (a *ARPShare) join(ep *stack.Endpoint) {
	a.mu.Lock()
	a.eps = append(a.eps, ep)
	a.mu.Unlock()
	ep.SetARPTap(func(frame []byte) {
		a.mu.RLock()
		defer a.mu.RUnlock()
		for _, o := range a.eps {
			if o != ep {
				o.InjectFrame(frame)
			}
		}
	})
}

// leave removes ep (before its stack closes).
func (a *ARPShare) leave(ep *stack.Endpoint) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, o := range a.eps {
		if o == ep {
			a.eps = append(a.eps[:i], a.eps[i+1:]...)
			return
		}
	}
}

// DefaultLinger is Options.Linger's default.
const DefaultLinger = 200 * time.Millisecond

// listenBacklog is the server's accept backlog.
const listenBacklog = 128

// pollBudget bounds the frames one round delivers to netstack.
const pollBudget = 256

// Backend is the userspace TCP over a FrameIO: tcp-xdp and tcp-dpdk are a
// Backend on their FrameIO. It implements core.Backend with the semantics
// of kind tcp (kernel TCP):
//
//   - A client connects to every Config.Dests at New (ConnectTimeout); a
//     server listens on LocalIP:Port and accepts inside Rx and Flush, never
//     on a goroutine of its own.
//   - Records are u16 length-prefixed (Staging, Decoder). Queue copies a
//     record into each destination connection's Staging, all or none: when
//     one of them has no room (the peer is slow, or the window is closed)
//     Queue returns false and queues nothing (TxBackpressure). A record is
//     never cut: it enters the stream whole, in order (possibly in two
//     segments), or not at all.
//   - Flush hands staged bytes to netstack (its send buffer, TCP.SendBuf),
//     which sends at once (NoDelay) or as Nagle allows. It never blocks.
//     Bytes that netstack's full send buffer refuses stay staged, released:
//     every later Rx and Flush hands them over as ACKs make room, so the
//     stream moves on (and Queue's back-pressure clears) without another
//     Flush; records queued after the Flush still wait for the next one.
//     A connection that takes no byte for TCP.SendStall while records wait
//     makes Flush return a *SendStallError (errors.Is ErrSendStall), once
//     per stall: the peer stopped reading. The connection stays; close the
//     backend or keep waiting.
//   - Every Rx and Flush drives the stack: it delivers received frames to
//     netstack (ACKs included, so a sender whose window is closed takes the
//     ACKs that open it by flushing or receiving), hands netstack the
//     released bytes it has room for, accepts, and kicks the frames
//     netstack wrote, once per call.
//   - Rx returns whole records; Data points into the connection's Decoder
//     and is valid until the next Rx. From is the connection's peer.
//   - A peer that closes (FIN, after its data is read) or resets is
//     counted (PeerCloses, Resets), its connection removed (records still
//     staged for it are counted in TxDropped) and reported once, as a
//     *core.PeerError, by the next Rx or Flush that has nothing else to
//     return. A server goes on serving its other connections; a client
//     goes on with its other Dests (with none left, Queue has nowhere to
//     send and returns false).
//
// Threading is core.Backend's. Netstack runs goroutines of its own (see
// package stack); Wait sleeps until a frame arrives or netstack makes a
// connection readable.
type Backend struct {
	cfg  core.Config
	tune Tuning
	st   *stack.Stack
	fio  frameio.FrameIO
	opts Options

	guard core.Guard
	once  sync.Once

	conns   []*conn // poll loop only
	ln      tcpip.Endpoint
	lnWQ    *waiter.Queue
	lnEntry waiter.Entry
	lnReady atomic.Bool
	errs    []error // PeerErrors to report, poll loop only
	next    int     // first connection Rx looks at, for fairness
	noYield bool    // drive does not yield to netstack (BenchmarkHandoff)
	ndead   int     // connections killed since the last reap

	stats counters

	// The padding keeps the fields of the next object on the heap (another
	// queue's, written by another core) off this one's last cache line.
	_ [64]byte
}

// counters are updated by the poll loop and read by Stats from any
// goroutine.
type counters struct {
	txQueued, txBackpressure, txOversize, txSent, txDropped, txBytes atomic.Uint64
	rxDelivered, rxBytes, rxTruncated                                atomic.Uint64
	conns, accepts, resets, peerCloses, stalls, noConn               atomic.Uint64
	streamTx, streamRx                                               atomic.Uint64 // bytes through netstack
}

var _ core.Backend = (*Backend)(nil)

// conn is one TCP connection and its record buffers.
type conn struct {
	b     *Backend
	ep    tcpip.Endpoint
	wq    *waiter.Queue
	entry waiter.Entry
	peer  netip.AddrPort
	stage *Staging
	dec   *Decoder
	// released is how many bytes at the front of stage.Pending a Flush has
	// released to the stream and netstack has not taken yet (its send
	// buffer was full): Rx and Flush hand them over as the window opens.
	// Bytes staged after them wait for the next Flush.
	released int
	rd       bytes.Reader      // Pending staged bytes, for Write
	w        tcpip.SliceWriter // the decoder's Tail, for Read

	// ready is set by netstack's goroutines (NotifyEvent) when the
	// connection became readable, writable or failed.
	ready atomic.Bool
	// more: the last read filled the decoder, or records wait in it.
	more bool
	// delivered: Rx handed out records from dec since its last Compact.
	delivered bool
	// stallSince is when staged bytes last stopped moving; zero when they
	// move. stallReported: this stall was reported.
	stallSince    time.Time
	stallReported bool
	// dead says why the connection ended (a *core.PeerError), nil while
	// it lives.
	dead *core.PeerError
}

// NotifyEvent implements waiter.EventListener. Netstack's goroutines call
// it; it marks the connection and wakes a sleeping poll loop.
func (c *conn) NotifyEvent(waiter.EventMask) {
	c.ready.Store(true)
	c.b.st.EP.Interrupt()
}

// lnListener wakes the poll loop when the listener has connections.
type lnListener struct{ b *Backend }

// NotifyEvent implements waiter.EventListener.
func (l lnListener) NotifyEvent(waiter.EventMask) {
	l.b.lnReady.Store(true)
	l.b.st.EP.Interrupt()
}

func checkConfig(cfg core.Config) error {
	bad := func(field string, v any, why string) error {
		return &core.ConfigError{Field: field, Value: v, Reason: why}
	}
	if !cfg.LocalIP.IsValid() || !cfg.LocalIP.Is4() {
		return bad("LocalIP", cfg.LocalIP, "the userspace TCP needs our IPv4 address")
	}
	if cfg.Port == 0 {
		return bad("Port", cfg.Port, "the server's TCP port is required")
	}
	if cfg.Role == core.RoleClient && len(cfg.Dests) == 0 {
		return bad("Dests", cfg.Dests, "a client needs at least one destination address")
	}
	for _, d := range cfg.Dests {
		if !d.IsValid() || !d.Is4() {
			return bad("Dests", d, "only IPv4 is supported")
		}
	}
	if cfg.MaxDatagram < 1 || cfg.MaxDatagram > MaxRecord {
		return bad("MaxDatagram", cfg.MaxDatagram, "a stream record carries 1 to 65535 bytes")
	}
	if cfg.TxQueue < 1 || cfg.RxBatch < 1 {
		return bad("TxQueue", cfg.TxQueue, "TxQueue and RxBatch must be positive")
	}
	return TuningFromConfig(cfg).Validate()
}

// stagingSize is a connection's send staging: TxQueue records of
// MaxDatagram, at most 4 MiB (netstack's send buffer is the real queue).
func stagingSize(cfg core.Config) int {
	n := cfg.TxQueue * (HeaderLen + cfg.MaxDatagram)
	if n > 4<<20 {
		n = 4 << 20
	}
	if n < HeaderLen+cfg.MaxDatagram {
		n = HeaderLen + cfg.MaxDatagram
	}
	return n
}

// decoderSize is a connection's receive buffer: RxBatch records of
// MaxDatagram plus one partial record, at least 64 KiB, at most 4 MiB.
func decoderSize(cfg core.Config) int {
	n := (cfg.RxBatch + 1) * (HeaderLen + cfg.MaxDatagram)
	if n < 64<<10 {
		n = 64 << 10
	}
	if n > 4<<20 {
		n = 4 << 20
	}
	return n
}

// NewOverFrameIO opens the userspace TCP of cfg (Kind tcp-xdp or tcp-dpdk,
// defaults applied here) over fio: it builds the netstack (stack.New), sets
// the Tuning, and connects to every Dests (client, driving the stack itself
// until each is established, ConnectTimeout in all) or listens (server).
//
// fio belongs to the Backend from this call on: on error it is released
// (opts.Close, or fio.Close) before NewOverFrameIO returns.
func NewOverFrameIO(cfg core.Config, fio frameio.FrameIO, opts Options) (*Backend, error) {
	release := opts.Close
	if release == nil {
		release = fio.Close
	}
	cfg = cfg.WithDefaults()
	if err := checkConfig(cfg); err != nil {
		release()
		return nil, err
	}
	if opts.Linger == 0 {
		opts.Linger = DefaultLinger
	}
	st, err := stack.New(fio, stack.Options{Addr: cfg.LocalIP, PrefixLen: opts.PrefixLen, Neighbors: stack.OptionsFromConfig(cfg).Neighbors,
		Clock: opts.Clock, OwnerKicks: opts.OwnerKicks})
	if err != nil {
		release()
		return nil, err
	}
	b := &Backend{cfg: cfg, tune: TuningFromConfig(cfg), st: st, fio: fio, opts: opts}
	b.opts.Close = release
	if opts.ARPShare != nil {
		opts.ARPShare.join(st.EP)
	}
	if err := b.open(); err != nil {
		b.shutdown(false)
		return nil, err
	}
	return b, nil
}

// open sets the tuning and listens or connects; shutdown undoes it.
func (b *Backend) open() error {
	if err := b.tune.Apply(b.st.NS); err != nil {
		return err
	}
	if b.cfg.Role == core.RoleServer {
		return b.listen()
	}
	return b.connectAll()
}

func (b *Backend) fullAddr(a netip.Addr, port uint16) tcpip.FullAddress {
	return tcpip.FullAddress{NIC: stack.NICID, Addr: tcpip.AddrFrom4(a.As4()), Port: port}
}

func (b *Backend) newConn(ep tcpip.Endpoint, wq *waiter.Queue, peer netip.AddrPort) *conn {
	c := &conn{b: b, ep: ep, wq: wq, peer: peer,
		stage: NewStaging(stagingSize(b.cfg)), dec: NewDecoder(b.cfg.MaxDatagram, decoderSize(b.cfg))}
	c.entry.Init(c, waiter.ReadableEvents|waiter.WritableEvents|waiter.EventHUp|waiter.EventErr)
	wq.EventRegister(&c.entry)
	c.ready.Store(true)
	return c
}

// release unregisters and closes the connection's endpoint (FIN, or RST
// if the peer reset it already).
func (c *conn) release() {
	c.wq.EventUnregister(&c.entry)
	c.ep.Close()
}

func (b *Backend) listen() error {
	wq := new(waiter.Queue)
	ep, terr := b.st.NS.NewEndpoint(ntcp.ProtocolNumber, ipv4.ProtocolNumber, wq)
	if terr != nil {
		return fmt.Errorf("tcp: new endpoint: %w", goErr(terr))
	}
	ep.SocketOptions().SetReuseAddress(true)
	if err := b.tune.ApplyEndpoint(ep); err != nil {
		ep.Close()
		return err
	}
	if terr := ep.Bind(b.fullAddr(b.cfg.LocalIP, b.cfg.Port)); terr != nil {
		ep.Close()
		return fmt.Errorf("tcp: bind %s:%d: %w", b.cfg.LocalIP, b.cfg.Port, goErr(terr))
	}
	if terr := ep.Listen(listenBacklog); terr != nil {
		ep.Close()
		return fmt.Errorf("tcp: listen %s:%d: %w", b.cfg.LocalIP, b.cfg.Port, goErr(terr))
	}
	b.ln, b.lnWQ = ep, wq
	b.lnEntry.Init(lnListener{b}, waiter.ReadableEvents)
	wq.EventRegister(&b.lnEntry)
	b.lnReady.Store(true)
	return nil
}

// accept takes every connection the listener has. Poll loop only.
func (b *Backend) accept() {
	if b.ln == nil || !b.lnReady.Swap(false) {
		return
	}
	for {
		var addr tcpip.FullAddress
		ep, wq, terr := b.ln.Accept(&addr)
		if terr != nil {
			return // ErrWouldBlock: none left
		}
		if err := b.tune.ApplyEndpoint(ep); err != nil {
			// Netstack accepted a setting it does not keep: refuse the
			// connection rather than run it untuned.
			ep.Abort()
			ep.Close()
			b.errs = append(b.errs, err)
			continue
		}
		peer := netip.AddrPortFrom(netip.AddrFrom4(addr.Addr.As4()), addr.Port)
		b.conns = append(b.conns, b.newConn(ep, wq, peer))
		b.stats.accepts.Add(1)
		b.stats.conns.Store(uint64(len(b.conns)))
	}
}

// connectAll connects to every destination, driving the stack itself.
func (b *Backend) connectAll() error {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ConnectTimeout)
	defer cancel()
	if err := b.resolveAll(ctx); err != nil {
		return err
	}
	pending := make([]*conn, 0, len(b.cfg.Dests))
	for _, d := range b.cfg.Dests {
		wq := new(waiter.Queue)
		ep, terr := b.st.NS.NewEndpoint(ntcp.ProtocolNumber, ipv4.ProtocolNumber, wq)
		if terr != nil {
			return fmt.Errorf("tcp: new endpoint: %w", goErr(terr))
		}
		c := b.newConn(ep, wq, netip.AddrPortFrom(d, b.cfg.Port))
		b.conns = append(b.conns, c) // released by shutdown on error
		if err := b.tune.ApplyEndpoint(ep); err != nil {
			return err
		}
		if b.cfg.LocalPort != 0 {
			ep.SocketOptions().SetReuseAddress(true)
			if terr := ep.Bind(b.fullAddr(b.cfg.LocalIP, b.cfg.LocalPort)); terr != nil {
				return fmt.Errorf("tcp: bind %s:%d: %w", b.cfg.LocalIP, b.cfg.LocalPort, goErr(terr))
			}
		} else if b.opts.SourcePorts != nil {
			if err := b.bindSourcePort(ep, c.peer); err != nil {
				return err
			}
		}
		switch terr := ep.Connect(b.fullAddr(d, b.cfg.Port)); terr.(type) {
		case nil:
		case *tcpip.ErrConnectStarted:
			pending = append(pending, c)
		default:
			return fmt.Errorf("tcp: connect %s: %w", c.peer, goErr(terr))
		}
	}
	for len(pending) > 0 {
		b.st.EP.Poll(pollBudget)
		if err := b.st.EP.Flush(); err != nil {
			return fmt.Errorf("tcp: connect: %w", err)
		}
		left := pending[:0]
		for _, c := range pending {
			if !c.ready.Load() {
				left = append(left, c)
				continue
			}
			if c.ep.Readiness(waiter.WritableEvents|waiter.EventErr|waiter.EventHUp) == 0 {
				c.ready.Store(false)
				// Re-check after clearing: an event between the two
				// lines set it again.
				if c.ep.Readiness(waiter.WritableEvents|waiter.EventErr|waiter.EventHUp) == 0 {
					left = append(left, c)
					continue
				}
			}
			// Connect again reports the outcome, as gonet does.
			if terr := c.ep.Connect(b.fullAddr(c.peer.Addr(), c.peer.Port())); terr != nil {
				if _, again := terr.(*tcpip.ErrAlreadyConnecting); again {
					left = append(left, c)
					continue
				}
				return fmt.Errorf("tcp: connect %s: %w", c.peer, goErr(terr))
			}
		}
		pending = left
		if len(pending) == 0 {
			break
		}
		if err := b.nap(ctx); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("tcp: connect %s: no answer within %v (ConnectTimeout): %w", pending[0].peer, b.cfg.ConnectTimeout, syscall.ETIMEDOUT)
			}
			return fmt.Errorf("tcp: connect %s: %w", pending[0].peer, err)
		}
	}
	// Netstack announces a connection (the event that ended the loop)
	// before it writes the ACK that completes the handshake; the second
	// Connect above waited for the endpoint that netstack held meanwhile,
	// so the ACK is written by now: send it, or a caller that polls
	// nothing after New leaves it in the ring and the server never accepts.
	if err := b.st.EP.Flush(); err != nil {
		return fmt.Errorf("tcp: connect: %w", err)
	}
	for _, c := range b.conns {
		c.ready.Store(true)
	}
	b.stats.conns.Store(uint64(len(b.conns)))
	return nil
}

// resolveAll has netstack resolve the link address of every destination
// (ARP) before any SYN is made, driving the stack until each is resolved,
// has failed, or ctx is done. A SYN made first would wait inside netstack
// for the answer carrying the timestamp of its making, and netstack would
// take the wait (1 s when the first ARP request is lost) for the round-trip
// time of its handshake: an RTO of 3 s, and a stream that stalls for
// seconds at its first lost retransmission. A failed resolution is left
// for the connect to report.
func (b *Backend) resolveAll(ctx context.Context) error {
	var left atomic.Int32
	local := tcpip.AddrFrom4(b.cfg.LocalIP.As4())
	for _, d := range b.cfg.Dests {
		left.Add(1)
		done := func(nstack.LinkResolutionResult) {
			left.Add(-1)
			b.st.EP.Interrupt()
		}
		switch terr := b.st.NS.GetLinkAddress(stack.NICID, tcpip.AddrFrom4(d.As4()), local, ipv4.ProtocolNumber, done); terr.(type) {
		case nil, *tcpip.ErrWouldBlock:
		default:
			return fmt.Errorf("tcp: resolve %s: %w", d, goErr(terr))
		}
	}
	for left.Load() > 0 {
		b.st.EP.Poll(pollBudget)
		if err := b.st.EP.Flush(); err != nil {
			return fmt.Errorf("tcp: resolve: %w", err)
		}
		if left.Load() == 0 {
			break
		}
		if err := b.nap(ctx); err != nil {
			if ctx.Err() != nil {
				return nil // the connect reports the timeout
			}
			return fmt.Errorf("tcp: resolve: %w", err)
		}
	}
	return nil
}

// bindSourcePort binds ep to the first port of opts.SourcePorts(peer) that
// is free.
func (b *Backend) bindSourcePort(ep tcpip.Endpoint, peer netip.AddrPort) error {
	ports := b.opts.SourcePorts(peer)
	for _, p := range ports {
		terr := ep.Bind(b.fullAddr(b.cfg.LocalIP, p))
		if terr == nil {
			return nil
		}
		if _, inUse := terr.(*tcpip.ErrPortInUse); !inUse {
			return fmt.Errorf("tcp: bind %s:%d: %w", b.cfg.LocalIP, p, goErr(terr))
		}
	}
	return fmt.Errorf("tcp: connect %s: none of the %d source ports chosen for this queue is free: %w", peer, len(ports), syscall.EADDRINUSE)
}

// Queue copies payload as one record into the staging of every connection
// (all of them or none) and returns true; false when one of them has no
// room (TxBackpressure, one per connection), when payload is longer than
// MaxDatagram (TxOversize), when there is no connection ("queue_no_conn",
// layer "tcp"), or after Close.
// Nothing is sent before Flush.
func (b *Backend) Queue(payload []byte) bool {
	if !b.guard.Enter() {
		return false
	}
	defer b.guard.Exit()
	if len(payload) > b.cfg.MaxDatagram {
		b.stats.txOversize.Add(1)
		return false
	}
	if len(b.conns) == 0 {
		b.stats.noConn.Add(1)
		return false
	}
	for _, c := range b.conns {
		if !c.stage.Fits(len(payload)) {
			b.stats.txBackpressure.Add(uint64(len(b.conns)))
			return false
		}
	}
	for _, c := range b.conns {
		_ = c.stage.Put(payload) // fits: checked above
	}
	b.stats.txQueued.Add(uint64(len(b.conns)))
	return true
}

// QueueTo is Queue for the one connection whose peer is to (the From of a
// received Packet). It returns false as Queue does; a peer that is not (or
// no longer) connected is counted as "queue_no_conn" (layer "tcp"), as kind
// tcp counts it.
func (b *Backend) QueueTo(payload []byte, to netip.AddrPort) bool {
	if !b.guard.Enter() {
		return false
	}
	defer b.guard.Exit()
	if len(payload) > b.cfg.MaxDatagram {
		b.stats.txOversize.Add(1)
		return false
	}
	for _, c := range b.conns {
		if c.peer == to {
			if c.stage.Put(payload) != nil {
				b.stats.txBackpressure.Add(1)
				return false
			}
			b.stats.txQueued.Add(1)
			return true
		}
	}
	b.stats.noConn.Add(1)
	return false
}

// Flush hands every connection's staged records to netstack, drives the
// stack and kicks what netstack wrote. It never blocks. It returns a
// reported peer error (*core.PeerError: a close or a reset; *SendStallError)
// once,
// a device error from the FrameIO's Kick, or net.ErrClosed after Close.
func (b *Backend) Flush() error {
	if !b.guard.Enter() {
		return net.ErrClosed
	}
	defer b.guard.Exit()
	b.accept()
	for _, c := range b.conns {
		c.released = c.stage.Len()
		b.send(c)
	}
	b.drive()
	for _, c := range b.conns {
		if c.released > 0 {
			b.send(c) // the ACKs just delivered may have opened the window
		}
	}
	b.reap()
	if err := b.st.EP.Flush(); err != nil {
		return err
	}
	return b.takeErr()
}

// send writes c's released staged bytes into netstack. Poll loop only.
func (b *Backend) send(c *conn) {
	if c.dead != nil || c.released == 0 {
		return
	}
	p := c.stage.Pending()[:c.released]
	c.rd.Reset(p)
	n, terr := c.ep.Write(&c.rd, tcpip.WriteOptions{})
	if n > 0 {
		c.released -= int(n)
		recs := c.stage.Consume(int(n))
		b.stats.txSent.Add(uint64(recs))
		b.stats.streamTx.Add(uint64(n))
		c.stallSince, c.stallReported = time.Time{}, false
	}
	switch terr.(type) {
	case nil:
		if c.released == 0 {
			return
		}
	case *tcpip.ErrWouldBlock:
	default:
		b.kill(c, terr)
		return
	}
	// Bytes are left: the send buffer is full because the window is
	// closed or the peer is slow. Watch for a stall.
	now := time.Now()
	if c.stallSince.IsZero() {
		c.stallSince = now
		return
	}
	if !c.stallReported && now.Sub(c.stallSince) >= b.cfg.TCP.SendStall {
		c.stallReported = true
		b.stats.stalls.Add(1)
		b.errs = append(b.errs, &SendStallError{Peer: c.peer, Stalled: now.Sub(c.stallSince)})
	}
}

// kill ends c after the netstack error terr (reset, closed, timed out);
// reap removes it.
func (b *Backend) kill(c *conn, terr tcpip.Error) {
	if c.dead != nil {
		return
	}
	b.ndead++
	reset := true
	switch terr.(type) {
	case *tcpip.ErrClosedForReceive, *tcpip.ErrClosedForSend:
		reset = false
	}
	c.dead = &core.PeerError{Peer: c.peer, Reset: reset, Err: goErr(terr)}
}

// reap removes dead connections, counting and reporting them. Poll loop
// only.
func (b *Backend) reap() {
	if b.ndead == 0 {
		return
	}
	b.ndead = 0
	kept := b.conns[:0]
	for _, c := range b.conns {
		if c.dead == nil {
			kept = append(kept, c)
			continue
		}
		if c.dead.Reset {
			b.stats.resets.Add(1)
		} else {
			b.stats.peerCloses.Add(1)
		}
		b.stats.txDropped.Add(uint64(c.stage.Records()))
		b.errs = append(b.errs, c.dead)
		c.release()
	}
	clear(b.conns[len(kept):])
	b.conns = kept
	b.stats.conns.Store(uint64(len(b.conns)))
}

// takeErr returns the oldest unreported error, once.
func (b *Backend) takeErr() error {
	if len(b.errs) == 0 {
		return nil
	}
	err := b.errs[0]
	copy(b.errs, b.errs[1:])
	b.errs[len(b.errs)-1] = nil
	b.errs = b.errs[:len(b.errs)-1]
	return err
}

// drive delivers received frames to netstack and accepts. Netstack hands
// each TCP segment to a processor goroutine; when frames were delivered,
// drive yields once (runtime.Gosched) so that the processor runs before the
// connections are read (package stack's documentation has the numbers).
func (b *Backend) drive() {
	total := 0
	for total < pollBudget {
		n := b.st.EP.Poll(b.cfg.RxBatch)
		total += n
		if n < b.cfg.RxBatch {
			break
		}
	}
	if total > 0 && !b.noYield {
		runtime.Gosched()
	}
	b.accept()
}

// Rx returns up to min(len(pkts), Config.RxBatch) whole records from the
// connections, as kind tcp does. It never blocks. pkts[i].Data is valid
// until the next Rx. Like Flush, it drives the stack and hands netstack the
// bytes of earlier Flushes that its send buffer refused (a caller whose
// Queue is refused need not Flush for the stream to move). The error is a
// peer's close or reset (*core.PeerError), reported once, when Rx has no
// record to return; net.ErrClosed after Close.
func (b *Backend) Rx(pkts []core.Packet) (int, error) {
	if !b.guard.Enter() {
		return 0, net.ErrClosed
	}
	defer b.guard.Exit()
	for _, c := range b.conns {
		if c.delivered {
			c.dec.Compact()
			c.delivered = false
		}
	}
	b.drive()
	for _, c := range b.conns {
		if c.released > 0 {
			b.send(c) // what earlier Flushes left, now that ACKs came
		}
	}
	if len(pkts) > b.cfg.RxBatch {
		pkts = pkts[:b.cfg.RxBatch]
	}
	n := 0
	if len(b.conns) > 0 {
		if b.next >= len(b.conns) {
			b.next = 0
		}
		for i := 0; i < len(b.conns) && n < len(pkts); i++ {
			c := b.conns[(b.next+i)%len(b.conns)]
			n += b.receive(c, pkts[n:])
		}
		b.next++
	}
	b.reap()
	if err := b.st.EP.Flush(); err != nil {
		if n == 0 {
			return 0, err
		}
		b.errs = append(b.errs, err)
	}
	if n > 0 {
		return n, nil
	}
	if err := b.takeErr(); err != nil {
		return 0, err
	}
	// Nothing for the caller: let netstack's goroutines (the processor
	// that has our segments, the peer's poll loop in the same process)
	// run before the caller polls again. A poll loop that spins on Rx
	// would otherwise hold its P until preempted (10 ms) whenever the
	// Ps are all busy (GOMAXPROCS=1, or as many spinning loops as Ps).
	runtime.Gosched()
	return 0, nil
}

// receive reads c's stream and decodes records into pkts. Poll loop only.
func (b *Backend) receive(c *conn, pkts []core.Packet) int {
	n := 0
	for n < len(pkts) && c.dead == nil {
		rec, err := c.dec.Next()
		if err != nil { // ErrOversize: dropped by the decoder, counted here
			b.stats.rxTruncated.Add(1)
			continue
		}
		if rec != nil {
			pkts[n] = core.Packet{Data: rec, From: c.peer}
			n++
			c.delivered = true
			b.stats.rxDelivered.Add(1)
			b.stats.rxBytes.Add(uint64(len(rec)))
			continue
		}
		if !c.ready.Swap(false) && !c.more {
			break
		}
		tail := c.dec.Tail()
		if len(tail) == 0 {
			c.more = true // full of records handed out this round
			break
		}
		c.w = tcpip.SliceWriter(tail)
		res, terr := c.ep.Read(&c.w, tcpip.ReadOptions{})
		switch terr.(type) {
		case nil:
		case *tcpip.ErrWouldBlock:
			c.more = false
			continue // decode what is there; the loop ends on the next nil
		default:
			b.kill(c, terr)
			continue
		}
		c.dec.Commit(res.Count)
		b.stats.streamRx.Add(uint64(res.Count))
		if b.tune.Moderate {
			c.ep.ModerateRecvBuf(res.Count)
		}
		c.more = res.Count == len(tail)
	}
	if n == len(pkts) {
		c.more = true // records may be left in the decoder
	}
	return n
}

// Wait sleeps until Rx may return something or move the stream on (a frame
// arrived, netstack made a connection readable, made room for bytes a Flush
// released, or accepted a connection; an error waits to be reported), ctx
// is done (ctx.Err()), or the backend is closed (net.ErrClosed). While it
// sleeps, netstack's timers and processors still send (retransmissions
// leave on time). Over a FrameIO that cannot sleep (no frameio.Waiter:
// DPDK) it returns an error matching core.ErrNotSupported.
func (b *Backend) Wait(ctx context.Context) error {
	if !b.guard.BeginWait() {
		return net.ErrClosed
	}
	defer b.guard.EndWait()
	if _, ok := b.fio.(frameio.Waiter); !ok {
		return core.NotSupported("Wait on "+b.cfg.Kind+" over this device", "", "the device cannot sleep on its queue: poll Rx", nil)
	}
	// Let netstack's processors finish what the last Rx delivered: what
	// they make readable then shows here instead of having to wake the
	// sleep (which, on a FrameIO without Interrupt, takes up to
	// stack.SleepSlice).
	runtime.Gosched()
	if len(b.errs) > 0 || b.lnReady.Load() {
		return nil
	}
	for _, c := range b.conns {
		if c.more || c.ready.Load() {
			return nil
		}
		// Released bytes wait for room in netstack's send buffer: the
		// event that says so may have been taken by a read since.
		if c.released > 0 && c.dead == nil && c.ep.Readiness(waiter.WritableEvents) != 0 {
			return nil
		}
	}
	err := b.st.EP.Sleep(ctx)
	if b.guard.Closed() {
		return net.ErrClosed
	}
	return err
}

// Stats returns the counters. Layers hold netstack's ("netstack"), the link
// endpoint's ("link": frames, kicks, wake-ups), the FrameIO's own, and the
// stream's ("stream": records and frames, whose ratio is the packing of
// records into segments). Safe from any goroutine, and after Close (the
// FrameIO's counters then include what its Close found left, such as
// AF_XDP's tx_unsent_at_close).
//
// The FrameIO counts frames, and TCP sends again what a frame lost
// carried: its loss counters (xsk rx_dropped, memio impair_lost, …) are
// reported with Loss false, since no record is lost with them. Records are
// lost only with their connection (TxDropped) or refused (TxBackpressure,
// TxOversize).
func (b *Backend) Stats() core.Stats {
	s := &b.stats
	fs := b.fio.Stats()
	out := core.Stats{
		Kind: b.cfg.Kind, Mode: b.opts.Mode,
		TxQueued: s.txQueued.Load(), TxBackpressure: s.txBackpressure.Load(), TxOversize: s.txOversize.Load(),
		TxSent: s.txSent.Load(), TxDropped: s.txDropped.Load(), TxBytes: s.streamTx.Load(),
		RxDelivered: s.rxDelivered.Load(), RxBytes: s.rxBytes.Load(), RxTruncated: s.rxTruncated.Load(),
		Syscalls: fs.Syscalls,
		Conns:    s.conns.Load(), Accepts: s.accepts.Load(), Resets: s.resets.Load(), PeerCloses: s.peerCloses.Load(),
		SockSndBuf: b.tune.SendBuf, SockRcvBuf: b.tune.RecvBuf,
	}
	out.Layers = b.st.AppendCounters(out.Layers)
	out.Layers = append(out.Layers,
		core.Counter{Layer: "stream", Name: "records_tx", Value: s.txSent.Load()},
		core.Counter{Layer: "stream", Name: "records_rx", Value: s.rxDelivered.Load()},
		core.Counter{Layer: "stream", Name: "bytes_tx", Value: s.streamTx.Load()},
		core.Counter{Layer: "stream", Name: "bytes_rx", Value: s.streamRx.Load()},
		core.Counter{Layer: "stream", Name: "send_stalls", Value: s.stalls.Load()},
		core.Counter{Layer: "tcp", Name: "queue_no_conn", Value: s.noConn.Load()},
	)
	for i := range fs.Layers {
		fs.Layers[i].Loss = false // frames, which TCP retransmits
	}
	out.Layers = append(out.Layers, fs.Layers...)
	return out
}

// FramesPerRecord returns the frames carrying TCP payload per record, sent
// and received, from s (a Stats of this backend): the seed's "packing".
// Below 1 means several records rode in one segment.
func FramesPerRecord(s core.Stats) (tx, rx float64) {
	get := func(layer, name string) float64 { v, _ := s.Counter(layer, name); return float64(v) }
	if r := get("stream", "records_tx"); r > 0 {
		tx = get("link", "tx_tcp_data_frames") / r
	}
	if r := get("stream", "records_rx"); r > 0 {
		rx = get("link", "rx_tcp_data_frames") / r
	}
	return tx, rx
}

// Close closes every connection (FIN), drives the stack for up to
// Options.Linger so the FINs and ACKs get through, then shuts netstack down
// (what is still open is reset) and releases the FrameIO. A Close during Rx
// or Wait waits for them to return net.ErrClosed. Safe to call more than
// once.
func (b *Backend) Close() error {
	var err error
	b.once.Do(func() {
		if !b.guard.Shut(b.st.EP.Interrupt) {
			return
		}
		err = b.shutdown(true)
	})
	return err
}

// shutdown releases everything; linger drives the stack while the
// connections close. The poll loop must not run.
func (b *Backend) shutdown(linger bool) error {
	for _, c := range b.conns {
		b.stats.txDropped.Add(uint64(c.stage.Records()))
		c.release()
	}
	if b.ln != nil {
		b.lnWQ.EventUnregister(&b.lnEntry)
		b.ln.Close()
	}
	if linger && len(b.conns) > 0 {
		deadline := time.Now().Add(b.opts.Linger)
		for time.Now().Before(deadline) && !b.allClosed() {
			b.st.EP.Poll(pollBudget)
			b.st.EP.Flush()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			_ = b.nap(ctx)
			cancel()
		}
	}
	b.conns = nil
	b.stats.conns.Store(0)
	if b.opts.ARPShare != nil {
		b.opts.ARPShare.leave(b.st.EP)
	}
	b.st.Close()
	return b.opts.Close()
}

// nap sleeps until a frame arrives, netstack wakes the poll loop, or ctx is
// done: the FrameIO's Wait through Endpoint.Sleep, or, on a FrameIO that
// cannot wait (DPDK), a sleep of napPoll. For the poll loops of New and
// Close, not for Wait.
func (b *Backend) nap(ctx context.Context) error {
	err := b.st.EP.Sleep(ctx)
	if errors.Is(err, core.ErrNotSupported) {
		t := time.NewTimer(napPoll)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

// napPoll is how long nap sleeps on a FrameIO that cannot wait.
const napPoll = 20 * time.Microsecond

// allClosed reports whether every connection's FIN has been acknowledged
// (or the connection is gone).
func (b *Backend) allClosed() bool {
	for _, c := range b.conns {
		switch ntcp.EndpointState(c.ep.State()) {
		case ntcp.StateFinWait2, ntcp.StateTimeWait, ntcp.StateClose, ntcp.StateError:
		default:
			return false
		}
	}
	return true
}
