// Package uring is the kind "uring": the same kernel UDP socket as kind udp
// (set up by kernel/sock, so the two differ only in how they cross into
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
// Needs Linux 6.0 (multishot RECVMSG; buffer rings are 5.19) and io_uring
// allowed by the sysctl kernel.io_uring_disabled; NAPI busy polling needs
// 6.9. No privileges are needed.
package uring
