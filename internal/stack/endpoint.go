package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	nstack "gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/fdwait"
)

// ethHeader is the length of an Ethernet header without VLAN tag.
const ethHeader = header.EthernetMinimumSize

// Interrupter is implemented by a frameio.Waiter whose Wait can be ended
// early from another goroutine: Interrupt makes the Wait in progress (or the
// next one) return nil at once. Endpoint.Sleep uses it to wake the poll loop
// when netstack's goroutines make data readable without a new frame
// arriving. A FrameIO without it is waited on in slices of SleepSlice.
type Interrupter interface {
	Interrupt()
}

// SleepSlice bounds one FrameIO.Wait in Endpoint.Sleep when the FrameIO
// cannot be interrupted (it does not implement Interrupter): the latency of
// a wake-up by netstack's goroutines is then up to this long.
const SleepSlice = time.Millisecond

// Endpoint is a netstack link endpoint (stack.LinkEndpoint of gVisor) over a
// frameio.FrameIO. It adds and removes the Ethernet header itself, asks
// netstack to resolve link addresses (ARP), pads frames shorter than 60
// bytes with zeros before FrameIO.TxFrame, and computes no checksum offload
// (netstack computes and verifies every checksum in software, which is right
// on any card and on veth).
//
// Two repairs of this gVisor version's TCP sit in the Endpoint, which sees
// every segment both ways: a segment that netstack would refuse as out of
// its receive window is preceded by a bare ACK carrying its ACK field and
// window (acks_salvaged; RFC 9293 §3.10.7.4, see zerowindow.go), and a
// SYN+FIN is dropped before netstack (rx_syn_fin_dropped).
//
// Receive runs on the poll loop (Poll); transmit (WritePackets) may be called
// by any goroutine. See the package documentation for the threading rules.
// The FrameIO belongs to the Endpoint from NewEndpoint on, but Endpoint does
// not close it: its owner (the backend) closes it after Stack.Close.
type Endpoint struct {
	fio frameio.FrameIO
	mtu atomic.Uint32
	irq Interrupter // nil: fio cannot be interrupted

	mu         sync.RWMutex
	dispatcher nstack.NetworkDispatcher
	addr       tcpip.LinkAddress
	onClose    func()

	// Transmit side, shared by the poll loop and netstack's goroutines.
	txMu      sync.Mutex
	txBuf     []byte // one frame, linearized and padded
	txPending bool   // frames given to TxFrame since the last Kick
	txClosed  bool
	txErr     error // the last Kick error, reported by Flush
	// ownerKicks: only the poll loop kicks (SetOwnerKicks); writers wake
	// it instead.
	ownerKicks bool
	// syns gives retransmitted SYNs a fresh TSval (see synStamps), in
	// clock's milliseconds (netstack's clock).
	syns  synStamps
	clock tcpip.Clock

	// sleeping is true while the poll loop is in Sleep: writers then kick
	// themselves, and Interrupt wakes it. wakePending is set by Interrupt
	// and consumed by Sleep, so a wake-up between the poll loop's last look
	// and its sleep is not lost.
	sleeping, wakePending atomic.Bool
	// cancel ends the current slice of a Sleep on a FrameIO that is not an
	// Interrupter (its Wait honours ctx.Done, or at least the deadline).
	cancelMu sync.Mutex
	cancel   context.CancelFunc

	// acks repairs netstack's zero-window drop of ACK fields (see
	// zerowindow.go); ackBuf holds the pure ACK it makes. Both under
	// ackMu: the transmit side notes what netstack sends, the receive
	// side (the poll loop, InjectFrame) what the peer sends.
	ackMu  sync.Mutex
	acks   ackSalvage
	ackBuf []byte

	// Receive side, poll loop only.
	deliver func([]byte)
	arpTap  func([]byte) // SetARPTap; set before the stack runs

	// Counters.
	rxFrames, rxBytes, rxOtherHost, rxMalformed atomic.Uint64
	rxDataFrames                                atomic.Uint64
	txFrames, txBytes, txRingFull, txOversize   atomic.Uint64
	txDataFrames                                atomic.Uint64
	kicks, writerKicks, wakeups                 atomic.Uint64
	rxInjected, arpShared                       atomic.Uint64
	synRestamped                                atomic.Uint64
	acksSalvaged, rxSynFin                      atomic.Uint64
}

