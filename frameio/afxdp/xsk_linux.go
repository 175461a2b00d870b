package afxdp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/frameio/afxdp/xdpprog"
	"github.com/dgramio/dgramio/internal/cleanup"
	"github.com/dgramio/dgramio/internal/fdwait"
	"github.com/dgramio/dgramio/internal/guard"
	"github.com/dgramio/dgramio/internal/monotime"
	"github.com/dgramio/dgramio/internal/poison"
)

var (
	_ frameio.FrameIO          = (*XSK)(nil)
	_ frameio.Waiter           = (*XSK)(nil)
	_ interface{ Interrupt() } = (*XSK)(nil) // package stack's Interrupter
)

// ErrNoCarrier is matched by the error of Open when the link has no carrier
// within Options.CarrierWait after bind.
var ErrNoCarrier = errors.New("no carrier")

// rxWakeEvery is how many empty polls RxFrames lets pass between two RX
// wake-ups (recvfrom) while the kernel asks for one: a wake-up per empty
// poll would cost a system call per poll.
const rxWakeEvery = 64

// bindBusyWait bounds how long bind retries a queue that is busy (EBUSY):
// long enough for the kernel to release the queue of a socket just closed.
const bindBusyWait = 2 * time.Second

// XSK is one AF_XDP socket on one queue, with its UMEM, its four rings and
// the XDP program that feeds it. It implements frameio.FrameIO,
// frameio.Waiter and Interrupt (package stack's Interrupter).
//
// Threading is frameio.FrameIO's: the receive side (RxFrames, Wait) and the
// transmit side (TxFrame, Kick) may run in two goroutines, each side driven
// by one goroutine at a time. Stats, MAC, MTU, Mode and Interrupt may be
// called from any goroutine. Close must not race with RxFrames, TxFrame or
// Kick; it may race with Wait (which then returns net.ErrClosed), with
// Interrupt and with Stats.
type XSK struct {
	opts      Options
	fd        int
	ifindex   int
	mac       net.HardwareAddr
	mtu       int
	umem      []byte
	frameMask uint64
	mode      string
	fallback  error
	objs      *xdpprog.Objects // the socket's own program; nil with Options.Shared
	shared    *Program         // Options.Shared
	link      link.Link
	waker     *fdwait.Waker // Close's: stays signalled
	irq       *fdwait.Waker // Interrupt's: drained by the Wait it ends

	guard   guard.Guard
	statsMu sync.RWMutex // held for writing by Close, for reading by Stats
	closed  bool
	final   kernelStats // the kernel's counters as Close read them
	// What Close found left: TX frames accepted by TxFrame and never
	// completed, RX descriptors never read.
	txUnsentAtClose, rxUnreadAtClose atomic.Uint64
	undo                             cleanup.Stack

	_  [64]byte
	rx rxSide
	_  [64]byte
	tx txSide

	// The padding keeps the fields of the next object on the heap (another
	// queue's, written by another core) off this one's last cache line.
	_ [64]byte
}

// rxSide is the state of the receive side: fill and RX rings.
type rxSide struct {
	fill   ring[uint64]
	rx     ring[unix.XDPDesc]
	spare  []uint64 // RX frames not in the fill ring (when it is smaller)
	ret    []uint64 // scratch: the frames of one RxFrames call
	empty  int      // empty polls while the fill ring wants a wake-up
	idle   uint32   // empty polls, for the spares' retries
	rekick int      // RxFrames calls until the next TX re-kick
	end    uint64   // end of the RX half of the UMEM

	frames, bytes, syscalls, invalid, rekicks atomic.Uint64
	// txStalled is set by a Kick that left descriptors in the TX ring
	// because the device was busy; the receive side (RxFrames, Wait)
	// kicks again until the kernel takes the wake-up (see rekick). It
	// lives here, read on every RxFrames and written only on a stall, so
	// it stays off the TX side's cache lines.
	txStalled atomic.Bool
}

// txSide is the state of the transmit side: TX and completion rings and
// the free TX frames. Its counters are plain fields written by TxFrame and
// Kick and published to pub at each Kick.
type txSide struct {
	tx       ring[unix.XDPDesc]
	comp     ring[uint64]
	free     []uint64
	held     uint64 // 1 + the address of the frame TxSlot took (0: none)
	frames0  int    // TX frames in all (free when none is in flight)
	maxLen   int
	maxKicks int
	// clock times Kick's system calls (kickNs): on a device whose
	// driver copies (veth, any copy mode) the call carries the frames
	// through the kernel, and what it costs the caller's loop is worth
	// knowing.
	clock *monotime.Clock

	frames, bytes, ringFull, oversize, dropped, syscalls, kickNs uint64
	pub                                                          struct {
		frames, bytes, ringFull, oversize, dropped, syscalls, kickNs atomic.Uint64
	}
}

