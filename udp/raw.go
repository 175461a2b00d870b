package udp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"

	"github.com/dgramio/dgramio/arp"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/core"
)

// Resolver returns the MAC address of the next hop towards addr (on one
// link: addr itself). It may block; ctx bounds it.
type Resolver func(ctx context.Context, addr netip.Addr) ([6]byte, error)

// RawOptions are what a raw datagram backend needs besides Config and the
// FrameIO: where peers' MACs come from, ARP, and the names for Stats.
type RawOptions struct {
	// Resolve finds the MAC of a destination when Config.DstMAC is not set:
	// the Dests at construction, and a QueueTo address never heard from.
	// The xdp kind passes a neighbour-table lookup, the dpdk kind ARP.
	// nil with ARP set: ARP.Resolve.
	Resolve Resolver
	// ARP, when set, owns ARP on this interface: Rx hands it ARP frames,
	// so requests for Config.LocalIP are answered, and its replies are
	// kicked out at the end of that Rx (the only case where Rx sends).
	// Its counters join Stats.Layers.
	ARP *arp.Handler
	// Mode is Stats.Mode ("xdp driver copy", ...). Default: the FrameIO's
	// Stats().Mode.
	Mode string
	// OnClose, when set, runs in Close after the FrameIO is closed
	// (detaching what the constructor attached, for instance).
	OnClose func() error
}

// maxPeers bounds the table of peers QueueTo answers; beyond it, a new
// peer replaces an arbitrary one that is not a configured destination.
const maxPeers = 4096

// txRetries bounds the attempts at TxFrame, with a Kick and a yield
// between them, when the FrameIO's ring is full during Flush.
const txRetries = 64

type peer struct {
	tmpl Template
	dest bool // one of Config.Dests: never evicted
}

// Raw is the raw datagram backend over any frameio.FrameIO: the xdp and
// dpdk kinds are a Raw over an AF_XDP socket or a DPDK port. It builds
// Ethernet/IPv4/UDP frames from a Template per destination, parses what it
// receives with Parse, and keeps every refused or lost message in a
// counter.
//
// Sending: Queue and QueueTo build the frame at once into one of
// Config.TxQueue preallocated slots (the payload is copied, the caller
// keeps it) and return false when the slots are full. Flush hands the slots
// to the FrameIO, Config.TxBatch frames and one Kick per batch, so the
// device sees batches of the size the kernel kinds use for sendmmsg. A
// frame the FrameIO's ring refuses even after kicking and retrying is
// counted in Stats.TxDropped.
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
//
// Threading and lifetime as core.Backend says. Nothing is allocated per
// message; Wait with a cancellable ctx allocates a little per call.
type Raw struct {
	cfg    core.Config
	fio    frameio.FrameIO
	opts   RawOptions
	filter Filter
	mac    [6]byte
	src    netip.AddrPort

	dests []*peer
	peers map[netip.AddrPort]*peer

	// Transmit slots: frame i is txBuf[i*slot:][:txLen[i]].
	slot    int
	txBuf   []byte
	txLen   []int
	txPay   []int
	pending int

	// Receive buffers, one per packet of an Rx.
	rxBuf  []byte
	rxSize int
	rxPkts []core.Packet
	rxN    int
	rxLast int // packets handed out by the last Rx, for Poison
	deliv  func([]byte)

	guard       core.Guard
	closeCtx    context.Context
	closeCancel context.CancelFunc

	parse                                        Counters
	txQueued, txBackpressure, txOversize, txSent atomic.Uint64
	txDropped, txBytes, rxDelivered, rxBytes     atomic.Uint64
	rxTruncated, txUnresolved, txRetried         atomic.Uint64

	// The padding keeps the fields of the next object on the heap (another
	// queue's, written by another core) off this one's last cache line.
	_ [64]byte
}

var _ core.Backend = (*Raw)(nil)