var _ nstack.LinkEndpoint = (*Endpoint)(nil)

// NewEndpoint wraps fio. The link address is fio.MAC() and the MTU (largest
// IP packet) fio.MTU().
func NewEndpoint(fio frameio.FrameIO) *Endpoint {
	e := &Endpoint{
		fio:   fio,
		addr:  tcpip.LinkAddress(fio.MAC()),
		txBuf: make([]byte, fio.MTU()+ethHeader),
		// The largest headers: IPv4 and TCP with all their options.
		ackBuf: make([]byte, ethHeader+60+60),
		clock:  tcpip.NewStdClock(),
	}
	e.mtu.Store(uint32(fio.MTU()))
	e.irq, _ = fio.(Interrupter)
	e.deliver = e.deliverFrame
	return e
}

// MTU implements stack.LinkEndpoint: the largest IP packet, FrameIO.MTU().
func (e *Endpoint) MTU() uint32 { return e.mtu.Load() }

// SetMTU implements stack.LinkEndpoint. The MTU is the FrameIO's; it cannot
// be raised, and a smaller value is accepted (netstack then sends smaller
// segments).
func (e *Endpoint) SetMTU(mtu uint32) {
	if mtu <= uint32(len(e.txBuf)-ethHeader) {
		e.mtu.Store(mtu)
	}
}

// MaxHeaderLength implements stack.LinkEndpoint: the Ethernet header.
func (e *Endpoint) MaxHeaderLength() uint16 { return ethHeader }

// LinkAddress implements stack.LinkEndpoint: the FrameIO's MAC address.
func (e *Endpoint) LinkAddress() tcpip.LinkAddress {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.addr
}

// SetLinkAddress implements stack.LinkEndpoint. It changes the source
// address of the frames we send and the address we accept unicast frames
// for; the FrameIO itself is not changed.
func (e *Endpoint) SetLinkAddress(addr tcpip.LinkAddress) {
	e.mu.Lock()
	e.addr = addr
	e.mu.Unlock()
}

// Capabilities implements stack.LinkEndpoint: link address resolution is
// required (netstack runs ARP); no checksum offload.
func (e *Endpoint) Capabilities() nstack.LinkEndpointCapabilities {
	return nstack.CapabilityResolutionRequired
}

// Attach implements stack.LinkEndpoint. Frames are delivered to dispatcher
// by Poll; a nil dispatcher (the NIC is being removed) makes Poll drop them.
func (e *Endpoint) Attach(dispatcher nstack.NetworkDispatcher) {
	e.mu.Lock()
	e.dispatcher = dispatcher
	e.mu.Unlock()
}

// IsAttached implements stack.LinkEndpoint.
func (e *Endpoint) IsAttached() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.dispatcher != nil
}

// Wait implements stack.LinkEndpoint. The endpoint runs no goroutine of its
// own (the poll loop is the application's), so there is nothing to wait for.
func (e *Endpoint) Wait() {}

// ARPHardwareType implements stack.LinkEndpoint: Ethernet.
func (e *Endpoint) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareEther }

// AddHeader implements stack.LinkEndpoint: it pushes the Ethernet header.
func (e *Endpoint) AddHeader(pkt *nstack.PacketBuffer) {
	eth := header.Ethernet(pkt.LinkHeader().Push(ethHeader))
	eth.Encode(&header.EthernetFields{
		SrcAddr: pkt.EgressRoute.LocalLinkAddress,
		DstAddr: pkt.EgressRoute.RemoteLinkAddress,
		Type:    pkt.NetworkProtocolNumber,
	})
}

// ParseHeader implements stack.LinkEndpoint: it consumes the Ethernet
// header. Netstack calls it only for packets written with their link header
// in the payload; Poll consumes the header of received frames itself.
func (e *Endpoint) ParseHeader(pkt *nstack.PacketBuffer) bool {
	_, ok := pkt.LinkHeader().Consume(ethHeader)
	return ok
}

