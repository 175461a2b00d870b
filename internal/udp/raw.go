package udp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/arp"
	"github.com/dgramio/dgramio/internal/fdwait"
	"github.com/dgramio/dgramio/internal/guard"
	"github.com/dgramio/dgramio/internal/ndp"
	"github.com/dgramio/dgramio/internal/poison"
)

// Resolver returns the MAC address of the next hop towards addr (on one
// link: addr itself). It may block; ctx bounds it. Raw calls it from
// several goroutines at once (see RawOptions.Resolve): it must be safe for
// that.
type Resolver func(ctx context.Context, addr netip.Addr) ([6]byte, error)

// RawOptions are what a raw datagram backend needs besides Config and the
// FrameIO: where peers' MACs come from, ARP, and the names for Stats.
type RawOptions struct {
	// Resolve finds the MAC of a destination when Config.DstMAC is not set:
	// the Dests at construction (on the caller's goroutine), and a QueueTo
	// address never heard from (on a worker goroutine of Raw's, at most a
	// few at a time, each bounded by Config.ConnectTimeout, so that the
	// poll loop never waits for it). The xdp kind passes a
	// neighbour-table lookup. nil with ARP (or NDP) set: its Resolve for
	// the Dests, its Query and Poll on the poll loop for QueueTo.
	Resolve Resolver
	// ARP, when set, owns ARP on this interface: Rx hands it ARP frames,
	// so requests for Config.LocalIP are answered, and its replies are
	// kicked out at the end of that Rx (the only case where Rx sends).
	// Its counters join Stats.Layers. For an IPv4 Config only.
	ARP *arp.Handler
	// NDP is ARP's counterpart for an IPv6 Config: it owns neighbour
	// discovery on this interface (solicitations for Config.LocalIP and
	// our link-local address are answered, peers are resolved with our
	// solicitations), the same way.
	NDP *ndp.Handler
	// NextHop, when set, returns the address whose MAC the frames to addr
	// carry (addr on the link, its gateway behind a router), for the
	// resolutions with ARP or NDP; nil: every address is on the link. It runs on
	// the poll loop (once per address never heard from) and must not
	// wait for the network. The xdp and dpdk kinds pass the kernel's
	// route lookup where the interface has a kernel side; dpdk passes
	// Config.DPDK.Gateway for the addresses off its Config.DPDK.PrefixLen
	// when set (a PCI device has no kernel side).
	NextHop func(addr netip.Addr) netip.Addr
	// Mode is Stats.Mode ("xdp driver copy", ...). Default: the FrameIO's
	// Stats().Mode.
	Mode string
	// OnClose, when set, runs in Close after the FrameIO is closed
	// (detaching what the constructor attached, for instance).
	OnClose func() error
}

// txRetries bounds the attempts at TxFrame, with a Kick and a yield
// between them, when the FrameIO's ring is full during Flush.
const txRetries = 64

