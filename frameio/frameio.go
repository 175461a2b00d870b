// Package frameio defines FrameIO, the transport of raw Ethernet frames that
// the raw datagram backends (xdp, dpdk) and the userspace TCP (tcp-xdp,
// tcp-dpdk) are built on, and the rules every implementation keeps.
//
// Implementations: frameio/afxdp (AF_XDP), frameio/dpdk (DPDK, build tag
// dpdk), frameio/memio (an in-memory pair for tests).
//
// This package is API: it and its implementations are useful on their own,
// without the rest of dgramio.
package frameio

import (
	"context"
	"net"
	"time"

	"github.com/dgramio/dgramio"
)

// MinFrame is the shortest Ethernet frame without FCS (ETH_ZLEN). The kernel
// pads shorter frames; AF_XDP and DPDK do not, so raw paths pad with
// package pad before TxFrame.
const MinFrame = 60

// FrameIO moves raw Ethernet frames (destination MAC first, no FCS).
//
// Threading: the transmit side (TxFrame, Kick) and the receive side
// (RxFrames) use separate rings and may run at the same time in two
// goroutines, but each side must be driven by one goroutine at a time;
// FrameIO does no locking of its own. A user with several transmitting
// goroutines (netstack's TCP processors and timers) serializes them itself:
// package stack holds a mutex around TxFrame. MAC, MTU and Stats may be
// called from any goroutine. Close must not race with either side.
type FrameIO interface {
	// TxFrame copies frame into a transmit slot and returns true, or returns
	// false when no slot is free (the ring is full; nothing was copied and
	// the frame is not sent). The caller keeps ownership of frame. The frame
	// is not handed to the device before Kick.
	TxFrame(frame []byte) bool
	// Kick makes the device take the frames given to TxFrame. It makes a
	// system call only when the device needs one (AF_XDP need_wakeup). An
	// error means the device refused (link gone), not that the ring is busy.
	Kick() error
	// RxFrames calls deliver for each received frame, at most max of them,
	// and returns how many it delivered. It never blocks. frame is valid only
	// inside the call to deliver: its memory goes back to the device
	// afterwards; copy what you keep.
	RxFrames(max int, deliver func(frame []byte)) int
	// MAC is the interface's hardware address.
	MAC() net.HardwareAddr
	// MTU is the largest IP packet (frame minus the 14-byte Ethernet header)
	// that one transmit or receive slot holds.
	MTU() int
	// Stats returns the transport's counters.
	Stats() Stats
	// Close releases the rings, memory and anything attached to the device.
	Close() error
}

// SlotWriter is implemented by a FrameIO whose transmit slots a caller
// may build a frame in where it will be sent, instead of building it
// elsewhere and having TxFrame copy it (a copy of every frame's bytes
// saved on a sender's path). A wrapper that changes what TxFrame does
// (drops, captures, rewrites frames) must do the same in TxCommit or not
// offer SlotWriter: embedding a concrete FrameIO passes these methods on.
type SlotWriter interface {
	// TxSlot takes a free transmit slot, or the one taken before and not
	// committed yet, and returns its memory: len 0, cap the largest
	// frame. It returns nil when no slot is free. TxFrame does not use a
	// taken slot; its bytes are the caller's until TxCommit.
	TxSlot() []byte
	// TxCommit queues the first n bytes of the taken slot as a frame for
	// the next Kick, as TxFrame queues a copy, and returns true. It
	// returns false, and the slot stays taken, when no slot is taken, n
	// is 0 or above the slot's size, or the transmit ring is full
	// (counted as TxFrame counts it).
	TxCommit(n int) bool
}

// Waiter is implemented by a FrameIO that can sleep until a frame arrives.
type Waiter interface {
	// Wait blocks until RxFrames may deliver something, ctx is done, or the
	// FrameIO is closed (net.ErrClosed).
	Wait(ctx context.Context) error
}

// DeadlineWaiter is implemented by a Waiter that can also sleep until a
// time without a context made for it: a poll loop that sleeps until its
// next timer every round saves a context and its timer per sleep.
type DeadlineWaiter interface {
	// WaitUntil is Wait that also returns nil once deadline has passed
	// (a zero deadline: none).
	WaitUntil(ctx context.Context, deadline time.Time) error
}

// Stats are a FrameIO's counters, in frames.
type Stats struct {
	// Mode says how the transport runs ("driver copy", "skb copy",
	// "net_af_xdp", "memio").
	Mode string
	// RxFrames and TxFrames count frames delivered and frames accepted by
	// TxFrame; RxBytes and TxBytes their bytes.
	RxFrames, TxFrames, RxBytes, TxBytes uint64
	// TxRingFull counts TxFrame calls refused because no slot was free.
	TxRingFull uint64
	// TxDropped counts frames accepted by TxFrame that the device then
	// dropped (a bounded wait on a full ring that ran out).
	TxDropped uint64
	// RxDropped counts frames the device or kernel dropped before we saw
	// them (XSK rx_dropped and rx_ring_full, DPDK imissed, impairment).
	RxDropped uint64
	// Syscalls counts system calls made (kicks, wake-ups).
	Syscalls uint64
	// Layers are the device's own counters (XDP_STATISTICS, the XDP
	// program's counters, rte_eth_stats, xstats), named as the device names
	// them.
	Layers []dgramio.Counter
}
