package native

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/fdwait"
	"github.com/dgramio/dgramio/internal/monotime"
	"github.com/dgramio/dgramio/internal/pad"
)

// Errors of connections and of the engine. They are values: returning one
// allocates nothing.
var (
	// ErrReset: the peer reset the connection (RFC 9293 §3.10.7.4).
	ErrReset = errors.New("native: connection reset by peer")
	// ErrRefused: the peer answered the SYN with a RST.
	ErrRefused = errors.New("native: connection refused")
	// ErrTimedOut: retransmissions or keepalive probes went unanswered.
	ErrTimedOut = errors.New("native: connection timed out")
	// ErrHostUnreachable: ARP (or neighbour discovery) found no peer, or
	// there is no gateway for an off-link peer.
	ErrHostUnreachable = errors.New("native: host unreachable (no ARP answer)")
	// ErrAborted: the connection was aborted locally (Abort, Close with
	// unread data, Engine.Close).
	ErrAborted = errors.New("native: connection aborted")
	// ErrClosed: the engine is closed.
	ErrClosed = net.ErrClosed
	// ErrTableFull: MaxConns connections exist.
	ErrTableFull = errors.New("native: connection table full (raise Options.MaxConns)")
	// ErrPortInUse: the address and port are taken.
	ErrPortInUse = errors.New("native: port in use")
)

// tuple identifies a connection: remote address and both ports.
type tuple struct {
	raddr        [4]byte
	lport, rport uint16
}

// Engine is a TCP/IP host over one frameio.FrameIO: Ethernet, ARP,
// IPv4, ICMP, IPv6 (with Options.Addr6: ICMPv6, neighbour discovery) and
// TCP over either, run to completion on its owner's goroutine. It has
// no goroutines and no locks: every method (and every method of its
// Listeners and Conns) must be called from one goroutine at a time. Poll
// takes frames and runs input and the timers due; Flush sends what is due
// and kicks the FrameIO once; Wait sleeps until a frame or the next timer.
// Each reads the clock; a loop that polls and flushes in one step reads it
// once (Tick) and passes the reading to PollAt and FlushAt.
type Engine struct {
	// The fields every poll, segment and flush touches come first and
	// together; the configuration and the rest follow.
	fio       frameio.FrameIO
	now       int64           // ns since start: the latest Tick that Poll/Flush/Wait took
	mono      *monotime.Clock // the monotonic clock since start; nil with Options.Clock
	top       int64           // the timer heap's earliest heapAt (noTimer: empty)
	reasmUsed int             // slots of reasm in use
	share     *ARPShare       // o.ARPShare
	deliv     func([]byte)
	closed    bool
	unkicked  bool
	txTaken   bool // e.tx is a FrameIO's transmit slot (txslot.go)
	nagle     bool // o.Nagle
	cubic     bool // o.Congestion is CUBIC
	ipID      uint16
	mac       [6]byte
	addr      [4]byte
	lastIdx   int32 // the conn of last; -1: none
	last      tuple // the tuple the last lookup found (lastIdx >= 0)
	conns     []Conn
	dirty     []int32 // conns with something to send
	readable  []int32 // conns that may have become readable (TakeReadable)
	tx        []byte  // frame under construction
	table     map[tuple]int32
	delack    int64 // o.DelayedACK
	minRTO    int64 // o.MinRTO
	maxRTO    int64 // o.MaxRTO
	arp       arpTable
	mask      uint32
	net4      uint32
	seg       segment
	cnt       [nCounters]uint64

	waiter       frameio.Waiter
	irq          interface{ Interrupt() } // nil: the FrameIO's Wait cannot be ended early
	o            Options
	clock        Clock
	start        time.Time
	gw           [4]byte
	hasGW        bool
	mss          int // announced MSS
	secret       [16]byte
	synRcvd      int // connections in SYN-RECEIVED of every listener
	challengeSec int64
	challengeN   int
	challengeMax int // this second's budget of challenge ACKs (challengeACK)

	free      []int32
	listeners map[uint16]*Listener
	heap      []int32           // timer heap of conn indices, by Conn.heapAt
	arpWait   []int32           // conns waiting for a neighbour
	inbox     arpInbox          // replies the ARPShare's other engines learnt
	reasm     []reasmSlot       // Options.ReassemblyMemory's worth
	ports     [portTable]uint16 // RFC 6056 §3.3.4's table of counters
	tw        twTable           // TIME-WAIT records (timewait.go)
	pool      bufPool           // rings not in use (bufpool.go)
	txs       txSlots           // building frames in the FrameIO's slots (txslot.go)

	// Hardening against the link (docs/hardening-net.md).
	icmpCredit int64 // ns of ICMP rate earned (icmpAllow)
	icmpAt     int64 // when icmpCredit was last brought up to date
	arpEpoch   uint16

	// IPv6 (engine6.go): nil when Options.Addr6 is unset. no4: no IPv4
	// address (an IPv6-only engine).
	six *engine6
	no4 bool
}

