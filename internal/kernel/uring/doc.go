// Package uring is the kind "uring": the same kernel UDP socket as kind udp
// (set up by internal/sock, so the two differ only in how they cross into
// the kernel), driven through io_uring with package kernel/iouring.
//
// Send: Queue copies the payload into a slot in mmap'd memory (msghdr,
// iovec, sockaddr and payload); Flush turns the queued slots into SENDMSG
// SQEs and submits them, Config.TxBatch per io_uring_enter (one call when
// everything queued fits one batch; with SQPOLL, no call unless the kernel
// thread sleeps). A slot is reused only after its completion.
//
// Receive: one multishot RECVMSG, armed once on a registered file, fed by a
// provided buffer ring: each datagram lands in its own buffer and yields a
// CQE. An Rx that finds nothing reads the CQ tail and makes no system call.
// Buffers handed out by Rx go back to the ring at the start of the next Rx.
// When every buffer is taken the kernel ends the multishot request with
// ENOBUFS (the datagrams wait in the socket buffer, nothing is lost), and
// the next Rx arms it again (Stats layer "uring", counter "rearm").
//
// # Threads
//
// The ring is set up with IORING_SETUP_SINGLE_ISSUER: only the OS thread
// that created it may submit. New therefore locks the calling goroutine to
// its thread, and Queue, Flush, Rx and Wait must be called on that
// goroutine, which must outlive the backend (when its thread exits, the
// kernel cancels the ring's requests).
//
// Completions that need the ring's thread (a receive is finished by the
// thread that submitted it) are run cooperatively
// (IORING_SETUP_COOP_TASKRUN with IORING_SETUP_TASKRUN_FLAG, Linux 5.19):
// the kernel raises a flag in the SQ ring instead of interrupting the
// thread, and Rx, seeing the flag, enters the kernel once to run them. An
// Rx that finds nothing still makes no system call, and a thread spinning
// on the CQ is not interrupted (an interrupt per datagram costs far more
// than the enter: BenchmarkNAPIVeth, BENCHMARKS.md).
// Config.URing.Interrupts turns the cooperative mode off, for comparison.
// IORING_SETUP_DEFER_TASKRUN is not
// used: its work runs only inside io_uring_enter on the ring's thread, so
// Close from another goroutine could never cancel what is in flight while
// that thread is parked, and it saves nothing more for this loop (every
// receive needs one enter either way). With SQPOLL the kernel refuses the
// cooperative flags (its own thread runs the completions), so they are
// left off.
//
// # Close
//
// Close may run on any goroutine. It cannot submit a cancellation from
// another thread (SINGLE_ISSUER), so New arms a kill switch: a POLL_ADD on
// an eventfd linked to an ASYNC_CANCEL of every request. Close writes the
// eventfd, which also ends a Wait sleeping in the kernel; the kernel then
// cancels the receive and the sends still waiting, Close watches the CQ
// until every request has completed, and only then closes the ring and
// unmaps the memory those requests pointed into. The receive buffers the
// last Rx handed out (Packet.Data) are the poll loop's until its next Rx
// or Wait: a Close from another goroutine leaves them mapped, and that
// next call, which returns net.ErrClosed, unmaps them, so a loop still
// reading its last batch never faults.
//
// # NAPI busy polling
//
// With Config.URing.NAPI the ring registers NAPI busy polling (Linux 6.9)
// for Config.BusyPollUs. The kernel polls the NAPI contexts of the ring's
// sockets only while the thread waits in io_uring_enter (Wait), never for
// an Rx that spins on the CQ, and a socket has a NAPI context on veth only
// when GRO is on at the receiving end (otherwise its packets come through
// the per-CPU backlog and SO_INCOMING_NAPI_ID is 0). With NAPI a waiting
// thread pulls its own packet from the device's ring and completes its
// receive itself, with no wake-up from another CPU, which makes a Wait
// nearly as fast as spinning on the CQ (BenchmarkNAPIVeth, BENCHMARKS.md).
//
// Needs Linux 6.0 (multishot RECVMSG; buffer rings are 5.19) and io_uring
// allowed by the sysctl kernel.io_uring_disabled; NAPI busy polling needs
// 6.9. No privileges are needed.
//
// This package is one of dgramio's backends, reached through dgramio.New
// and dgramio.NewGroup; its exported names serve the module's other
// packages and are not a stable API of their own.
package uring