// Raw is the raw datagram backend over any frameio.FrameIO: the xdp and
// dpdk kinds are a Raw over an AF_XDP socket or a DPDK port. It builds
// Ethernet/IPv4/UDP or Ethernet/IPv6/UDP frames (the Config's family) from
// a Template per destination, parses what it receives with Parse, and
// keeps every refused or lost message in a counter.
//
// Sending: Queue and QueueTo build the frame at once into a preallocated
// slot, one per destination (the payload is copied, the caller keeps it),
// and return false when Config.TxQueue messages are queued (a message sent
// to every one of the Dests is one message, as on every kind). Flush hands
// the slots to the FrameIO, Config.TxBatch frames and one Kick per batch,
// so the device sees batches of the size the kernel kinds use for
// sendmmsg. A frame the FrameIO's ring refuses even after kicking and
// retrying is counted in Stats.TxDropped. The slots take TxQueue ×
// max(len(Dests), 1) × (42 + MaxDatagram) bytes (62 + MaxDatagram over
// IPv6), allocated by NewRaw.
//
// Receiving: Rx takes up to min(len(pkts), Config.RxBatch) frames with
// RxFrames and copies each payload into Raw's own receive buffers (a frame
// is valid only inside RxFrames' deliver), so pkts[i].Data is valid until
// the next Rx. Frames for other addresses, ports or protocols are counted
// as filtered; damaged ones as bad checksum or malformed; datagrams larger
// than Config.MaxDatagram as truncated (dropped, never cut).
//
// Peers: a server answers a Packet's From with QueueTo; the MAC for it is
// learnt from the frame that came from there (the sender's, or its
// router's: either way the next hop), so answering needs no resolution.
// The peer table holds Config.Peers peers (see peerTable for the memory
// per peer); beyond that the peer heard from or answered longest ago is
// replaced (raw.peers_replaced), never one of the last Rx. A QueueTo to
// an address the table lacks is accepted and waits, up to 4 messages per
// peer and Config.TxQueue in all, while the peer's MAC is resolved in the
// background (ARP or NDP, or the kernel's neighbour table towards the next
// hop);
// it leaves with the first Flush after the answer, or after a frame from
// the peer taught its MAC. A message beyond those bounds is dropped
// (raw.tx_resolve_overflow), and so are those of a resolution that failed
// (raw.tx_resolve_timeout): both are in TxDropped.
//
// Threading and lifetime as dgramio.Backend says. Nothing is allocated per
// message; a new peer allocates only when the table grows (a chunk of
// 1024 entries, and the map), a resolution a little, and Wait with a
// cancellable ctx a little per call.
type Raw struct {
	cfg    dgramio.Config
	fio    frameio.FrameIO
	opts   RawOptions
	filter Filter
	mac    [6]byte
	src    netip.AddrPort

	dests     []int32 // Config.Dests in the table
	table     peerTable
	wait      waitPool
	res       resolver               // nil: nothing resolves
	resolving map[netip.Addr][]int32 // peers waiting, by address
	ready     []int32                // wait-pool frames resolved, for the next Flush
	resDone   func(netip.Addr, [6]byte, error)
	msgs      int     // messages queued (TxQueue bounds them)
	dmac      [6]byte // newPeer's scratch

	// Transmit slots: frame i is txBuf[i*slot:][:txLen[i]].
	slot    int
	txBuf   []byte
	txLen   []int
	txPay   []int
	pending int

	// Receive buffers, one per packet of an Rx.
	rxBuf  []byte
	rxSize int
	rxPkts []dgramio.Packet
	rxN    int
	rxLast int // packets handed out by the last Rx, for Poison
	deliv  func([]byte)

	guard       guard.Guard
	closeCtx    context.Context
	closeCancel context.CancelFunc

	nb            neighbours // opts.ARP or opts.NDP; nil: none
	ownARPResolve bool       // opts.Resolve is nb.Resolve: resolve with nb.Query

	parse                                        Counters
	txQueued, txBackpressure, txOversize, txSent atomic.Uint64
	txDropped, txBytes, rxDelivered, rxBytes     atomic.Uint64
	rxTruncated, txUnresolved, txRetried         atomic.Uint64
	txResolveOverflow, txResolveTimeout          atomic.Uint64
	txUnsentAtClose, txNoDest, rxWhileResolving  atomic.Uint64

	// The padding keeps the fields of the next object on the heap (another
	// queue's, written by another core) off this one's last cache line.
	_ [64]byte
}

var _ dgramio.Backend = (*Raw)(nil)

// neighbours is what Raw needs of an ARP or NDP handler (arp.Handler,
// ndp.Handler): both speak their protocol over the FrameIO the same way.
type neighbours interface {
	Handle(frame []byte) bool
	Flush() error
	Resolve(ctx context.Context, addr netip.Addr, other func(frame []byte)) ([6]byte, error)
	Query(addr netip.Addr, now time.Time) ([6]byte, bool)
	Poll(now time.Time, done func(addr netip.Addr, mac [6]byte, err error)) int
	Pending() int
	AppendLayers(dst []dgramio.Counter) []dgramio.Counter
}