// New makes an engine on fio with options o. Everything the data path
// needs is allocated here, except the connections' send and receive
// rings, which come from the engine's pool as bytes need them
// (docs/memory.md). The engine does not own fio: Close leaves it open.
func New(fio frameio.FrameIO, o Options) (*Engine, error) {
	if err := o.setDefaults(fio.MTU()); err != nil {
		return nil, err
	}
	if o.RecvMemory == 0 {
		o.RecvMemory = recvMemoryFor(fio, o.MSS) // bufpool.go
	}
	mac := fio.MAC()
	if len(mac) != 6 {
		return nil, fmt.Errorf("native: FrameIO MAC %v is not Ethernet", mac)
	}
	e := &Engine{fio: fio, o: o, clock: o.Clock, mss: o.MSS, secret: o.ISNSecret,
		share: o.ARPShare, nagle: o.Nagle, cubic: o.Congestion == CUBIC,
		delack: int64(o.DelayedACK), minRTO: int64(o.MinRTO), maxRTO: int64(o.MaxRTO)}
	e.waiter, _ = fio.(frameio.Waiter)
	e.irq, _ = fio.(interface{ Interrupt() })
	if e.clock == nil {
		e.clock = monoClock{}
	}
	e.start = e.clock.Now()
	if _, real := e.clock.(monoClock); real {
		e.mono = monotime.New(e.start)
	}
	copy(e.mac[:], mac)
	if o.Addr.IsValid() {
		e.addr = o.Addr.As4()
	} else {
		e.no4 = true
	}
	e.mask = ^uint32(0) << (32 - o.PrefixLen)
	if o.AllOnLink {
		e.mask = 0
	}
	e.net4 = binary.BigEndian.Uint32(e.addr[:]) & e.mask
	if o.Gateway.IsValid() && !o.AllOnLink {
		e.gw, e.hasGW = o.Gateway.As4(), true
	}
	if e.secret == ([16]byte{}) {
		if _, err := rand.Read(e.secret[:]); err != nil {
			return nil, fmt.Errorf("native: ISN secret: %w", err)
		}
	}
	e.conns = make([]Conn, o.MaxConns)
	e.free = make([]int32, 0, o.MaxConns)
	for i := o.MaxConns - 1; i >= 0; i-- {
		e.conns[i].e, e.conns[i].idx, e.conns[i].heapIdx = e, int32(i), -1
		e.free = append(e.free, int32(i))
	}
	e.table = make(map[tuple]int32, o.MaxConns)
	e.lastIdx = -1
	e.listeners = make(map[uint16]*Listener)
	e.heap = make([]int32, 0, o.MaxConns)
	e.top = noTimer
	e.tw.init()
	e.pool.init(o.SendBuf, o.RecvBuf, rcvSlack(o.RecvBuf))
	e.dirty = make([]int32, 0, o.MaxConns)
	e.readable = make([]int32, 0, o.MaxConns)
	e.arpWait = make([]int32, 0, o.MaxConns)
	e.arp.init(o.ARPEntries, int64(o.ARPReachable))
	e.reasm = make([]reasmSlot, reasmSlotsFor(o.ReassemblyMemory))
	e.icmpCredit = int64(o.ICMPBurst) * (1e9 / int64(o.ICMPRateLimit)) // the bucket starts full
	if err := e.init6(); err != nil {
		return nil, err
	}
	for a, m := range o.Neighbors {
		if a.Is6() && !a.Is4In6() && e.six != nil && len(m) == 6 {
			e.six.neigh.setStatic(a.As16(), [6]byte(m), 0)
			continue
		}
		if !a.Unmap().Is4() || len(m) != 6 {
			return nil, fmt.Errorf("native: neighbour %v %v is not IPv4/Ethernet (nor IPv6 on an engine with Addr6)", a, m)
		}
		e.setStatic(a.Unmap().As4(), [6]byte(m))
	}
	e.tx = make([]byte, 0, o.MTU+ethLen+pad.MinFrame)
	e.txs.init(fio, e.tx)
	e.deliv = e.input
	if o.ARPShare != nil {
		o.ARPShare.join(e)
	}
	return e, nil
}

