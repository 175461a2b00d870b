//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package uring

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/fdwait"
	"github.com/dgramio/dgramio/internal/kindcfg"
	"github.com/dgramio/dgramio/internal/poison"
	"github.com/dgramio/dgramio/internal/sock"
	"github.com/dgramio/dgramio/kernel/iouring"
)

// User data of the requests: the kind in the top byte, a slot index below.
const (
	tagShift = 56
	tagRecv  = 1 << tagShift
	tagSend  = 2 << tagShift
	tagWake  = 3 << tagShift
	tagKill  = 4 << tagShift
	tagMask  = 0xff << tagShift
	// tagCancel is the cancellation of a reply socket's receive.
	tagCancel = 5 << tagShift
	// A receive's user data holds its socket below the tag: 0 the server
	// socket, i+1 reply slot i, and above that the slot's generation.
	recvSockMask = 0xffff
	recvGenShift = 16
)

const (
	bufGroup = 0 // the one buffer group
	fixedFD  = 0 // the socket's index among the registered files

	// Layout of a send slot: msghdr, iovec, sockaddr_in, payload.
	slotIov     = 64
	slotName    = slotIov + 16
	slotPayload = slotName + 32 // a sockaddr_in6 (28 bytes), aligned

	// waitSlice bounds one sleep in the kernel, so that a context without a
	// deadline is noticed.
	waitSlice = 50 * time.Millisecond
	// drainWait bounds how long Close waits for the kernel to finish the
	// requests in flight before it unmaps their memory.
	drainWait = 2 * time.Second
)

// Backend is the uring kind. Create it with New on the goroutine that will
// poll it; see dgramio.Backend for the method contracts and the threading
// rules.
//
// Memory: everything the kernel reads or writes outside a system call is in
// mmap'd memory: the rings, Config.URing.RxBuffers receive buffers of
// 32+MaxDatagram bytes (the io_uring_recvmsg_out header, the source
// address, the payload), and TxQueue×(destinations) send slots. Nothing is
// allocated per message.
type Backend struct {
	cfg     dgramio.Config
	fd      int
	granted sock.Granted
	mode    string
	sqpoll  bool
	// coop is IORING_SETUP_COOP_TASKRUN|IORING_SETUP_TASKRUN_FLAG (5.19),
	// on unless URing.Interrupts or SQPoll (the kernel refuses both): the
	// kernel raises a flag in the SQ ring instead of interrupting the
	// ring's thread to complete a receive, and Rx, seeing it, enters the
	// kernel once to run the completions (one system call per batch that
	// arrived, none for an Rx that finds nothing). A thread waiting in
	// io_uring_enter is still woken.
	coop bool

	ring  *iouring.Ring
	bufs  *iouring.BufRing
	mem   *iouring.Region // the receive msghdr, then the send slots
	waker *fdwait.Waker   // written by Close: ends Wait, cancels everything

	// thread is the OS thread New ran on, which submits: locked, and
	// pinned to Config.CPUs[0] when set. Close releases it there.
	thread cpu.Thread
	life   sock.Life

	// Send slots: free[:nfree] are free, nq slots from queue[qhead]
	// (modulo nslots) are queued for Flush, inflight are submitted (or in
	// the SQ) and not completed.
	nslots       int
	slotSize     int
	free         []uint16
	nfree        int
	queue        []uint16
	qhead, qtail int
	nq           int
	inflight     int
	dests        []netip.AddrPort // with Port; empty name when connected
	connectedTo  netip.AddrPort
	nameLen      int // the sockaddr of the socket's family: 16 (IPv4) or 28 (IPv6)
	recvOff      int // the receive msghdr's offset in mem (0)
	slotsOff     int

	// Receive: rxq holds completions taken from the CQ and not yet
	// delivered (one per buffer, so never more than RxBuffers); held are
	// the buffers handed out by the last Rx.
	armed         bool
	rxq           []rxDone
	rxHead, rxLen int
	held          []uint16
	nheld         int
	// bufsHand hands the freeing of the buffer ring between Close and the
	// poll loop (bufsClosed, bufsLoopLeft): see releaseBufs.
	bufsHand       atomic.Uint32
	killed, woken  bool       // the kill switch and wake-up completions arrived
	rxErr          unix.Errno // an unexpected receive error, reported once by Rx
	syscallsAtOpen uint64

	// Counters, written under the guard (or after Shut).
	st                                   dgramio.Stats
	rearms, enobufs, rxRefused, rxErrors uint64
	sendBufFull, sendRefused, sendOther  uint64
	noDest, badDest, cancelled           uint64
	unconfirmedAtClose                   uint64
	unread                               uint64 // datagrams received and never taken by Rx, counted at Close

	// Connected reply sockets (nil without): each has a multishot receive
	// of its own (Reply.Armed) into the one buffer ring, and sends to its
	// peer go to it (plain fds, not registered files). sendTo[slot] is
	// the reply slot + 1 a send slot went to (0: the server socket), of
	// generation sendGen[slot]; unarmed counts reply receives the kernel
	// ended (ENOBUFS) that Rx arms again.
	rep      *sock.Replies
	sendTo   []uint16
	sendGen  []uint16
	unarmed  int
	toCancel int // closing reply sockets whose cancellation did not fit in the SQ
	rxCalls  uint64

	// The padding keeps the fields of the next object on the heap (another
	// queue's, written by another core) off this one's last cache line.
	_ [64]byte
}

type rxDone struct {
	res int32
	bid uint16
	src uint16 // the socket: 0 the server socket, i+1 reply slot i
}

var _ dgramio.Backend = (*Backend)(nil)