// NewRaw returns a Raw for cfg over fio, which it owns from then on (Close
// closes it, and so does a failed NewRaw). cfg gets its defaults here;
// LocalIP must be set, IPv4 or IPv6 (the frames' family, Config.IPv6),
// MaxDatagram must fit one frame of fio's MTU (MTU - 28 for IPv4, MTU -
// 48 for IPv6), and a client's Dests are resolved now (Config.DstMAC, else
// opts.Resolve, else opts.ARP or opts.NDP, which must match the family),
// bounded by Config.ConnectTimeout.
func NewRaw(cfg dgramio.Config, fio frameio.FrameIO, opts RawOptions) (_ *Raw, err error) {
	defer func() {
		if err != nil {
			fio.Close()
		}
	}()
	cfg = cfg.WithDefaults()
	a := cfg.LocalIP
	if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() || a.Zone() != "" {
		return nil, &dgramio.ConfigError{Field: "LocalIP", Value: cfg.LocalIP, Reason: "a raw datagram kind needs our unicast IPv4 or IPv6 address"}
	}
	v6 := a.Is6()
	if opts.ARP != nil && v6 || opts.NDP != nil && !v6 || opts.ARP != nil && opts.NDP != nil {
		return nil, fmt.Errorf("udp: ARP serves an IPv4 Config, NDP an IPv6 one (LocalIP %v)", a)
	}
	if most := MaxPayloadFor(fio.MTU(), v6); cfg.MaxDatagram > most || cfg.MaxDatagram <= 0 {
		return nil, &dgramio.ConfigError{Field: "MaxDatagram", Value: cfg.MaxDatagram,
			Reason: fmt.Sprintf("one frame of this interface carries at most %d bytes of UDP payload over %s (MTU %d); lower MaxDatagram or raise the MTU", most, familyName(v6), fio.MTU())}
	}
	if len(cfg.DstMAC) != 0 && len(cfg.DstMAC) != 6 {
		return nil, &dgramio.ConfigError{Field: "DstMAC", Value: cfg.DstMAC, Reason: "an Ethernet address has 6 bytes"}
	}
	mac := fio.MAC()
	if len(mac) != 6 {
		return nil, fmt.Errorf("udp: FrameIO MAC %v is not an Ethernet address", mac)
	}
	var nb neighbours
	switch {
	case opts.ARP != nil:
		nb = opts.ARP
	case opts.NDP != nil:
		nb = opts.NDP
	}
	ownARPResolve := opts.Resolve == nil && nb != nil
	var r *Raw // set below, before any resolution runs
	if ownARPResolve {
		h, hop := nb, opts.NextHop
		opts.Resolve = func(ctx context.Context, a netip.Addr) ([6]byte, error) {
			if hop != nil {
				a = hop(a) // a Dest behind a router: its gateway
			}
			return h.Resolve(ctx, a, r.whileResolving)
		}
	}
	if opts.Mode == "" {
		opts.Mode = fio.Stats().Mode
	}
	port := cfg.Port
	if cfg.Role == dgramio.RoleClient && cfg.LocalPort != 0 {
		port = cfg.LocalPort
	}
	r = &Raw{
		cfg:    cfg,
		fio:    fio,
		opts:   opts,
		filter: Filter{MAC: mac, Addr: cfg.LocalIP, Port: port},
		src:    netip.AddrPortFrom(cfg.LocalIP, port),
		table:  newPeerTable(max(cfg.Peers, cfg.RxBatch)),
		slot:   max(HeaderLenFor(v6)+cfg.MaxDatagram, frameio.MinFrame),
		rxSize: cfg.MaxDatagram,

		nb:            nb,
		ownARPResolve: ownARPResolve,
	}
	copy(r.mac[:], mac)
	frames := cfg.TxQueue * max(len(cfg.Dests), 1)
	r.txBuf = make([]byte, frames*r.slot)
	r.txLen = make([]int, frames)
	r.txPay = make([]int, frames)
	r.rxBuf = make([]byte, cfg.RxBatch*r.rxSize)
	r.deliv = r.deliver

	if len(cfg.Dests) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.ConnectTimeout)
		defer cancel()
		for _, d := range cfg.Dests {
			var dmac [6]byte
			switch {
			case len(cfg.DstMAC) == 6:
				copy(dmac[:], cfg.DstMAC)
			case opts.Resolve != nil:
				dmac, err = opts.Resolve(ctx, d.Addr())
				if err != nil {
					return nil, fmt.Errorf("udp: resolve destination %s: %w", d, err)
				}
			default:
				return nil, &dgramio.ConfigError{Field: "DstMAC", Value: cfg.DstMAC,
					Reason: "nothing resolves the destination's MAC on this path; set DstMAC"}
			}
			i, err := r.newPeer(d, dmac)
			if err != nil {
				return nil, err
			}
			r.table.at(i).dest = true
			r.dests = append(r.dests, i)
		}
	}
	r.setResolver()
	r.closeCtx, r.closeCancel = context.WithCancel(context.Background())
	return r, nil
}