// NewRaw returns a Raw for cfg over fio, which it owns from then on (Close
// closes it, and so does a failed NewRaw). cfg gets its defaults here;
// LocalIP must be IPv4, MaxDatagram must fit one frame of fio's MTU, and a
// client's Dests are resolved now (Config.DstMAC, else opts.Resolve, else
// opts.ARP), bounded by Config.ConnectTimeout.
func NewRaw(cfg core.Config, fio frameio.FrameIO, opts RawOptions) (_ *Raw, err error) {
	defer func() {
		if err != nil {
			fio.Close()
		}
	}()
	cfg = cfg.WithDefaults()
	if !cfg.LocalIP.Is4() {
		return nil, &core.ConfigError{Field: "LocalIP", Value: cfg.LocalIP, Reason: "a raw datagram kind needs our IPv4 address"}
	}
	if most := MaxPayload(fio.MTU()); cfg.MaxDatagram > most || cfg.MaxDatagram <= 0 {
		return nil, &core.ConfigError{Field: "MaxDatagram", Value: cfg.MaxDatagram,
			Reason: fmt.Sprintf("one frame of this interface carries at most %d bytes of UDP payload (MTU %d); lower MaxDatagram or raise the MTU", most, fio.MTU())}
	}
	if len(cfg.DstMAC) != 0 && len(cfg.DstMAC) != 6 {
		return nil, &core.ConfigError{Field: "DstMAC", Value: cfg.DstMAC, Reason: "an Ethernet address has 6 bytes"}
	}
	mac := fio.MAC()
	if len(mac) != 6 {
		return nil, fmt.Errorf("udp: FrameIO MAC %v is not an Ethernet address", mac)
	}
	if opts.Resolve == nil && opts.ARP != nil {
		h := opts.ARP
		opts.Resolve = func(ctx context.Context, a netip.Addr) ([6]byte, error) { return h.Resolve(ctx, a, nil) }
	}
	if opts.Mode == "" {
		opts.Mode = fio.Stats().Mode
	}
	port := cfg.Port
	if cfg.Role == core.RoleClient && cfg.LocalPort != 0 {
		port = cfg.LocalPort
	}
	r := &Raw{
		cfg:    cfg,
		fio:    fio,
		opts:   opts,
		filter: Filter{MAC: mac, Addr: cfg.LocalIP, Port: port},
		src:    netip.AddrPortFrom(cfg.LocalIP, port),
		peers:  make(map[netip.AddrPort]*peer, len(cfg.Dests)),
		slot:   max(HeaderLen+cfg.MaxDatagram, frameio.MinFrame),
		rxSize: cfg.MaxDatagram,
	}
	copy(r.mac[:], mac)
	r.txBuf = make([]byte, cfg.TxQueue*r.slot)
	r.txLen = make([]int, cfg.TxQueue)
	r.txPay = make([]int, cfg.TxQueue)
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
				dmac, err = opts.Resolve(ctx, d)
				if err != nil {
					return nil, fmt.Errorf("udp: resolve destination %s: %w", d, err)
				}
			default:
				return nil, &core.ConfigError{Field: "DstMAC", Value: cfg.DstMAC,
					Reason: "nothing resolves the destination's MAC on this path; set DstMAC"}
			}
			p, err := r.newPeer(netip.AddrPortFrom(d, cfg.Port), dmac)
			if err != nil {
				return nil, err
			}
			p.dest = true
			r.dests = append(r.dests, p)
		}
	}
	r.closeCtx, r.closeCancel = context.WithCancel(context.Background())
	return r, nil
}

// newPeer adds a template towards to at dmac to the peer table.
func (r *Raw) newPeer(to netip.AddrPort, dmac [6]byte) (*peer, error) {
	if len(r.peers) >= maxPeers {
		for k, p := range r.peers {
			if !p.dest {
				delete(r.peers, k)
				break
			}
		}
	}
	p := &peer{}
	err := p.tmpl.Reset(Endpoints{SrcMAC: r.mac[:], DstMAC: dmac[:], Src: r.src, Dst: to, DF: true})
	if err != nil {
		return nil, err
	}
	r.peers[to] = p
	return p, nil
}