type monoClock struct{}

func (monoClock) Now() time.Time { return time.Now() }

// Tick is a reading of the engine's clock: nanoseconds since New on
// Options.Clock (the monotonic clock when nil). Engine.Tick reads it;
// PollAt and FlushAt take it.
type Tick int64

// Tick reads the engine's clock once. A poll loop that makes several
// engine calls in one step (Poll, then Flush) reads the clock once with
// Tick and passes the reading to PollAt and FlushAt, instead of letting
// each call read it. On the monotonic clock a reading is a
// monotime.Clock's: the CPU's counter where the kernel's clock is that
// counter too (about 10 ns against time.Since's 25), time.Since elsewhere.
func (e *Engine) Tick() Tick {
	if e.mono != nil {
		return Tick(e.mono.Since())
	}
	return Tick(e.clock.Now().Sub(e.start))
}

// setNow makes t the engine's time. The engine's time never goes back: a
// t earlier than the time of an earlier call (a stale reading) leaves it
// where it is.
func (e *Engine) setNow(t Tick) {
	if int64(t) > e.now {
		e.now = int64(t)
	}
}

// tick reads the clock and makes it the engine's time.
func (e *Engine) tick() { e.setNow(e.Tick()) }

// Poll takes up to budget frames from the FrameIO and runs their input
// (answers and ACKs are queued for Flush, control answers such as ARP
// replies and RSTs are put in TX slots at once), then fires the timers
// that are due. It returns the number of frames taken. It reads the
// clock: Poll(n) is PollAt(e.Tick(), n).
func (e *Engine) Poll(budget int) int { return e.PollAt(e.Tick(), budget) }

// PollAt is Poll at time now, a reading of Tick taken by the caller
// (earlier in the same step of its poll loop): the timers due at now
// fire. A poll loop that never passes a fresher reading stops the timers
// (retransmissions, delayed ACKs, TIME-WAIT): read Tick at least once per
// step.
func (e *Engine) PollAt(now Tick, budget int) int {
	if e.closed {
		return 0
	}
	e.setNow(now)
	if e.share != nil {
		e.takeShared()
	}
	n := e.fio.RxFrames(budget, e.deliv)
	e.cnt[cRxFrames] += uint64(n)
	e.runTimers()
	return n
}

