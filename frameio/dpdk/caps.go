//go:build dpdk

package dpdk

import (
	"errors"
	"strings"

	"github.com/dgramio/dgramio"
	"golang.org/x/sys/unix"
)

// capability is a Linux capability: its number and name.
type capability struct {
	bit  int
	name string
}

var (
	capNetAdmin = capability{unix.CAP_NET_ADMIN, "CAP_NET_ADMIN"}
	capNetRaw   = capability{unix.CAP_NET_RAW, "CAP_NET_RAW"}
	capSysAdmin = capability{unix.CAP_SYS_ADMIN, "CAP_SYS_ADMIN"}
	capIPCLock  = capability{unix.CAP_IPC_LOCK, "CAP_IPC_LOCK"}
)

// driverCaps are the capabilities a process other than root needs for a
// vdev of each driver, as TestPrivileges measures them (on Linux 6.18;
// the EAL itself, without hugepages, needs none):
//
//   - net_af_xdp: CAP_NET_RAW to create its AF_XDP sockets; CAP_IPC_LOCK
//     to pin the mempool as their UMEM (beyond RLIMIT_MEMLOCK);
//     CAP_SYS_ADMIN, without which it cannot work at all, as libxdp reads
//     the XDP program on the interface back by its id to find the XSKMAP
//     it puts the sockets into (BPF_PROG_GET_FD_BY_ID and
//     BPF_MAP_GET_FD_BY_ID allow only CAP_SYS_ADMIN), and which also lets
//     Open load that program (CAP_BPF is then not needed); and
//     CAP_NET_ADMIN, which rte_eth_dev_start needs to put the interface's
//     promiscuous flag as configured (SIOCSIFFLAGS).
//   - net_af_packet: CAP_NET_RAW for its packet sockets, and CAP_NET_ADMIN,
//     which rte_eth_dev_start needs to set the interface's MAC address and
//     promiscuous flag (SIOCSIFHWADDR, SIOCSIFFLAGS).
var driverCaps = map[string][]capability{
	"net_af_xdp":    {capNetAdmin, capNetRaw, capSysAdmin, capIPCLock},
	"net_af_packet": {capNetAdmin, capNetRaw},
	"net_ring":      nil,
}

// driverOf names the PMD that takes a device name: the vdev drivers this
// package knows by their name's prefix, "" for another vdev or a PCI
// address.
func driverOf(devName string) string {
	for _, d := range []string{"net_af_xdp", "net_af_packet", "net_ring"} {
		if strings.HasPrefix(devName, d) {
			return d
		}
	}
	return ""
}

// effectiveCaps returns the calling thread's effective capability set.
func effectiveCaps() (uint64, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0, err
	}
	return uint64(data[0].Effective) | uint64(data[1].Effective)<<32, nil
}

// missingCaps returns those of need that the calling thread lacks, or nil
// when its capabilities cannot be read.
func missingCaps(need []capability) []capability {
	eff, err := effectiveCaps()
	if err != nil {
		return nil
	}
	var out []capability
	for _, c := range need {
		if eff&(1<<uint(c.bit)) == 0 {
			out = append(out, c)
		}
	}
	return out
}

// capList joins capability names: "A", "A and B", "A, B and C".
func capList(cs []capability) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.name
	}
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// privilegeError is the error of op, which failed with err, when the
// device's driver may have been refused for want of privileges: a
// *dgramio.PrivilegeError naming the capabilities the driver needs that the
// process lacks; or, when it lacks none of them, one naming all of them if
// err is EPERM or EACCES (something else refused them: an LSM, seccomp, a
// user namespace); and nil otherwise. A PCI device (bound to vfio-pci)
// wants root: it is refused for want of privileges when the process is not
// root or err is EPERM or EACCES. Another vdev is when err is.
func (p *Port) privilegeError(op string, err error) error {
	perm := errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)
	d := driverOf(p.devName)
	need, known := driverCaps[d]
	switch {
	case !known && !p.vdev && (perm || unix.Geteuid() != 0):
		return &dgramio.PrivilegeError{Op: op, Capability: "root (a PCI device on vfio-pci: CAP_SYS_ADMIN, CAP_IPC_LOCK and CAP_SYS_RAWIO)", Err: err}
	case !known && perm:
		return &dgramio.PrivilegeError{Op: op, Capability: "root", Err: err}
	case !known:
		return nil
	}
	all := d + " needs " + capList(need)
	if missing := missingCaps(need); len(missing) > 0 {
		return &dgramio.PrivilegeError{Op: op, Capability: capList(missing) + " (" + all + ")", Err: err}
	}
	if perm {
		return &dgramio.PrivilegeError{Op: op, Capability: all + ", which this process has: something else refused the call (an LSM, seccomp, a user namespace)", Err: err}
	}
	return nil
}