// New opens a uring backend for cfg. It applies cfg.WithDefaults and
// validates cfg before any system call; cfg.Kind may be "uring" or empty.
//
// Call New on the goroutine that will call Queue, Flush, Rx and Wait: New
// locks that goroutine to its OS thread (runtime.LockOSThread) and leaves
// it locked, because the ring is set up with IORING_SETUP_SINGLE_ISSUER
// (only the creating thread may submit; any other gets EEXIST), and
// because io_uring runs completion work on the submitting thread and CPU
// affinity is per thread. With Config.CPUs set it also pins the thread to
// CPUs[0], unless the caller pinned it there already (see cpu.Claim).
// Close gives the thread the affinity it had before New from any
// goroutine; called on that goroutine, it undoes all New did (a pin the caller
// made stays); a goroutine that ends while locked takes its thread with
// it. That goroutine must outlive the backend: when its thread ends, the kernel
// cancels the ring's requests (the receive ends, sends in flight fail) and
// no other thread may arm them again (Rx then returns an error saying so).
// To open a backend whose socket lives in another network namespace, join
// the namespace on the polling goroutine's locked thread (setns) before
// New; the ring does not care where its thread is afterwards.
//
// A server on one address gives the peers that keep sending connected
// reply sockets of their own (Config.ReplySockets, sock.Replies), each
// with a multishot receive into the same buffer ring; QueueTo to such a
// peer goes out of its socket; Close cancels and closes them.
//
// Options (Config.URing): SQPoll needs SQCPU, a CPU other than the
// poller's and inside the process's CPU set (Validate refuses an unset
// one; New refuses one outside the set, naming the allowed CPUs). NAPI
// registers NAPI busy polling (Linux 6.9) for Config.BusyPollUs; it acts
// only while Wait sleeps in the kernel (and in the SQPOLL thread).
//
// Errors: a *dgramio.ConfigError for a bad field; an error matching
// dgramio.ErrNotSupported when the kernel is older than 6.0 or io_uring is
// turned off (the sysctl kernel.io_uring_disabled); a *dgramio.PrivilegeError
// when io_uring is restricted to a group the process is not in, or for a
// port below 1024; a wrapped errno otherwise.
func New(cfg dgramio.Config) (dgramio.Backend, error) {
	b, err := open(cfg)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func open(cfg dgramio.Config) (_ *Backend, err error) {
	return openQueue(cfg, -1, sock.Granted{}, "")
}

// openQueue opens a backend on the server socket fd with what the kernel
// granted it (a queue of a group, which hands fd over: it is closed on
// error), or on a socket of its own when fd is -1. note ends Stats.Mode.
func openQueue(cfg dgramio.Config, fd int, granted sock.Granted, note string) (_ *Backend, err error) {
	if fd >= 0 {
		defer func() {
			if err != nil {
				unix.Close(fd)
			}
		}()
	}
	cfg, err = kindcfg.PrepareOne(cfg, dgramio.KindURing)
	if err != nil {
		return nil, err
	}
	if err := iouring.Check(); err != nil {
		return nil, err
	}
	sqCPU, err := sqCPUOf(cfg)
	if err != nil {
		return nil, err
	}

	b := &Backend{cfg: cfg, fd: -1, sqpoll: cfg.URing.SQPoll, coop: !cfg.URing.Interrupts && !cfg.URing.SQPoll}
	var undo []func()
	defer func() {
		if err != nil {
			// The ring goes first: closing it ends what it may have in
			// flight before the memory it points into is unmapped.
			if b.ring != nil {
				b.ring.Close()
			}
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()

	// Locked always (SINGLE_ISSUER), pinned with Config.CPUs unless the
	// caller pinned the thread there already (its pin stays at Close).
	if b.thread, err = cpu.Claim(cfg.CPUs, true); err != nil {
		return nil, err
	}
	undo = append(undo, func() { _ = b.thread.Release() })

	if fd >= 0 {
		b.fd, b.granted = fd, granted // closed by openQueue's own undo
	} else {
		b.fd, b.granted, err = sock.OpenUDP(cfg)
		if err != nil {
			return nil, err
		}
		undo = append(undo, func() { unix.Close(b.fd) })
	}

	if err := b.openRing(cfg, sqCPU); err != nil {
		return nil, err // the deferred clean-up closes the ring
	}
	if err := b.allocate(cfg, &undo); err != nil {
		return nil, err
	}
	if b.rep = sock.RepliesFor(cfg, b.fd, b.granted.Local); b.rep != nil {
		undo = append(undo, b.rep.Close)
		b.sendTo = make([]uint16, b.nslots)
		b.sendGen = make([]uint16, b.nslots)
	}
	if err := b.start(); err != nil {
		return nil, err
	}
	b.mode = b.describe()
	if note != "" {
		b.mode += ", " + note
	}
	return b, nil
}

// sqCPUOf returns the CPU of the SQPOLL thread, -1 without SQPoll, or a
// *dgramio.ConfigError when the process may not run on it.
func sqCPUOf(cfg dgramio.Config) (int, error) {
	if !cfg.URing.SQPoll {
		return -1, nil
	}
	sqCPU := *cfg.URing.SQCPU
	allowed, err := cpu.Allowed()
	if err != nil {
		return -1, err
	}
	if !slices.Contains(allowed, sqCPU) {
		return -1, &dgramio.ConfigError{Field: "URing.SQCPU", Value: sqCPU,
			Reason: "the SQ thread's CPU must be one this process may run on (the kernel refuses others with EINVAL); allowed CPUs are " + cpu.FormatList(allowed)}
	}
	return sqCPU, nil
}

// openRing sizes the send slots, sets up the ring (b.ring, which the
// caller closes on error) and registers the socket and NAPI on it.
func (b *Backend) openRing(cfg dgramio.Config, sqCPU int) error {
	// One slot per destination and message (a server without Dests
	// answers one at a time with QueueTo).
	b.nslots = cfg.TxQueue * max(len(cfg.Dests), 1)
	if b.nslots > 1<<16 {
		return &dgramio.ConfigError{Field: "TxQueue", Value: cfg.TxQueue, Reason: "TxQueue × destinations must not exceed 65536 for kind uring"}
	}
	// The CQ has room for every completion that can be outstanding: one
	// per receive buffer, one per send slot, and the wake-up and kill
	// switch. So it never overflows.
	// Reply sockets add a final completion and a cancellation each.
	cqSize := pow2(max(2*cfg.URing.Entries, cfg.URing.RxBuffers+b.nslots+8+2*sock.ReplySocketsOf(cfg)))
	var err error
	b.ring, err = iouring.New(iouring.Options{
		Entries:      uint32(cfg.URing.Entries),
		CQEntries:    uint32(cqSize),
		SingleIssuer: true,
		CoopTaskrun:  b.coop,
		SQPoll:       cfg.URing.SQPoll,
		SQCPU:        sqCPU,
	})
	if err != nil {
		return err
	}
	if b.ring.Features()&iouring.FeatExtArg == 0 {
		return dgramio.NotSupported("io_uring IORING_ENTER_EXT_ARG", iouring.MinKernelExtArg, "", nil)
	}
	if err := b.ring.RegisterFiles([]int32{int32(b.fd)}); err != nil {
		return err
	}
	if cfg.URing.NAPI {
		us := cfg.BusyPollUs
		if us < 0 {
			us = dgramio.DefaultBusyPollUs
		}
		if err := b.ring.RegisterNAPI(time.Duration(us)*time.Microsecond, false); err != nil {
			return err
		}
	}
	return nil
}

// allocate makes the provided buffer ring, the send slots' memory and the
// waker, appending their release to undo.
func (b *Backend) allocate(cfg dgramio.Config, undo *[]func()) error {
	var err error
	b.nameLen = iouring.SockaddrInLen
	if cfg.IPv6() {
		b.nameLen = iouring.SockaddrIn6Len
	}
	bufSize := iouring.RecvmsgOutLen + b.nameLen + cfg.MaxDatagram
	b.bufs, err = b.ring.NewBufRing(bufGroup, uint32(cfg.URing.RxBuffers), bufSize)
	if err != nil {
		return err
	}
	*undo = append(*undo, func() { b.bufs.Free() })

	b.slotSize = (slotPayload + cfg.MaxDatagram + 63) &^ 63
	b.slotsOff = 64
	b.mem, err = iouring.NewRegion(b.slotsOff + b.nslots*b.slotSize)
	if err != nil {
		return err
	}
	*undo = append(*undo, func() { b.mem.Free() })
	b.initSlots()

	b.waker, err = fdwait.NewWaker()
	if err != nil {
		return err
	}
	*undo = append(*undo, func() { b.waker.Close() })
	return nil
}

// start arms the kill switch and the receive and submits them.
//
// The wake-up and kill switch: a poll on the waker's eventfd, linked to a
// cancellation of every request. Close writes the eventfd from whatever
// thread it runs on; the kernel then ends a Wait sleeping in
// io_uring_enter and cancels the receive and any send still waiting,
// which Close could not submit itself from another thread (SINGLE_ISSUER).
func (b *Backend) start() error {
	wake := b.ring.GetSQE()
	wake.PrepPollAdd(int32(b.waker.FD()), unix.POLLIN, tagWake)
	wake.Flags |= iouring.SQEIOLink
	b.ring.GetSQE().PrepCancelAll(tagKill)
	b.arm()
	if _, err := b.ring.Submit(0); err != nil {
		return err
	}
	b.syscallsAtOpen = b.ring.Syscalls()
	return nil
}

func (b *Backend) describe() string {
	var m strings.Builder
	m.WriteString("io_uring multishot recvmsg + buffer ring, fixed file")
	if b.sqpoll {
		fmt.Fprintf(&m, ", sqpoll cpu %d", *b.cfg.URing.SQCPU)
	}
	if b.cfg.URing.NAPI {
		us := b.cfg.BusyPollUs
		if us < 0 {
			us = dgramio.DefaultBusyPollUs
		}
		fmt.Fprintf(&m, ", napi busy poll %dus", us)
	}
	if b.cfg.URing.Interrupts && !b.sqpoll {
		m.WriteString(", completions by interrupt")
	}
	m.WriteString(", ")
	m.WriteString(b.granted.Mode())
	if b.rep != nil {
		m.WriteString(", ")
		m.WriteString(b.rep.Mode())
	}
	return m.String()
}

func (b *Backend) initSlots() {
	c := &b.cfg
	b.free = make([]uint16, b.nslots)
	for i := range b.free {
		b.free[i] = uint16(b.nslots - 1 - i)
	}
	b.nfree = b.nslots
	b.queue = make([]uint16, b.nslots)
	b.dests = append(b.dests, c.Dests...)
	if b.granted.Connected {
		b.connectedTo = b.dests[0]
	}
	b.rxq = make([]rxDone, c.URing.RxBuffers)
	b.held = make([]uint16, c.URing.RxBuffers)
	// The receive msghdr: room for the sender's address, no control data,
	// no iovec (the whole provided buffer is used).
	*iouring.MsghdrAt(b.mem, b.recvOff) = iouring.Msghdr{Namelen: uint32(b.nameLen)}
	// Fixed parts of the send slots: msghdr → iovec → payload.
	for i := 0; i < b.nslots; i++ {
		off := b.slotsOff + i*b.slotSize
		*iouring.IovecAt(b.mem, off+slotIov) = iouring.Iovec{Base: b.mem.Addr(off + slotPayload)}
		*iouring.MsghdrAt(b.mem, off) = iouring.Msghdr{Iov: b.mem.Addr(off + slotIov), Iovlen: 1}
	}
}

func pow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// LocalAddr is the address and port the socket is bound to.
func (b *Backend) LocalAddr() netip.AddrPort { return b.granted.Local }

// arm prepares the multishot RECVMSG (submitted by the caller).
func (b *Backend) arm() bool {
	e := b.ring.GetSQE()
	if e == nil {
		return false
	}
	e.PrepRecvmsgMultishot(fixedFD, true, b.mem.Addr(b.recvOff), bufGroup, tagRecv)
	b.armed = true
	return true
}

// Queue copies payload into a send slot for every destination in
// Config.Dests (the connected peer of a one-destination client). It
// returns nil, or queues nothing and returns dgramio.ErrBackPressure when the
// slots are full (TxBackpressure; slots free up as their sends complete),
// dgramio.ErrTooLarge when the payload exceeds MaxDatagram (TxOversize),
// dgramio.ErrClosed after Close, or dgramio.ErrNoRoute when a server has no
// Dests (layer "uring" counter "queue_no_dest"; answer with QueueTo). It
// makes no system call.
func (b *Backend) Queue(payload []byte) error {
	if !b.life.Enter() {
		return dgramio.ErrClosed
	}
	defer b.life.Exit()
	if len(b.dests) == 0 {
		b.noDest++
		return dgramio.ErrNoRoute
	}
	per := len(b.dests) // one when the socket is connected to it
	if err := b.room(payload, per); err != nil {
		return err
	}
	for i := 0; i < per; i++ {
		b.put(payload, b.dests[i])
	}
	return nil
}

// QueueTo copies payload into a send slot addressed to to, the From of a
// received Packet (an IPv4-mapped address is taken as IPv4). It returns
// what Queue does, and dgramio.ErrNoRoute for a to that is not an address of
// the socket's family with a port (layer "uring" counter
// "queue_bad_dest").
func (b *Backend) QueueTo(payload []byte, to netip.AddrPort) error {
	if !b.life.Enter() {
		return dgramio.ErrClosed
	}
	defer b.life.Exit()
	to = dgramio.Unmap(to)
	if !sock.Sendable(to, b.nameLen == iouring.SockaddrIn6Len) {
		b.badDest++
		return dgramio.ErrNoRoute
	}
	if err := b.room(payload, 1); err != nil {
		return err
	}
	b.put(payload, to)
	return nil
}

// room checks the size of payload and that per slots are free, reaping
// completions (no system call) when they are not.
func (b *Backend) room(payload []byte, per int) error {
	if len(payload) > b.cfg.MaxDatagram {
		b.st.TxOversize += uint64(per)
		return dgramio.ErrTooLarge
	}
	if b.nfree < per {
		b.reap()
		if b.nfree < per {
			b.st.TxBackpressure += uint64(per)
			return dgramio.ErrBackPressure
		}
	}
	return nil
}

// put fills a free slot with payload for to and queues it.
func (b *Backend) put(payload []byte, to netip.AddrPort) {
	b.nfree--
	slot := b.free[b.nfree]
	off := b.slotsOff + int(slot)*b.slotSize
	copy(b.mem.Slice(off+slotPayload, len(payload)), payload)
	iouring.IovecAt(b.mem, off+slotIov).Len = uint64(len(payload))
	m := iouring.MsghdrAt(b.mem, off)
	if b.granted.Connected && to == b.connectedTo {
		m.Name, m.Namelen = 0, 0
	} else {
		var n int
		if b.nameLen == iouring.SockaddrIn6Len {
			n = iouring.PutSockaddrIn6(b.mem.Slice(off+slotName, iouring.SockaddrIn6Len), to)
		} else {
			n = iouring.PutSockaddrIn4(b.mem.Slice(off+slotName, iouring.SockaddrInLen), to)
		}
		m.Name, m.Namelen = b.mem.Addr(off+slotName), uint32(n)
	}
	if b.rep != nil {
		b.sendTo[slot] = 0
		if i := b.rep.Lookup(to); i >= 0 {
			// Its connected socket: no name (the one written stays, for
			// Flush to fall back on), no route lookup.
			b.sendTo[slot], b.sendGen[slot] = uint16(i+1), b.rep.Slots[i].Gen
			m.Name, m.Namelen = 0, 0
		}
	}
	b.queue[b.qtail] = slot
	b.qtail++
	if b.qtail == b.nslots {
		b.qtail = 0
	}
	b.nq++
	b.st.TxQueued++
}

// Flush turns the queued messages into SENDMSG SQEs and submits them,
// Config.TxBatch per io_uring_enter (one call for a batch that fits), so
// the system calls per message compare with kind udp's sendmmsg at the
// same batch size. With SQPOLL it only publishes the SQEs and enters the
// kernel when the SQ thread has gone to sleep. Messages that do not fit
// in the SQ stay queued for the next Flush. A send the kernel fails is
// counted in TxDropped when its completion is reaped (by Flush, Rx, Wait
// or Queue); TxSent and TxBytes count completed sends. It returns
// net.ErrClosed after Close, or a failed io_uring_enter.
func (b *Backend) Flush() error {
	if !b.life.Enter() {
		return dgramio.ErrClosed
	}
	defer b.life.Exit()
	b.reap()
	batch := b.cfg.TxBatch
	for {
		for (b.sqpoll || int(b.ring.Unsubmitted()) < batch) && b.nq > 0 {
			e := b.ring.GetSQE()
			if e == nil {
				break
			}
			slot := b.queue[b.qhead]
			b.qhead++
			if b.qhead == b.nslots {
				b.qhead = 0
			}
			b.nq--
			fd, fixed := int32(fixedFD), true
			if b.rep != nil && b.sendTo[slot] > 0 {
				fd, fixed = b.replyFD(slot)
			}
			e.PrepSendmsg(fd, fixed, b.mem.Addr(b.slotsOff+int(slot)*b.slotSize), 0, tagSend|uint64(slot))
			b.inflight++
		}
		if b.ring.Unsubmitted() == 0 {
			return nil
		}
		n, err := b.ring.Submit(batch)
		if err != nil {
			return threadErr(err)
		}
		if n == 0 || b.sqpoll {
			return nil // the kernel is busy (EAGAIN/EBUSY) or the SQ thread takes it
		}
	}
}

// replyFD is the socket a send slot queued for a reply socket goes out
// of: that socket, or, when Rx has closed it since (or it is closing), the
// server socket with the peer's address (which put wrote).
func (b *Backend) replyFD(slot uint16) (int32, bool) {
	r := &b.rep.Slots[b.sendTo[slot]-1]
	if r.Fd < 0 || r.Closing || r.Gen != b.sendGen[slot] {
		b.sendTo[slot] = 0
		m := iouring.MsghdrAt(b.mem, b.slotsOff+int(slot)*b.slotSize)
		m.Name, m.Namelen = b.mem.Addr(b.slotsOff+int(slot)*b.slotSize+slotName), uint32(b.nameLen)
		return fixedFD, true
	}
	return int32(r.Fd), false
}

// reap takes every completion from the CQ (no system call): sends free
// their slots, receives go to rxq in order.
func (b *Backend) reap() {
	ready := b.ring.CQReady()
	if ready == 0 {
		if b.ring.SQFlags()&(iouring.SQCQOverflow|iouring.SQTaskrun) != 0 {
			_ = b.ring.FlushOverflow()
			ready = b.ring.CQReady()
		}
		if ready == 0 {
			return
		}
	}
	for i := uint32(0); i < ready; i++ {
		c := b.ring.CQEAt(i)
		switch c.UserData & tagMask {
		case tagSend:
			b.sendDone(uint16(c.UserData), c.Res)
		case tagRecv:
			src := uint16(c.UserData & recvSockMask)
			if c.HasBuffer() {
				j := b.rxHead + b.rxLen
				if j >= len(b.rxq) {
					j -= len(b.rxq)
				}
				b.rxq[j] = rxDone{res: c.Res, bid: c.BufID(), src: src}
				b.rxLen++
			} else if c.Res < 0 && (src == 0 || unix.Errno(-c.Res) != unix.ECANCELED) {
				b.recvError(unix.Errno(-c.Res))
			}
			if !c.More() {
				if src == 0 {
					b.armed = false
				} else {
					b.replyRecvEnded(int(src-1), uint16(c.UserData>>recvGenShift))
				}
			}
		case tagWake:
			b.woken = true
		case tagKill:
			b.killed = true
		}
	}
	b.ring.CQAdvance(ready)
}

func (b *Backend) sendDone(slot uint16, res int32) {
	b.inflight--
	b.free[b.nfree] = slot
	b.nfree++
	if res >= 0 {
		if b.rep != nil && b.sendTo[slot] > 0 {
			b.rep.Tx++
		}
		b.st.TxSent++
		b.st.TxBytes += uint64(res)
		return
	}
	b.st.TxDropped++
	switch unix.Errno(-res) {
	case unix.EAGAIN, unix.ENOBUFS:
		b.sendBufFull++
	case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH:
		b.sendRefused++
	case unix.ECANCELED:
		b.cancelled++
	default:
		b.sendOther++
	}
}

func (b *Backend) recvError(e unix.Errno) {
	switch e {
	case unix.ENOBUFS:
		b.enobufs++
	case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH:
		// An ICMP error queued on a connected socket: reported once, then
		// the socket receives normally. The next Rx arms again.
		b.rxRefused++
	case unix.ECANCELED:
	default:
		b.rxErrors++
		b.rxErr = e
	}
}

// Rx delivers up to min(len(pkts), Config.RxBatch) datagrams the multishot
// receive has completed, and never blocks. It first gives the buffers of
// the previous Rx back to the kernel (so pkts[i].Data of the previous call
// is invalid from here on), and arms the receive again if the kernel ended
// it (one io_uring_enter, counted in layer "uring" counter "rearm"); an Rx
// that finds nothing makes no system call. A datagram longer than
// MaxDatagram is counted in RxTruncated and not delivered; one whose
// buffer cannot be parsed in RxMalformed. pkts[i].Data points into the
// buffer ring and is valid until the next Rx or Wait, or a Close on the
// poll loop's goroutine; a Close from another goroutine leaves the
// memory of the last batch mapped until the loop's next Rx or Wait,
// which return net.ErrClosed and unmap it (see Close).
//
// The error is net.ErrClosed after Close, or an io_uring_enter or receive
// failure other than the expected ones (ENOBUFS, ICMP errors, which are
// counted).
func (b *Backend) Rx(pkts []dgramio.Packet) (int, error) {
	if !b.life.Enter() {
		b.loopLeft()
		return 0, dgramio.ErrClosed
	}
	defer b.life.Exit()
	b.recycle()
	if !b.armed || b.unarmed > 0 {
		if !b.armed && b.arm() {
			b.rearms++
		}
		if b.unarmed > 0 {
			b.armReplies()
		}
		if _, err := b.ring.Submit(0); err != nil {
			return 0, threadErr(err)
		}
	}
	b.reap()
	var err error
	if b.rxErr != 0 {
		// Reported once; the next Rx arms the receive again.
		err = fmt.Errorf("io_uring recvmsg: %w", b.rxErr)
		b.rxErr = 0
	}
	limit := min(len(pkts), b.cfg.RxBatch)
	k := 0
	var bytes uint64
	for k < limit && b.rxLen > 0 {
		d := b.rxq[b.rxHead]
		b.rxHead++
		if b.rxHead == len(b.rxq) {
			b.rxHead = 0
		}
		b.rxLen--
		b.held[b.nheld] = d.bid
		b.nheld++
		if d.res < 0 {
			b.st.RxMalformed++
			continue
		}
		m := iouring.RecvmsgOut{Buf: b.bufs.Buf(d.bid)[:d.res], NameLen: b.nameLen}
		if !m.IsValid() {
			b.st.RxMalformed++
			continue
		}
		if m.Truncated() || int(m.PayloadLen()) > b.cfg.MaxDatagram {
			b.st.RxTruncated++
			continue
		}
		from, _ := iouring.Sockaddr(m.Name())
		p := m.Payload()
		pkts[k] = dgramio.Packet{Data: p[:len(p):len(p)], From: from}
		bytes += uint64(len(p))
		k++
		if b.rep != nil {
			if d.src > 0 {
				b.rep.Got(int(d.src-1), 1)
			} else if b.rep.Heard(from) {
				b.openReply(from)
			}
		}
	}
	b.st.RxDelivered += uint64(k)
	b.st.RxBytes += bytes
	if b.rep != nil {
		b.rxCalls++
		if (b.rxCalls&63 == 0 || k == 0) && b.rep.Due() && b.rep.Sweep() || b.toCancel > 0 {
			b.closeIdle()
		}
	}
	return k, err
}

// armReply prepares reply slot i's multishot RECVMSG (submitted by the
// caller), into the server socket's buffer ring.
func (b *Backend) armReply(i int) bool {
	r := &b.rep.Slots[i]
	e := b.ring.GetSQE()
	if e == nil {
		return false
	}
	e.PrepRecvmsgMultishot(int32(r.Fd), false, b.mem.Addr(b.recvOff), bufGroup, tagRecv|uint64(r.Gen)<<recvGenShift|uint64(i+1))
	r.Armed = true
	return true
}

// armReplies arms again the reply receives the kernel ended (unarmed
// counts those it could not: the SQ was full).
func (b *Backend) armReplies() {
	b.unarmed = 0
	for i := range b.rep.Slots {
		r := &b.rep.Slots[i]
		if r.Fd >= 0 && !r.Armed && !r.Closing {
			if !b.armReply(i) {
				b.unarmed++
				continue
			}
			b.rearms++
		}
	}
}

// openReply gives peer a connected reply socket and arms its receive.
func (b *Backend) openReply(peer netip.AddrPort) {
	i := b.rep.Open(peer)
	if i < 0 {
		return
	}
	if !b.armReply(i) {
		b.unarmed++ // the SQ is full: the next Rx arms it
		return
	}
	if _, err := b.ring.Submit(0); err != nil {
		b.rxErr = unix.EIO
	}
}

// replyRecvEnded is the last completion of reply slot i's receive (of
// generation gen): a closing socket is released, another is armed again
// by the next Rx.
func (b *Backend) replyRecvEnded(i int, gen uint16) {
	r := &b.rep.Slots[i]
	if r.Fd < 0 || r.Gen != gen || !r.Armed {
		return
	}
	r.Armed = false
	if r.Closing {
		b.unread += b.rep.Release(i)
		b.toCancel = 0 // recounted by closeIdle
		return
	}
	b.unarmed++
}

// closeIdle cancels the receives of the reply sockets Sweep started
// closing (their filter drops what arrives from now on); each is released
// when its receive's last completion arrives, or now when none is armed.
func (b *Backend) closeIdle() {
	b.toCancel = 0
	for i := range b.rep.Slots {
		r := &b.rep.Slots[i]
		if r.Fd < 0 || !r.Closing || r.Cancelled {
			continue
		}
		if !r.Armed {
			b.unread += b.rep.Release(i)
			continue
		}
		e := b.ring.GetSQE()
		if e == nil {
			b.toCancel++ // the SQ is full: the next Rx tries again
			continue
		}
		e.PrepCancel(tagRecv|uint64(r.Gen)<<recvGenShift|uint64(i+1), tagCancel)
		r.Cancelled = true
	}
	if _, err := b.ring.Submit(0); err != nil {
		b.rxErr = unix.EIO
	}
}

// recycle gives the buffers of the last Rx back to the buffer ring.
func (b *Backend) recycle() {
	if b.nheld == 0 {
		return
	}
	for _, bid := range b.held[:b.nheld] {
		if poison.Debug {
			poison.Fill(b.bufs.Buf(bid))
		}
		b.bufs.Recycle(bid)
	}
	b.nheld = 0
	b.bufs.Publish()
}

// Wait sleeps in io_uring_enter until a completion arrives that Rx can
// deliver (or must re-arm after), ctx is done (ctx.Err()), or the backend
// is closed (net.ErrClosed). Send completions that arrive meanwhile are
// reaped and the sleep goes on. With URing.NAPI, the kernel busy polls the
// socket's NAPI context inside this sleep. Each sleep lasts at most 50 ms,
// so a context without a deadline is noticed.
func (b *Backend) Wait(ctx context.Context) error {
	if !b.life.BeginWait() {
		b.loopLeft()
		return dgramio.ErrClosed
	}
	defer b.life.EndWait()
	for {
		if !b.life.Enter() {
			b.loopLeft()
			return dgramio.ErrClosed
		}
		b.reap()
		ready, woken := b.rxLen > 0 || !b.armed || b.rxErr != 0, b.woken
		var sweep time.Duration
		if b.rep != nil {
			// Rx has reply receives to arm or cancel, or the sweep of
			// idle reply sockets to run by then.
			ready = ready || b.unarmed > 0 || b.toCancel > 0 || b.rep.InUse > 0 && b.rep.Due()
			sweep = b.rep.UntilSweep()
		}
		b.life.Exit()
		if woken {
			return dgramio.ErrClosed
		}
		if ready {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		d := waitSlice
		if sweep > 0 {
			d = min(d, sweep)
		}
		if dl, ok := ctx.Deadline(); ok {
			if d = min(d, time.Until(dl)); d <= 0 {
				return fdwait.Expired(ctx) // passed; its timer fires next
			}
		}
		// Between the reap above and this sleep, the ring is not touched by
		// anyone else: Queue, Flush and Rx are not called during Wait, and
		// Close only writes the eventfd until Wait returns.
		if err := b.ring.WaitCQE(d); err != nil && !errors.Is(err, iouring.ErrTimeout) {
			return threadErr(err)
		}
	}
}

// threadErr explains EEXIST, what a SINGLE_ISSUER ring answers a
// submission from another thread than the one that created it.
func threadErr(err error) error {
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("uring: %w: only the OS thread that called New may submit to its ring (IORING_SETUP_SINGLE_ISSUER); "+
			"call Queue, Flush, Rx and Wait on the goroutine that called New, and keep that goroutine alive while the backend is open", err)
	}
	return err
}

// Stats returns the counters. Syscalls counts the io_uring_enter calls of
// Flush, Rx and Wait (set-up excluded). Layers: the socket's own drop
// count (layer "socket", "drops", a loss); layer "uring": "rearm" (the
// multishot receive armed again after the kernel ended it), "enobufs"
// (ended for want of buffers), "rx_icmp_refused", "rx_errors", the send
// errors by cause (already in TxDropped), "tx_inflight" (sends submitted
// and not completed), "cq_overflow" and "sq_dropped" (kernel counters that
// stay 0 when the rings are sized right). Safe from any goroutine; after
// Close it returns the counters as they were at Close.
func (b *Backend) Stats() dgramio.Stats { return b.life.Stats(b.snapshot) }

func (b *Backend) snapshot() dgramio.Stats {
	s := b.st
	s.Kind, s.Mode = dgramio.KindURing, b.mode
	s.Syscalls = b.ring.Syscalls() - b.syscallsAtOpen
	s.SockRcvBuf, s.SockSndBuf = b.granted.RcvBuf, b.granted.SndBuf
	if drops, err := sock.Drops(b.fd); err == nil {
		s.Layers = append(s.Layers, dgramio.Counter{Layer: "socket", Name: "drops", Value: drops, Loss: true})
	}
	s.Layers = append(s.Layers,
		dgramio.Counter{Layer: "uring", Name: "rearm", Value: b.rearms},
		dgramio.Counter{Layer: "uring", Name: "enobufs", Value: b.enobufs},
		dgramio.Counter{Layer: "uring", Name: "rx_icmp_refused", Value: b.rxRefused},
		dgramio.Counter{Layer: "uring", Name: "rx_errors", Value: b.rxErrors},
		dgramio.Counter{Layer: "uring", Name: "send_buffer_full", Value: b.sendBufFull},
		dgramio.Counter{Layer: "uring", Name: "send_refused", Value: b.sendRefused},
		dgramio.Counter{Layer: "uring", Name: "send_other_errors", Value: b.sendOther},
		dgramio.Counter{Layer: "uring", Name: "send_cancelled", Value: b.cancelled},
		dgramio.Counter{Layer: "uring", Name: "tx_inflight", Value: uint64(b.inflight), Gauge: true},
		dgramio.Counter{Layer: "uring", Name: "tx_unconfirmed_at_close", Value: b.unconfirmedAtClose},
		dgramio.Counter{Layer: "uring", Name: "rx_unread_at_close", Value: b.unread, Loss: true},
		dgramio.Counter{Layer: "uring", Name: "queue_no_dest", Value: b.noDest},
		dgramio.Counter{Layer: "uring", Name: "queue_bad_dest", Value: b.badDest},
		dgramio.Counter{Layer: "uring", Name: "cq_overflow", Value: uint64(b.ring.CQOverflow()), Loss: true},
		dgramio.Counter{Layer: "uring", Name: "sq_dropped", Value: uint64(b.ring.SQDropped())},
	)
	s.Layers = b.rep.Counters(s.Layers, "uring")
	return s
}

// unreadLimit bounds the datagrams Close reads from the socket to count
// them (rx_unread_at_close), so that a peer still sending cannot hold
// Close: far more than a 64 MiB receive buffer holds.
const unreadLimit = 1 << 20

// Close cancels what the ring has in flight, waits (up to 2 s) for the
// kernel to finish with it, and releases the ring, the socket and the
// memory. A Rx, Flush or Wait running on another goroutine returns
// net.ErrClosed; Close waits for it to leave first. The buffers the last
// Rx handed out (Packet.Data) may still be read by the poll loop after
// that Rx returned: a Close from another goroutine therefore leaves them
// mapped (RxBuffers buffers of MaxDatagram and some bytes, 256 KiB or
// more), and the loop's next Rx or Wait, which returns net.ErrClosed,
// unmaps them; a loop that never calls either again leaves them mapped. Messages still queued
// are counted in TxDropped; sends cancelled in flight too (layer "uring"
// "send_cancelled"); datagrams received that Rx never took, in the buffer
// ring or still in the socket's queue, in layer "uring"
// "rx_unread_at_close" (a loss). Safe to call more than once, from any
// goroutine.
//
// Cancellation works from any thread: Close writes an eventfd that the
// ring polls, and the kernel then runs the cancellation linked to that poll
// on the ring's own thread. Memory is unmapped only once every request
// that points into it has completed; if the kernel has not finished after
// 2 s, the memory is left mapped (a leak, not a corruption) and Close says
// so.
//
// When Close returns, the kernel has released the socket: a server's port
// is free for a New at once (a server restarting in place). On the ring's
// thread Close unregisters the socket from the ring before closing it;
// elsewhere it waits for the ring's teardown to let go (a few tens of ms).
func (b *Backend) Close() error { return b.life.Close(b.waker.Wake, b.shutdown) }

// shutdown is Close's work, once the guard is shut.
func (b *Backend) shutdown() (dgramio.Stats, error) {
	b.st.TxDropped += uint64(b.nq)
	b.nq, b.qhead, b.qtail = 0, 0, 0
	// SQEs the kernel has not taken (a Flush that met EAGAIN) never will
	// be: take them back, so the drain does not wait for them.
	b.ring.Retract(func(e *iouring.SQE) {
		switch e.UserData & tagMask {
		case tagSend:
			b.inflight--
			b.st.TxDropped++
		case tagRecv:
			if src := e.UserData & recvSockMask; src == 0 {
				b.armed = false
			} else if b.rep != nil {
				b.rep.Slots[src-1].Armed = false
			}
		}
	})
	drained := b.drain()
	b.unconfirmedAtClose = uint64(b.inflight)
	// Datagrams received into the buffer ring that Rx never took, and
	// those still in the socket's queue once the receive is cancelled.
	b.unread += uint64(b.rxLen)
	if !b.armed {
		b.unread += sock.DrainUnread(b.fd, unreadLimit)
	}
	if b.rep != nil {
		// What reply sockets still hold is unread too. One whose receive
		// the kernel did not end is left open until the ring goes, below.
		for i := range b.rep.Slots {
			if !b.rep.Slots[i].Armed {
				b.unread += b.rep.Release(i)
			}
		}
	}
	final := b.snapshot()

	var errs []error
	// The ring holds the socket as a registered file until it is torn
	// down, which the kernel does asynchronously (20-30 ms) after the
	// ring's fd is closed: on the ring's own thread, unregister it first,
	// so that the socket is released when its fd is closed below; on
	// another (which SINGLE_ISSUER refuses to unregister), wait for the
	// release after the closes. Either way a server's port is free when
	// Close returns, for a New on it at once.
	unregistered := false
	if drained && b.thread.Mine() {
		if err := b.ring.UnregisterFiles(); err != nil {
			errs = append(errs, err)
		} else {
			unregistered = true
		}
	}
	errs = append(errs, b.ring.Close())
	if b.rep != nil {
		for i := range b.rep.Slots {
			b.rep.Release(i)
		}
		b.rep.Close()
	}
	if drained {
		errs = append(errs, b.releaseBufs(), b.mem.Free())
	} else {
		errs = append(errs, fmt.Errorf("uring close: the kernel still had %d sends and the receive (armed %v) in flight after %v; their memory is left mapped", b.inflight, b.armed, drainWait))
	}
	if err := unix.Close(b.fd); err != nil {
		errs = append(errs, fmt.Errorf("close socket: %w", err))
	}
	if !unregistered && b.cfg.Role == dgramio.RoleServer && b.cfg.Queues <= 1 {
		errs = append(errs, awaitRelease(b.granted.Local))
	}
	errs = append(errs, b.waker.Close(), b.thread.Release())
	return final, errors.Join(errs...)
}

// releaseWait bounds awaitRelease.
const releaseWait = 2 * time.Second

// awaitRelease waits until the kernel has released the UDP port of local
// (the ring's teardown drops the last reference to the socket): a probe
// socket of its family bound there without SO_REUSEADDR or SO_REUSEPORT
// succeeds only then. It is an error when the port is still held after releaseWait
// (another socket took it).
func awaitRelease(local netip.AddrPort) error {
	if !local.Addr().IsValid() || local.Port() == 0 {
		return nil
	}
	// The probe is of the socket's family, IPV6_V6ONLY as it was.
	probe := dgramio.Config{LocalIP: local.Addr()}
	sa := sock.Sockaddr(local)
	deadline := time.Now().Add(releaseWait)
	for {
		fd, err := sock.Socket(probe, unix.SOCK_DGRAM, 0)
		if err != nil {
			return fmt.Errorf("uring close: probe socket: %w", err)
		}
		err = unix.Bind(fd, sa)
		unix.Close(fd)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, unix.EADDRINUSE):
			return fmt.Errorf("uring close: probe bind %v: %w", local, err)
		case time.Now().After(deadline):
			return fmt.Errorf("uring close: port %v still in use %v after the socket was closed", local, releaseWait)
		}
		time.Sleep(time.Millisecond)
	}
}

// The halves of bufsHand: Close has finished with the buffer ring, the
// poll loop has come back after Close.
const (
	bufsClosed   = 1
	bufsLoopLeft = 2
)

// releaseBufs frees the buffer ring at Close when no Packet.Data of the
// last Rx is out (none delivered, or Close runs on the poll loop's own
// thread, which is not reading it); otherwise it leaves the freeing to
// the loop's next Rx or Wait (loopLeft), unless that came already.
func (b *Backend) releaseBufs() error {
	if b.nheld == 0 || b.thread.Mine() {
		b.bufsHand.Store(bufsClosed | bufsLoopLeft)
		return b.bufs.Free()
	}
	if b.bufsHand.Or(bufsClosed)&bufsLoopLeft != 0 {
		return b.bufs.Free()
	}
	return nil
}

// loopLeft is the poll loop's Rx or Wait finding the backend closed: the
// loop is done with the last batch, so the buffer ring may go, and goes
// here when Close has left it (releaseBufs). Only the first such call
// counts.
func (b *Backend) loopLeft() {
	if old := b.bufsHand.Or(bufsLoopLeft); old == bufsClosed {
		_ = b.bufs.Free() // munmap of our own mapping: it fails only on a bad address
	}
}

// nudgeOwner makes the ring's thread run the completion work the kernel
// queued for it. With COOP_TASKRUN that work runs when the thread enters
// or leaves the kernel: a thread asleep (a parked goroutine's futex, Wait)
// is woken by the kernel itself, but one busy in user space (spinning on
// something other than Rx) would keep it waiting until the Go runtime
// preempts it. A signal makes it enter at once. SIGURG is the signal the Go
// runtime itself sends threads to preempt them, and ignores when it did
// not ask for a preemption, so an extra one is harmless. The tid is one of
// this process's threads (tgkill checks the pid): if the ring's thread is
// gone, the kernel has already cancelled its requests, and the signal
// reaches nobody or a thread that ignores it.
func (b *Backend) nudgeOwner() {
	if b.coop {
		_ = unix.Tgkill(unix.Getpid(), b.thread.Tid(), unix.SIGURG)
	}
}

// replyArmed reports whether a reply socket's receive is still in flight.
func (b *Backend) replyArmed() bool {
	if b.rep == nil {
		return false
	}
	for i := range b.rep.Slots {
		if b.rep.Slots[i].Fd >= 0 && b.rep.Slots[i].Armed {
			return true
		}
	}
	return false
}

// drain waits until the receive has ended and every send has completed,
// after the kill switch fired. On the ring's own thread it sleeps in
// io_uring_enter; elsewhere it watches the CQ in memory (the kernel runs
// the work on the ring's thread, interrupting whatever it does).
func (b *Backend) drain() bool {
	onOwner := b.thread.Mine()
	deadline := time.Now().Add(drainWait)
	for {
		b.reap()
		if !b.armed && b.inflight == 0 && b.killed && !b.replyArmed() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		if onOwner {
			_ = b.ring.WaitCQE(10 * time.Millisecond)
		} else {
			b.nudgeOwner()
			time.Sleep(time.Millisecond)
		}
	}
}