// setResolver picks what resolves a QueueTo address never heard from.
func (r *Raw) setResolver() {
	r.resolving = make(map[netip.Addr][]int32)
	r.resDone = r.resolved
	var wake func()
	if i, ok := r.fio.(interface{ Interrupt() }); ok {
		wake = i.Interrupt
	}
	switch {
	case len(r.cfg.DstMAC) == 6:
	case r.nb != nil && r.ownARPResolve:
		r.res = &arpResolver{h: r.nb, hop: r.opts.NextHop}
	case r.opts.Resolve != nil:
		r.res = newGoResolver(r.opts.Resolve, r.cfg.ConnectTimeout, wake)
	}
}

// newPeer adds a template towards to at dmac to the peer table, off the
// recency list.
func (r *Raw) newPeer(to netip.AddrPort, dmac [6]byte) (int32, error) {
	i := r.table.add(to)
	r.dmac = dmac // a slice of the argument would escape: one allocation a peer
	err := r.table.at(i).tmpl.Reset(Endpoints{SrcMAC: r.mac[:], DstMAC: r.dmac[:], Src: r.src, Dst: to, DF: true})
	if err != nil {
		r.table.remove(i)
		return noPeer, err
	}
	return i, nil
}

// Queue builds payload into a slot for every destination (Config.Dests).
// With no destinations (a server) it returns dgramio.ErrNoRoute, counted as
// layer "raw" counter "queue_no_dest": a server answers with QueueTo. See
// dgramio.Backend for the other causes.
func (r *Raw) Queue(payload []byte) error {
	if !r.guard.Enter() {
		return dgramio.ErrClosed
	}
	defer r.guard.Exit()
	need := len(r.dests)
	if need == 0 {
		r.txNoDest.Add(1)
		return dgramio.ErrNoRoute
	}
	if len(payload) > r.cfg.MaxDatagram {
		r.txOversize.Add(uint64(need))
		return dgramio.ErrTooLarge
	}
	if r.msgs >= r.cfg.TxQueue {
		r.txBackpressure.Add(uint64(need))
		return dgramio.ErrBackPressure
	}
	for _, i := range r.dests {
		r.put(&r.table.at(i).tmpl, payload)
	}
	r.msgs++
	r.txQueued.Add(uint64(need))
	return nil
}

// QueueTo builds payload into a slot for to. It never blocks: to a peer
// the table lacks, the message waits while the peer is resolved (see
// Raw). An IPv4-mapped to is taken as IPv4. It returns dgramio.ErrNoRoute,
// counting tx_unresolved, when nothing can resolve to (not
// of the Config's family, not dgramio.Unicast, or no Config.DstMAC,
// resolver or ARP/NDP handler; or the resolver has
// more requests than it takes), and what Queue does
// for a payload too large, full slots or a closed backend. See
// dgramio.Backend.
func (r *Raw) QueueTo(payload []byte, to netip.AddrPort) error {
	if !r.guard.Enter() {
		return dgramio.ErrClosed
	}
	defer r.guard.Exit()
	if len(payload) > r.cfg.MaxDatagram {
		r.txOversize.Add(1)
		return dgramio.ErrTooLarge
	}
	if r.msgs >= r.cfg.TxQueue {
		r.txBackpressure.Add(1)
		return dgramio.ErrBackPressure
	}
	to = dgramio.Unmap(to)
	i := r.table.find(to)
	if i == noPeer {
		if i = r.unknownPeer(to); i == noPeer {
			r.txUnresolved.Add(1)
			return dgramio.ErrNoRoute
		}
	}
	p := r.table.at(i)
	r.txQueued.Add(1)
	if p.waiting {
		r.hold(p, payload)
		return nil
	}
	if !p.dest {
		r.table.touch(i)
	}
	r.put(&p.tmpl, payload)
	r.msgs++
	return nil
}

