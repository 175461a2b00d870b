// Package afxdp is a frameio.FrameIO over one AF_XDP socket (XSK) bound to
// one queue of one network interface, written on golang.org/x/sys/unix and
// cilium/ebpf, with the XDP program of package xdpprog steering our frames
// into it.
//
// # Memory
//
// The UMEM is an anonymous mmap (MAP_POPULATE), never Go heap memory, of
// Options.Frames frames of Options.FrameSize bytes. It is split in two: the
// first half receives (frames go fill ring → RX ring → back to the fill
// ring), the second half transmits (frames go from a free list → TX ring →
// completion ring → free list). So the receive side (RxFrames, Wait) and the
// transmit side (TxFrame, Kick) touch disjoint rings and memory and may run
// in two goroutines, as frameio.FrameIO allows. The defaults (4096 frames of
// 4 KiB, half each way, rings of 2048) follow dgramio.Config's XDP defaults: a
// few MiB, so that the frames in flight stay within the share of the cache
// a NIC writes into (DDIO); tens of MiB of fill frames do not.
//
// The kernel pins the UMEM pages when they are registered and charges them to
// RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK: a limit too small makes
// Open fail with a *dgramio.PrivilegeError naming both.
//
// # The XDP program and its lifetime
//
// Open loads the program of Options.Program (see xdpprog) and attaches it
// through a bpf_link (Linux >= 5.9): driver (native) mode first, then SKB
// (generic) mode as a fallback that Stats.Mode reports ("skb copy (driver
// mode refused)"), never silently. Options.Mode forces one mode. Because the
// program is held by a bpf_link whose only reference is our file descriptor,
// the kernel detaches it when the socket's process exits for any reason,
// SIGKILL included: nothing is left on the interface. (And were a program
// left behind by other means, its redirect falls back to XDP_PASS when no
// socket is in its map, so frames would take the kernel's path.)
//
// # Copy and zero-copy
//
// The socket is bound with XDP_USE_NEED_WAKEUP (Linux >= 5.4), and with
// XDP_ZEROCOPY when Options.Copy is "zerocopy" (a *dgramio.UnsupportedError if
// the driver refuses: veth never offers it), XDP_COPY when it is "copy" or
// when the program runs in SKB mode, and neither when it is "" (the kernel
// picks zero-copy where the driver offers it; the mode obtained is read back
// with XDP_OPTIONS and shown in Stats.Mode: "driver zerocopy", "driver copy").
//
// # Frame size
//
// A received frame must fit one RX buffer. In zero-copy mode ixgbe sizes the
// 82599's RX buffer as the UMEM frame minus the 256-byte XDP headroom,
// rounded down to whole KiB (1 KiB for 2 KiB frames, 3 KiB for 4 KiB frames)
// and drops longer frames without counting them anywhere; MaxFrame computes
// that bound and Open refuses an Options.MaxFrame above it, whatever the
// driver, so a setting that works on veth does not lose frames on a NIC.
//
// This package is API: an AF_XDP library usable without the rest of
// dgramio. Its errors are those of package dgramio (match them with
// errors.Is(err, dgramio.ErrNotSupported), errors.As with
// *dgramio.PrivilegeError).
package afxdp
