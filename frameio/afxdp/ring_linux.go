package afxdp

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is one of the four single-producer single-consumer rings shared with
// the kernel. The kernel owns one end, we own the other: we are the
// producer of the fill and TX rings and the consumer of the RX and
// completion rings. Indexes run freely over uint32 and wrap; a slot is
// index & mask.
//
// Ordering: the producer writes slots, then publishes the producer index
// with an atomic store; the consumer loads the producer index atomically
// before reading slots, and publishes its consumer index after it is done
// with them. Go's atomics are sequentially consistent, which covers the
// kernel's acquire/release pairing (smp_load_acquire/smp_store_release).
type ring[T uint64 | unix.XDPDesc] struct {
	producer, consumer, flags *atomic.Uint32
	slots                     []T
	mask, size                uint32
	// prod and cons are our cached copies of the two indexes. On a ring we
	// produce, prod is ahead of the shared producer by the slots written
	// but not yet submitted; on a ring we consume, cons is ahead of the
	// shared consumer by the slots read but not yet released.
	prod, cons uint32
	mem        []byte // the mapping, for munmap
}

// initRing points r at a ring laid out in mem at off, of size slots.
func initRing[T uint64 | unix.XDPDesc](r *ring[T], mem []byte, off unix.XDPRingOffset, size uint32) error {
	var zero T
	end := off.Desc + uint64(size)*uint64(unsafe.Sizeof(zero))
	if off.Producer+4 > uint64(len(mem)) || off.Consumer+4 > uint64(len(mem)) || off.Flags+4 > uint64(len(mem)) || end > uint64(len(mem)) {
		return fmt.Errorf("ring offsets %+v outside a %d-byte mapping", off, len(mem))
	}
	if off.Producer%4 != 0 || off.Consumer%4 != 0 || off.Flags%4 != 0 || off.Desc%8 != 0 {
		return fmt.Errorf("ring offsets %+v misaligned", off)
	}
	r.mem = mem
	r.producer = (*atomic.Uint32)(unsafe.Pointer(&mem[off.Producer]))
	r.consumer = (*atomic.Uint32)(unsafe.Pointer(&mem[off.Consumer]))
	r.flags = (*atomic.Uint32)(unsafe.Pointer(&mem[off.Flags]))
	r.slots = unsafe.Slice((*T)(unsafe.Pointer(&mem[off.Desc])), size)
	r.size = size
	r.mask = size - 1
	r.prod = r.producer.Load()
	r.cons = r.consumer.Load()
	return nil
}

// free returns how many slots the producer may fill now (at least want if
// the cached view shows too few, after refreshing it from the kernel).
func (r *ring[T]) free(want uint32) uint32 {
	n := r.size - (r.prod - r.cons)
	if n < want {
		r.cons = r.consumer.Load()
		n = r.size - (r.prod - r.cons)
	}
	return n
}

// put writes v into the next slot; the caller checked free first.
func (r *ring[T]) put(v T) {
	r.slots[r.prod&r.mask] = v
	r.prod++
}

// submit publishes the slots written since the last submit.
func (r *ring[T]) submit() { r.producer.Store(r.prod) }

// pending returns how many slots were written but not submitted.
func (r *ring[T]) pending() uint32 { return r.prod - r.producer.Load() }

// outstanding returns how many submitted slots the kernel has not consumed.
func (r *ring[T]) outstanding() uint32 { return r.producer.Load() - r.consumer.Load() }

// avail returns how many slots the consumer may read now, at most max,
// refreshing the producer index when the cached view holds fewer than max.
func (r *ring[T]) avail(max uint32) uint32 {
	n := r.prod - r.cons
	if n < max {
		r.prod = r.producer.Load()
		n = r.prod - r.cons
	}
	if n > max {
		n = max
	}
	return n
}

// get returns the i-th unread slot (i < avail).
func (r *ring[T]) get(i uint32) T { return r.slots[(r.cons+i)&r.mask] }

// release gives n read slots back to the kernel.
func (r *ring[T]) release(n uint32) {
	r.cons += n
	r.consumer.Store(r.cons)
}

// needWakeup reports whether the kernel asked to be woken (need_wakeup).
func (r *ring[T]) needWakeup() bool { return r.flags.Load()&unix.XDP_RING_NEED_WAKEUP != 0 }
