// Package netconn gives the userspace TCP (kinds tcp-xdp and tcp-dpdk: the
// native engine of package stack/native, or gVisor netstack, over a
// FrameIO) the interfaces every Go program already speaks: net.Listener
// and net.Conn. An existing server (net/http, gRPC,
// anything that takes a net.Listener) runs on the kernel-bypass path
// unchanged:
//
//	ln, err := netconn.Listen(dgramio.Config{Kind: "tcp-xdp", Iface: "eth1",
//		LocalIP: netip.MustParseAddr("198.18.0.3"), Port: 8080})
//	if err != nil {
//		log.Fatal(err)
//	}
//	log.Fatal(http.Serve(ln, handler))
//
// and a client dials through Service.DialContext (http.Transport's
// DialContext). The name says what it returns (net.Conn), and keeps it
// apart from gVisor's own adapter, gonet, which this package does not
// use: gonet turns netstack's errors into errors.New(err.String()), and
// ours keep their identity.
//
// # Engines
//
// Config.TCP.Stack picks the engine, as for dgramio.New: empty or
// "native" (the default) is stack/native, "netstack" is gVisor netstack.
// Both give the same types and the same contract (below); the Threading
// section says how each is driven.
//
// # Service
//
// A Service is one engine over one FrameIO (one AF_XDP socket on one
// interface queue, or one DPDK port), with one address (Config.LocalIP,
// which the kernel must not hold on that interface; netstack answers ARP
// for it) and a poller goroutine of its own. New opens the FrameIO through
// an Opener (OpenXDP, OpenDPDK, or the caller's), NewOverFrameIO takes
// one open (frameio/memio in tests). Listen and Dial on the Service make
// as many listeners and connections as Options.MaxConns allows; Listen(cfg)
// and Dial(ctx, cfg, addr) are the one-line forms, whose Service lives as
// long as what they return. On tcp-xdp a Service answers for its address
// as a host: its XDP program hands the engine every frame to LocalIP (any
// port, ICMP) and ARP, the kernel keeps the rest; SYNs to it pass a
// per-CPU token bucket (Config.XDP.SYNRate) first.
//
// # Threading on the native engine
//
// The engine has one owner: the poller goroutine, the only one that
// calls it. Each connection has two single-producer/single-consumer byte
// rings (128 KiB each, atomic indices) between the application and the
// engine: Read copies out of the receive ring, Write copies into the send
// ring, and the poller moves bytes between the rings and the engine. A
// connection with work for the poller (bytes to send, room made in a full
// receive ring, a close) joins a lock-free list once until the poller
// takes it; the poller is woken only when it sleeps, a reader or writer
// only when it is parked (its ring empty, or full): a busy Service pays no
// lock, system call or wake-up per message. Listen, Dial, Close,
// SetReadBuffer and Stats are requests the poller runs between two polls.
// On AF_XDP the poller sleeps in the Go netpoller on the socket (PollFDer),
// so that the goroutine whose write makes a frame arrive runs the poller
// when it blocks, as it would a kernel socket's reader.
//
// # Threading on netstack
//
// The poller is the only goroutine that receives: each round it hands up
// to 256 frames to netstack (stack.Endpoint.Poll) and kicks what netstack
// wrote since the last round (one system call at most). Application
// goroutines never poll. A Read copies out of netstack's receive queue; a
// Write copies into its send buffer and pushes the segments the window
// allows on the writer's goroutine (they leave at the poller's next kick,
// or at once while the poller sleeps); a call that cannot go on waits on
// a channel that netstack's readiness callback signals. Netstack's own
// goroutines (the segment processors, the timers) send ACKs,
// retransmissions and window updates as package stack describes.
//
// With Config.CPUs the poller is locked to its OS thread and pinned to
// CPUs[0] (internal/cpu.Claim), and then never yields; unpinned, it yields
// after each round that delivered frames so that the netstack processor it
// made runnable runs at once.
//
// # Idle
//
// Options.Poll says what the poller does when a round finds nothing.
// PollSpin polls again: one CPU at 100% while the Service lives. PollSleep
// sleeps at once (netstack: stack.Endpoint.Sleep, poll(2) on the AF_XDP
// socket; native: the Go netpoller on it, or the FrameIO's Wait) until
// a frame arrives. PollAdaptive, the default, spins for Options.SpinFor
// (50 µs) after the last frame, then sleeps: a request/response exchange
// keeps the poller awake, an idle server costs no CPU. A native poller
// that sleeps in the Go netpoller (AF_XDP) spins only while a CPU is free
// for it (probed every 800 ms from /proc/stat and getrusage) and where a
// 50 ms trial of the spin moved as many frames a second as the probe
// without it (a client goroutine of the same process moves fewer: the
// spinner keeps the Go scheduler from polling the network on its P),
// looking at the RX ring without a system call and yielding to the
// Service's goroutines between looks; elsewhere it sleeps at once after a
// round, since a spin would take its time from the other processes or
// the program's own goroutines, and its wake-up costs what a kernel
// socket's does. DPDK cannot sleep on
// a vdev's queue: its poller naps (a sleep the Go runtime stretches to
// about 1 ms) instead.
//
// What sleeping costs is the wake-up of the first frame after a pause: the
// kernel wakes the poller's thread from poll(2), and the segment it hands
// netstack wakes a processor goroutine on another thread. Spinning saves
// that, costs a CPU of its own, and a pinned poller never yields, so
// netstack's processor must be stolen by another thread each time: where
// the poller shares its CPU with the application and the kernel, spinning
// may lose at p99 what it gains at p50; with a core to spare for the
// poller, it gains. BenchmarkVethRTT measures each mode; BENCHMARKS.md
// has the numbers.
//
// # Limits
//
// Options.MaxConns caps the connections open at once (accepted and
// dialled): past it Accept resets the new connection and returns a
// *ConnLimitError (a Temporary net.Error, so net/http backs off as it does
// for EMFILE) and Dial refuses before sending anything; Stats counts each
// refusal (netconn/conn_limit_refused). Each connection's memory in the
// engine is bounded by Config.TCP.SendBuf and Config.TCP.RecvBuf (1 MiB
// each by default): a Write blocks when the send buffer is full, the
// window closes when the receive buffer is, and SetReadBuffer or
// SetWriteBuffer beyond them returns a *BufferLimitError. MaxConns times
// (SendBuf + RecvBuf) bounds the whole, plus, on the native engine, the
// two 128 KiB rings of each connection (SetWriteBuffer bounds the send
// ring there; SetNoDelay has no effect: Nagle is Config.Nagle). The
// native engine's table (Config.TCP.MaxConns, default twice MaxConns)
// also holds the connections it still closes and the handshakes.
//
// # Errors
//
// As the standard library's TCP: *net.OpError with Net "tcp"; errors.Is
// with net.ErrClosed after Close, with os.ErrDeadlineExceeded past a
// deadline (a net.Error whose Timeout is true), with the errno Linux gives
// (syscall.ECONNRESET, ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH, EPIPE after
// CloseWrite, EADDRINUSE; each netstack error mapped onto its errno); io.EOF,
// unwrapped, at the peer's FIN.
//
// # Shutdown
//
// Service.Close closes every listener and connection (FIN), keeps polling
// for up to Options.Linger while the FINs are acknowledged (those of
// connections the application closed just before too), stops the
// poller, shuts the engine down (resetting what is still open, the
// connections closed before included: their peers get a RST), then
// closes the FrameIO, which detaches the XDP program.
//
// This package is API: net.Conn and net.Listener over the userspace TCP.
package netconn