// Open creates the AF_XDP socket described by o, loads and attaches its XDP
// program, binds it, and waits for carrier. The interface is looked up in
// the network namespace of the calling thread (inside testhost.Host.Do, the
// host's namespace); the socket stays there for its whole life.
//
// Errors: a *dgramio.ConfigError for a bad option (before any system call), a
// *dgramio.PrivilegeError naming the capability that is missing
// (CAP_NET_RAW for the socket, CAP_BPF and CAP_NET_ADMIN for the program,
// CAP_IPC_LOCK or RLIMIT_MEMLOCK for the UMEM), an error matching
// dgramio.ErrNotSupported for a kernel or driver that lacks a feature (AF_XDP
// 4.18, need_wakeup 5.4, XDP bpf_link 5.9, zero-copy where the driver has
// none), an error matching ErrNoCarrier. Every step is undone on error.
func Open(o Options) (*XSK, error) {
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Shared != nil {
		if err := o.Shared.check(o); err != nil {
			return nil, err
		}
	}
	x := &XSK{opts: o, fd: -1, frameMask: uint64(o.FrameSize - 1)}
	ok := false
	defer func() {
		if !ok {
			_ = x.undo.Undo()
		}
	}()
	a, err := linkAttrs(o.Iface, o.QueueID, o.QueueID)
	if err != nil {
		return nil, err
	}
	x.ifindex = a.Index
	x.mac = append(net.HardwareAddr(nil), a.HardwareAddr...)
	x.mtu = a.MTU
	if m := o.MaxFrame - ethHeader; x.mtu == 0 || m < x.mtu {
		x.mtu = m
	}
	if err := x.newWakers(); err != nil {
		return nil, err
	}
	if err := x.openSocket(); err != nil {
		return nil, err
	}
	if err := x.mapUMEM(); err != nil {
		return nil, err
	}
	if err := x.setupRings(); err != nil {
		return nil, err
	}
	zc, err := x.bind()
	if err != nil {
		return nil, err
	}
	attachMode, err := x.program(zc)
	if err != nil {
		return nil, err
	}
	x.mode = attachMode + " copy"
	if zc {
		x.mode = attachMode + " zerocopy"
	}
	if x.fallback != nil {
		x.mode += " (driver mode refused)"
	}
	if err := waitCarrier(x.ifindex, o.Iface, o.CarrierWait); err != nil {
		return nil, err
	}
	ok = true
	return x, nil
}

// linkAttrs looks iface up in the calling thread's network namespace and
// refuses queues first..last beyond its RX queues (a *dgramio.ConfigError
// for QueueID).
func linkAttrs(iface string, first, last int) (*netlink.LinkAttrs, error) {
	l, err := netlink.LinkByName(iface)
	if err != nil {
		return nil, fmt.Errorf("afxdp: interface %q: %w", iface, err)
	}
	a := l.Attrs()
	if a.NumRxQueues > 0 && last >= a.NumRxQueues {
		queues := fmt.Sprintf("queues %d..%d", first, last)
		if first == last {
			queues = fmt.Sprintf("queue %d", first)
		}
		return nil, dgramio.BadField("QueueID", first, "%s: interface %s has %d RX queues", queues, iface, a.NumRxQueues)
	}
	return a, nil
}

// newWakers makes the eventfds of Close and Interrupt.
func (x *XSK) newWakers() error {
	var err error
	if x.waker, err = fdwait.NewWaker(); err != nil {
		return fmt.Errorf("afxdp: %w", err)
	}
	x.undo.Add(x.waker.Close)
	if x.irq, err = fdwait.NewWaker(); err != nil {
		return fmt.Errorf("afxdp: %w", err)
	}
	x.undo.Add(x.irq.Close)
	return nil
}

// program loads and attaches the socket's own XDP program, or takes
// Options.Shared's, and registers the bound socket in its map at QueueID.
// It returns the program's attach mode ("driver" or "skb").
func (x *XSK) program(zc bool) (string, error) {
	o := x.opts
	objs := o.Shared.objects()
	attachMode := o.Shared.attachMode()
	if o.Shared == nil {
		var err error
		x.objs, err = xdpprog.Load(xdpprog.Spec{Variant: o.Program, Queues: o.QueueID + 1})
		if err != nil {
			return "", fmt.Errorf("afxdp: %w", err)
		}
		x.undo.Add(x.objs.Close)
		if err := x.objs.SetPort(o.Port); err != nil {
			return "", fmt.Errorf("afxdp: %w", err)
		}
		if o.IPv6 {
			if err := x.objs.SetIPv6(true); err != nil {
				return "", fmt.Errorf("afxdp: %w", err)
			}
		}
		if o.Program == xdpprog.UDPARP {
			if err := setNeighHost(x.objs, o.NeighHost); err != nil {
				return "", dgramio.BadField("NeighHost", o.NeighHost, "%v", err)
			}
		}
		var l link.Link
		if l, attachMode, x.fallback, err = attach(x.objs, x.ifindex, o.Iface, o.Mode); err != nil {
			return "", err
		}
		x.link = l
		x.undo.Add(l.Close)
		objs = x.objs
	} else {
		x.shared, x.fallback = o.Shared, o.Shared.fallback
	}
	if zc && attachMode != "driver" {
		// Cannot happen with a driver that offers zero-copy (it has native
		// XDP), but say so rather than run a socket nobody feeds.
		return "", dgramio.NotSupported("AF_XDP zero-copy with SKB-mode XDP", "",
			"zero-copy needs the program in driver mode", nil)
	}
	if err := objs.SetSocket(o.QueueID, x.fd); err != nil {
		return "", fmt.Errorf("afxdp: %w", err)
	}
	x.undo.Add(func() error { return objs.ClearSocket(o.QueueID) })
	return attachMode, nil
}

func sysErr(op string, err error) error { return fmt.Errorf("afxdp: %s: %w", op, err) }

func (x *XSK) openSocket() error {
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.EAFNOSUPPORT):
		return dgramio.NotSupported("AF_XDP sockets", "4.18", "the kernel must be built with CONFIG_XDP_SOCKETS", err)
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		return &dgramio.PrivilegeError{Op: "create AF_XDP socket", Capability: "CAP_NET_RAW", Err: err}
	case err != nil:
		return sysErr("create AF_XDP socket", err)
	}
	x.fd = fd
	x.undo.Add(func() error { return unix.Close(fd) })
	return nil
}