// unknownPeer adds to, never heard from, to the table: at Config.DstMAC,
// or waiting for its resolution, which it starts. noPeer: nothing can
// resolve it now.
func (r *Raw) unknownPeer(to netip.AddrPort) int32 {
	if to.Addr().Is4() != r.src.Addr().Is4() || !dgramio.Unicast(to) {
		return noPeer
	}
	if len(r.cfg.DstMAC) == 6 {
		i, err := r.newPeer(to, [6]byte(r.cfg.DstMAC))
		if err != nil {
			return noPeer
		}
		r.table.touch(i)
		return i
	}
	if r.res == nil {
		return noPeer
	}
	addr := to.Addr()
	w, started := r.resolving[addr]
	if !started && !r.res.start(addr) {
		return noPeer
	}
	i, err := r.newPeer(to, [6]byte{})
	if err != nil {
		return noPeer
	}
	r.table.at(i).waiting = true
	r.resolving[addr] = append(w, i)
	return i
}

// hold builds payload for the waiting peer p into the wait pool, or drops
// it (tx_resolve_overflow) when p or the pool is full.
func (r *Raw) hold(p *peer, payload []byte) {
	s := noPeer
	if p.qlen < waitPerPeer {
		s = r.wait.take(r.cfg.TxQueue, r.slot)
	}
	if s == noPeer {
		r.txResolveOverflow.Add(1)
		r.txDropped.Add(1)
		return
	}
	w := &r.wait
	w.len[s] = p.tmpl.Build(w.buf[int(s)*w.slot:][:w.slot], payload)
	w.pay[s] = len(payload)
	if p.qtail == noPeer {
		p.qhead = s
	} else {
		w.next[p.qtail] = s
	}
	p.qtail = s
	p.qlen++
}

// resolved ends the resolution of addr: each peer still waiting for it
// gets mac and its frames move to the ready list, or, on err, is removed
// with its frames counted in tx_resolve_timeout.
func (r *Raw) resolved(addr netip.Addr, mac [6]byte, err error) {
	for _, i := range r.resolving[addr] {
		p := r.table.at(i)
		if !p.waiting || p.key.Addr() != addr {
			continue // heard from meanwhile (and maybe replaced since)
		}
		if err != nil {
			for s := p.qhead; s != noPeer; s = r.wait.next[s] {
				r.wait.free = append(r.wait.free, s)
			}
			r.txResolveTimeout.Add(uint64(p.qlen))
			r.txDropped.Add(uint64(p.qlen))
			r.table.remove(i)
			continue
		}
		r.release(i, mac)
	}
	delete(r.resolving, addr)
}

// release gives the waiting peer i its MAC: its frames go to the ready
// list, it joins the recency list.
func (r *Raw) release(i int32, mac [6]byte) {
	p := r.table.at(i)
	p.tmpl.SetDstMAC(mac)
	for s := p.qhead; s != noPeer; s = r.wait.next[s] {
		copy(r.wait.frame(s)[0:6], mac[:]) // no checksum covers it
		r.ready = append(r.ready, s)
	}
	p.waiting, p.qhead, p.qtail, p.qlen = false, noPeer, noPeer, 0
	r.table.touch(i)
}

// pollResolve takes the resolutions that ended and moves the ready frames
// into the transmit slots while there is room.
func (r *Raw) pollResolve() {
	if len(r.resolving) > 0 {
		r.res.poll(r.resDone)
	}
	if len(r.ready) == 0 {
		return
	}
	k := 0
	for ; k < len(r.ready) && r.msgs < r.cfg.TxQueue; k++ {
		s := r.ready[k]
		i := r.pending
		r.txLen[i] = copy(r.txBuf[i*r.slot:(i+1)*r.slot], r.wait.frame(s))
		r.txPay[i] = r.wait.pay[s]
		r.pending++
		r.msgs++
		r.wait.free = append(r.wait.free, s)
	}
	r.ready = r.ready[:copy(r.ready, r.ready[k:])]
}

// put builds the frame into the next slot.
func (r *Raw) put(t *Template, payload []byte) {
	i := r.pending
	r.txLen[i] = t.Build(r.txBuf[i*r.slot:(i+1)*r.slot], payload)
	r.txPay[i] = len(payload)
	r.pending++
}

