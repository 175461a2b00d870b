//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package iouring

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Msghdr is struct msghdr on 64-bit Linux with addresses as integers, for
// building in mmap'd memory: unix.Msghdr has pointer fields, and storing a
// non-Go address in a Go pointer field is what go vet rightly refuses.
type Msghdr struct {
	Name       uint64
	Namelen    uint32
	_          uint32
	Iov        uint64
	Iovlen     uint64
	Control    uint64
	Controllen uint64
	Flags      int32
	_          int32
}

// Iovec is struct iovec on 64-bit Linux, with the base as an integer.
type Iovec struct {
	Base uint64
	Len  uint64
}

// Compile-time checks that the layouts match the kernel's (as x/sys
// describes them); they fail to build on 32-bit platforms, which this
// package does not support.
var (
	_ [unsafe.Sizeof(unix.Msghdr{}) - unsafe.Sizeof(Msghdr{})]struct{}
	_ [unsafe.Sizeof(Msghdr{}) - unsafe.Sizeof(unix.Msghdr{})]struct{}
	_ [unsafe.Offsetof(unix.Msghdr{}.Flags) - unsafe.Offsetof(Msghdr{}.Flags)]struct{}
	_ [unsafe.Offsetof(Msghdr{}.Flags) - unsafe.Offsetof(unix.Msghdr{}.Flags)]struct{}
	_ [unsafe.Sizeof(unix.Iovec{}) - unsafe.Sizeof(Iovec{})]struct{}
	_ [unsafe.Sizeof(Iovec{}) - unsafe.Sizeof(unix.Iovec{})]struct{}
)

// MsghdrAt returns the Msghdr at off in r.
func MsghdrAt(r *Region, off int) *Msghdr { return (*Msghdr)(r.Ptr(off)) }

// IovecAt returns the Iovec at off in r.
func IovecAt(r *Region, off int) *Iovec { return (*Iovec)(r.Ptr(off)) }