// Close implements stack.LinkEndpoint; netstack calls it when the NIC is
// removed (Stack.Close). From then on WritePackets refuses. It runs the
// action given to SetOnCloseAction and does not close the FrameIO.
func (e *Endpoint) Close() {
	e.txMu.Lock()
	e.txClosed = true
	e.txMu.Unlock()
	e.mu.Lock()
	f := e.onClose
	e.onClose = nil
	e.mu.Unlock()
	if f != nil {
		f()
	}
}

// SetOnCloseAction implements stack.LinkEndpoint.
func (e *Endpoint) SetOnCloseAction(f func()) {
	e.mu.Lock()
	e.onClose = f
	e.mu.Unlock()
}

// WritePackets implements stack.LinkWriter. It may be called from any
// goroutine. Each packet (link header already pushed by AddHeader) is copied
// into one frame, padded with zeros to 60 bytes, and given to
// FrameIO.TxFrame; the packets stay owned by the caller (netstack releases
// them). The frames leave at the poll loop's next Flush, or at once when the
// poll loop sleeps. A full TX ring is kicked and tried once more; a frame
// that still does not fit is dropped, counted (tx_ring_full), and reported
// as ErrNoBufferSpace, which TCP treats as a loss to retransmit.
//
// A retransmitted SYN or SYN-ACK leaves with a fresh TCP timestamp, and a
// SYN-ACK echoes the peer's latest SYN (counted as syn_restamped): this
// gVisor version resends the first TSval and echo, so that netstack (or
// the peer) would take the SYN's backoff (1 s) for the round-trip time,
// and a connection whose first SYN or SYN-ACK was lost would run with an
// RTO of 3 s (see synstamp.go).
func (e *Endpoint) WritePackets(pkts nstack.PacketBufferList) (int, tcpip.Error) {
	e.txMu.Lock()
	defer e.txMu.Unlock()
	n := 0
	var terr tcpip.Error
	for _, pkt := range pkts.AsSlice() {
		if terr = e.writeLocked(pkt); terr != nil {
			break
		}
		n++
	}
	e.kickIfSleepingLocked()
	return n, terr
}

// writeLocked gives one packet to the FrameIO. Caller holds txMu.
func (e *Endpoint) writeLocked(pkt *nstack.PacketBuffer) tcpip.Error {
	if e.txClosed {
		return &tcpip.ErrClosedForSend{}
	}
	frame, ok := e.linearize(pkt)
	if !ok {
		e.txOversize.Add(1)
		return &tcpip.ErrMessageTooLong{}
	}
	if isSYN(frame) && e.syns.restamp(frame, e.clock.NowMonotonic().Sub(tcpip.MonotonicTime{}).Milliseconds()) {
		e.synRestamped.Add(1)
	}
	if v, ok := parseTCP(frame); ok {
		e.ackMu.Lock()
		e.acks.sent(v)
		e.ackMu.Unlock()
	}
	if !e.fio.TxFrame(frame) {
		if e.ownerKicks {
			e.txRingFull.Add(1)
			e.Interrupt()
			return &tcpip.ErrNoBufferSpace{}
		}
		e.kickLocked()
		if !e.fio.TxFrame(frame) {
			e.txRingFull.Add(1)
			return &tcpip.ErrNoBufferSpace{}
		}
	}
	e.txPending = true
	if tcpPayloadLen(frame) > 0 {
		e.txDataFrames.Add(1)
	}
	e.txFrames.Add(1)
	e.txBytes.Add(uint64(len(frame)))
	return nil
}

// kickIfSleepingLocked kicks at once when the poll loop sleeps (it would
// not kick before waking), or, with SetOwnerKicks, wakes it to kick.
// Caller holds txMu.
func (e *Endpoint) kickIfSleepingLocked() {
	if e.txPending && e.sleeping.Load() {
		if e.ownerKicks {
			e.Interrupt()
			return
		}
		e.writerKicks.Add(1)
		e.kickLocked()
	}
}

