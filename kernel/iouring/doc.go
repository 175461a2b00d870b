// Package iouring is a small io_uring library on golang.org/x/sys/unix: ring
// set-up and mapping, SQE preparation (NOP, SENDMSG, multishot RECVMSG,
// POLL_ADD, ASYNC_CANCEL), submission and waiting (io_uring_enter, with a
// timeout through IORING_ENTER_EXT_ARG), completion reaping without system
// calls, registered files, provided buffer rings and NAPI busy polling.
// It is what the uring backend (kernel/uring) is built on, and no more.
//
// # Memory
//
// Everything the kernel reads or writes after a system call returns lives
// in memory mapped with mmap(2), never in Go memory, which the runtime may
// move or free: the rings themselves (the kernel's), the buffers of a
// BufRing, and whatever an SQE points to (msghdr, iovec, sockaddr and
// payload of a send in flight), which callers place in a Region. SQEs carry
// those addresses as integers; no Go pointer is ever stored in one.
// Arguments the kernel reads only during a system call (the file table
// given to RegisterFiles) may be Go memory.
//
// # Threads
//
// A Ring is used by one goroutine. With Options.SingleIssuer (Linux 6.0)
// the kernel insists on one thread: the goroutine must call
// runtime.LockOSThread before New and keep the lock while it uses the ring,
// otherwise io_uring_enter and io_uring_register fail with EEXIST. io_uring
// runs a request's completion work (task_work) on the thread that
// submitted it, and CPU affinity is per thread: both are further reasons to
// keep one ring on one locked thread.
//
// # Kernels
//
// io_uring appeared in Linux 5.1. This package uses IORING_ENTER_EXT_ARG
// (5.11) for timed waits, provided buffer rings (5.19) and multishot
// RECVMSG (6.0); NAPI busy polling needs 6.9. Check reports, from a cached
// look at uname and the sysctl kernel.io_uring_disabled (6.6, and RHEL 9,
// which sets it to 2), whether the backend's needs are met. The package
// supports 64-bit Linux only (its struct msghdr layout is 64-bit).
//
// This package is API and stands alone: it imports no other part of
// dgramio but its error types (errors match dgramio.ErrNotSupported and
// *dgramio.PrivilegeError).
package iouring
