package tcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	nstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	ntcp "gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/fdwait"
	"github.com/dgramio/dgramio/internal/guard"
	"github.com/dgramio/dgramio/internal/record"
	"github.com/dgramio/dgramio/internal/stack"
	layer "github.com/dgramio/dgramio/internal/stream"
	"github.com/dgramio/dgramio/stack/native"
)

// Options are what NewOverFrameIO needs beyond dgramio.Config: what the
// backend's kind-specific constructor (NewXDP, the DPDK one) knows.
type Options struct {
	// Mode is Stats.Mode, e.g. "netstack over xdp driver copy".
	Mode string
	// Close releases the FrameIO and whatever came with it (an XDP
	// program); Backend.Close calls it once netstack is down. nil: the
	// FrameIO's own Close.
	Close func() error
	// PrefixLen is LocalIP's subnet length. netstack: 0 means 32, and every
	// peer is on the link either way; the native engine: 0 puts every peer
	// on the link, otherwise peers outside it go to Gateway.
	PrefixLen int
	// Gateway is the native engine's next hop for peers outside
	// LocalIP/PrefixLen (tcp-dpdk's Config.DPDK.Gateway: a PCI port has no
	// kernel routes). Invalid: none, and with PrefixLen 0 every peer is on
	// the link.
	Gateway netip.Addr
	// Clock is netstack's clock; nil is the system clock. For tests.
	Clock tcpip.Clock
	// Linger bounds how long Close drives the stack after its FINs,
	// reading what the peers still send (counted in "stream" "rx_closed")
	// until they close too and letting what was written be acknowledged,
	// before what is left is reset. Default 200 ms.
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
	// NativeClock is the native engine's clock (TCP.Stack native); nil is
	// the monotonic clock. For tests.
	NativeClock native.Clock
	// ARPShare, when set, is the group whose engines (netstack or native)
	// pass each other the ARP replies they receive (see ARPShare).
	ARPShare *ARPShare
}