func (x *XSK) mapUMEM() error {
	o := x.opts
	size := o.Frames * o.FrameSize
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return sysErr(fmt.Sprintf("mmap %d-byte UMEM", size), err)
	}
	x.umem = mem
	x.undo.Add(func() error { return unix.Munmap(mem) })
	if o.MLock {
		if err := unix.Mlock(mem); err != nil {
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOMEM) || errors.Is(err, unix.EAGAIN) {
				return &dgramio.PrivilegeError{Op: "mlock UMEM", Capability: memlockHint(size), Err: err}
			}
			return sysErr("mlock UMEM", err)
		}
	}
	reg := unix.XDPUmemReg{
		Addr: uint64(uintptr(unsafe.Pointer(&mem[0]))),
		Len:  uint64(size),
		Size: uint32(o.FrameSize),
	}
	if _, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(x.fd), unix.SOL_XDP, unix.XDP_UMEM_REG,
		uintptr(unsafe.Pointer(&reg)), unsafe.Sizeof(reg), 0); e != 0 {
		if e == unix.ENOBUFS || e == unix.EPERM {
			return &dgramio.PrivilegeError{Op: "register UMEM", Capability: memlockHint(size), Err: e}
		}
		return sysErr("register UMEM", e)
	}
	return nil
}

// memlockHint names what lets a process pin size bytes.
func memlockHint(size int) string {
	var rl unix.Rlimit
	now := "unknown"
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl) == nil {
		if rl.Cur == unix.RLIM_INFINITY {
			now = "unlimited"
		} else {
			now = fmt.Sprintf("%d KiB", rl.Cur/1024)
		}
	}
	return fmt.Sprintf("CAP_IPC_LOCK, or an RLIMIT_MEMLOCK of at least %d KiB (now %s; ulimit -l, or LimitMEMLOCK= in a systemd unit)", (size+1023)/1024, now)
}

func (x *XSK) setupRings() error {
	o := x.opts
	n := o.RingSize
	for _, r := range []struct {
		opt  int
		name string
	}{
		{unix.XDP_UMEM_FILL_RING, "fill"},
		{unix.XDP_UMEM_COMPLETION_RING, "completion"},
		{unix.XDP_RX_RING, "RX"},
		{unix.XDP_TX_RING, "TX"},
	} {
		if err := unix.SetsockoptInt(x.fd, unix.SOL_XDP, r.opt, n); err != nil {
			return sysErr(fmt.Sprintf("set %s ring size %d", r.name, n), err)
		}
	}
	var off unix.XDPMmapOffsets
	size := uint32(unsafe.Sizeof(off))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(x.fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&size)), 0); e != 0 {
		return sysErr("get ring offsets", e)
	}
	if size != uint32(unsafe.Sizeof(off)) {
		return dgramio.NotSupported("AF_XDP ring flags (need_wakeup)", "5.4", "", nil)
	}
	descSize := uint64(unsafe.Sizeof(unix.XDPDesc{}))
	mapRing := func(pgoff int64, ro unix.XDPRingOffset, elem uint64, name string) ([]byte, error) {
		length := int(ro.Desc + uint64(n)*elem)
		mem, err := unix.Mmap(x.fd, pgoff, length, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return nil, sysErr("mmap "+name+" ring", err)
		}
		x.undo.Add(func() error { return unix.Munmap(mem) })
		return mem, nil
	}
	mem, err := mapRing(unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, 8, "fill")
	if err != nil {
		return err
	}
	if err := initRing(&x.rx.fill, mem, off.Fr, uint32(n)); err != nil {
		return sysErr("fill ring", err)
	}
	if mem, err = mapRing(unix.XDP_PGOFF_RX_RING, off.Rx, descSize, "RX"); err != nil {
		return err
	}
	if err := initRing(&x.rx.rx, mem, off.Rx, uint32(n)); err != nil {
		return sysErr("RX ring", err)
	}
	if mem, err = mapRing(unix.XDP_PGOFF_TX_RING, off.Tx, descSize, "TX"); err != nil {
		return err
	}
	if err := initRing(&x.tx.tx, mem, off.Tx, uint32(n)); err != nil {
		return sysErr("TX ring", err)
	}
	if mem, err = mapRing(unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, 8, "completion"); err != nil {
		return err
	}
	if err := initRing(&x.tx.comp, mem, off.Cr, uint32(n)); err != nil {
		return sysErr("completion ring", err)
	}

	x.splitUMEM()
	return nil
}

// splitUMEM gives the first half of the UMEM's frames to the receive side
// (the fill ring, the rest spare) and the second half to the transmit
// side's free list, once the rings of Options.RingSize entries are set up.
func (x *XSK) splitUMEM() {
	o := x.opts
	half := o.Frames / 2
	fs := uint64(o.FrameSize)
	x.rx.end = uint64(half) * fs
	x.rx.ret = make([]uint64, o.RingSize)
	x.rx.spare = make([]uint64, 0, half)
	for i := half - 1; i >= 0; i-- {
		x.rx.spare = append(x.rx.spare, uint64(i)*fs)
	}
	x.rx.refill(nil)
	x.tx.free = make([]uint64, 0, o.Frames-half)
	for i := o.Frames - 1; i >= half; i-- {
		x.tx.free = append(x.tx.free, uint64(i)*fs)
	}
	x.tx.frames0 = len(x.tx.free)
	x.tx.maxLen = o.MaxFrame
	// A copy-mode kick sends at most 32 frames (the kernel's TX budget)
	// and returns EAGAIN when more are left: enough kicks to empty a ring.
	x.tx.maxKicks = o.RingSize/32 + 4
	x.tx.clock = monotime.New(time.Now())
}

