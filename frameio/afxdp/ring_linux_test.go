package afxdp

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fakeRing lays a ring out in Go memory the way the kernel does in its
// mapping (producer, consumer, flags, then the slots) and starts both
// indexes at start, so that wrap-around of the free-running uint32 indexes
// is exercised.
func fakeRing[T uint64 | unix.XDPDesc](t *testing.T, size, start uint32) (*ring[T], []uint64) {
	t.Helper()
	var zero T
	words := make([]uint64, 8+int(size)*int(unsafe.Sizeof(zero))/8)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	off := unix.XDPRingOffset{Producer: 0, Consumer: 8, Flags: 16, Desc: 64}
	*(*uint32)(unsafe.Pointer(&mem[0])) = start
	*(*uint32)(unsafe.Pointer(&mem[8])) = start
	r := new(ring[T])
	if err := initRing(r, mem, off, size); err != nil {
		t.Fatal(err)
	}
	return r, words
}

func TestRingProduceConsumeWraps(t *testing.T) {
	const size = 8
	prod, _ := fakeRing[uint64](t, size, ^uint32(0)-5)
	// The "kernel" consumes prod's slots through a second view of the same
	// memory, as a consumer ring.
	cons := &ring[uint64]{producer: prod.producer, consumer: prod.consumer, flags: prod.flags,
		slots: prod.slots, mask: prod.mask, size: prod.size, prod: prod.producer.Load(), cons: prod.consumer.Load()}
	next, want := uint64(0), uint64(0)
	for round := 0; round < 50; round++ {
		k := prod.free(size)
		if k > size {
			t.Fatalf("free %d > size", k)
		}
		// Write a varying number of entries, submit, then consume a
		// varying number.
		w := uint32(round%size) + 1
		if w > k {
			w = k
		}
		for i := uint32(0); i < w; i++ {
			prod.put(next)
			next++
		}
		if got := prod.pending(); got != w {
			t.Fatalf("pending %d, want %d", got, w)
		}
		if got := cons.avail(size); got != 0 && round == 0 {
			t.Fatalf("consumer saw %d slots before submit", got)
		}
		prod.submit()
		if prod.pending() != 0 {
			t.Fatal("pending after submit")
		}
		n := cons.avail(uint32(round%3) + 1)
		for i := uint32(0); i < n; i++ {
			if v := cons.get(i); v != want {
				t.Fatalf("round %d: got %d, want %d", round, v, want)
			}
			want++
		}
		cons.release(n)
	}
	// Drain the rest.
	for {
		n := cons.avail(size)
		if n == 0 {
			break
		}
		for i := uint32(0); i < n; i++ {
			if v := cons.get(i); v != want {
				t.Fatalf("drain: got %d, want %d", v, want)
			}
			want++
		}
		cons.release(n)
	}
	if want != next {
		t.Fatalf("consumed %d of %d", want, next)
	}
	if prod.outstanding() != 0 {
		t.Fatalf("outstanding %d after drain", prod.outstanding())
	}
}

func TestRingFullAndFlags(t *testing.T) {
	const size = 4
	r, words := fakeRing[unix.XDPDesc](t, size, 100)
	if n := r.free(1); n != size {
		t.Fatalf("empty ring: free %d, want %d", n, size)
	}
	for i := 0; i < size; i++ {
		r.put(unix.XDPDesc{Addr: uint64(i) * 4096, Len: 60})
	}
	r.submit()
	if n := r.free(1); n != 0 {
		t.Fatalf("full ring: free %d", n)
	}
	// The kernel consumes two.
	r.consumer.Store(r.consumer.Load() + 2)
	if n := r.free(1); n != 2 {
		t.Fatalf("after the kernel took 2: free %d, want 2", n)
	}
	if r.outstanding() != 2 {
		t.Fatalf("outstanding %d, want 2", r.outstanding())
	}
	if r.needWakeup() {
		t.Fatal("need_wakeup without the flag")
	}
	words[2] = unix.XDP_RING_NEED_WAKEUP // flags at byte 16
	if !r.needWakeup() {
		t.Fatal("need_wakeup flag not seen")
	}
}

func TestInitRingRejectsBadOffsets(t *testing.T) {
	mem := make([]byte, 128)
	var r ring[uint64]
	if err := initRing(&r, mem, unix.XDPRingOffset{Producer: 0, Consumer: 8, Flags: 16, Desc: 64}, 16); err == nil {
		t.Error("slots past the mapping accepted")
	}
	if err := initRing(&r, mem, unix.XDPRingOffset{Producer: 2, Consumer: 8, Flags: 16, Desc: 64}, 4); err == nil {
		t.Error("misaligned producer accepted")
	}
}