// input runs one received frame.
func (e *Engine) input(f []byte) {
	if len(f) < ethLen {
		e.cnt[cRxShort]++
		return
	}
	dst := [6]byte(f[0:6])
	typ := binary.BigEndian.Uint16(f[12:])
	if dst == e.mac && typ == etherIPv4 && !e.no4 { // the data path first
		e.ipInput(f)
		return
	}
	if dst != e.mac && dst != [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} &&
		(e.six == nil || dst[0] != 0x33 || dst[1] != 0x33) { // IPv6 multicast (RFC 2464 §7)
		e.cnt[cRxNotForUs]++
		return
	}
	switch typ {
	case etherARP:
		if e.no4 {
			e.six.cnt[c6FamilyOff]++
			return
		}
		e.arpInput(f)
	case etherIPv4:
		if dst != e.mac {
			e.cnt[cRxNotForUs]++
			return
		}
		e.six.cnt[c6FamilyOff]++ // no IPv4 address
	case etherIPv6:
		if e.six == nil {
			e.cnt[cRxUnknownEtherType]++
			return
		}
		e.ip6Input(f, dst != e.mac)
	default:
		e.cnt[cRxUnknownEtherType]++
	}
}

// ipInput takes an IPv4 datagram (RFC 791, RFC 1122 §3.2.1).
func (e *Engine) ipInput(f []byte) {
	p := ipv4(f[ethLen:])
	switch p.check() {
	case ipOK:
	case ipShort, ipLength:
		e.cnt[cIPLength]++
		return
	case ipVersion:
		e.cnt[cIPVersion]++
		return
	case ipChecksum:
		e.cnt[cIPChecksum]++
		return
	case ipOptions:
		e.cnt[cIPOptions]++
		return
	case ipFragment:
		if e.ipForUs(p) {
			e.fragment([6]byte(f[6:12]), p)
		}
		return
	}
	if e.ipForUs(p) {
		e.ipDeliver([6]byte(f[6:12]), p)
	}
}

// ipForUs reports whether valid datagram p is ours to take: to our
// address, from a source a reply may go to (RFC 1122 §3.2.1.3).
func (e *Engine) ipForUs(p ipv4) bool {
	src := p.src()
	if src == e.addr {
		// Our own address as the source: a spoof, or a loop (Linux drops
		// it as a martian source, fib_validate_source).
		e.cnt[cIPSourceOurs]++
		return false
	}
	if p.dst() != e.addr || src[0] == 0 || src[0] >= 224 || src[0] == 127 ||
		binary.BigEndian.Uint32(src[:]) == e.net4|^e.mask {
		e.cnt[cIPNotOurAddr]++
		return false
	}
	return true
}

// ipDeliver hands a datagram for us to its protocol.
func (e *Engine) ipDeliver(srcMAC [6]byte, p ipv4) {
	e.cnt[cIPDelivered]++
	switch p.proto() {
	case protoTCP:
		e.tcpInput(srcMAC, p.src(), pseudo(p.src(), e.addr, protoTCP, 0), p.payload())
	case protoICMP:
		e.icmpInput(srcMAC, p)
	case protoUDP:
		e.sendUnreachable(srcMAC, p, 3) // port unreachable: no UDP here
	default:
		e.sendUnreachable(srcMAC, p, 2) // protocol unreachable
	}
}

// tcpInput parses a segment and hands it to its connection, its listener
// or the no-connection rule.
// src is the peer (an IPv6 one's alias, engine6.go), sum its pseudo-header
// sum without the length (parseTCPSum).
func (e *Engine) tcpInput(srcMAC [6]byte, src [4]byte, sum uint64, b []byte) {
	s := &e.seg
	if err := parseTCPSum(s, sum, b); err != tcpOK {
		e.countBadTCP(err)
		return
	}
	s.src = src
	e.cnt[cTCPSegmentsIn]++
	s.srcMAC = srcMAC
	if i, ok := e.lookup(tuple{s.src, s.dport, s.sport}); ok {
		if i < 0 { // a TIME-WAIT record
			if e.twInput(^i, s) {
				return
			}
		} else if c := &e.conns[i]; c.state == TimeWait && s.flags&(flagSYN|flagACK|flagRST) == flagSYN && e.twReusable(c, s) {
			e.release(c) // RFC 9293 §3.10.7.4 note, RFC 6191: a new SYN ends TIME-WAIT
		} else {
			c.input(s)
			return
		}
	}
	if l := e.listeners[s.dport]; l != nil && !l.closed {
		l.input(s)
		return
	}
	e.cnt[cTCPNoConn]++
	e.resetFor(s) // RFC 9293 §3.10.7.1
}

