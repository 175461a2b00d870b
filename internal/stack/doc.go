// Package stack runs gVisor's netstack over a frameio.FrameIO: Endpoint is
// the link endpoint (Ethernet, ARP resolution, padding to 60 bytes) and Stack
// builds a netstack instance on it (one NIC, our IPv4 address, an on-link
// default route, ARP, IPv4, ICMP echo, TCP).
//
// # Threading
//
// Two kinds of goroutine touch an Endpoint, and the design is built around
// the difference between them.
//
// The poll loop is the application's goroutine, inside a backend's Rx,
// Flush or Wait. It alone receives: Endpoint.Poll pulls frames with
// FrameIO.RxFrames and hands them to netstack (DeliverNetworkPacket), on the
// poll loop's own goroutine. It also sends what the application writes:
// netstack's Endpoint.Write pushes segments synchronously, so those
// WritePackets calls run on the poll loop too.
//
// Netstack's own goroutines also send: the TCP segment processors (one per
// GOMAXPROCS at stack creation; they handle every received segment, so the
// ACKs, the data released by an opening window and the SYN-ACKs leave from
// them) and the timers (retransmission, TLP, keepalive, TIME-WAIT).
// WritePackets is therefore safe for any goroutine: it holds a mutex around
// FrameIO.TxFrame. It does not kick the device per frame. A frame written
// while the poll loop is awake stays in the TX ring until the poll loop's
// next Endpoint.Flush (every backend Rx and Flush ends with one): one kick,
// at most one system call, per round. A frame written while the poll loop
// sleeps in Endpoint.Sleep is kicked by its writer at once, so a
// retransmission leaves on time even when the application is idle. An
// application that neither polls nor sleeps (it stopped calling the
// backend) leaves netstack's frames in the ring until it comes back, as
// lwIP's timers would not run at all.
//
// Received segments are not processed on the poll loop: netstack queues
// them to its processor goroutines. This gVisor version has no setting for
// synchronous processing and none for the number of processors (one per
// GOMAXPROCS at stack creation; a connection always uses the same one), so
// the hand-off stays. What keeps it short is the caller's: package tcp
// yields (runtime.Gosched) after a Poll that delivered frames and in an Rx
// that found nothing, so the processor, made runnable on the poll loop's P,
// runs at once instead of waiting for a preemption (10 ms, when every P is
// busy, as with GOMAXPROCS=1 or one spinning loop per P).
//
// What the hand-off and the stack cost is measured by BenchmarkHandoff
// (over memio) and BenchmarkVethSteps (over veth) in package tcp; the
// numbers are in BENCHMARKS.md. A poll loop that sleeps pays more: after
// a sleep, the processor's wake-up has the Go runtime wake another OS
// thread for the idle P (netstack readies its goroutine with wakep).
//
// A FrameIO with Interrupt (frameio/afxdp: an eventfd its Wait polls;
// frameio/memio: a channel) sleeps without slices and without allocating.
// Sleep on a FrameIO that is not an Interrupter waits in slices of
// SleepSlice, each a context that Interrupt cancels (a Wait that selects on
// ctx.Done honours that at once; one built on poll(2) notices it only at
// the slice's end), and allocates that context.
//
// # Shutdown
//
// Stop the poll loop first (a backend does so with a guard), then
// Stack.Close: it aborts the endpoints, waits for netstack's goroutines and
// only then closes the endpoint, after which WritePackets refuses. Closing
// netstack while the poll loop still delivers frames into it can deadlock.
//
// This package is API: a gVisor link endpoint and stack over any FrameIO.
package stack
