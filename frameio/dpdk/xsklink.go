//go:build dpdk

package dpdk

// #include "shim.h"
import "C"

import (
	"fmt"
	"strconv"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// xskProgName is the name of libxdp's default AF_XDP program, which
// net_af_xdp (through libxdp's xsk_socket__create) attaches, or adopts
// when it finds it on the interface already.
const xskProgName = "xsk_def_prog"

// minXSKMapEntries is the XSKMAP size xsk_def_xdp_prog.o declares.
const minXSKMapEntries = 64

// DPDK 22.11's net_af_xdp has libxdp attach its XDP program through
// netlink, so the program outlives a process killed before Close: the
// interface then keeps redirecting its queue to a socket that is gone, and
// the kernel sees nothing of it (no ARP, no answer) until someone removes
// the program. Port attaches that very program itself, before the PMD sets
// up its sockets, through a BPF link whose descriptor the process owns
// (Linux >= 5.9): libxdp finds xsk_def_prog on the interface and adopts it
// (puts its sockets into the program's XSKMAP) instead of attaching one of
// its own, and the kernel detaches the program when the descriptor closes,
// at Close or when the process dies, however it dies.

// wantXSKLink reports whether Open attaches net_af_xdp's program itself:
// for a net_af_xdp vdev on an interface, unless its xdp_prog devarg names
// a program of the user's (which the PMD attaches through netlink).
func wantXSKLink(devName, devargs, iface string) bool {
	return iface != "" && driverOf(devName) == "net_af_xdp" && devargValue(devargs, "xdp_prog") == ""
}

// xskMapEntries is the XSKMAP size a net_af_xdp vdev with devargs needs:
// an entry for each of its queues (start_queue .. start_queue+queue_count-1),
// at least the object's own 64.
func xskMapEntries(devargs string) int {
	start, _ := strconv.Atoi(devargValue(devargs, "start_queue"))
	count, _ := strconv.Atoi(devargValue(devargs, "queue_count"))
	return max(minXSKMapEntries, start+max(count, 1))
}

// attachXSKLink attaches libxdp's xsk_def_prog to p's interface through a
// BPF link (see above) and keeps the link's descriptor in p.xdpLink. It
// runs on Open's thread, inside the interface's namespace. When the kernel
// has no XDP links (before 5.9) or libxdp's object file cannot be found, it
// leaves the attaching to the PMD and notes why (p.xskLink is then false):
// a process killed before Close then leaves the program on the interface.
// A program already on the interface is shared when it is libxdp's
// xsk_def_prog (another AF_XDP user's, or one a killed process left
// through netlink: the PMD adopts it; it is not ours to detach) and
// refused otherwise (see shareXDP).
func (p *Port) attachXSKLink(devargs string) error {
	l, err := netlink.LinkByName(p.iface)
	if err != nil {
		return fmt.Errorf("dpdk: interface %s: %w", p.iface, err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached && x.ProgId != 0 {
		return p.shareXDP(x.ProgId, fmt.Sprintf("dpdk: %s on %s", p.devName, p.iface), unix.EBUSY)
	}
	var fd C.int
	var id C.uint
	var step *C.char
	ret := C.dg_xsk_prog_attach(C.int(l.Attrs().Index), C.uint(xskMapEntries(devargs)), &fd, &id, &step)
	if ret == 0 {
		p.xdpLink, p.xdpProg = int(fd), uint32(id)
		return nil
	}
	errno := syscall.Errno(-ret)
	op := fmt.Sprintf("dpdk: %s on %s: %s", p.devName, p.iface, C.GoString(step))
	switch {
	case errno == unix.EPERM || errno == unix.EACCES:
		return p.privilegeError(op+logHint(), errno)
	case errno == unix.EBUSY || errno == unix.EEXIST:
		// Someone attached a program since we looked.
		takeLog()
		id, _ := xdpProgID(p.iface)
		return p.shareXDP(id, op, errno)
	}
	p.xskLink = false
	p.note("%s: %v%s; net_af_xdp attaches its XDP program through netlink itself, and a process killed before Close leaves it on %s (XDP links need Linux 5.9)",
		op, errno, logHint(), p.iface)
	return nil
}

// shareXDP decides about the XDP program id found on p's interface: libxdp's
// xsk_def_prog is shared (the PMD adopts it, as it does without us), any
// other is refused with err, as the PMD could not work beside it.
func (p *Port) shareXDP(id uint32, op string, err error) error {
	name := progName(id)
	if name != xskProgName {
		return fmt.Errorf("%s: XDP program %d (%q) is already attached to %s, and net_af_xdp can only share libxdp's %s: remove it first (ip link set dev %s xdp off): %w",
			op, id, name, p.iface, xskProgName, p.iface, err)
	}
	p.xskLink = false
	p.note("libxdp's %s (program %d) is already on %s: net_af_xdp shares it, and receives nothing once its owner detaches it; at Close the PMD removes it through netlink, which fails (its log says so) when the owner holds it by a BPF link", xskProgName, id, p.iface)
	return nil
}

// detachXSKLink closes the BPF link of attachXSKLink, which detaches the
// program (its sockets are no longer redirected to).
func (p *Port) detachXSKLink() {
	if p.xdpLink >= 0 {
		unix.Close(p.xdpLink)
		p.xdpLink = -1
	}
}

// progName returns the name of the BPF program with the given id, or ""
// when it cannot be read (reading another program needs CAP_SYS_ADMIN).
func progName(id uint32) string {
	if id == 0 {
		return ""
	}
	prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return ""
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		return ""
	}
	return info.Name
}