// bind binds the socket to the queue and reports whether it runs in
// zero-copy mode.
func (x *XSK) bind() (bool, error) {
	o := x.opts
	flags := uint16(unix.XDP_USE_NEED_WAKEUP)
	switch {
	case o.Copy == "zerocopy":
		flags |= unix.XDP_ZEROCOPY
	case o.Copy == "copy" || o.Mode == "skb":
		flags |= unix.XDP_COPY
	}
	sa := &unix.SockaddrXDP{Flags: flags, Ifindex: uint32(x.ifindex), QueueID: uint32(o.QueueID)}
	err := unix.Bind(x.fd, sa)
	// The kernel lets go of a queue some time after the socket that held
	// it is closed (the buffer pool is released by a work queue), so a
	// socket reopened at once can find the queue busy for a moment.
	for deadline := time.Now().Add(bindBusyWait); errors.Is(err, unix.EBUSY) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		err = unix.Bind(x.fd, sa)
	}
	where := fmt.Sprintf("%s queue %d", o.Iface, o.QueueID)
	switch {
	case err == nil:
	case o.Copy == "zerocopy" && (errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)):
		return false, dgramio.NotSupported("AF_XDP zero-copy on "+o.Iface, "4.20",
			`the driver does not offer zero-copy (veth never does): use Copy "copy" or ""`, err)
	case errors.Is(err, unix.EBUSY):
		return false, sysErr(fmt.Sprintf("bind AF_XDP socket to %s (another AF_XDP socket held the queue for %v)", where, bindBusyWait), err)
	case errors.Is(err, unix.EINVAL):
		return false, sysErr("bind AF_XDP socket to "+where+" (a bad queue, or a kernel without need_wakeup, Linux < 5.4)", err)
	case errors.Is(err, unix.EPERM):
		return false, &dgramio.PrivilegeError{Op: "bind AF_XDP socket", Capability: "CAP_NET_RAW", Err: err}
	default:
		return false, sysErr("bind AF_XDP socket to "+where, err)
	}
	opt, err := unix.GetsockoptInt(x.fd, unix.SOL_XDP, unix.XDP_OPTIONS)
	if err != nil {
		if o.Copy == "zerocopy" {
			return true, nil // the bind would have failed otherwise
		}
		if errors.Is(err, unix.ENOPROTOOPT) {
			return false, nil // Linux < 5.3 cannot say; only a forced bind is sure
		}
		return false, sysErr("get XDP_OPTIONS", err)
	}
	return opt&unix.XDP_OPTIONS_ZEROCOPY != 0, nil
}

// attach attaches objs' program to interface ifindex (named iface)
// through a bpf_link in mode ("" tries driver, then SKB), and returns the
// link, "driver" or "skb", and why driver mode was refused when it fell
// back to SKB mode (nil otherwise).
func attach(objs *xdpprog.Objects, ifindex int, iface string, mode dgramio.XDPMode) (link.Link, string, error, error) {
	try := func(flags link.XDPAttachFlags) (link.Link, error) {
		return link.AttachXDP(link.XDPOptions{Program: objs.Program, Interface: ifindex, Flags: flags})
	}
	var (
		l        link.Link
		err      error
		got      = "driver"
		fallback error
	)
	switch mode {
	case dgramio.XDPModeDriver:
		if l, err = try(link.XDPDriverMode); err != nil {
			if !isPriv(err) && !isBusy(err) && !errors.Is(err, ebpf.ErrNotSupported) {
				return nil, "", nil, dgramio.NotSupported("driver-mode (native) XDP on "+iface, "",
					`the driver has no native XDP: use Mode "skb" or "" (SKB mode, reported)`, err)
			}
			return nil, "", nil, attachErr(iface, "driver", err)
		}
	case dgramio.XDPModeSKB:
		got = "skb"
		if l, err = try(link.XDPGenericMode); err != nil {
			return nil, "", nil, attachErr(iface, got, err)
		}
	default:
		if l, err = try(link.XDPDriverMode); err != nil {
			if isPriv(err) || isBusy(err) || errors.Is(err, ebpf.ErrNotSupported) {
				return nil, "", nil, attachErr(iface, "driver", err)
			}
			drvErr := err
			got = "skb"
			if l, err = try(link.XDPGenericMode); err != nil {
				return nil, "", nil, attachErr(iface, "driver or skb", errors.Join(drvErr, err))
			}
			fallback = drvErr
		}
	}
	return l, got, fallback, nil
}

func isPriv(err error) bool { return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) }
func isBusy(err error) bool { return errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST) }

func attachErr(iface, mode string, err error) error {
	switch {
	case isPriv(err):
		return &dgramio.PrivilegeError{Op: "attach XDP program to " + iface, Capability: "CAP_NET_ADMIN and CAP_BPF", Err: err}
	case errors.Is(err, ebpf.ErrNotSupported):
		return dgramio.NotSupported("XDP through bpf_link", "5.9", "", err)
	case isBusy(err):
		return sysErr(fmt.Sprintf("attach XDP program to %s in %s mode: another XDP program is attached; remove it (ip link set dev %s xdp off) or use another interface", iface, mode, iface), err)
	}
	return sysErr(fmt.Sprintf("attach XDP program to %s in %s mode", iface, mode), err)
}