// ARPShare passes the ARP replies that one queue's engine receives to
// the engines of the other queues of a group, which hold the same
// address and MAC: a NIC hashes ARP, which has no ports, to one queue, so
// a stack whose own request is answered on another queue would never
// learn the answer. Netstacks pass the reply frame
// (stack.Endpoint.SetARPTap, InjectFrame); native engines share through
// native.ARPShare. It is control traffic, rare: the lock it takes is not
// on the data path. The zero value is ready for use; a group passes one
// in every queue's Options.
type ARPShare struct {
	mu  sync.RWMutex
	eps []*stack.Endpoint
	nat native.ARPShare // the native engines' (Options.ARPShare of each)
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

// lingerIdle ends Close's linger on a peer that has sent nothing for that
// long (and has not closed), as kind tcp does.
const lingerIdle = 100 * time.Millisecond

// listenBacklog is the server's accept backlog.
const listenBacklog = 128

// pollBudget bounds the frames one round delivers to netstack.
const pollBudget = 256

// Backend is the userspace TCP over a FrameIO: tcp-xdp and tcp-dpdk are a
// Backend on their FrameIO, running the engine of Config.TCP.Stack: the
// native engine (stack/native, the default), or netstack. What follows
// says "netstack"; with the native engine read "the engine", with these
// differences: it runs no goroutines (Rx, Flush and Wait drive it, and
// Wait sleeps until a frame or its next timer); its counters are layer
// "native"; Queue stages each record in the engine's send buffer
// (TCP.SendBuf) itself, held there until Flush releases it (TxQueue
// records' worth at most between two Flushes, and what the buffer has
// room for), so that there is no separate staging and "released bytes"
// never wait; and Rx hands out the records that arrived whole in the
// engine's receive buffer where they lie (Data points into it, valid
// until the next Rx), the Decoder taking only a record that arrived cut.
// On either engine Close counts in TxDropped the records the engine took
// whose first byte the peer had not acknowledged when Linger ran out. It
// implements dgramio.Backend with the semantics of kind tcp (kernel TCP):
//
//   - A client connects to every Config.Dests at New (ConnectTimeout); a
//     server listens on LocalIP:Port and accepts inside Rx and Flush, never
//     on a goroutine of its own.
//   - Records are u16 length-prefixed (Staging, Decoder). Queue copies a
//     record into each destination connection's Staging, all or none: when
//     one of them has no room (the peer is slow, or the window is closed)
//     Queue returns dgramio.ErrBackPressure and queues nothing (TxBackpressure). A record is
//     never cut: it enters the stream whole, in order (possibly in two
//     segments), or not at all.
//   - Flush hands staged bytes to netstack (its send buffer, TCP.SendBuf),
//     which sends at once (NoDelay) or as Nagle allows. It never blocks.
//     Bytes that netstack's full send buffer refuses stay staged, released:
//     every later Rx and Flush hands them over as ACKs make room, so the
//     stream moves on (and Queue's back-pressure clears) without another
//     Flush; records queued after the Flush still wait for the next one.
//     A connection that takes no byte for TCP.SendStall while records wait
//     is counted (layer "stream" "send_stalls") and, with Config.Events,
//     delivered by Rx as an EventStalled whose Err is a *SendStallError
//     (errors.Is ErrSendStall), once per stall: the peer stopped reading.
//     The connection stays; wait, or CloseConn or ResetConn it.
//   - Every Rx and Flush drives the stack: it delivers received frames to
//     netstack (ACKs included, so a sender whose window is closed takes the
//     ACKs that open it by flushing or receiving), hands netstack the
//     released bytes it has room for, accepts, and kicks the frames
//     netstack wrote, once per call; a Flush that an Rx came before since
//     the last Flush (a poll loop's step: Rx, then the answers' Flush)
//     leaves the receiving to that Rx and the next.
//   - Rx returns whole records (Config.FramingRaw: the bytes as they
//     arrived, at most MaxDatagram a Packet); Data points into the
//     connection's Decoder (or the native engine's receive ring) and is
//     valid until the next Rx. From is the connection's peer.
//   - A peer's FIN ends its direction only: it is counted (PeerCloses)
//     and, with Config.Events, delivered once, after the records before
//     it, as an EventPeerFIN of the connection; answers queued until the
//     Flush after the Rx that delivers it still go out, then the backend
//     closes its side (EventEnded). A reset is counted (Resets), its
//     connection removed (records still staged for it are counted in
//     TxDropped) and delivered the same way (EventReset, EventEnded).
//     Neither is an error of Rx or Flush. A server goes on serving its
//     other connections; a client goes on with its other Dests (with none
//     left, Queue has nowhere to send: dgramio.ErrNoRoute). The loop
//     closes, resets, pauses and resumes one connection through
//     dgramio.Conns.
//   - The connection set, staging, decoding and counting are the stream
//     layer's (internal/stream), shared with kind tcp; netstack's
//     endpoints are its transport.
//
// Threading is dgramio.Backend's. Netstack runs goroutines of its own (see
// package stack); Wait sleeps until a frame arrives or netstack makes a
// connection readable.
type Backend struct {
	cfg  dgramio.Config
	tune Tuning
	st   *stack.Stack  // netstack; nil with the native engine
	nat  *nativeEngine // the native engine; nil with netstack
	fio  frameio.FrameIO
	opts Options

	guard guard.Guard
	once  sync.Once

	s       *layer.Layer // poll loop only, and Stats under guard
	ln      tcpip.Endpoint
	lnWQ    *waiter.Queue
	lnEntry waiter.Entry
	lnReady atomic.Bool
	noYield bool // Poll does not yield to netstack (BenchmarkHandoff)

	// events are the connections netstack made readable since Watch last
	// took them (conn.list); taking swaps them with spare.
	evMu          sync.Mutex
	events, spare []*conn

	// final holds the counters as Close left them, for Stats after
	// Close; finalMu is held by Close until they are set.
	finalMu sync.Mutex
	final   dgramio.Stats
	finalC  layer.Counters
	// finalEngine holds the native engine's counters as Close left them.
	finalEngine []dgramio.Counter

	// The padding keeps the fields of the next object on the heap (another
	// queue's, written by another core) off this one's last cache line.
	_ [64]byte
}

var _ dgramio.Backend = (*Backend)(nil)

// conn is one netstack endpoint: the layer.Conn of the userspace TCP.
type conn struct {
	layer.Hook
	b     *Backend
	ep    tcpip.Endpoint
	wq    *waiter.Queue
	entry waiter.Entry
	peer  netip.AddrPort
	local netip.AddrPort    // read from ep when first needed
	rd    bytes.Reader      // the bytes of a Write
	w     tcpip.SliceWriter // the buffer of a Read
	// sent follows the records netstack took, for Close to count those
	// whose first byte the peer never acknowledged.
	sent layer.Sent

	// ready is set by netstack's goroutines (NotifyEvent) when the
	// connection became readable, writable or failed; listed while it is
	// in the Backend's events for Watch.
	ready, listed atomic.Bool
}

var (
	_ layer.Conn       = (*conn)(nil)
	_ layer.HalfCloser = (*conn)(nil)
	_ layer.Unacker    = (*conn)(nil)
)

// NotifyEvent implements waiter.EventListener. Netstack's goroutines call
// it; it marks the connection, lists it for Watch when it may have become
// readable, and wakes a sleeping poll loop.
func (c *conn) NotifyEvent(m waiter.EventMask) {
	c.ready.Store(true)
	if m&(waiter.ReadableEvents|waiter.EventHUp|waiter.EventErr) != 0 {
		c.list()
	}
	c.b.st.EP.Interrupt()
}

// list puts c in the Backend's events, once until Watch takes it.
func (c *conn) list() {
	if !c.listed.Swap(true) {
		c.b.evMu.Lock()
		c.b.events = append(c.b.events, c)
		c.b.evMu.Unlock()
	}
}

// lnListener wakes the poll loop when the listener has connections.
type lnListener struct{ b *Backend }

// NotifyEvent implements waiter.EventListener.
func (l lnListener) NotifyEvent(waiter.EventMask) {
	l.b.lnReady.Store(true)
	l.b.st.EP.Interrupt()
}

func checkConfig(cfg dgramio.Config) error {
	bad := func(field string, v any, why string) error {
		return &dgramio.ConfigError{Field: field, Value: v, Reason: why}
	}
	if !cfg.LocalIP.IsValid() {
		return bad("LocalIP", cfg.LocalIP, "the userspace TCP needs our IPv4 or IPv6 address")
	}
	v6 := !cfg.LocalIP.Unmap().Is4()
	if cfg.Port == 0 {
		return bad("Port", cfg.Port, "the server's TCP port is required")
	}
	if cfg.Role == dgramio.RoleClient && len(cfg.Dests) == 0 {
		return bad("Dests", cfg.Dests, "a client needs at least one destination address")
	}
	for _, d := range cfg.Dests {
		if !d.Addr().IsValid() || d.Addr().Unmap().Is4() == v6 || d.Port() == 0 {
			return bad("Dests", d, "a destination of LocalIP's family, with a port")
		}
	}
	if cfg.MaxDatagram < 1 || cfg.MaxDatagram > MaxRecord {
		return bad("MaxDatagram", cfg.MaxDatagram, "a stream record carries 1 to 65535 bytes")
	}
	if cfg.TxQueue < 1 || cfg.RxBatch < 1 {
		return bad("TxQueue", cfg.TxQueue, "TxQueue and RxBatch must be positive")
	}
	if f := cfg.Framing; f != "" && f != dgramio.FramingU16 && f != dgramio.FramingRaw && f != dgramio.FramingU32 {
		return bad("Framing", f, "use \"u16\", \"raw\" or \"u32\"")
	}
	return TuningFromConfig(cfg).ValidateFor(cfg.TCP.Stack)
}

// stagingSize is a connection's send staging: TxQueue records of
// MaxDatagram, at most 4 MiB (netstack's send buffer is the real queue).
func stagingSize(cfg dgramio.Config) int {
	hl := prefixLen(cfg)
	n := cfg.TxQueue * (hl + cfg.MaxDatagram)
	if n > 4<<20 {
		n = 4 << 20
	}
	if n < hl+cfg.MaxDatagram {
		n = hl + cfg.MaxDatagram
	}
	return n
}

// prefixLen is the length of a record's prefix in cfg's framing.
func prefixLen(cfg dgramio.Config) int {
	if cfg.Framing == dgramio.FramingU32 {
		return record.HeaderLen32
	}
	return HeaderLen
}

// decoderSize is a connection's receive buffer: RxBatch records of
// MaxDatagram plus one partial record, at least 64 KiB, at most 4 MiB.
func decoderSize(cfg dgramio.Config) int {
	n := (cfg.RxBatch + 1) * (prefixLen(cfg) + cfg.MaxDatagram)
	if n < 64<<10 {
		n = 64 << 10
	}
	if n > 4<<20 {
		n = 4 << 20
	}
	return n
}

// NewOverFrameIO opens the userspace TCP of cfg (Kind tcp-xdp or tcp-dpdk,
// defaults applied here) over fio on the engine of cfg.TCP.Stack: it builds
// the native engine (native.New) or the netstack (stack.New), sets the
// Tuning (a knob the engine cannot honour is a *dgramio.ConfigError: see
// Tuning.ValidateFor), and connects to every Dests (client, driving the stack itself
// until each is established, ConnectTimeout in all) or listens (server).
//
// fio belongs to the Backend from this call on: on error it is released
// (opts.Close, or fio.Close) before NewOverFrameIO returns.
func NewOverFrameIO(cfg dgramio.Config, fio frameio.FrameIO, opts Options) (*Backend, error) {
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
	if cfg.TCP.Stack == dgramio.TCPStackNative {
		return newNativeBackend(cfg, fio, opts, release)
	}
	st, err := stack.New(fio, stack.Options{Addr: cfg.LocalIP, PrefixLen: opts.PrefixLen, Neighbors: stack.OptionsFromConfig(cfg).Neighbors,
		Clock: opts.Clock, OwnerKicks: opts.OwnerKicks})
	if err != nil {
		release()
		return nil, err
	}
	b := &Backend{cfg: cfg, tune: TuningFromConfig(cfg), st: st, fio: fio, opts: opts}
	b.s = layer.New((*transport)(b), layerOptions(cfg))
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

// newNativeBackend is NewOverFrameIO with the native engine.
func newNativeBackend(cfg dgramio.Config, fio frameio.FrameIO, opts Options, release func() error) (*Backend, error) {
	opts.Close = release
	b := &Backend{cfg: cfg, tune: TuningFromConfig(cfg), fio: fio, opts: opts}
	b.nat = &nativeEngine{b: b}
	b.s = layer.New(b.nat, layerOptions(cfg))
	if err := b.nat.open(fio); err != nil {
		b.shutdown(false)
		return nil, err
	}
	return b, nil
}

// layerOptions sizes the stream layer of cfg.
func layerOptions(cfg dgramio.Config) layer.Options {
	return layer.Options{
		MaxRecord:   cfg.MaxDatagram,
		RxBatch:     cfg.RxBatch,
		StagingSize: stagingSize(cfg),
		DecoderSize: decoderSize(cfg),
		SendStall:   cfg.TCP.SendStall,
		StallError: func(peer netip.AddrPort, stalled time.Duration) error {
			return &SendStallError{Peer: peer, Stalled: stalled}
		},
		Framing: cfg.Framing,
		Events:  cfg.Events,
	}
}

// open sets the tuning and listens or connects; shutdown undoes it.
func (b *Backend) open() error {
	if err := b.tune.Apply(b.st.NS); err != nil {
		return err
	}
	if b.cfg.Role == dgramio.RoleServer {
		return b.listen()
	}
	return b.connectAll()
}

func (b *Backend) fullAddr(a netip.Addr, port uint16) tcpip.FullAddress {
	return tcpip.FullAddress{NIC: stack.NICID, Addr: stack.Addr(a), Port: port}
}

func (b *Backend) newConn(ep tcpip.Endpoint, wq *waiter.Queue, peer netip.AddrPort) *conn {
	c := &conn{b: b, ep: ep, wq: wq, peer: peer}
	c.sent.SetFraming(b.cfg.Framing)
	c.entry.Init(c, waiter.ReadableEvents|waiter.WritableEvents|waiter.EventHUp|waiter.EventErr)
	wq.EventRegister(&c.entry)
	c.ready.Store(true)
	return c
}

// Write implements layer.Conn: netstack copies what its send buffer
// takes.
func (c *conn) Write(p []byte) (int, error) {
	c.rd.Reset(p)
	n, terr := c.ep.Write(&c.rd, tcpip.WriteOptions{})
	if n > 0 {
		c.sent.Wrote(p[:n])
		if c.sent.Tracked() >= forgetEvery {
			if u, ok := c.unacked(); ok {
				c.sent.Forget(u)
			}
		}
	}
	switch terr.(type) {
	case nil, *tcpip.ErrWouldBlock:
		return int(n), nil
	}
	return int(n), peerError(terr)
}

// forgetEvery is how many record starts a connection's layer.Sent holds
// before Write asks the link endpoint which of them the peer
// acknowledged.
const forgetEvery = 1024

// unacked returns how many of the bytes netstack took on c the peer has
// not acknowledged (stack.Endpoint.Unacked), ok false when it cannot
// tell.
func (c *conn) unacked() (uint64, bool) {
	if !c.local.IsValid() {
		a, terr := c.ep.GetLocalAddress()
		if terr != nil {
			return 0, false
		}
		c.local = netip.AddrPortFrom(stack.AddrOf(a.Addr), a.Port)
	}
	return c.b.st.EP.Unacked(c.local, c.peer, c.sent.Written())
}

// Appended implements layer.Appender: in raw framing, where the next
// QueueTo's bytes start in the stream.
func (c *conn) Appended(n int) { c.sent.Appended(n) }

// UnackedRecords implements layer.Unacker: the records netstack took on
// c whose first byte the peer has not acknowledged (none when that cannot
// be told), and whether the connection ended (reset or failed).
func (c *conn) UnackedRecords() (int, bool) {
	var ended bool
	switch ntcp.EndpointState(c.ep.State()) {
	case ntcp.StateClose, ntcp.StateError:
		ended = true
	}
	u, ok := c.unacked()
	if !ok {
		return 0, ended
	}
	return c.sent.Unacked(u), ended
}

// CloseWrite implements layer.HalfCloser: a FIN after what was written;
// the endpoint stays readable.
func (c *conn) CloseWrite() error {
	return goErr(c.ep.Shutdown(tcpip.ShutdownWrite))
}

// Read implements layer.Conn.
func (c *conn) Read(p []byte) (int, error) {
	c.ready.Store(false) // an event from now on sets it again
	c.w = tcpip.SliceWriter(p)
	res, terr := c.ep.Read(&c.w, tcpip.ReadOptions{})
	switch terr.(type) {
	case nil:
	case *tcpip.ErrWouldBlock:
		return 0, nil
	case *tcpip.ErrClosedForReceive:
		return 0, io.EOF // the peer's FIN
	default:
		return 0, peerError(terr)
	}
	if c.b.tune.Moderate {
		c.ep.ModerateRecvBuf(res.Count)
	}
	if c.ep.Readiness(waiter.ReadableEvents) != 0 {
		// More came (or the FIN) while this read ran, and its event may
		// have come before ready was cleared.
		c.ready.Store(true)
		c.list()
	}
	return res.Count, nil
}

// peerError is the stream's end for a netstack error: a reset unless the
// endpoint was closed in order.
func peerError(terr tcpip.Error) error {
	_, closed := terr.(*tcpip.ErrClosedForSend)
	return &dgramio.PeerError{Reset: !closed, Err: goErr(terr)}
}

// Ended implements layer.Ender: a reset (or a failed connection) ended
// the endpoint, told from its state without reading. Netstack keeps the
// cause for the next Read; this says reset.
func (c *conn) Ended() error {
	if ntcp.EndpointState(c.ep.State()) != ntcp.StateError {
		return nil
	}
	return peerError(&tcpip.ErrConnectionReset{})
}

// Readable implements layer.Conn: netstack said so since the last Read.
func (c *conn) Readable() bool { return c.ready.Load() }

// Writable implements layer.Conn.
func (c *conn) Writable() bool { return c.ep.Readiness(waiter.WritableEvents) != 0 }

// SetReading implements layer.Conn: Wait asks the layer (Layer.Ready),
// which skips a connection it does not read.
func (c *conn) SetReading(bool) {}

// Close implements layer.Conn: unregister and close the endpoint (FIN
// after what was written, or RST if the peer reset it already).
func (c *conn) Close() {
	c.wq.EventUnregister(&c.entry)
	c.ep.Close()
}

// Abort implements layer.Conn.
func (c *conn) Abort() {
	c.ep.Abort()
	c.Close()
}

func (b *Backend) listen() error {
	wq := new(waiter.Queue)
	ep, terr := b.st.NS.NewEndpoint(ntcp.ProtocolNumber, b.st.Proto(), wq)
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

// transport is the Backend as the stream layer's Transport.
type transport Backend

var _ layer.Transport = (*transport)(nil)

// Poll implements layer.Transport: it delivers received frames to
// netstack. Netstack hands each TCP segment to a processor goroutine;
// when frames were delivered, Poll yields once (runtime.Gosched) so that
// the processor runs before the connections are read (package stack's
// documentation has the numbers). It reports true: netstack's goroutines
// act on their own time, so only Watch can tell what they did.
func (t *transport) Poll() bool {
	b := (*Backend)(t)
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
	return true
}

// Push implements layer.Transport: one kick for what netstack wrote.
func (t *transport) Push() error { return t.st.EP.Flush() }

// Watch implements layer.Transport: the connections netstack's goroutines
// listed (NotifyEvent) since the last call.
func (t *transport) Watch(mark func(layer.Conn)) {
	b := (*Backend)(t)
	b.evMu.Lock()
	evs := b.events
	b.events = b.spare[:0]
	b.evMu.Unlock()
	for _, c := range evs {
		// Cleared before the layer reads c: an event from now on lists
		// it again.
		c.listed.Store(false)
		mark(c)
	}
	clear(evs)
	b.spare = evs[:0]
}

// Accept implements layer.Transport: every connection the listener has.
func (t *transport) Accept(add func(layer.Conn, netip.AddrPort)) {
	b := (*Backend)(t)
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
			b.s.Report(err)
			continue
		}
		peer := netip.AddrPortFrom(stack.AddrOf(addr.Addr), addr.Port)
		add(b.newConn(ep, wq, peer), peer)
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
		ep, terr := b.st.NS.NewEndpoint(ntcp.ProtocolNumber, b.st.Proto(), wq)
		if terr != nil {
			return fmt.Errorf("tcp: new endpoint: %w", goErr(terr))
		}
		c := b.newConn(ep, wq, d)
		b.s.Add(c, c.peer) // released by shutdown on error
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
		switch terr := ep.Connect(b.fullAddr(d.Addr(), d.Port())); terr.(type) {
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
	for i := 0; i < b.s.Len(); i++ {
		b.s.Conn(i).(*conn).ready.Store(true)
	}
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
	local := stack.Addr(b.cfg.LocalIP)
	for _, d := range b.cfg.Dests {
		left.Add(1)
		done := func(nstack.LinkResolutionResult) {
			left.Add(-1)
			b.st.EP.Interrupt()
		}
		switch terr := b.st.NS.GetLinkAddress(stack.NICID, stack.Addr(d.Addr()), local, b.st.Proto(), done); terr.(type) {
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
// (all of them or none) and returns nil; or, staging nothing,
// dgramio.ErrNoRoute when there is no connection ("queue_no_conn", layer
// "tcp"), dgramio.ErrTooLarge when payload is longer than MaxDatagram
// (TxOversize, one per connection), dgramio.ErrBackPressure when one of them
// has no room (TxBackpressure, one per connection), or dgramio.ErrClosed
// after Close. Nothing is sent before Flush.
func (b *Backend) Queue(payload []byte) error {
	if !b.guard.Enter() {
		return dgramio.ErrClosed
	}
	defer b.guard.Exit()
	return b.s.Queue(payload)
}

// QueueTo is Queue for the one connection whose peer is to (the From of a
// received Packet; an IPv4-mapped address is taken as IPv4). It returns
// what Queue does; a peer that is not (or no longer) connected, an IPv6
// one among them, is dgramio.ErrNoRoute, counted as "queue_no_conn" (layer
// "tcp"), as kind tcp counts it.
func (b *Backend) QueueTo(payload []byte, to netip.AddrPort) error {
	if !b.guard.Enter() {
		return dgramio.ErrClosed
	}
	defer b.guard.Exit()
	return b.s.QueueTo(payload, dgramio.Unmap(to))
}

// Hold stops (on) or resumes delivery from the connection of peer, as
// layer.Layer.Hold: while held, Rx reads and delivers nothing of it, so
// netstack's receive buffer fills and TCP's window stops the peer. A
// server that cannot queue an answer (QueueTo refused) holds the peer
// until the answer fits. It returns false when peer has no connection or
// the backend is closed.
func (b *Backend) Hold(peer netip.AddrPort, on bool) bool {
	if !b.guard.Enter() {
		return false
	}
	defer b.guard.Exit()
	return b.s.Hold(peer, on)
}

// CloseConn implements dgramio.Conns: the connection to peer closes in
// order (stream.Layer.CloseConn): what was queued goes out at the next
// Flush, then our FIN; nothing more of it is delivered.
func (b *Backend) CloseConn(peer netip.AddrPort) error {
	if !b.guard.Enter() {
		return dgramio.ErrClosed
	}
	defer b.guard.Exit()
	return layer.ConnErr(b.s.CloseConn(peer))
}

// ResetConn implements dgramio.Conns: the connection to peer is reset (RST)
// at the next Rx or Flush (stream.Layer.ResetConn).
func (b *Backend) ResetConn(peer netip.AddrPort) error {
	if !b.guard.Enter() {
		return dgramio.ErrClosed
	}
	defer b.guard.Exit()
	return layer.ConnErr(b.s.ResetConn(peer))
}

// Pause implements dgramio.Conns: Hold(peer, true).
func (b *Backend) Pause(peer netip.AddrPort) error {
	if !b.guard.Enter() {
		return dgramio.ErrClosed
	}
	defer b.guard.Exit()
	return layer.ConnErr(b.s.Hold(peer, true))
}

// Resume implements dgramio.Conns: Hold(peer, false).
func (b *Backend) Resume(peer netip.AddrPort) error {
	if !b.guard.Enter() {
		return dgramio.ErrClosed
	}
	defer b.guard.Exit()
	return layer.ConnErr(b.s.Hold(peer, false))
}

// Flush drives the stack, hands every connection's staged records to
// netstack and kicks what netstack wrote. It never blocks. It returns a
// device error from the FrameIO's Kick, or net.ErrClosed after Close; a
// connection's end or stall is no error (an event, with Config.Events).
func (b *Backend) Flush() error {
	if !b.guard.Enter() {
		return net.ErrClosed
	}
	defer b.guard.Exit()
	return b.s.Flush()
}

// Rx returns up to min(len(pkts), Config.RxBatch) whole records from the
// connections, as kind tcp does. It never blocks. pkts[i].Data is valid
// until the next Rx. Like Flush, it drives the stack and hands netstack the
// bytes of earlier Flushes that its send buffer refused (a caller whose
// Queue is refused need not Flush for the stream to move). A record longer
// than MaxDatagram is skipped as it arrives and counted in RxTruncated.
// With Config.Events each connection's life comes as Packets with Event
// set. The error is net.ErrClosed after Close or a device error; never a
// connection's end or stall.
func (b *Backend) Rx(pkts []dgramio.Packet) (int, error) {
	if !b.guard.Enter() {
		return 0, net.ErrClosed
	}
	defer b.guard.Exit()
	n, err := b.s.Rx(pkts)
	if n == 0 && err == nil && b.nat == nil {
		// Nothing for the caller: let netstack's goroutines (the
		// processor that has our segments) run before the caller polls
		// again. A poll loop that spins on Rx would otherwise hold its P
		// until preempted (10 ms) whenever the Ps are all busy
		// (GOMAXPROCS=1, or as many spinning loops as Ps). The native
		// engine has nothing behind the poll loop to wait for and polls
		// as the raw kinds do (BENCHMARKS.md has what a yield cost it).
		runtime.Gosched()
	}
	return n, err
}

// Wait sleeps until Rx may return something or move the stream on (a frame
// arrived, netstack made a connection readable, made room for bytes a Flush
// released, or accepted a connection; an error waits to be reported), ctx
// is done (ctx.Err()), or the backend is closed (net.ErrClosed). While it
// sleeps, netstack's timers and processors still send (retransmissions
// leave on time). Over a FrameIO that cannot sleep (no frameio.Waiter:
// DPDK) it returns an error matching dgramio.ErrNotSupported.
func (b *Backend) Wait(ctx context.Context) error {
	if !b.guard.BeginWait() {
		return net.ErrClosed
	}
	defer b.guard.EndWait()
	if b.nat != nil {
		return b.waitNative(ctx)
	}
	if _, ok := b.fio.(frameio.Waiter); !ok {
		return dgramio.NotSupported("Wait on "+string(b.cfg.Kind)+" over this device", "", "the device cannot sleep on its queue: poll Rx", nil)
	}
	// Let netstack's processors finish what the last Rx delivered: what
	// they make readable then shows here instead of having to wake the
	// sleep (which, on a FrameIO without Interrupt, takes up to
	// stack.SleepSlice).
	runtime.Gosched()
	if b.lnReady.Load() || b.s.Ready() {
		return nil
	}
	err := b.st.EP.Sleep(ctx)
	if b.guard.Closed() {
		return net.ErrClosed
	}
	return fdwait.Cause(ctx, err)
}

// waitNative is Wait with the native engine: it reads the layer and the
// engine's next timer under the guard, then sleeps on the FrameIO until a
// frame, that timer, ctx or Close.
func (b *Backend) waitNative(ctx context.Context) error {
	if !b.guard.Enter() {
		return net.ErrClosed
	}
	ready := b.s.Ready() || (b.nat.ln != nil && b.nat.ln.Pending() > 0)
	at, armed := b.nat.e.NextTimer()
	b.guard.Exit()
	if ready {
		return nil
	}
	err := b.nat.sleep(ctx, at, armed)
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
func (b *Backend) Stats() dgramio.Stats {
	out := dgramio.Stats{Kind: b.cfg.Kind, Mode: b.opts.Mode}
	var s layer.Counters
	if b.guard.Enter() {
		b.s.Fill(&out)
		s = b.s.Counters()
		b.guard.Exit()
	} else {
		b.finalMu.Lock()
		out, s = b.final, b.finalC
		b.finalMu.Unlock()
	}
	fs := b.fio.Stats()
	out.Syscalls = fs.Syscalls
	out.SockSndBuf, out.SockRcvBuf = b.tune.SendBuf, b.tune.RecvBuf
	out.Layers = b.appendEngineCounters(out.Layers, &out)
	out.Layers = append(out.Layers,
		dgramio.Counter{Layer: "stream", Name: "records_tx", Value: s.TxSent},
		dgramio.Counter{Layer: "stream", Name: "records_rx", Value: s.RxDelivered},
		dgramio.Counter{Layer: "stream", Name: "bytes_tx", Value: s.StreamTx},
		dgramio.Counter{Layer: "stream", Name: "bytes_rx", Value: s.StreamRx},
		dgramio.Counter{Layer: "stream", Name: "send_stalls", Value: s.Stalls},
		dgramio.Counter{Layer: "tcp", Name: "queue_no_conn", Value: s.NoConn},
	)
	for i := range fs.Layers {
		fs.Layers[i].Loss = false // frames, which TCP retransmits
	}
	out.Layers = append(out.Layers, fs.Layers...)
	return out
}

// appendEngineCounters appends the engine's counters: netstack's and the
// link endpoint's, or the native engine's (layer "native", read under the
// guard, or as Close left them).
func (b *Backend) appendEngineCounters(dst []dgramio.Counter, out *dgramio.Stats) []dgramio.Counter {
	if b.nat == nil {
		return b.st.AppendCounters(dst)
	}
	at := len(dst)
	if b.guard.Enter() {
		dst = b.nat.e.AppendCounters(dst)
		b.guard.Exit()
	} else {
		b.finalMu.Lock()
		dst = append(dst, b.finalEngine...)
		b.finalMu.Unlock()
	}
	for i := at; i < len(dst); i++ {
		dst[i].Loss = false // frames, which TCP retransmits
	}
	return dst
}

// FramesPerRecord returns the frames carrying TCP payload per record, sent
// and received, from s (a Stats of this backend). Below 1 means several
// records rode in one segment. With the native engine (layer "native")
// every TCP segment counts, pure ACKs included (tcp_segments_out,
// tcp_segments_in): with delayed ACK a request and its answer then cost
// one segment each way.
func FramesPerRecord(s dgramio.Stats) (tx, rx float64) {
	get := func(layer, name string) float64 { v, _ := s.Counter(layer, name); return float64(v) }
	txName, rxName := [2]string{"link", "tx_tcp_data_frames"}, [2]string{"link", "rx_tcp_data_frames"}
	if _, ok := s.Counter(native.Layer, "tcp_segments_out"); ok {
		txName, rxName = [2]string{native.Layer, "tcp_segments_out"}, [2]string{native.Layer, "tcp_segments_in"}
	}
	if r := get("stream", "records_tx"); r > 0 {
		tx = get(txName[0], txName[1]) / r
	}
	if r := get("stream", "records_rx"); r > 0 {
		rx = get(rxName[0], rxName[1]) / r
	}
	return tx, rx
}

// Close closes every connection (FIN), drives the stack for up to
// Options.Linger (100 ms after a peer's last byte at most) reading what
// the peers still send until they close too (every record read then, and
// every one never delivered, counts in "stream" "rx_closed"), then shuts
// the engine down (what is still open is reset) and releases the FrameIO. Records still
// staged are counted as kind tcp counts them: in TxDropped, except one whose
// head netstack already took, which counts as sent (the receiver counts it
// cut). Records netstack took whose first byte the peer had not
// acknowledged when Linger ran out move from TxSent to TxDropped: their
// connection is reset. A Close during Rx or Wait waits for them to return net.ErrClosed;
// a Stats during Close waits for the counters Close leaves. Safe to call
// more than once.
func (b *Backend) Close() error {
	var err error
	b.once.Do(func() {
		b.finalMu.Lock()
		defer b.finalMu.Unlock()
		if !b.guard.Shut(b.interrupt) {
			return
		}
		err = b.shutdown(true)
		b.final = dgramio.Stats{Kind: b.cfg.Kind, Mode: b.opts.Mode}
		b.s.Fill(&b.final)
		b.finalC = b.s.Counters()
		if b.nat != nil {
			// Records the engine took whose first byte the peer had not
			// acknowledged when Linger ran out: lost with the reset.
			lost := min(b.final.TxSent, b.nat.lost)
			b.final.TxSent -= lost
			b.final.TxDropped += lost
		}
	})
	return err
}

// interrupt ends a Wait in progress (Close).
func (b *Backend) interrupt() {
	if b.nat != nil {
		b.nat.interrupt()
		return
	}
	b.st.EP.Interrupt()
}

// shutdown releases everything; linger drives the stack while the
// connections close. The poll loop must not run.
func (b *Backend) shutdown(linger bool) error {
	b.s.Abandon()
	if linger {
		// FINs, and read what the peers still send (an echo's answers)
		// until they close too, for up to Linger.
		b.s.Linger(min(b.opts.Linger, lingerIdle), b.opts.Linger, b.lingerWait)
	}
	if b.nat != nil {
		l := time.Duration(0)
		if linger {
			l = b.opts.Linger
		}
		b.nat.shutdown(l)
		if b.nat.e != nil {
			b.finalEngine = b.nat.e.AppendCounters(nil)
		}
		return b.opts.Close()
	}
	eps := make([]tcpip.Endpoint, b.s.Len())
	for i := range eps {
		eps[i] = b.s.Conn(i).(*conn).ep
	}
	// The rest read out; what the peers never acknowledged counted and
	// reset, the others closed (FIN).
	b.s.Close()
	if b.ln != nil {
		b.lnWQ.EventUnregister(&b.lnEntry)
		b.ln.Close()
	}
	if linger && len(eps) > 0 {
		deadline := time.Now().Add(b.opts.Linger)
		for time.Now().Before(deadline) && !allClosed(eps) {
			b.st.EP.Poll(pollBudget)
			b.st.EP.Flush()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			_ = b.nap(ctx)
			cancel()
		}
	}
	// What netstack's goroutines wrote last (the ACKs of what was read
	// last) leaves before the stack goes: a peer would otherwise count
	// as lost what we received and counted.
	runtime.Gosched()
	b.st.EP.Flush()
	if b.opts.ARPShare != nil {
		b.opts.ARPShare.leave(b.st.EP)
	}
	b.st.Close()
	return b.opts.Close()
}

// lingerWait drives the engine for Close's linger (layer.Layer.Linger)
// and sleeps until one of conns is readable, a frame arrives or d (at
// most 5 ms) has passed.
func (b *Backend) lingerWait(conns []layer.Conn, d time.Duration) {
	if b.nat != nil {
		b.nat.Poll()
		b.nat.Push()
	} else {
		b.st.EP.Poll(pollBudget)
		b.st.EP.Flush()
		runtime.Gosched() // netstack's processors take what Poll delivered
	}
	for _, c := range conns {
		if c.Readable() {
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(d, 5*time.Millisecond))
	defer cancel()
	if b.nat != nil {
		_ = b.nat.nap(ctx)
		return
	}
	_ = b.nap(ctx)
}

// nap sleeps until a frame arrives, netstack wakes the poll loop, or ctx is
// done: the FrameIO's Wait through Endpoint.Sleep, or, on a FrameIO that
// cannot wait (DPDK), a sleep of napPoll. For the poll loops of New and
// Close, not for Wait.
func (b *Backend) nap(ctx context.Context) error {
	return napOr(ctx, b.st.EP.Sleep(ctx))
}

// napPoll is how long nap sleeps on a FrameIO that cannot wait.
const napPoll = 20 * time.Microsecond

// napOr returns err, the result of a sleep, unless it says the device
// cannot sleep (dgramio.ErrNotSupported): then it sleeps napPoll or until ctx
// is done instead.
func napOr(ctx context.Context, err error) error {
	if !errors.Is(err, dgramio.ErrNotSupported) {
		return err
	}
	t := time.NewTimer(napPoll)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// allClosed reports whether every connection's FIN has been acknowledged
// (or the connection is gone).
func allClosed(eps []tcpip.Endpoint) bool {
	for _, ep := range eps {
		switch ntcp.EndpointState(ep.State()) {
		case ntcp.StateFinWait2, ntcp.StateTimeWait, ntcp.StateClose, ntcp.StateError:
		default:
			return false
		}
	}
	return true
}
