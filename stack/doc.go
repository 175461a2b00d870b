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
// them to its processor goroutines (this version has no setting for
// synchronous processing). That hand-off is the price of netstack, measured
// by BenchmarkHandoff; see Endpoint.Poll for what the poll loop does to keep
// it short.
//
// # Shutdown
//
// Stop the poll loop first (a backend does so with core.Guard), then
// Stack.Close: it aborts the endpoints, waits for netstack's goroutines and
// only then closes the endpoint, after which WritePackets refuses. Closing
// netstack while the poll loop still delivers frames into it can deadlock.
package stack
