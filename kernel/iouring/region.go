//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package iouring

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Region is anonymous memory from mmap(2): memory the Go runtime neither
// moves nor frees, so its addresses may be handed to the kernel and kept
// there (in SQEs, buffer rings, msghdrs of sends in flight). Everything the
// kernel reads or writes after a system call has returned lives in a
// Region, never in Go memory.
//
// The Region owns the mapping until Free; slices and addresses taken from
// it are invalid after Free.
type Region struct {
	mem []byte
}

// NewRegion maps size bytes (rounded up to a page) of zeroed, private,
// read-write memory.
func NewRegion(size int) (*Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("iouring: region of %d bytes", size)
	}
	page := unix.Getpagesize()
	size = (size + page - 1) &^ (page - 1)
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", size, err)
	}
	return &Region{mem: mem}, nil
}

// Bytes returns the whole region. The slice is valid until Free.
func (r *Region) Bytes() []byte { return r.mem }

// Len returns the size of the region in bytes.
func (r *Region) Len() int { return len(r.mem) }

// Slice returns n bytes at off; valid until Free.
func (r *Region) Slice(off, n int) []byte { return r.mem[off : off+n : off+n] }

// Ptr returns a pointer to the byte at off.
func (r *Region) Ptr(off int) unsafe.Pointer { return unsafe.Pointer(&r.mem[off]) }

// Addr returns the address of the byte at off, as the kernel takes it in an
// SQE or a structure. Since the memory is not Go's, the integer stays valid
// until Free.
func (r *Region) Addr(off int) uint64 { return uint64(uintptr(unsafe.Pointer(&r.mem[off]))) }

// Free unmaps the region. Nothing may use it afterwards, including the
// kernel: free a region only after the requests that point into it have
// completed or the ring that holds them is closed.
func (r *Region) Free() error {
	if r == nil || r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	if err != nil {
		return fmt.Errorf("munmap: %w", err)
	}
	return nil
}
