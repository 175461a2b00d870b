// Package testhost makes the hosts that dgramio's tests and benchmarks send
// between: two network namespaces, A and B, joined by a veth pair, made from
// Go through netlink (no ip or ethtool binary is needed; a bare benchmark
// host may have neither).
//
// # Nothing is left behind
//
// Both namespaces are anonymous: each is made by unshare(CLONE_NEWNET) on a
// dedicated OS thread and held only by that thread and an open file
// descriptor (Host.NS); no name is bound under /run/netns. The veth pair is
// created from inside A with its peer placed directly into B, so neither end
// ever sits in the root namespace. When the last thread, process and
// descriptor referring to a namespace goes away, the kernel destroys it and
// every link in it. So a test binary that exits, panics, is interrupted
// (SIGINT, SIGTERM) or is killed (SIGKILL) leaves nothing behind, without
// any handler of ours having to run. Pair.Close removes everything at once
// (it deletes the veth synchronously, then lets go of the namespaces).
//
// # Addresses and wire-like frames
//
// Addresses come only from 198.18.0.0/15 (RFC 2544); anything else is
// refused. By default A is 198.18.n.1/24 and B is 198.18.n.2/24, with n
// chosen per Pair. IPv6 is disabled in both namespaces by default (so no
// router solicitation or MLD report shows up in a capture). With
// Options.IPv6 it is on: each end also gets an address from 2001:2::/48
// (RFC 5180; by default 2001:2:0:n::1/64 and ::2/64) and its link-local
// one, both usable at once, with router solicitations, router
// advertisements, autoconfiguration and duplicate address detection off,
// so the kernel sends only the neighbour discovery that traffic needs
// and the MLD reports of a new address, all on the test veth. TX checksum
// offload, TSO and GSO are turned off on both ends and verified by reading
// the features back, so that what a kernel socket sends looks like a wire's
// frames: full checksums, no 64 KiB super-frames.
//
// # Running code inside a namespace
//
// Host.Do runs a function on a fresh OS thread that has joined the namespace
// with setns; the thread is never handed back to the Go runtime's pool (the
// goroutine exits while locked, so the runtime ends the thread). Sockets,
// netlink handles and AF_XDP sockets made inside Do belong to the namespace
// for their whole life and may be used from any goroutine afterwards.
// Calls that name an interface by index or name resolve it in the calling
// thread's namespace: attach XDP programs (link.AttachXDP, netlink), bind
// AF_XDP sockets, start DPDK's EAL inside Do. For a loop that must stay
// inside the namespace (a poller that makes sockets as it goes), call Do
// from its own goroutine: go h.Do(loop). Do never runs on the process's main
// thread, which the runtime cannot end (it would stay in the namespace, and
// /proc/self/ns/net with it); code that calls setns itself must avoid it too.
//
// A sysfs mounted in the root namespace (/sys) shows the root namespace's
// devices even to a thread inside another namespace; Host.ReadSys and
// Host.WriteSys read and write the namespace's own sysfs.
//
// Host.Command prepares a process for the namespace; start it with
// Host.Start (or Host.Run / Host.Output), which forks it from the host's own
// thread inside the namespace. A plain cmd.Start() would fork it from an
// arbitrary thread of the root namespace, so Command's *exec.Cmd refuses
// that with an error. Such processes get SIGKILL when the Pair is closed or
// this process dies (Pdeathsig).
//
// Everything here needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and Linux.
package testhost