// waitCarrier waits until the link is up with carrier (IFF_LOWER_UP), for
// at most d; d < 0 does not wait.
func waitCarrier(ifindex int, name string, d time.Duration) error {
	if d < 0 {
		return nil
	}
	deadline := time.Now().Add(d)
	for {
		l, err := netlink.LinkByIndex(ifindex)
		if err != nil {
			return sysErr("read link state of "+name, err)
		}
		a := l.Attrs()
		if a.RawFlags&unix.IFF_UP != 0 && a.RawFlags&unix.IFF_LOWER_UP != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("afxdp: %s: %w %v after bind (operstate %s): is the link up, and its peer (the cable's other end, the other veth end)?",
				name, ErrNoCarrier, d, a.OperState)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TxFrame copies frame into a free TX frame of the UMEM and queues its
// descriptor; it is handed to the kernel at the next Kick. It returns false,
// copying nothing, when no TX frame or TX ring slot is free (counted in
// TxRingFull: Kick reaps completions and frees frames), or when frame is
// empty or longer than Options.MaxFrame (counted in the "xsk" layer's
// tx_oversize: such a frame never fits, do not retry it). The caller keeps
// ownership of frame. It makes no system call.
func (x *XSK) TxFrame(frame []byte) bool {
	t := &x.tx
	if len(frame) == 0 || len(frame) > t.maxLen {
		t.oversize++
		return false
	}
	if len(t.free) == 0 {
		t.reap()
		if len(t.free) == 0 {
			t.ringFull++
			return false
		}
	}
	if t.tx.free(1) == 0 {
		t.ringFull++
		return false
	}
	addr := t.free[len(t.free)-1]
	t.free = t.free[:len(t.free)-1]
	copy(x.umem[addr:addr+uint64(len(frame))], frame)
	t.tx.put(unix.XDPDesc{Addr: addr, Len: uint32(len(frame))})
	t.frames++
	t.bytes += uint64(len(frame))
	return true
}

// TxSlot takes a free TX frame of the UMEM, or the one taken before and
// not committed, and returns its memory (len 0, cap MaxFrame), nil when
// none is free: the caller builds its frame there and TxCommit queues it
// without TxFrame's copy (frameio.SlotWriter).
func (x *XSK) TxSlot() []byte {
	t := &x.tx
	if t.held == 0 {
		if len(t.free) == 0 {
			t.reap()
			if len(t.free) == 0 {
				return nil
			}
		}
		t.held = 1 + t.free[len(t.free)-1]
		t.free = t.free[:len(t.free)-1]
	}
	addr := t.held - 1
	return x.umem[addr : addr : addr+uint64(t.maxLen)]
}

// TxCommit queues the first n bytes of the frame TxSlot took for the next
// Kick; false (the frame stays taken) when none was taken, n is out of
// range (counted as an oversized frame) or the TX ring is full (counted
// as TxFrame counts it).
func (x *XSK) TxCommit(n int) bool {
	t := &x.tx
	switch {
	case t.held == 0:
		return false
	case n <= 0 || n > t.maxLen:
		t.oversize++
		return false
	case t.tx.free(1) == 0:
		t.ringFull++
		return false
	}
	t.tx.put(unix.XDPDesc{Addr: t.held - 1, Len: uint32(n)})
	t.held = 0
	t.frames++
	t.bytes += uint64(n)
	return true
}

// Kick submits the frames queued by TxFrame and, when the kernel asks for
// a wake-up (need_wakeup) and descriptors are waiting in the TX ring, kicks
// it with sendto(MSG_DONTWAIT): once in zero-copy mode, where the driver
// sends asynchronously, and in copy mode again while the kernel reports
// that its per-call budget (32 frames) left some (EAGAIN) and it made
// progress. With nothing queued it makes no system call. Then it reaps the
// completion ring, freeing sent frames. The error reports a link that is
// gone (ENETDOWN, ENXIO) or an unexpected errno; a busy device is not an
// error, and a frame the device dropped (EBUSY) is counted in
// Stats.TxDropped. Frames a busy device left in the ring are not left
// there until the next send: the receive side kicks again, at the next
// RxFrames and every 64 calls after it, and in Wait every millisecond,
// until the kernel takes the wake-up (tx_rekicks counts those).
func (x *XSK) Kick() error {
	t := &x.tx
	if t.tx.prod != t.tx.producer.Load() {
		t.tx.submit()
	}
	var err error
kicks:
	for i := 0; i < t.maxKicks; i++ {
		if t.tx.outstanding() == 0 || !t.tx.needWakeup() {
			break
		}
		before := t.tx.consumer.Load()
		t0 := t.clock.Since()
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(x.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		t.kickNs += uint64(t.clock.Since() - t0)
		t.syscalls++
		switch e {
		case 0:
			break kicks
		case unix.EAGAIN, unix.ENOBUFS:
			t.reap()
			if t.tx.consumer.Load() == before {
				x.rx.txStalled.Store(true) // the receive side kicks again
				break kicks
			}
		case unix.EBUSY:
			t.dropped++
		case unix.ENETDOWN, unix.ENXIO:
			err = sysErr("kick TX on "+x.opts.Iface+" (link down or gone)", e)
			break kicks
		default:
			err = sysErr("kick TX", e)
			break kicks
		}
	}
	t.reap()
	t.publish()
	return err
}

// countLeft counts, at Close, the TX frames that TxFrame accepted and the
// kernel never completed (still in the TX ring, submitted or not, or in
// the driver's hands) and the RX descriptors nobody read. Close must not
// race with the data path (XSK's threading rule), so the rings are still.
func (x *XSK) countLeft() {
	t := &x.tx
	t.reap()
	t.publish()
	n := t.frames0 - len(t.free)
	if t.held != 0 {
		n-- // taken by TxSlot, never queued
	}
	if n > 0 {
		x.txUnsentAtClose.Store(uint64(n))
	}
	x.rxUnreadAtClose.Store(uint64(x.rx.rx.avail(x.rx.rx.size)))
}

// reap moves completed TX frames back to the free list.
func (t *txSide) reap() {
	n := t.comp.avail(t.comp.size)
	if n == 0 {
		return
	}
	for i := uint32(0); i < n; i++ {
		t.free = append(t.free, t.comp.get(i))
	}
	t.comp.release(n)
}

func (t *txSide) publish() {
	t.pub.frames.Store(t.frames)
	t.pub.bytes.Store(t.bytes)
	t.pub.ringFull.Store(t.ringFull)
	t.pub.oversize.Store(t.oversize)
	t.pub.dropped.Store(t.dropped)
	t.pub.syscalls.Store(t.syscalls)
	t.pub.kickNs.Store(t.kickNs)
}

// RxReady reports whether the RX ring holds frames RxFrames has not yet
// released. It reads only the ring's two shared indexes, so any goroutine
// may call it while another is in RxFrames (which may then be delivering
// the frames it sees). A goroutine about to wait for the socket's
// readiness calls it after arming the wait: a frame that arrived before
// would wake nobody.
func (x *XSK) RxReady() bool {
	r := &x.rx.rx
	return r.producer != nil && r.producer.Load() != r.consumer.Load()
}

// RxFrames calls deliver for each received frame, at most max of them (and
// at most the ring size per call), and returns how many it delivered. It
// never blocks. frame points into the UMEM and is valid only inside the call
// to deliver: the frame goes back to the fill ring right after (overwritten
// with 0xDB first in dgramio_debug builds); copy what you keep. When the
// RX ring is empty and the kernel asks for a fill-ring wake-up, it makes one
// recvfrom(MSG_DONTWAIT) per 64 such empty polls; otherwise it makes no
// system call.
func (x *XSK) RxFrames(max int, deliver func(frame []byte)) int {
	r := &x.rx
	if max <= 0 {
		return 0
	}
	if x.rx.txStalled.Load() {
		if r.rekick <= 0 {
			x.rekick()
			r.rekick = rxWakeEvery
		}
		r.rekick--
	}
	if max > len(r.ret) {
		max = len(r.ret)
	}
	n := r.rx.avail(uint32(max))
	if n == 0 {
		r.idle++
		if len(r.spare) > 0 && r.idle%rxWakeEvery == 0 {
			// Spares wait for room, which frames we deliver make (and
			// refill returns at once). Asking the ring for room on every
			// empty call would read the kernel's consumer index, a cache
			// line the kernel writes, each time.
			r.refill(nil)
		}
		if r.fill.needWakeup() {
			r.empty++
			if r.empty >= rxWakeEvery {
				r.empty = 0
				_, _, _ = unix.Syscall6(unix.SYS_RECVFROM, uintptr(x.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
				r.syscalls.Add(1)
			}
		}
		return 0
	}
	r.empty = 0
	var bytes uint64
	k := 0
	for i := uint32(0); i < n; i++ {
		d := r.rx.get(i)
		end := d.Addr + uint64(d.Len)
		if end > r.end || d.Addr > end {
			r.invalid.Add(1) // not a frame of ours: never deliver it or give it back
			continue
		}
		f := x.umem[d.Addr:end:end]
		deliver(f)
		poison.Fill(f)
		r.ret[k] = d.Addr &^ x.frameMask
		k++
		bytes += uint64(d.Len)
	}
	r.rx.release(n)
	r.refill(r.ret[:k])
	r.frames.Add(uint64(k))
	r.bytes.Add(bytes)
	return k
}

// rekick wakes the kernel's TX again after a Kick that found the device
// busy (rxSide.txStalled), from the receive side: only the system call and
// atomic loads of the TX ring's indices, no TX-side state. It clears
// stalled when the ring is empty or the kernel took the wake-up.
func (x *XSK) rekick() {
	t := &x.tx
	if t.tx.outstanding() == 0 {
		x.rx.txStalled.Store(false)
		return
	}
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(x.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	x.rx.syscalls.Add(1)
	x.rx.rekicks.Add(1)
	if e != unix.EAGAIN && e != unix.ENOBUFS {
		x.rx.txStalled.Store(false) // taken, or an error the next Kick reports
	}
}

// refill gives addrs and any spare frames to the fill ring, keeping what
// does not fit as spares. It reads the kernel's consumer index only when
// its last reading leaves too little room for addrs (with addrs nil: for
// the spares too): that index is a cache line the kernel writes, and
// spares that wait for room would otherwise make every call read it.
func (r *rxSide) refill(addrs []uint64) {
	want := uint32(len(addrs))
	if addrs == nil {
		want = uint32(len(r.spare))
	}
	room := r.fill.free(want)
	put := 0
	for _, a := range addrs {
		if uint32(put) == room {
			r.spare = append(r.spare, a)
			continue
		}
		r.fill.put(a)
		put++
	}
	for uint32(put) < room && len(r.spare) > 0 {
		r.fill.put(r.spare[len(r.spare)-1])
		r.spare = r.spare[:len(r.spare)-1]
		put++
	}
	if put > 0 {
		r.fill.submit()
	}
}

// Wait blocks until the RX ring holds a frame, Interrupt is called, ctx is
// done (ctx.Err()), or the XSK is closed (net.ErrClosed). It polls the
// socket (which also wakes a driver that asked for it), Close's eventfd
// and Interrupt's, in slices of at most waitSlice so that a context
// without a deadline is noticed; each poll(2), and the read that takes an
// Interrupt, count in Stats.Syscalls. It allocates nothing.
func (x *XSK) Wait(ctx context.Context) error { return x.wait(ctx, time.Time{}) }

// WaitUntil is Wait that also returns nil once deadline has passed (a
// zero deadline: none), without a context made for the deadline: a poll
// loop that sleeps until its next timer every round saves the context's
// timer (frameio.DeadlineWaiter).
func (x *XSK) WaitUntil(ctx context.Context, deadline time.Time) error {
	return x.wait(ctx, deadline)
}

func (x *XSK) wait(ctx context.Context, until time.Time) error {
	if !x.guard.BeginWait() {
		return net.ErrClosed
	}
	defer x.guard.EndWait()
	if x.rx.rx.avail(1) > 0 {
		return nil
	}
	fds := [3]unix.PollFd{
		{Fd: int32(x.fd), Events: unix.POLLIN},
		{Fd: int32(x.waker.FD()), Events: unix.POLLIN},
		{Fd: int32(x.irq.FD()), Events: unix.POLLIN},
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		ms := int(waitSlice / time.Millisecond)
		if x.rx.txStalled.Load() {
			x.rekick()
			if x.rx.txStalled.Load() {
				ms = 1 // the device is still busy: again soon
			}
		}
		if !until.IsZero() {
			left := time.Until(until)
			if left <= 0 {
				return nil
			}
			if left < waitSlice {
				ms = min(ms, int((left+time.Millisecond-1)/time.Millisecond))
			}
		}
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if left <= 0 {
				// Passed, but the context's timer may not have fired
				// yet: wait for it rather than spin on poll(0), and
				// return what ctx.Err() says from then on.
				<-ctx.Done()
				return ctx.Err()
			}
			if left < waitSlice {
				ms = min(ms, int((left+time.Millisecond-1)/time.Millisecond))
			}
		}
		fds[0].Revents, fds[1].Revents, fds[2].Revents = 0, 0, 0
		n, err := unix.Poll(fds[:], ms)
		x.rx.syscalls.Add(1)
		switch {
		case err == unix.EINTR || n == 0:
			continue
		case err != nil:
			return sysErr("poll", err)
		case fds[1].Revents != 0:
			return net.ErrClosed
		case fds[2].Revents != 0:
			x.irq.Drain()
			x.rx.syscalls.Add(1)
			return nil
		case fds[0].Revents != 0:
			return nil
		}
	}
}

// waitSlice bounds one poll(2) of Wait.
const waitSlice = 50 * time.Millisecond

// Interrupt makes the Wait in progress return nil at once or, when none
// is, the next one (an eventfd that Wait polls and drains): package stack
// wakes a sleeping poll loop with it when netstack's goroutines have work
// for it. It makes one write(2); it does nothing after Close.
func (x *XSK) Interrupt() {
	if !x.guard.BeginWait() {
		return
	}
	x.irq.Wake()
	x.guard.EndWait()
}

// MAC returns the interface's hardware address (a copy).
func (x *XSK) MAC() net.HardwareAddr { return append(net.HardwareAddr(nil), x.mac...) }

// MTU returns the largest IP packet one frame carries: the interface's MTU,
// or Options.MaxFrame minus the Ethernet header if that is smaller.
func (x *XSK) MTU() int { return x.mtu }

// Mode returns how the socket runs: "driver copy", "driver zerocopy",
// "skb copy", or "skb copy (driver mode refused)" after a fallback.
func (x *XSK) Mode() string { return x.mode }

// Fallback returns why driver mode was refused when Open fell back to SKB
// mode, or nil.
func (x *XSK) Fallback() error { return x.fallback }

// Queue returns the interface queue the socket is bound to.
func (x *XSK) Queue() int { return x.opts.QueueID }

// Stats returns the counters. RX counters are current; TX counters (frames,
// bytes, ring-full refusals) are as of the last Kick. Layers hold the
// socket's XDP_STATISTICS ("xsk": rx_dropped, rx_invalid_descs,
// tx_invalid_descs, rx_ring_full, rx_fill_ring_empty_descs,
// tx_ring_empty_descs; rx_dropped, rx_ring_full and tx_invalid_descs are
// losses), our own "xsk" counters (tx_oversize, rx_bad_desc,
// tx_dropped_busy, tx_rekicks (not a loss: TX wake-ups the receive side
// made after a Kick found the device busy), tx_kicks and tx_kick_ns (not
// losses: Kick's sendto calls and the nanoseconds they took), and what
// Close found left: tx_unsent_at_close, frames
// TxFrame accepted that were never sent or never completed, and
// rx_unread_at_close, frames the kernel put in the RX ring that nobody
// read; all losses) and the XDP program's counters ("xdp-prog"), unless
// the program is shared (Options.Shared): its counters count every
// queue's frames, so its owner reports them once (Program.Counters).
// TxDropped and RxDropped include the close counters. Stats makes system
// calls and allocates. After Close it returns the same set: the kernel's
// counters as Close read them, just before it let the socket go.
func (x *XSK) Stats() frameio.Stats {
	t := &x.tx.pub
	unsent, unread := x.txUnsentAtClose.Load(), x.rxUnreadAtClose.Load()
	s := frameio.Stats{
		Mode:       x.mode,
		RxFrames:   x.rx.frames.Load(),
		RxBytes:    x.rx.bytes.Load(),
		TxFrames:   t.frames.Load(),
		TxBytes:    t.bytes.Load(),
		TxRingFull: t.ringFull.Load(),
		TxDropped:  t.dropped.Load() + unsent,
		RxDropped:  unread,
		Syscalls:   x.rx.syscalls.Load() + t.syscalls.Load(),
	}
	s.Layers = append(s.Layers,
		dgramio.Counter{Layer: "xsk", Name: "tx_oversize", Value: t.oversize.Load(), Loss: true},
		dgramio.Counter{Layer: "xsk", Name: "rx_bad_desc", Value: x.rx.invalid.Load(), Loss: true},
		// sendto returned EBUSY: the kernel completed a frame without
		// sending it (NET_XMIT_DROP in copy mode).
		dgramio.Counter{Layer: "xsk", Name: "tx_dropped_busy", Value: t.dropped.Load(), Loss: true},
		dgramio.Counter{Layer: "xsk", Name: "tx_unsent_at_close", Value: unsent, Loss: true},
		// wake-ups of TX from the receive side after a Kick found the
		// device busy (Kick).
		dgramio.Counter{Layer: "xsk", Name: "tx_rekicks", Value: x.rx.rekicks.Load()},
		// Kick's sendto calls and the time they took, in nanoseconds (not
		// losses): on a copying device each call carries the frames
		// through the kernel to the peer, so the mean call is what one
		// send costs the loop beyond building the frames.
		dgramio.Counter{Layer: "xsk", Name: "tx_kicks", Value: t.syscalls.Load()},
		dgramio.Counter{Layer: "xsk", Name: "tx_kick_ns", Value: t.kickNs.Load()},
		dgramio.Counter{Layer: "xsk", Name: "rx_unread_at_close", Value: unread, Loss: true},
	)
	x.statsMu.RLock()
	k := x.final
	if !x.closed {
		k = x.readKernel()
	}
	x.statsMu.RUnlock()
	s.RxDropped += k.rxDropped
	s.TxDropped += k.txDropped
	s.Layers = append(s.Layers, k.layers...)
	return s
}

// kernelStats are the counters Stats reads from the kernel.
type kernelStats struct {
	rxDropped, txDropped uint64
	layers               []dgramio.Counter
}

// readKernel reads XDP_STATISTICS and, unless the program is shared, the
// program's counters. The socket must be open (statsMu held).
func (x *XSK) readKernel() kernelStats {
	var k kernelStats
	if st, n, err := xdpStatistics(x.fd); err == nil {
		k.rxDropped = st.Rx_dropped + st.Rx_ring_full
		k.txDropped = st.Tx_invalid_descs
		k.layers = append(k.layers,
			dgramio.Counter{Layer: "xsk", Name: "rx_dropped", Value: st.Rx_dropped, Loss: true},
			dgramio.Counter{Layer: "xsk", Name: "rx_invalid_descs", Value: st.Rx_invalid_descs},
			dgramio.Counter{Layer: "xsk", Name: "tx_invalid_descs", Value: st.Tx_invalid_descs, Loss: true},
		)
		if n >= 6 {
			k.layers = append(k.layers,
				dgramio.Counter{Layer: "xsk", Name: "rx_ring_full", Value: st.Rx_ring_full, Loss: true},
				dgramio.Counter{Layer: "xsk", Name: "rx_fill_ring_empty_descs", Value: st.Rx_fill_ring_empty_descs},
				dgramio.Counter{Layer: "xsk", Name: "tx_ring_empty_descs", Value: st.Tx_ring_empty_descs},
			)
		}
	}
	if x.objs != nil {
		if c, err := x.objs.ReadCounters(); err == nil {
			k.layers = append(k.layers, c.Layers()...)
		}
	}
	return k
}

// Shared returns the Program the socket registered into (Options.Shared),
// or nil when it has a program of its own.
func (x *XSK) Shared() *Program { return x.shared }

// xdpStatistics reads XDP_STATISTICS and how many of its fields the kernel
// filled (3 before Linux 5.9, 6 since).
func xdpStatistics(fd int) (unix.XDPStatistics, int, error) {
	var st unix.XDPStatistics
	size := uint32(unsafe.Sizeof(st))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_STATISTICS,
		uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&size)), 0); e != 0 {
		return st, 0, sysErr("get XDP_STATISTICS", e)
	}
	return st, int(size / 8), nil
}

// ProgramCounters reads the XDP program's counters, summed over CPUs (the
// shared Program's, counting every queue's frames, with Options.Shared).
func (x *XSK) ProgramCounters() (xdpprog.Counts, error) {
	x.statsMu.RLock()
	defer x.statsMu.RUnlock()
	if x.closed {
		return xdpprog.Counts{}, net.ErrClosed
	}
	if x.shared != nil {
		return x.shared.Counters()
	}
	return x.objs.ReadCounters()
}

// Close undoes Open, last step first: it removes the socket from the
// program's map, detaches the XDP program (closes its bpf_link) and frees
// the maps and the program unless they are shared (Options.Shared: the
// Program's owner closes it), unmaps the rings and the UMEM (the kernel
// keeps the pages it pinned until the socket goes) and closes the socket.
// Before that it counts what is left (Stats: tx_unsent_at_close,
// rx_unread_at_close) and reads the kernel's counters a last time, for
// Stats after Close. A Wait in progress returns net.ErrClosed. Close is
// safe to call more than once; later calls return nil.
func (x *XSK) Close() error {
	if !x.guard.Shut(x.waker.Wake) {
		return nil
	}
	x.statsMu.Lock()
	defer x.statsMu.Unlock()
	x.countLeft()
	x.final = x.readKernel()
	x.closed = true
	if err := x.undo.Undo(); err != nil {
		return fmt.Errorf("afxdp: close: %w", err)
	}
	return nil
}