// countBadTCP counts a segment parseTCP refused, under its reason.
func (e *Engine) countBadTCP(err tcpError) {
	switch err {
	case tcpShort, tcpOffset:
		e.cnt[cTCPShort]++
	case tcpChecksum:
		e.cnt[cTCPChecksum]++
	case tcpBadOption:
		e.cnt[cTCPBadOption]++
	}
}

// lookup finds the connection of tuple t, or its TIME-WAIT record (a
// negative index, ^k for record k). The last connection found is kept
// aside: a flow's segments come in runs (a burst, a request and its ACK),
// and comparing eight bytes costs less than hashing them.
func (e *Engine) lookup(t tuple) (int32, bool) {
	if e.lastIdx >= 0 && t == e.last {
		return e.lastIdx, true
	}
	i, ok := e.table[t]
	if ok && i >= 0 {
		e.last, e.lastIdx = t, i
	}
	return i, ok
}

// unlist removes tuple t from the table (and from lookup's memory).
func (e *Engine) unlist(t tuple) {
	delete(e.table, t)
	if t == e.last {
		e.lastIdx = -1
	}
	if t.raddr[0] == 0 {
		e.peerUnref(t.raddr) // an IPv6 peer's alias (engine6.go)
	}
}

// Flush fires the timers that are due, sends what is due on every
// connection with something to send, and kicks the FrameIO once. A full
// TX ring leaves the rest for the next Flush (counted tx_ring_full). The
// error is the FrameIO's Kick error, or ErrClosed. It reads the clock:
// Flush() is FlushAt(e.Tick()).
func (e *Engine) Flush() error { return e.FlushAt(e.Tick()) }

// FlushAt is Flush at time now, a reading of Tick taken by the caller, as
// PollAt.
func (e *Engine) FlushAt(now Tick) error {
	if e.closed {
		return ErrClosed
	}
	e.setNow(now)
	e.runTimers()
	if len(e.dirty) > 0 {
		d := e.dirty
		k := 0
		for _, i := range d {
			c := &e.conns[i]
			c.inDirty = false
			if !c.output() {
				d[k] = i
				k++
				c.inDirty = true
			}
		}
		e.dirty = d[:k]
	}
	if !e.unkicked {
		return nil
	}
	e.unkicked = false
	return e.fio.Kick()
}

// Idle reports whether nothing waits for TakeReadable or Flush: no
// connection became readable or has something to send, and no frame
// waits for a kick. A loop that polled and finds the engine idle has
// nothing to read or flush.
func (e *Engine) Idle() bool {
	return len(e.readable) == 0 && len(e.dirty) == 0 && !e.unkicked
}

// NextTimer returns when the earliest timer falls due, and false when no
// timer is armed.
func (e *Engine) NextTimer() (time.Time, bool) {
	at, ok := e.nextAt()
	if !ok {
		return time.Time{}, false
	}
	return e.start.Add(time.Duration(at)), true
}

func (e *Engine) nextAt() (int64, bool) {
	at, ok := int64(0), false
	if e.top != noTimer {
		at, ok = e.top, true
	}
	if a, has := e.arp.next(); has && (!ok || a < at) {
		at, ok = a, true
	}
	if a, has := e.reasmNext(); has && (!ok || a < at) {
		at, ok = a, true
	}
	if len(e.dirty) > 0 || e.inbox.pending.Load() {
		at, ok = e.now, true
	}
	return at, ok
}

