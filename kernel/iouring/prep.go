//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package iouring

// The Prep methods fill an SQE taken from GetSQE. Addresses are of mmap'd
// memory (Region.Addr) that stays valid until the request completes; fd is
// a file descriptor, or a registered file index when SQEFixedFile is set
// in Flags afterwards (or fixed is true where the method takes it).

// PrepNop prepares IORING_OP_NOP: a request that completes at once with
// res 0.
func (e *SQE) PrepNop(userData uint64) {
	e.Opcode = OpNop
	e.FD = -1
	e.UserData = userData
}

// PrepSendmsg prepares IORING_OP_SENDMSG (5.3) of the struct msghdr at
// msghdr (mmap'd memory: the kernel reads the header when it takes the
// SQE and the payload when it sends, which may be later). With fixed, fd is
// a registered file index.
func (e *SQE) PrepSendmsg(fd int32, fixed bool, msghdr uint64, msgFlags uint32, userData uint64) {
	e.Opcode = OpSendmsg
	e.FD = fd
	if fixed {
		e.Flags |= SQEFixedFile
	}
	e.Addr = msghdr
	e.Len = 1
	e.OpFlags = msgFlags
	e.UserData = userData
}

// PrepRecvmsgMultishot prepares a multishot IORING_OP_RECVMSG (6.0) with
// buffers from group bgid: one SQE, and one CQE per datagram for as long as
// the request lives. Each CQE's buffer starts with a struct
// io_uring_recvmsg_out, then the source address (msg_namelen bytes), the
// control data (msg_controllen bytes) and the payload; see RecvmsgOut. The
// msghdr at msghdr gives msg_namelen and msg_controllen, and must have no
// iovec (msg_iovlen 0: the whole buffer is used). The request ends (a CQE
// without CQEFMore) on an error, ENOBUFS when the group has no buffer left,
// or cancellation.
func (e *SQE) PrepRecvmsgMultishot(fd int32, fixed bool, msghdr uint64, bgid uint16, userData uint64) {
	e.Opcode = OpRecvmsg
	e.FD = fd
	e.Flags |= SQEBufferSelect
	if fixed {
		e.Flags |= SQEFixedFile
	}
	e.IOPrio = RecvMultishot
	e.Addr = msghdr
	e.Len = 1
	e.BufIndex = bgid
	e.UserData = userData
}

// PrepPollAdd prepares a one-shot IORING_OP_POLL_ADD (5.1) for events
// (unix.POLLIN, ...) on fd: it completes with the events that are ready.
func (e *SQE) PrepPollAdd(fd int32, events uint32, userData uint64) {
	e.Opcode = OpPollAdd
	e.FD = fd
	e.OpFlags = events
	e.UserData = userData
}

// PrepCancelAll prepares IORING_OP_ASYNC_CANCEL (5.5) of every request in
// flight (IORING_ASYNC_CANCEL_ANY|ALL, 5.19). Its CQE's res is the number
// of requests cancelled.
func (e *SQE) PrepCancelAll(userData uint64) {
	e.Opcode = OpAsyncCancel
	e.FD = -1
	e.OpFlags = CancelAny | CancelAll
	e.UserData = userData
}

// PrepCancel prepares IORING_OP_ASYNC_CANCEL (5.5) of the request whose
// user data is target (the first that matches). Its CQE's res is 0 when
// it was found and cancelled, -ENOENT when no such request was in flight,
// -EALREADY when it was running and may still complete.
func (e *SQE) PrepCancel(target, userData uint64) {
	e.Opcode = OpAsyncCancel
	e.FD = -1
	e.Addr = target
	e.UserData = userData
}
