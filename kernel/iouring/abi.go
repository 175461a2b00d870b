//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package iouring

// The kernel's io_uring ABI (include/uapi/linux/io_uring.h). golang.org/x/sys
// has the syscall numbers but none of the structures or constants, so the
// parts this package uses are written out here. Layouts are checked against
// the C sizes in abi_test.go.

// Setup flags (io_uring_params.flags).
const (
	SetupSQPoll       = 1 << 1  // a kernel thread takes submissions (5.1; unprivileged since 5.11)
	SetupSQAff        = 1 << 2  // sq_thread_cpu is valid (5.1)
	SetupCQSize       = 1 << 3  // cq_entries is valid (5.5)
	SetupClamp        = 1 << 4  // clamp ring sizes to the maximum (5.6)
	SetupSubmitAll    = 1 << 7  // go on submitting after a bad SQE (5.18)
	SetupCoopTaskrun  = 1 << 8  // no IPI to run completions (5.19)
	SetupTaskrunFlag  = 1 << 9  // set SQTaskrun when completions wait (5.19)
	SetupSingleIssuer = 1 << 12 // one task submits (6.0)
	SetupDeferTaskrun = 1 << 13 // completions run only in io_uring_enter (6.1)
)

// Features (io_uring_params.features).
const (
	FeatSingleMmap = 1 << 0 // SQ and CQ rings share one mapping (5.4)
	FeatNoDrop     = 1 << 1 // CQ overflow is kept, not dropped (5.5)
	FeatFastPoll   = 1 << 5 // internal poll instead of io-wq for sockets (5.7)
	FeatExtArg     = 1 << 8 // IORING_ENTER_EXT_ARG (5.11)
)

// io_uring_enter flags.
const (
	EnterGetEvents = 1 << 0
	EnterSQWakeup  = 1 << 1
	EnterSQWait    = 1 << 2
	EnterExtArg    = 1 << 3
)

// SQ ring flags (read through Ring.SQFlags).
const (
	SQNeedWakeup = 1 << 0 // the SQPOLL thread sleeps; wake it with EnterSQWakeup
	SQCQOverflow = 1 << 1 // completions wait in the kernel's overflow list
	SQTaskrun    = 1 << 2 // completions wait for the task to enter the kernel
)

// SQE flags (SQE.Flags).
const (
	SQEFixedFile    = 1 << 0 // FD is an index into the registered files
	SQEIODrain      = 1 << 1
	SQEIOLink       = 1 << 2
	SQEAsync        = 1 << 4
	SQEBufferSelect = 1 << 5 // the kernel picks a buffer from BufIndex's group
	SQECQESkip      = 1 << 6
)

// Opcodes.
const (
	OpNop         = 0
	OpPollAdd     = 6
	OpSendmsg     = 9
	OpRecvmsg     = 10
	OpAsyncCancel = 14
	OpMsgRing     = 40
)

// Flags of recv/send SQEs, in SQE.IOPrio.
const (
	RecvsendPollFirst = 1 << 0
	RecvMultishot     = 1 << 1 // one SQE, one CQE per datagram (6.0)
)

// Flags of OpAsyncCancel, in SQE.OpFlags.
const (
	CancelAll     = 1 << 0 // every match, not just the first (5.19)
	CancelFD      = 1 << 1 // match on the file descriptor (5.19)
	CancelAny     = 1 << 2 // match every request (5.19)
	CancelFDFixed = 1 << 3 // the FD is a registered file index (5.19)
)

// CQE flags.
const (
	CQEFBuffer       = 1 << 0 // the upper 16 bits hold the buffer id
	CQEFMore         = 1 << 1 // a multishot request goes on
	CQEFSockNonempty = 1 << 2
	CQEBufferShift   = 16
)

// Offsets of the mappings (the last argument of mmap on the ring fd).
const (
	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000
)

// io_uring_register opcodes.
const (
	registerFiles      = 2
	unregisterFiles    = 3
	registerProbe      = 8
	registerPbufRing   = 22
	unregisterPbufRing = 23
	registerNAPI       = 27
	unregisterNAPI     = 28
)

// SQE is a submission queue entry, struct io_uring_sqe (64 bytes). The
// fields that several operations share under a C union carry the name of
// the use this package makes of them. No Go pointer is ever stored in an
// SQE: addresses are of mmap'd memory (see Region).
type SQE struct {
	Opcode uint8
	Flags  uint8
	IOPrio uint16
	FD     int32
	Off    uint64 // off / addr2
	Addr   uint64 // addr / splice_off_in
	Len    uint32
	// OpFlags is the per-opcode flag word: msg_flags, poll32_events,
	// cancel_flags, ...
	OpFlags  uint32
	UserData uint64
	// BufIndex is buf_index, or buf_group with SQEBufferSelect.
	BufIndex    uint16
	Personality uint16
	FileIndex   uint32 // splice_fd_in / file_index / addr_len
	Addr3       uint64
	_           uint64
}

// CQE is a completion queue entry, struct io_uring_cqe (16 bytes).
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// BufID returns the buffer id of a CQE with CQEFBuffer set.
func (c *CQE) BufID() uint16 { return uint16(c.Flags >> CQEBufferShift) }

// HasBuffer reports whether the kernel took a buffer from a ring for c.
func (c *CQE) HasBuffer() bool { return c.Flags&CQEFBuffer != 0 }

// More reports whether the multishot request that produced c goes on.
func (c *CQE) More() bool { return c.Flags&CQEFMore != 0 }

type sqOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	UserAddr                                                        uint64
}

type cqOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, CQEs, Flags, Resv1 uint32
	UserAddr                                                        uint64
}

type params struct {
	SQEntries, CQEntries, Flags, SQThreadCPU, SQThreadIdle, Features, WQFD uint32
	Resv                                                                   [3]uint32
	SQOff                                                                  sqOffsets
	CQOff                                                                  cqOffsets
}

// bufReg is struct io_uring_buf_reg.
type bufReg struct {
	RingAddr    uint64
	RingEntries uint32
	BGID        uint16
	Flags       uint16
	Resv        [3]uint64
}

// bufEntry is struct io_uring_buf, one entry of a provided buffer ring.
type bufEntry struct {
	Addr uint64
	Len  uint32
	BID  uint16
	Resv uint16 // in entry 0, this is the ring's tail
}

// geteventsArg is struct io_uring_getevents_arg.
type geteventsArg struct {
	Sigmask   uint64
	SigmaskSz uint32
	MinWaitUs uint32 // pad before 6.12
	TS        uint64
}

// timespec is struct __kernel_timespec.
type timespec struct{ Sec, Nsec int64 }

// napiReg is struct io_uring_napi (6.9). Opcode 0 with OpParam 0 is
// "register, track NAPI ids dynamically", also on kernels before the field
// existed (it was padding then).
type napiReg struct {
	BusyPollTo     uint32
	PreferBusyPoll uint8
	Opcode         uint8
	Pad            [2]uint8
	OpParam        uint32
	Resv           uint32
}

// probeOp is struct io_uring_probe_op.
type probeOp struct {
	Op, Resv uint8
	Flags    uint16
	Resv2    uint32
}

// probeHdr is struct io_uring_probe without its flexible ops array.
type probeHdr struct {
	LastOp, OpsLen uint8
	Resv           uint16
	Resv2          [3]uint32
}