// Flush gives the queued frames to the FrameIO, TxBatch at a time with a
// Kick after each batch. A frame the ring refuses is retried after a Kick
// and a yield, a bounded number of times, then counted in TxDropped. The
// error is the Kick's (the device is gone), with the frames left counted
// as dropped, or net.ErrClosed.
func (r *Raw) Flush() error {
	if !r.guard.Enter() {
		return dgramio.ErrClosed
	}
	defer r.guard.Exit()
	r.pollResolve()
	if r.nb != nil && r.pending == 0 {
		if err := r.nb.Flush(); err != nil { // requests of resolutions
			return fmt.Errorf("udp: flush: %w", err)
		}
	}
	if r.pending == 0 {
		return nil
	}
	n := r.pending
	r.pending, r.msgs = 0, 0
	var sent, bytes uint64
	for i := 0; i < n; {
		end := min(i+r.cfg.TxBatch, n)
		for ; i < end; i++ {
			f := r.txBuf[i*r.slot : i*r.slot+r.txLen[i]]
			ok := r.fio.TxFrame(f)
			for try := 0; !ok && try < txRetries; try++ {
				r.txRetried.Add(1)
				if err := r.fio.Kick(); err != nil {
					r.txSent.Add(sent)
					r.txBytes.Add(bytes)
					r.txDropped.Add(uint64(n - i))
					return fmt.Errorf("udp: flush: %w", err)
				}
				runtime.Gosched()
				ok = r.fio.TxFrame(f)
			}
			if !ok {
				r.txDropped.Add(1)
				continue
			}
			sent++
			bytes += uint64(r.txPay[i])
		}
		if err := r.fio.Kick(); err != nil {
			// The frames of this batch may or may not have left; the ones
			// after it did not.
			r.txSent.Add(sent)
			r.txBytes.Add(bytes)
			r.txDropped.Add(uint64(n - i))
			return fmt.Errorf("udp: flush: %w", err)
		}
	}
	r.txSent.Add(sent)
	r.txBytes.Add(bytes)
	return nil
}

// Rx fills pkts with received datagrams. See dgramio.Backend.
func (r *Raw) Rx(pkts []dgramio.Packet) (int, error) {
	if !r.guard.Enter() {
		return 0, dgramio.ErrClosed
	}
	defer r.guard.Exit()
	if poison.Debug {
		for i := 0; i < r.rxLast; i++ {
			poison.Fill(r.rxBuf[i*r.rxSize : (i+1)*r.rxSize])
		}
	}
	want := min(len(pkts), r.cfg.RxBatch)
	r.rxPkts, r.rxN = pkts[:want], 0
	if want > 0 {
		r.fio.RxFrames(want, r.deliv)
	}
	n := r.rxN
	r.rxPkts, r.rxLast = nil, n
	r.pollResolve()
	if r.nb != nil {
		if err := r.nb.Flush(); err != nil {
			return n, fmt.Errorf("udp: ARP or NDP answer: %w", err)
		}
	}
	r.rxDelivered.Add(uint64(n))
	return n, nil
}

// deliver takes one frame inside RxFrames.
func (r *Raw) deliver(frame []byte) {
	if r.nb != nil && r.nb.Handle(frame) {
		return
	}
	d, why := Parse(frame, &r.filter)
	r.parse.Count(why)
	if why != OK {
		return
	}
	if len(d.Payload) > r.rxSize {
		r.rxTruncated.Add(1)
		return
	}
	i := r.rxN
	buf := r.rxBuf[i*r.rxSize : (i+1)*r.rxSize]
	n := copy(buf, d.Payload)
	r.rxPkts[i] = dgramio.Packet{Data: buf[:n:n], From: d.From}
	r.rxN++
	r.rxBytes.Add(uint64(n))
	r.learn(d.From, d.SrcMAC)
}

