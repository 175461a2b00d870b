// Package faulttest holds dgramio's fault tests: every kind, reached through
// dgramio.New, is put through the faults a real deployment meets, and the
// tests check that nothing hangs, that what was lost is in a counter, and
// that the host is left as it was. The package has no API; its tests are
// named TestFault… and run as root (make test):
//
//   - TestFaultLinkFlap: the echo's veth goes down and up under traffic.
//     Every Flush and Rx returns within a generous bound, traffic flows
//     again afterwards, and the messages that did not come back are
//     explained by the counters of both ends and of both kernels.
//   - TestFaultPeerRestart: the echo process is killed (SIGKILL) mid-run
//     and started again. Datagram kinds carry on with the same backend;
//     stream kinds deliver the broken connection's end as an event of Rx
//     (Config.Events) and a new backend connects to the restarted echo.
//   - TestFaultSlowConsumer: a receiver stops reading while the sender
//     pushes as fast as it can. The heap stays bounded; the sender meets
//     back-pressure (stream kinds, no loss) or the losses are counted
//     (datagram kinds).
//   - TestFaultFullTxRing and TestFaultEmptyFillRing: an AF_XDP socket
//     with tiny rings: a TX ring that fills during Flush, and a fill ring
//     that runs empty while the receiver sleeps. Calls stay bounded and
//     every frame is either delivered or counted.
//   - TestFaultMalformedFrames: broken frames written with an AF_PACKET
//     socket from the peer's namespace onto the wire of a raw kind. None is
//     delivered, each lands in the counter the test expects (the XDP
//     program's pass_* counters when it leaves the frame to the kernel, or
//     RxMalformed, RxBadChecksum, RxFiltered of the backend), and the good
//     datagrams sent around them arrive intact. A userspace TCP server gets
//     hostile segments (blind RST and SYN, illegal flags, bad checksums,
//     lying lengths) beside a live connection, which survives them.
//   - TestFaultCrashXDP and TestFaultSignalRestoresHost: an echo process
//     holding an XDP socket is killed with SIGKILL, or stopped with SIGINT
//     and SIGTERM; no XDP program stays on the interface, promiscuous mode
//     is as before, the kernel answers on the interface, and the next echo
//     takes the interface over. An interrupted netbench leaves no process
//     and no network namespace behind.
//   - TestFaultPrivileges: as uid 65534 without capabilities, udp, uring
//     and tcp work and the raw kinds fail with a *dgramio.PrivilegeError that
//     names the missing capability.
//   - TestFaultLossyWire: 16 MiB (256 MiB with SOAK=1, make soak) through
//     each stream kind over the seeded lossy wire of package internal/wire,
//     byte-exact; the seed is logged and WIRE_SEED replays it.
//   - FuzzRawRx and FuzzStreamRx: arbitrary frames into the receive path of
//     the raw datagram backend (checked against udp.Parse: every frame in
//     exactly one counter) and of the userspace TCP backend (no panic, no
//     record without a handshake, every frame counted), over frameio/memio.
//
// Each backend is opened and polled on one OS thread inside its namespace
// (kind uring binds its ring to the thread that opened it). Losses are
// checked per direction: the messages that did not arrive are at most what
// the counters of both backends and of both kernels count, each drop
// counted once although several layers may count it (see leg.counted).
//
// A kind that dgramio.New does not reach yet skips its subtest with the
// reason (and fails it when CI=true). The DPDK kinds join with the build tag
// dpdk.
//
// Addresses come only from 198.18.0.0/15 inside the test namespaces; nothing
// is sent from the root namespace. Every test removes what it made.
package faulttest
