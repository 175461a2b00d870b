//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package iouring

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
)

// Minimum kernels of what this package and the uring backend use.
const (
	MinKernelRing         = "5.1"  // io_uring itself
	MinKernelExtArg       = "5.11" // IORING_ENTER_EXT_ARG (a timeout on waits)
	MinKernelBufRing      = "5.19" // IORING_REGISTER_PBUF_RING
	MinKernelMultishotRx  = "6.0"  // multishot IORING_OP_RECVMSG
	MinKernelSingleIssuer = "6.0"  // IORING_SETUP_SINGLE_ISSUER
	MinKernelNAPI         = "6.9"  // IORING_REGISTER_NAPI
)

// DisabledSysctl is the file of the sysctl kernel.io_uring_disabled (Linux
// 6.6; RHEL 9 back-ported it and sets 2 by default): 0 allows io_uring to
// everyone, 1 only to members of kernel.io_uring_group and CAP_SYS_ADMIN,
// 2 to no one.
const DisabledSysctl = "/proc/sys/kernel/io_uring_disabled"

// KernelVersion is a Linux release as major, minor.
type KernelVersion struct{ Major, Minor int }

// AtLeast reports whether v is at least the version written "M.m" in s.
func (v KernelVersion) AtLeast(s string) bool {
	w, err := ParseKernelVersion(s)
	if err != nil {
		return false
	}
	return v.Major > w.Major || v.Major == w.Major && v.Minor >= w.Minor
}

// String returns "M.m".
func (v KernelVersion) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// ParseKernelVersion reads the leading "M.m" of a release string such as
// "6.18.44-fc-v857" or "5.14.0-362.el9.x86_64".
func ParseKernelVersion(s string) (KernelVersion, error) {
	var v KernelVersion
	major, rest, ok := strings.Cut(s, ".")
	if !ok {
		return v, fmt.Errorf("kernel release %q: no minor version", s)
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	var err1, err2 error
	v.Major, err1 = strconv.Atoi(major)
	v.Minor, err2 = strconv.Atoi(rest[:end])
	if err1 != nil || err2 != nil || v.Major < 0 || v.Minor < 0 {
		return KernelVersion{}, fmt.Errorf("kernel release %q: not M.m", s)
	}
	return v, nil
}

var runningKernel = sync.OnceValues(func() (KernelVersion, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return KernelVersion{}, fmt.Errorf("uname: %w", err)
	}
	return ParseKernelVersion(unix.ByteSliceToString(u.Release[:]))
})

// RunningKernel returns the version of the running kernel (uname, once).
func RunningKernel() (KernelVersion, error) { return runningKernel() }

// disabledLevel reads kernel.io_uring_disabled; -1 when the sysctl does not
// exist (kernels before 6.6 without the RHEL back-port: io_uring allowed).
func disabledLevel() (int, error) {
	b, err := os.ReadFile(DisabledSysctl)
	if errors.Is(err, os.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", DisabledSysctl, err)
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil {
		return 0, fmt.Errorf("read %s: %q is not a number", DisabledSysctl, b)
	}
	return n, nil
}

// Check reports whether this host lets the process use io_uring with the
// features the uring backend needs: the sysctl kernel.io_uring_disabled
// (2: off for everyone), and a kernel with multishot RECVMSG (6.0, which
// also brings buffer rings, 5.19, and SINGLE_ISSUER). The result comes from
// a file read and uname, made once and cached. It returns nil or an error
// matching dgramio.ErrNotSupported that names the sysctl or the version.
//
// kernel.io_uring_disabled=1 is not refused here: whether this process is
// allowed (CAP_SYS_ADMIN or kernel.io_uring_group) shows when the ring is
// set up, and New reports it as a *dgramio.PrivilegeError.
func Check() error { return check() }

var check = sync.OnceValue(func() error {
	level, err := disabledLevel()
	if err != nil {
		return err
	}
	if level >= 2 {
		return dgramio.NotSupported("io_uring", "", "the sysctl kernel.io_uring_disabled is "+strconv.Itoa(level)+
			" (io_uring off for every process; RHEL 9 sets 2 by default); set it to 0: sysctl -w kernel.io_uring_disabled=0", nil)
	}
	v, err := RunningKernel()
	if err != nil {
		return err
	}
	if !v.AtLeast(MinKernelMultishotRx) {
		return dgramio.NotSupported("io_uring multishot RECVMSG", MinKernelMultishotRx,
			"this kernel is "+v.String()+"; use kind udp", nil)
	}
	return nil
})