// Wait sleeps until a frame may be there to Poll, the next timer is due,
// or ctx is done (ctx.Err()). With a Clock other than the real one, a
// timer cannot be slept for: Wait then returns on frames and ctx only,
// and whoever moves the clock wakes the waiter (memio.Port.Interrupt).
// A FrameIO that cannot Wait makes Wait return at once.
func (e *Engine) Wait(ctx context.Context) error {
	if e.closed {
		return ErrClosed
	}
	e.tick()
	at, ok := e.nextAt()
	if ok && at <= e.now {
		return nil
	}
	if e.waiter == nil {
		return nil
	}
	if _, real := e.clock.(monoClock); ok && real {
		if dw, can := e.waiter.(frameio.DeadlineWaiter); can { // no context per sleep
			return fdwait.Cause(ctx, dw.WaitUntil(ctx, time.Now().Add(time.Duration(at-e.now))))
		}
		c, cancel := context.WithTimeout(ctx, time.Duration(at-e.now))
		err := e.waiter.Wait(c)
		cancel()
		return fdwait.Cause(ctx, err) // nil when the timer is due
	}
	return fdwait.Cause(ctx, e.waiter.Wait(ctx))
}

// Close aborts every connection (without sending anything), closes the
// listeners and makes every later call fail with ErrClosed. It does not
// close the FrameIO.
func (e *Engine) Close() error {
	if e.closed {
		return nil
	}
	for i := range e.conns {
		c := &e.conns[i]
		if c.state != Closed {
			c.err = ErrAborted
			c.state = Closed
		}
	}
	for _, l := range e.listeners {
		l.closed = true
	}
	if e.share != nil {
		e.share.leave(e)
	}
	e.closed = true
	return nil
}

// send puts the frame in e.tx into a TX slot, padded; false when the ring
// is full.
func (e *Engine) send() bool {
	if e.txTaken {
		return e.sendSlot()
	}
	f, _ := pad.InPlace(e.tx)
	if !e.fio.TxFrame(f) {
		e.cnt[cTxRingFull]++
		return false
	}
	e.cnt[cTxFrames]++
	e.unkicked = true
	return true
}

// onLink reports whether a is on the engine's link.
func (e *Engine) onLink(a [4]byte) bool {
	return binary.BigEndian.Uint32(a[:])&e.mask == e.net4
}

// nextHop returns the address whose MAC a frame to a goes to, and false
// when there is none (off-link without a gateway).
func (e *Engine) nextHop(a [4]byte) ([4]byte, bool) {
	if a[0] == 0 {
		return e.nextHop6(a)
	}
	if e.onLink(a) {
		return a, true
	}
	return e.gw, e.hasGW
}

// addrOf converts.
func addrOf(a [4]byte) netip.Addr { return netip.AddrFrom4(a) }

// The ephemeral port range (Linux's ip_local_port_range) and the size of
// ephemeral's table of counters.
const (
	portLo, portN = 32768, 61000 - 32768
	portTable     = 256
)

// ephemeral picks a free local port for raddr:rport by RFC 6056 §3.3.4's
// double-hash algorithm: a keyed offset per destination plus a counter
// of a table slot picked by another keyed hash. The ports used towards
// one destination tell nothing of those used towards another (a single
// sequential counter let anyone who connected once guess the 4-tuples of
// everyone else's connections), and a destination's ports are not
// reused sooner than the range goes round.
func (e *Engine) ephemeral(raddr [4]byte, rport uint16) (uint16, bool) {
	off := uint32(siphash(&e.secret, e.flowKey(raddr, 0, rport, 6, 0)))
	n := &e.ports[siphash(&e.secret, e.flowKey(raddr, 0, rport, 7, 0))%portTable]
	for range portN {
		p := uint16(portLo + (off+uint32(*n))%portN)
		*n++
		if _, used := e.table[tuple{raddr, p, rport}]; !used && e.listeners[p] == nil {
			return p, true
		}
	}
	return 0, false
}