// SetOwnerKicks makes the poll loop the only goroutine that kicks the
// FrameIO (Flush, Sleep): netstack's goroutines that write frames while it
// sleeps wake it (Interrupt) instead of kicking themselves, and a frame
// that finds the TX ring full is dropped at once (tx_ring_full; TCP
// retransmits it) rather than kicked out from their thread. A queue of a
// group sets it: the system call that sends (AF_XDP copy mode, veth) runs
// the transmission, and with it the peer's receive processing on veth, on
// the CPU that makes it, so only the queue's own pinned poller may make
// it, or the peer would answer on another CPU's queue. Call it before the
// stack runs.
func (e *Endpoint) SetOwnerKicks(on bool) {
	e.txMu.Lock()
	e.ownerKicks = on
	e.txMu.Unlock()
}

// qdisc is the NIC's queueing discipline: none. Netstack's default one
// wraps every packet in a PacketBufferList, an allocation per packet; this
// one hands the packet straight to the endpoint.
type qdisc struct{ e *Endpoint }

var _ nstack.QueueingDiscipline = qdisc{}

// WritePacket implements stack.QueueingDiscipline: WritePackets for one
// packet, which stays the caller's.
func (q qdisc) WritePacket(pkt *nstack.PacketBuffer) tcpip.Error {
	e := q.e
	e.txMu.Lock()
	err := e.writeLocked(pkt)
	e.kickIfSleepingLocked()
	e.txMu.Unlock()
	return err
}

// Close implements stack.QueueingDiscipline; there is nothing to release.
func (qdisc) Close() {}

// linearize copies pkt into txBuf and pads it to frameio.MinFrame.
func (e *Endpoint) linearize(pkt *nstack.PacketBuffer) ([]byte, bool) {
	size := pkt.Size()
	if size > len(e.txBuf) {
		return nil, false
	}
	views, skip := pkt.AsViewList()
	off := 0
	for v := views.Front(); v != nil; v = v.Next() {
		b := v.AsSlice()
		if skip >= len(b) {
			skip -= len(b)
			continue
		}
		off += copy(e.txBuf[off:size], b[skip:])
		skip = 0
		if off == size {
			break
		}
	}
	frame := e.txBuf[:off]
	if off < frameio.MinFrame {
		frame = e.txBuf[:frameio.MinFrame]
		clear(frame[off:])
	}
	return frame, true
}

// kickLocked kicks the FrameIO if frames are pending. Caller holds txMu.
func (e *Endpoint) kickLocked() {
	if !e.txPending {
		return
	}
	e.txPending = false
	e.kicks.Add(1)
	if err := e.fio.Kick(); err != nil {
		e.txErr = err
	}
}

// Flush kicks the frames written since the last kick (by the poll loop or
// by netstack's goroutines) and returns the FrameIO's last Kick error, if
// any, once. The poll loop calls it once per round.
func (e *Endpoint) Flush() error {
	e.txMu.Lock()
	e.kickLocked()
	err := e.txErr
	e.txErr = nil
	e.txMu.Unlock()
	if err != nil {
		return fmt.Errorf("kick: %w", err)
	}
	return nil
}

// Poll delivers up to max received frames to netstack and returns how many
// frames it took from the FrameIO. Poll loop only. Each frame is copied into
// a netstack buffer (pooled by netstack) inside FrameIO's deliver callback,
// so the FrameIO's slot goes back at once.
//
// Netstack queues each TCP segment to a processor goroutine, made runnable
// on this goroutine's P. The caller decides when it runs: package tcp
// yields (runtime.Gosched) once after a Poll that delivered frames, so the
// segment is usually processed before it reads the connections.
func (e *Endpoint) Poll(max int) int {
	return e.fio.RxFrames(max, e.deliver)
}

func (e *Endpoint) deliverFrame(frame []byte) {
	e.rxFrames.Add(1)
	e.rxBytes.Add(uint64(len(frame)))
	e.dispatch(frame)
	if e.arpTap != nil && isARPReply(frame) {
		e.arpShared.Add(1)
		e.arpTap(frame)
	}
}

