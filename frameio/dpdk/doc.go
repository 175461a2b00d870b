// Package dpdk is a frameio.FrameIO over DPDK (22.11, from the distribution's
// libdpdk), bound with cgo through a small C shim: rte_eth_rx_burst,
// rte_eth_tx_burst, rte_pktmbuf_alloc and mtod are static inline in DPDK's
// headers, so the shim puts each whole burst behind one function and Go makes
// one cgo call per burst, never one per packet.
//
// The package is built only with the build tag dpdk (it needs cgo and
// libdpdk: apt-get install dpdk-dev libdpdk-dev, then go build -tags dpdk).
// Without the tag it holds only this documentation, and the root package
// answers the kinds dpdk and tcp-dpdk with dgramio.ErrNoDPDK (which
// matches dgramio.ErrNotSupported).
//
// # EAL
//
// DPDK's Environment Abstraction Layer is started once per process, by
// StartEAL or by the first Open, and its arguments are decided then: the main
// lcore runs on the CPUs the calling thread is already allowed (pin the
// thread first to put it on one core); without hugepages --no-huge
// --no-shconf, with them --in-memory; a file prefix unique to the process;
// no telemetry. Devices are not given to the EAL at start: each Open
// hot-plugs its own (a vdev such as net_af_xdp or net_af_packet on an
// interface, or a PCI device) from the calling thread, so that a vdev finds
// its interface in the network namespace of the thread that calls Open. The
// EAL's run-time directory under /var/run/dpdk is removed as soon as the EAL
// has started (nothing there is used afterwards), so nothing is left behind
// even when the process is killed.
//
// # Threading and lifetime
//
// A Port follows the frameio.FrameIO rules: one goroutine transmits
// (TxFrame, Kick), one receives (RxFrames), MAC, MTU and Stats may be called
// from anywhere, and Close must not race with either side. A frame passed to
// the deliver function of RxFrames points into an mbuf and is valid only
// during that call. TxFrame copies the frame into a fresh mbuf at once.
//
// DPDK cannot sleep on a vdev's queue, so Port does not implement
// frameio.Waiter: its user polls.
//
// # Privileges
//
// Without root, the EAL (without hugepages) needs no capability; the
// vdevs do (as TestPrivileges measures them): net_af_xdp CAP_NET_ADMIN,
// CAP_NET_RAW, CAP_SYS_ADMIN and CAP_IPC_LOCK (CAP_SYS_ADMIN because libxdp
// reads the XDP program on the interface back by its id, which nothing
// else allows; CAP_BPF does not stand in for it), net_af_packet
// CAP_NET_ADMIN and CAP_NET_RAW. Open refused for want of them returns a
// *dgramio.PrivilegeError naming those the process lacks.
//
// # What DPDK 22.11's vdevs do, and what Port does about it
//
//   - net_af_xdp registers the mempool as its UMEM assuming the objects lie
//     back to back; without hugepages they do not unless the pool is made
//     with RTE_MEMPOOL_F_NO_IOVA_CONTIG, which Port does for every vdev (no
//     device DMAs into a vdev's pool). Otherwise transmission silently
//     stops after a few thousand frames (invalid descriptors).
//   - net_af_xdp leaves the socket that owns its UMEM open on close, so the
//     queue stays bound: Port closes it. The kernel frees a queue a few
//     milliseconds after its socket closes, so Open retries a net_af_xdp
//     queue set-up that fails, for up to 2 s.
//   - net_af_xdp reports XDP_STATISTICS rx_dropped as imissed and nothing
//     else; net_af_packet reports no kernel drops at all. Port reads the
//     sockets' XDP_STATISTICS and PACKET_STATISTICS itself (see Stats), so
//     that a full RX ring is a counted loss.
//   - net_af_packet's queues share one PACKET_FANOUT of the kernel with
//     PACKET_FANOUT_FLAG_ROLLOVER: while the ring a frame's hash chose is
//     full, the kernel gives the frame to another queue's socket, off its
//     flow's queue. The PMD counts nothing of it; Port reads the sockets'
//     PACKET_ROLLOVER_STATS (tp_rollover in DeviceStats). A ring with room
//     for every frame in flight (the framecnt devarg; 512 by default)
//     keeps flows on their queues.
//   - net_af_xdp and net_af_packet report their link up whatever the
//     interface's state: Open also waits for the interface's carrier.
//   - net_af_xdp has libxdp attach its XDP program through netlink, which
//     outlives a process killed before Close: the interface would go on
//     redirecting its queue to sockets that are gone, and the kernel would
//     see nothing arriving on it (no ARP, no answers) until someone removed
//     the program. Port attaches that program (libxdp's own
//     xsk_def_xdp_prog.o) itself, before the PMD sets up its sockets,
//     through a BPF link its process owns (Linux >= 5.9); libxdp adopts
//     the program it finds, and the kernel detaches it when the link's
//     descriptor closes: at Close, or when the process dies however it
//     dies. On an older kernel, with an xdp_prog devarg, or when libxdp's
//     program is on the interface already (another port's, on other
//     queues, which the PMD shares for as long as its owner keeps it
//     there), Port leaves the program to the PMD and says so in Info.Notes
//     (see Info.XDPProg). Any other XDP program on the interface makes
//     Open fail: net_af_xdp cannot work beside it.
//   - DPDK, its PMDs and libxdp open their descriptors without
//     close-on-exec, so every process the program starts would inherit
//     them: a child holding an AF_XDP socket keeps the interface's queue
//     bound after Close (the next net_af_xdp port on it cannot bind, for as
//     long as the child runs) and the mempool's pages pinned. StartEAL and
//     Open hold off fork while DPDK runs and set close-on-exec on every
//     descriptor it opened.
//   - The PMDs change the interface's promiscuous flag (and net_af_packet
//     could change its MTU): Close puts both back as Open found them, and
//     removes an XDP program the PMD would have left.
//   - A packet socket sees the frames the host itself sends on the
//     interface: on net_af_packet, RxFrames drops frames whose source MAC is
//     the port's own (counted as rx_own). The kernel also keeps receiving
//     everything: it answers ARP and sends ICMP port unreachable, unless the
//     address is off its interface (see udp.NewDPDK and tcp.NewDPDK).
//
// This package is API: a DPDK FrameIO usable without the rest of dgramio.
package dpdk
