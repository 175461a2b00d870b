//go:build dpdk

package dpdk

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// inNetns runs fn on a thread inside the network namespace nsfd refers to.
// When the calling goroutine's thread is already there, fn runs on a locked
// thread of the pool, which is handed back afterwards; otherwise on a
// thread that joins the namespace and ends with the goroutine (never handed
// back to the Go runtime).
func inNetns(nsfd int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		same, err := sameNetns(nsfd)
		if err != nil {
			errc <- err
			return
		}
		if same {
			defer runtime.UnlockOSThread()
		} else if err := unix.Setns(nsfd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("dpdk: setns: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// sameNetns reports whether the calling thread is in the namespace nsfd.
func sameNetns(nsfd int) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Fstat(nsfd, &a); err != nil {
		return false, fmt.Errorf("dpdk: fstat netns: %w", err)
	}
	if err := unix.Stat("/proc/thread-self/ns/net", &b); err != nil {
		return false, fmt.Errorf("dpdk: stat netns: %w", err)
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}

// ifreq opens a datagram socket in the calling thread's network namespace
// and calls fn with it and an ifreq for the interface name.
func ifreq(name string, fn func(fd int, ifr *unix.Ifreq) error) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	return fn(fd, ifr)
}

// ioctl runs the interface ioctl req (named op in its error) on ifr.
func ioctl(fd int, req uint, op string, ifr *unix.Ifreq) error {
	if err := unix.IoctlIfreq(fd, req, ifr); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// ifFlags reads the interface flags (SIOCGIFFLAGS) in the calling thread's
// network namespace.
func ifFlags(name string) (flags uint16, err error) {
	err = ifreq(name, func(fd int, ifr *unix.Ifreq) error {
		err := ioctl(fd, unix.SIOCGIFFLAGS, "SIOCGIFFLAGS", ifr)
		flags = ifr.Uint16()
		return err
	})
	return flags, err
}

// setPromisc sets or clears IFF_PROMISC on the interface.
func setPromisc(name string, on bool) error {
	return ifreq(name, func(fd int, ifr *unix.Ifreq) error {
		if err := ioctl(fd, unix.SIOCGIFFLAGS, "SIOCGIFFLAGS", ifr); err != nil {
			return err
		}
		flags := ifr.Uint16()
		if on {
			flags |= unix.IFF_PROMISC
		} else {
			flags &^= unix.IFF_PROMISC
		}
		ifr.SetUint16(flags)
		return ioctl(fd, unix.SIOCSIFFLAGS, "SIOCSIFFLAGS", ifr)
	})
}

// xdpProgID returns the id of the XDP program attached to the interface
// (0: none), as netlink reports it in the calling thread's namespace.
func xdpProgID(name string) (uint32, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return 0, err
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached {
		return x.ProgId, nil
	}
	return 0, nil
}

// detachXDP removes the XDP program from the interface, in the mode it is
// attached in.
func detachXDP(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	flags := 0
	if x := l.Attrs().Xdp; x != nil {
		switch x.AttachMode {
		case 1: // XDP_ATTACHED_DRV
			flags = 1 << 2 // XDP_FLAGS_DRV_MODE
		case 2: // XDP_ATTACHED_SKB
			flags = 1 << 1 // XDP_FLAGS_SKB_MODE
		case 3: // XDP_ATTACHED_HW
			flags = 1 << 3 // XDP_FLAGS_HW_MODE
		}
	}
	return netlink.LinkSetXdpFdWithFlags(l, -1, flags)
}

// ifMTU reads the interface's MTU (SIOCGIFMTU).
func ifMTU(name string) (mtu int, err error) {
	err = ifreq(name, func(fd int, ifr *unix.Ifreq) error {
		err := ioctl(fd, unix.SIOCGIFMTU, "SIOCGIFMTU", ifr)
		mtu = int(ifr.Uint32())
		return err
	})
	return mtu, err
}

// setIfMTU sets the interface's MTU (SIOCSIFMTU).
func setIfMTU(name string, mtu int) error {
	return ifreq(name, func(fd int, ifr *unix.Ifreq) error {
		ifr.SetUint32(uint32(mtu))
		return ioctl(fd, unix.SIOCSIFMTU, "SIOCSIFMTU", ifr)
	})
}

// sockFile is an open socket of the process: its descriptor and its
// socket inode.
type sockFile struct {
	fd  int
	ino uint64
}

// pmdSockets lists the process's sockets of domain (AF_XDP, AF_PACKET)
// that were opened without close-on-exec, as DPDK's PMDs and libxdp open
// them (Go code, the net package and frameio/afxdp always set it). Open
// uses it to find the sockets a PMD opened, before it sets close-on-exec
// on them (see closeOnExec).
func pmdSockets(domain int) []sockFile { return processSockets(domain, true) }

// processSockets lists the process's sockets of domain; with inheritable,
// only those without close-on-exec.
func processSockets(domain int, inheritable bool) []sockFile {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	var out []sockFile
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ino, ok := socketInode(fd)
		if !ok {
			continue
		}
		if dom, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN); err != nil || dom != domain {
			continue
		}
		if !inheritable {
			out = append(out, sockFile{fd, ino})
			continue
		}
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC != 0 {
			continue
		}
		out = append(out, sockFile{fd, ino})
	}
	return out
}

// dpdkXSKs lists the AF_XDP sockets libxdp opened (see pmdSockets).
func dpdkXSKs() []sockFile { return pmdSockets(unix.AF_XDP) }

// socketInode returns the inode of the socket fd refers to.
func socketInode(fd int) (uint64, bool) {
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return 0, false
	}
	s, ok := strings.CutPrefix(link, "socket:[")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
	return v, err == nil
}