// isARPReply reports whether frame is an Ethernet ARP reply (opcode 2).
func isARPReply(frame []byte) bool {
	return len(frame) >= ethHeader+8 && frame[12] == 0x08 && frame[13] == 0x06 &&
		frame[ethHeader+6] == 0 && frame[ethHeader+7] == 2
}

// SetARPTap makes the poll loop call fn with every ARP reply the Endpoint
// receives, after netstack has taken it; the frame is valid only during
// the call. The stacks of a group share one address and MAC, and a NIC
// puts ARP, which has no ports to hash, on one queue only: each stack
// passes the replies it gets to the others (InjectFrame), so that a stack
// whose own request was answered on another queue learns the answer too.
// Call it before the stack runs.
func (e *Endpoint) SetARPTap(fn func(frame []byte)) { e.arpTap = fn }

// InjectFrame hands netstack a frame another Endpoint received (an ARP
// reply passed on by SetARPTap's function), as if it had arrived here;
// it is copied, and counted as rx_injected, not rx_frames. Safe from any
// goroutine; after the stack is closed it does nothing.
func (e *Endpoint) InjectFrame(frame []byte) {
	e.rxInjected.Add(1)
	e.dispatch(frame)
}

// dispatch gives one frame to netstack (a copy).
func (e *Endpoint) dispatch(frame []byte) {
	if len(frame) < ethHeader {
		e.rxMalformed.Add(1)
		return
	}
	eth := header.Ethernet(frame)
	e.mu.RLock()
	d, own := e.dispatcher, e.addr
	e.mu.RUnlock()
	if d == nil {
		return
	}
	var typ tcpip.PacketType
	switch dst := eth.DestinationAddress(); {
	case dst == own:
		typ = tcpip.PacketHost
	case dst == header.EthernetBroadcastAddress:
		typ = tcpip.PacketBroadcast
	case header.IsMulticastEthernetAddress(dst):
		typ = tcpip.PacketMulticast
	default:
		// Another host's frame (a switch flooding, a promiscuous
		// device): not ours, and netstack's IPv4 would not drop it.
		e.rxOtherHost.Add(1)
		return
	}
	if isSYN(frame) {
		e.txMu.Lock() // the table is the transmit side's
		e.syns.notePeerSYN(frame)
		e.txMu.Unlock()
	}
	if v, ok := parseTCP(frame); ok && typ == tcpip.PacketHost {
		if v.tcp.Flags()&(header.TCPFlagSyn|header.TCPFlagFin) == header.TCPFlagSyn|header.TCPFlagFin {
			// SYN and FIN together open and close at once: no
			// host's TCP sends it, scanners and floods do. Linux
			// drops it; this gVisor version answers with a SYN-ACK.
			e.rxSynFin.Add(1)
			return
		}
		if v.payload > 0 {
			e.rxDataFrames.Add(1)
		}
		e.ackMu.Lock()
		if ack := e.acks.received(v, e.ackBuf); ack != nil {
			e.acksSalvaged.Add(1)
			deliverTo(d, typ, ack)
		}
		e.ackMu.Unlock()
	}
	deliverTo(d, typ, frame)
}

// deliverTo hands netstack's dispatcher d a copy of frame, received as typ.
func deliverTo(d nstack.NetworkDispatcher, typ tcpip.PacketType, frame []byte) {
	pkt := nstack.NewPacketBuffer(nstack.PacketBufferOptions{
		Payload: buffer.MakeWithView(buffer.NewViewWithData(frame)),
	})
	pkt.LinkHeader().Consume(ethHeader) // the caller checked the length
	pkt.PktType = typ
	d.DeliverNetworkPacket(header.Ethernet(frame).Type(), pkt)
	pkt.DecRef()
}