// Queue builds payload into a slot for every destination (Config.Dests).
// With no destinations (a server) it returns false and counts nothing: a
// server answers with QueueTo. See core.Backend.
func (r *Raw) Queue(payload []byte) bool {
	if !r.guard.Enter() {
		return false
	}
	defer r.guard.Exit()
	need := len(r.dests)
	if need == 0 {
		return false
	}
	if len(payload) > r.cfg.MaxDatagram {
		r.txOversize.Add(uint64(need))
		return false
	}
	if r.pending+need > r.cfg.TxQueue {
		r.txBackpressure.Add(uint64(need))
		return false
	}
	for _, p := range r.dests {
		r.put(&p.tmpl, payload)
	}
	r.txQueued.Add(uint64(need))
	return true
}

// QueueTo builds payload into a slot for to. A peer never heard from is
// resolved first (opts.Resolve, bounded by Config.ConnectTimeout); when
// that fails QueueTo returns false and counts tx_unresolved. See
// core.Backend.
func (r *Raw) QueueTo(payload []byte, to netip.AddrPort) bool {
	if !r.guard.Enter() {
		return false
	}
	defer r.guard.Exit()
	if len(payload) > r.cfg.MaxDatagram {
		r.txOversize.Add(1)
		return false
	}
	if r.pending >= r.cfg.TxQueue {
		r.txBackpressure.Add(1)
		return false
	}
	p := r.peers[to]
	if p == nil {
		p = r.resolvePeer(to)
		if p == nil {
			r.txUnresolved.Add(1)
			return false
		}
	}
	r.put(&p.tmpl, payload)
	r.txQueued.Add(1)
	return true
}

func (r *Raw) resolvePeer(to netip.AddrPort) *peer {
	if !to.Addr().Is4() {
		return nil
	}
	var dmac [6]byte
	switch {
	case len(r.cfg.DstMAC) == 6:
		copy(dmac[:], r.cfg.DstMAC)
	case r.opts.Resolve != nil:
		ctx, cancel := context.WithTimeout(r.closeCtx, r.cfg.ConnectTimeout)
		m, err := r.opts.Resolve(ctx, to.Addr())
		cancel()
		if err != nil {
			return nil
		}
		dmac = m
	default:
		return nil
	}
	p, err := r.newPeer(to, dmac)
	if err != nil {
		return nil
	}
	return p
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
		return core.ErrClosed
	}
	defer r.guard.Exit()
	if r.pending == 0 {
		return nil
	}
	n := r.pending
	r.pending = 0
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

// Rx fills pkts with received datagrams. See core.Backend.
func (r *Raw) Rx(pkts []core.Packet) (int, error) {
	if !r.guard.Enter() {
		return 0, core.ErrClosed
	}
	defer r.guard.Exit()
	if core.Debug {
		for i := 0; i < r.rxLast; i++ {
			core.Poison(r.rxBuf[i*r.rxSize : (i+1)*r.rxSize])
		}
	}
	want := min(len(pkts), r.cfg.RxBatch)
	r.rxPkts, r.rxN = pkts[:want], 0
	if want > 0 {
		r.fio.RxFrames(want, r.deliv)
	}
	n := r.rxN
	r.rxPkts, r.rxLast = nil, n
	if r.opts.ARP != nil {
		if err := r.opts.ARP.Flush(); err != nil {
			return n, fmt.Errorf("udp: ARP reply: %w", err)
		}
	}
	r.rxDelivered.Add(uint64(n))
	return n, nil
}

