package xdpprog

import "golang.org/x/sys/unix"

// lacksBPFCaps reports whether the calling thread certainly lacks what
// loading an XDP program with an XSKMAP needs: CAP_BPF (or CAP_SYS_ADMIN)
// and CAP_NET_ADMIN (or CAP_SYS_ADMIN). false when it has them or when its
// capabilities cannot be read.
func lacksBPFCaps() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return false
	}
	eff := uint64(data[0].Effective) | uint64(data[1].Effective)<<32
	has := func(c int) bool { return eff&(1<<uint(c)) != 0 }
	sys := has(unix.CAP_SYS_ADMIN)
	return !(sys || has(unix.CAP_BPF)) || !(sys || has(unix.CAP_NET_ADMIN))
}