// Sleep blocks the poll loop until a frame may be received, Interrupt is
// called, ctx is done (ctx.Err()) or the FrameIO is closed (net.ErrClosed).
// Before sleeping it kicks pending frames; while it sleeps, netstack's
// writers kick their own frames (with SetOwnerKicks, they wake it). It returns an error matching
// dgramio.ErrNotSupported if the FrameIO cannot wait (no frameio.Waiter).
func (e *Endpoint) Sleep(ctx context.Context) error {
	w, ok := e.fio.(frameio.Waiter)
	if !ok {
		return dgramio.NotSupported("Wait on this FrameIO", "", "poll Rx instead", nil)
	}
	e.txMu.Lock()
	e.sleeping.Store(true)
	e.kickLocked()
	e.txMu.Unlock()
	defer e.sleeping.Store(false)
	if e.wakePending.Swap(false) {
		return nil
	}
	if e.irq != nil {
		err := w.Wait(ctx)
		e.wakePending.Store(false)
		return fdwait.Cause(ctx, err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		sctx, cancel := context.WithTimeout(ctx, SleepSlice)
		e.cancelMu.Lock()
		e.cancel = cancel
		e.cancelMu.Unlock()
		if e.wakePending.Swap(false) {
			e.dropCancel()
			return nil
		}
		err := w.Wait(sctx)
		e.dropCancel()
		if err == nil || errors.Is(err, net.ErrClosed) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			return fdwait.Expired(ctx)
		}
		if e.wakePending.Swap(false) {
			return nil
		}
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			return err
		}
	}
}

// dropCancel releases the slice context of Sleep.
func (e *Endpoint) dropCancel() {
	e.cancelMu.Lock()
	c := e.cancel
	e.cancel = nil
	e.cancelMu.Unlock()
	if c != nil {
		c()
	}
}

// Interrupt ends the poll loop's Sleep, now or, if it is not sleeping, the
// next one as soon as it begins. Safe from any goroutine; netstack's
// goroutines call it (through the TCP endpoints' waiter callbacks) when they
// make data readable or a connection ready. It makes a system call (the
// FrameIO's Interrupt) only when the poll loop is asleep.
func (e *Endpoint) Interrupt() {
	e.wakePending.Store(true)
	if e.sleeping.Load() {
		e.wakeups.Add(1)
		if e.irq != nil {
			e.irq.Interrupt()
			return
		}
		e.cancelMu.Lock()
		c := e.cancel
		e.cancelMu.Unlock()
		if c != nil {
			c()
		}
	}
}

// Unacked returns how many of the first written bytes of netstack's
// stream on the connection from local to remote the peer has not
// acknowledged, as the segments the Endpoint saw both ways say (the
// highest ACK number from the peer against netstack's initial sequence
// number): this gVisor version's endpoints do not tell (GetSockOptInt
// does not answer tcpip.SendQueueSizeOption). ok is false when the
// Endpoint did not see the connection's SYN (its slot in the table of
// 1024 was taken by another connection since). written must be the
// bytes netstack took (Write) on that connection; fewer than 2 GiB of
// them may be unacknowledged. Safe from any goroutine.
func (e *Endpoint) Unacked(local, remote netip.AddrPort, written uint64) (unacked uint64, ok bool) {
	la, ra := local.Addr().Unmap(), remote.Addr().Unmap()
	if la.Is4() != ra.Is4() || !la.IsValid() {
		return 0, false
	}
	k := flowKey{lport: local.Port(), rport: remote.Port(), v6: !la.Is4()}
	if k.v6 {
		k.local, k.remote = la.As16(), ra.As16()
	} else {
		l4, r4 := la.As4(), ra.As4()
		copy(k.local[:], l4[:])
		copy(k.remote[:], r4[:])
	}
	e.ackMu.Lock()
	defer e.ackMu.Unlock()
	return e.acks.unacked(k, written)
}

// tcpPayloadLen returns the TCP payload length of an Ethernet frame carrying
// IPv4 or IPv6 and TCP (parseTCP), or 0 for anything else or anything malformed. It only
// counts (the "packing" of records into segments); netstack does the real
// parsing.
func tcpPayloadLen(frame []byte) int {
	v, ok := parseTCP(frame)
	if !ok {
		return 0
	}
	return v.payload
}