// newSockets returns the sockets of after that are not in before.
func newSockets(before, after []sockFile) []sockFile {
	var out []sockFile
	for _, a := range after {
		seen := false
		for _, b := range before {
			seen = seen || b == a
		}
		if !seen {
			out = append(out, a)
		}
	}
	return out
}

// xdpStatistics reads an AF_XDP socket's XDP_STATISTICS (Linux >= 5.9 for
// the last three fields; older kernels leave them 0).
func xdpStatistics(fd int) (unix.XDPStatistics, error) {
	var st unix.XDPStatistics
	size := uint32(unsafe.Sizeof(st))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_STATISTICS,
		uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&size)), 0); e != 0 {
		return st, fmt.Errorf("XDP_STATISTICS: %w", e)
	}
	return st, nil
}

// packetStatistics reads (and so resets) a packet socket's
// PACKET_STATISTICS: frames queued to it and frames it dropped, since the
// last read.
func packetStatistics(fd int) (packets, drops uint32, err error) {
	st, err := unix.GetsockoptTpacketStats(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return 0, 0, fmt.Errorf("PACKET_STATISTICS: %w", err)
	}
	return st.Packets, st.Drops, nil
}

// rollover is a packet socket's PACKET_ROLLOVER_STATS (struct
// tpacket_rollover_stats).
type rollover struct{ All, Huge, Failed uint64 }

// rolloverStatistics reads a packet socket's PACKET_ROLLOVER_STATS: the
// frames a fanout with PACKET_FANOUT_FLAG_ROLLOVER (net_af_packet's) chose
// this socket for and gave to another one, since the socket joined it
// (reading does not reset them). A socket outside such a fanout has none
// (EINVAL).
func rolloverStatistics(fd int) (rollover, error) {
	var r rollover
	size := uint32(unsafe.Sizeof(r))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_PACKET, unix.PACKET_ROLLOVER_STATS,
		uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(&size)), 0); e != 0 {
		return r, fmt.Errorf("PACKET_ROLLOVER_STATS: %w", e)
	}
	return r, nil
}

// fdSet is the descriptors of the process that lack close-on-exec, each
// with what it refers to (its /proc/self/fd link).
type fdSet map[int]string

// inheritableFDs returns the descriptors of the process that a child
// process would inherit.
func inheritableFDs() fdSet {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	out := fdSet{}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || fl&unix.FD_CLOEXEC != 0 {
			continue
		}
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out[fd] = target
	}
	return out
}

// closeOnExec sets close-on-exec on the descriptors that lack it and are
// not in before (the same descriptor referring to the same thing): those
// DPDK, its PMDs or libxdp opened since, as they open theirs without it.
// Otherwise every process the program starts would inherit them: a child
// holding an AF_XDP socket keeps the interface's queue bound (so that the
// next net_af_xdp port on it fails to bind) and the mempool's pages pinned
// for as long as it runs, one holding a packet socket receives copies of
// the interface's frames, one holding the EAL's memory files keeps its
// memory. The caller holds syscall.ForkLock for reading from before it took
// before until this returns, so that no fork happens in between. It returns
// how many it changed.
func closeOnExec(before fdSet) int {
	n := 0
	for fd, target := range inheritableFDs() {
		if was, ok := before[fd]; ok && was == target {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err == nil {
			n++
		}
	}
	return n
}
