//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package iouring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
)

// BufRing is a provided buffer ring (IORING_REGISTER_PBUF_RING, Linux
// 5.19): a ring of buffer descriptors the kernel takes buffers from for
// requests with SQEBufferSelect and this group id, plus the buffers
// themselves, n buffers of size bytes, all in mmap'd memory.
//
// The application owns a buffer from the CQE that names it (CQE.BufID)
// until it gives it back with Recycle; after Publish the kernel may write
// into it again. Only the ring's goroutine calls its methods.
type BufRing struct {
	ring    *Region // n entries of 16 bytes; the tail overlays entry 0
	bufs    *Region
	n, mask uint32
	size    int
	bgid    uint16
	tail    uint16 // our tail: entries written, published or not
	pending uint16 // entries written since the last Publish
}

// NewBufRing maps n buffers (a power of two, at most 32768) of size bytes
// each and registers them with r as buffer group bgid, all of them
// available to the kernel. Closing the ring unregisters the group; call
// Free after that (or after Unregister) to unmap the memory.
func (r *Ring) NewBufRing(bgid uint16, n uint32, size int) (*BufRing, error) {
	if n == 0 || n&(n-1) != 0 || n > 32768 {
		return nil, fmt.Errorf("iouring: buffer ring of %d entries (need a power of two up to 32768)", n)
	}
	if size <= 0 {
		return nil, fmt.Errorf("iouring: buffers of %d bytes", size)
	}
	b := &BufRing{n: n, mask: n - 1, size: size, bgid: bgid}
	var err error
	if b.ring, err = NewRegion(int(n) * int(unsafe.Sizeof(bufEntry{}))); err != nil {
		return nil, err
	}
	if b.bufs, err = NewRegion(int(n) * size); err != nil {
		b.Free()
		return nil, err
	}
	reg := bufReg{RingAddr: b.ring.Addr(0), RingEntries: n, BGID: bgid}
	if err := r.register(registerPbufRing, unsafe.Pointer(&reg), 1); err != nil {
		b.Free()
		if err == unix.EINVAL {
			if v, verr := RunningKernel(); verr == nil && !v.AtLeast(MinKernelBufRing) {
				return nil, dgramio.NotSupported("io_uring provided buffer rings", MinKernelBufRing, "", err)
			}
		}
		return nil, fmt.Errorf("io_uring_register pbuf ring: %w", err)
	}
	for i := uint32(0); i < n; i++ {
		b.Recycle(uint16(i))
	}
	b.Publish()
	return b, nil
}

// Unregister removes the group from r (not needed before closing r).
func (b *BufRing) Unregister(r *Ring) error {
	reg := bufReg{BGID: b.bgid}
	if err := r.register(unregisterPbufRing, unsafe.Pointer(&reg), 1); err != nil {
		return fmt.Errorf("io_uring_unregister pbuf ring: %w", err)
	}
	return nil
}

// Free unmaps the ring and the buffers. The group must be unregistered or
// its ring closed first.
func (b *BufRing) Free() error {
	return errors.Join(b.ring.Free(), b.bufs.Free())
}

// Group returns the buffer group id, for SQE.BufIndex.
func (b *BufRing) Group() uint16 { return b.bgid }

// Addr returns the address of buffer bid (for tests and diagnostics).
func (b *BufRing) Addr(bid uint16) uint64 { return b.bufs.Addr(int(uint32(bid)&b.mask) * b.size) }

// Entries returns the number of buffers.
func (b *BufRing) Entries() uint32 { return b.n }

// Size returns the size of each buffer.
func (b *BufRing) Size() int { return b.size }

// Buf returns buffer bid, all Size() bytes of it. It is the caller's while
// it holds the buffer (from its CQE until Recycle), the kernel's otherwise.
func (b *BufRing) Buf(bid uint16) []byte {
	return b.bufs.Slice(int(uint32(bid)&b.mask)*b.size, b.size)
}

func (b *BufRing) entry(i uint16) *bufEntry {
	return (*bufEntry)(b.ring.Ptr(int(uint32(i)&b.mask) * int(unsafe.Sizeof(bufEntry{}))))
}

// Recycle writes buffer bid into the next free entry of the ring. The
// kernel sees it after Publish. Give back only buffers you hold, each once:
// the ring has room for exactly every buffer.
func (b *BufRing) Recycle(bid uint16) {
	e := b.entry(b.tail)
	e.Addr = b.bufs.Addr(int(uint32(bid)&b.mask) * b.size)
	e.Len = uint32(b.size)
	e.BID = bid
	b.tail++
	b.pending++
}

// Publish makes the recycled buffers visible to the kernel by storing the
// new tail.
//
// The tail is a 16-bit field (the resv of entry 0, at byte 14), and
// sync/atomic has no 16-bit store. It is stored as part of the aligned
// 32-bit word at byte 12, whose other half is entry 0's bid (see tailShift for the byte order). That is
// correct because:
//   - we are the only writer of both halves: the kernel reads buffer ring
//     entries and the tail, it never writes them (incrementally consumed
//     rings, IOU_PBUF_RING_INC, would; we do not ask for them);
//   - the low half is rewritten with the value it holds, which we read
//     here: entry 0's bid was last written by us, by Recycle, before this
//     store, so a kernel reading entry 0 at any moment sees the same bid;
//   - an aligned 32-bit store is single-copy atomic on every architecture
//     Go supports, so the kernel's 16-bit acquire load of the tail sees the
//     old or the new tail, never a torn value;
//   - atomic.StoreUint32 is a release store (sequentially consistent in
//     Go's memory model), so the entries written by Recycle are visible to
//     the kernel before the tail that covers them, which is what the
//     kernel's smp_load_acquire of the tail pairs with.
func (b *BufRing) Publish() {
	if b.pending == 0 {
		return
	}
	word := (*uint32)(b.ring.Ptr(12))
	old := atomic.LoadUint32(word)
	atomic.StoreUint32(word, old&^(0xffff<<tailShift)|uint32(b.tail)<<tailShift)
	b.pending = 0
}

// tailShift is where the 16-bit tail at byte 14 sits in the 32-bit word at
// byte 12: the high half on little-endian machines, the low half on
// big-endian ones.
var tailShift = func() uint32 {
	w := uint32(1)
	if *(*byte)(unsafe.Pointer(&w)) == 1 {
		return 16
	}
	return 0
}()

// Tail returns the tail published to the kernel (for tests).
func (b *BufRing) Tail() uint16 {
	return uint16(atomic.LoadUint32((*uint32)(b.ring.Ptr(12))) >> tailShift)
}