// deliver takes one frame inside RxFrames.
func (r *Raw) deliver(frame []byte) {
	if r.opts.ARP != nil && r.opts.ARP.Handle(frame) {
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
	r.rxPkts[i] = core.Packet{Data: buf[:n:n], From: d.From}
	r.rxN++
	r.rxBytes.Add(uint64(n))
	r.learn(d.From, d.SrcMAC)
}

// learn records where answers to from go: the MAC its frame came from.
func (r *Raw) learn(from netip.AddrPort, mac [6]byte) {
	p := r.peers[from]
	if p == nil {
		r.newPeer(from, mac)
		return
	}
	if p.tmpl.DstMAC() != mac {
		p.tmpl.SetDstMAC(mac)
	}
}

// Wait sleeps until a frame arrives, ctx is done or Raw is closed, when
// the FrameIO implements frameio.Waiter; otherwise it returns an error
// matching ErrNotSupported at once. See core.Backend.
func (r *Raw) Wait(ctx context.Context) error {
	w, ok := r.fio.(frameio.Waiter)
	if !ok {
		return core.NotSupported("Wait on "+r.opts.Mode, "", "this transport cannot sleep; poll Rx", nil)
	}
	if !r.guard.BeginWait() {
		return core.ErrClosed
	}
	defer r.guard.EndWait()
	wctx := r.closeCtx
	if ctx.Done() != nil {
		c, cancel := context.WithCancel(ctx)
		stop := context.AfterFunc(r.closeCtx, cancel)
		defer stop()
		defer cancel()
		wctx = c
	}
	err := w.Wait(wctx)
	if r.guard.Closed() {
		return core.ErrClosed
	}
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Stats returns the counters. Layers: "udp" is the breakdown of the
// parser's verdicts (RxFiltered, RxMalformed, RxBadChecksum); "raw" counts
// tx_unresolved (QueueTo refused: no MAC for the peer; the caller kept the
// message) and tx_retried (TxFrame attempts repeated on a full ring);
// "frameio" the transport's totals (Loss false: rx_dropped and tx_dropped
// are sums, and the FrameIO's own Layers, appended after them as the
// FrameIO reports them, say which of its counters lose messages, as memio
// and afxdp do); "arp" the ARP handler's, when Raw owns ARP.
func (r *Raw) Stats() core.Stats {
	fs := r.fio.Stats()
	s := core.Stats{
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
	l := make([]core.Counter, 0, 32+len(fs.Layers))
	l = r.parse.AppendLayers(l, "udp")
	l = append(l,
		core.Counter{Layer: "raw", Name: "tx_unresolved", Value: r.txUnresolved.Load()},
		core.Counter{Layer: "raw", Name: "tx_retried", Value: r.txRetried.Load()},
		core.Counter{Layer: "frameio", Name: "rx_frames", Value: fs.RxFrames},
		core.Counter{Layer: "frameio", Name: "tx_frames", Value: fs.TxFrames},
		core.Counter{Layer: "frameio", Name: "tx_ring_full", Value: fs.TxRingFull},
		core.Counter{Layer: "frameio", Name: "tx_dropped", Value: fs.TxDropped},
		core.Counter{Layer: "frameio", Name: "rx_dropped", Value: fs.RxDropped},
	)
	l = append(l, fs.Layers...)
	if r.opts.ARP != nil {
		l = r.opts.ARP.AppendLayers(l)
	}
	s.Layers = l
	return s
}

// Close releases the FrameIO and runs opts.OnClose. See core.Backend.
func (r *Raw) Close() error {
	if !r.guard.Shut(r.closeCancel) {
		return nil
	}
	err := r.fio.Close()
	if r.opts.OnClose != nil {
		err = errors.Join(err, r.opts.OnClose())
	}
	if err != nil {
		return fmt.Errorf("udp: close: %w", err)
	}
	return nil
}

// MAC returns our Ethernet address (the FrameIO's).
func (r *Raw) MAC() net.HardwareAddr { return net.HardwareAddr(r.mac[:]) }