// whileResolving takes a frame that arrived while NewRaw resolved a Dest
// with the ARP or NDP handler (which takes its own frames): not ours,
// malformed or damaged, it is counted as Rx would count it; a datagram
// for us is lost (raw.rx_while_resolving), since nothing reads it yet.
func (r *Raw) whileResolving(frame []byte) {
	_, why := Parse(frame, &r.filter)
	if why == OK {
		r.rxWhileResolving.Add(1)
		return
	}
	r.parse.Count(why)
}

// learn records where answers to from go: the MAC its frame came from.
// The peer goes to the head of the recency list; one waiting for its
// resolution has it now.
func (r *Raw) learn(from netip.AddrPort, mac [6]byte) {
	i := r.table.find(from)
	if i == noPeer {
		if i, _ = r.newPeer(from, mac); i != noPeer {
			r.table.touch(i)
		}
		return
	}
	p := r.table.at(i)
	switch {
	case p.waiting:
		r.release(i, mac)
		return
	case p.tmpl.DstMAC() != mac:
		p.tmpl.SetDstMAC(mac)
	}
	if !p.dest {
		r.table.touch(i)
	}
}

// Wait sleeps until a frame arrives, ctx is done or Raw is closed, when
// the FrameIO implements frameio.Waiter; otherwise it returns an error
// matching ErrNotSupported at once. A Close from another goroutine ends
// it at once (it interrupts the FrameIO's Wait where the FrameIO can be
// interrupted). While ARP requests of resolutions are outstanding it
// returns nil every 10 ms, so that the loop's next Rx or Flush sends the
// retransmissions. See dgramio.Backend.
func (r *Raw) Wait(ctx context.Context) error {
	w, ok := r.fio.(frameio.Waiter)
	if !ok {
		return dgramio.NotSupported("Wait on "+r.opts.Mode, "", "this transport cannot sleep; poll Rx", nil)
	}
	if !r.guard.BeginWait() {
		return dgramio.ErrClosed
	}
	defer r.guard.EndWait()
	var tick time.Duration
	if len(r.resolving) > 0 {
		tick = r.res.tick()
	}
	wctx := r.closeCtx
	if ctx.Done() != nil || tick > 0 {
		c, cancel := context.WithCancel(ctx)
		if tick > 0 {
			c, cancel = context.WithTimeout(ctx, tick)
		}
		stop := context.AfterFunc(r.closeCtx, cancel)
		defer stop()
		defer cancel()
		wctx = c
	}
	err := w.Wait(wctx)
	if r.guard.Closed() {
		return dgramio.ErrClosed
	}
	// ctx.Err() when ctx ended the sleep; nil when the resolutions' tick
	// did (time for their next step).
	return fdwait.Cause(ctx, err)
}

// Stats returns the counters. Layers: "udp" is the breakdown of the
// parser's verdicts (RxFiltered, RxMalformed, RxBadChecksum); "raw" counts
// tx_unresolved (QueueTo refused: nothing can resolve the peer; the caller
// kept the message), tx_resolve_overflow and tx_resolve_timeout (messages
// to a peer being resolved that found its wait queue full, or whose
// resolution failed) and tx_unsent_at_close (messages queued and not yet
// flushed, or still waiting, when Close came): the causes of those
// TxDropped; peers_replaced (peers that made room for newer ones in the
// full peer table) and tx_retried (TxFrame attempts repeated on a full
// ring), rx_while_resolving (datagrams for us that arrived while NewRaw
// resolved a Dest, before anything read them: a loss);
// "frameio" the transport's totals (Loss false: rx_dropped and tx_dropped
// are sums, and the FrameIO's own Layers, appended after them as the
// FrameIO reports them, say which of its counters lose messages, as memio
// and afxdp do); "arp" the ARP handler's, when Raw owns ARP; "ndp" the
// NDP handler's, when Raw owns neighbour discovery (IPv6).
func (r *Raw) Stats() dgramio.Stats {
	fs := r.fio.Stats()
	s := dgramio.Stats{
		Kind:           r.cfg.Kind,
		Mode:           r.opts.Mode,
		TxQueued:       r.txQueued.Load(),
		TxBackpressure: r.txBackpressure.Load(),
		TxOversize:     r.txOversize.Load(),
		TxSent:         r.txSent.Load(),
		TxDropped:      r.txDropped.Load(),
		TxBytes:        r.txBytes.Load(),
		RxDelivered:    r.rxDelivered.Load(),
		RxBytes:        r.rxBytes.Load(),
		RxTruncated:    r.rxTruncated.Load(),
		RxBadChecksum:  r.parse.Class(ClassBadChecksum),
		RxMalformed:    r.parse.Class(ClassMalformed),
		RxFiltered:     r.parse.Class(ClassFiltered),
		Syscalls:       fs.Syscalls,
	}
	l := make([]dgramio.Counter, 0, 32+len(fs.Layers))
	l = r.parse.AppendLayers(l, "udp")
	l = append(l,
		dgramio.Counter{Layer: "raw", Name: "tx_unresolved", Value: r.txUnresolved.Load()},
		dgramio.Counter{Layer: "raw", Name: "queue_no_dest", Value: r.txNoDest.Load()},
		dgramio.Counter{Layer: "raw", Name: "tx_resolve_overflow", Value: r.txResolveOverflow.Load()},
		dgramio.Counter{Layer: "raw", Name: "tx_resolve_timeout", Value: r.txResolveTimeout.Load()},
		dgramio.Counter{Layer: "raw", Name: "peers_replaced", Value: r.table.replaced.Load()},
		dgramio.Counter{Layer: "raw", Name: "tx_unsent_at_close", Value: r.txUnsentAtClose.Load()},
		dgramio.Counter{Layer: "raw", Name: "tx_retried", Value: r.txRetried.Load()},
		dgramio.Counter{Layer: "raw", Name: "rx_while_resolving", Value: r.rxWhileResolving.Load(), Loss: true},
		dgramio.Counter{Layer: "frameio", Name: "rx_frames", Value: fs.RxFrames},
		dgramio.Counter{Layer: "frameio", Name: "tx_frames", Value: fs.TxFrames},
		dgramio.Counter{Layer: "frameio", Name: "tx_ring_full", Value: fs.TxRingFull},
		dgramio.Counter{Layer: "frameio", Name: "tx_dropped", Value: fs.TxDropped},
		dgramio.Counter{Layer: "frameio", Name: "rx_dropped", Value: fs.RxDropped},
	)
	l = append(l, fs.Layers...)
	if r.nb != nil {
		l = r.nb.AppendLayers(l)
	}
	s.Layers = l
	return s
}

// Close releases the FrameIO and runs opts.OnClose. A Wait in progress
// returns net.ErrClosed at once; resolutions in progress are abandoned
// (their worker goroutines have returned when Close does). See
// dgramio.Backend.
func (r *Raw) Close() error {
	if !r.guard.Shut(r.wakeForClose) {
		return nil
	}
	if r.res != nil {
		r.res.close()
	}
	r.countUnsent()
	err := r.fio.Close()
	if r.opts.OnClose != nil {
		err = errors.Join(err, r.opts.OnClose())
	}
	if err != nil {
		return fmt.Errorf("udp: close: %w", err)
	}
	return nil
}

// countUnsent counts, at Close, the messages queued and never given to
// the FrameIO: in the transmit slots (since the last Flush), waiting for
// a resolution, or resolved and waiting for room. They are TxDropped, with
// raw.tx_unsent_at_close saying why.
func (r *Raw) countUnsent() {
	n := uint64(r.pending + len(r.ready))
	for addr, w := range r.resolving {
		for _, i := range w {
			if p := r.table.at(i); p.waiting && p.key.Addr() == addr {
				n += uint64(p.qlen)
				p.qlen = 0 // an index listed twice counts once
			}
		}
	}
	r.pending, r.ready = 0, r.ready[:0]
	r.txUnsentAtClose.Store(n)
	r.txDropped.Add(n)
}

// wakeForClose ends a Wait in progress: it cancels its context and, since
// a FrameIO may look at the context only between slices of its sleep
// (afxdp: 50 ms), interrupts the FrameIO's Wait where it can.
func (r *Raw) wakeForClose() {
	r.closeCancel()
	if i, ok := r.fio.(interface{ Interrupt() }); ok {
		i.Interrupt()
	}
}

// familyName names the family for messages.
func familyName(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}

// MAC returns our Ethernet address (the FrameIO's).
func (r *Raw) MAC() net.HardwareAddr { return net.HardwareAddr(r.mac[:]) }
