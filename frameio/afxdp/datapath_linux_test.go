package afxdp

import (
	"bytes"
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio/internal/fdwait"
)

// fakeXSK is an XSK whose rings and UMEM live in Go memory and whose
// "kernel" is the test: it moves descriptors the way the kernel would. The
// socket is one end of a Unix datagram socketpair, so the kicks (sendto,
// recvfrom) are real system calls that succeed or say EAGAIN.
type fakeXSK struct {
	*XSK
	// The kernel's views of the four rings.
	kFill ring[uint64]
	kRX   ring[unix.XDPDesc]
	kTX   ring[unix.XDPDesc]
	kComp ring[uint64]
}

func newFakeXSK(t *testing.T, frames, ringSize int) *fakeXSK {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	const fs = 2048
	o := Options{Iface: "fake0", Port: 1, FrameSize: fs, Frames: frames, RingSize: ringSize, MaxFrame: 1024}.WithDefaults()
	x := &XSK{opts: o, fd: fds[0], frameMask: fs - 1, umem: make([]byte, frames*fs)}
	f := &fakeXSK{XSK: x}
	mk := func(us, them any) {
		switch us := us.(type) {
		case *ring[uint64]:
			r, _ := fakeRing[uint64](t, uint32(ringSize), 0)
			*us = *r
			*them.(*ring[uint64]) = *r
		case *ring[unix.XDPDesc]:
			r, _ := fakeRing[unix.XDPDesc](t, uint32(ringSize), 0)
			*us = *r
			*them.(*ring[unix.XDPDesc]) = *r
		}
	}
	mk(&x.rx.fill, &f.kFill)
	mk(&x.rx.rx, &f.kRX)
	mk(&x.tx.tx, &f.kTX)
	mk(&x.tx.comp, &f.kComp)
	x.splitUMEM()
	return f
}

// kernelReceive plays the kernel receiving frame: it takes a fill entry,
// copies the frame behind the headroom and posts an RX descriptor.
func (f *fakeXSK) kernelReceive(t *testing.T, frame []byte) bool {
	t.Helper()
	if f.kFill.avail(1) == 0 || f.kRX.free(1) == 0 {
		return false
	}
	addr := f.kFill.get(0)
	f.kFill.release(1)
	if addr%2048 != 0 || addr >= f.rx.end {
		t.Fatalf("fill ring got address %#x, not an RX frame", addr)
	}
	a := addr + Headroom
	copy(f.umem[a:], frame)
	f.kRX.put(unix.XDPDesc{Addr: a, Len: uint32(len(frame))})
	f.kRX.submit()
	return true
}

// kernelSend plays the kernel sending up to n TX descriptors: it checks
// each, and posts its address on the completion ring.
func (f *fakeXSK) kernelSend(t *testing.T, n int, sent *[][]byte) {
	t.Helper()
	k := f.kTX.avail(uint32(n))
	for i := uint32(0); i < k; i++ {
		d := f.kTX.get(i)
		if d.Addr < f.rx.end || d.Addr%2048 != 0 {
			t.Fatalf("TX descriptor %+v outside the TX half", d)
		}
		*sent = append(*sent, append([]byte(nil), f.umem[d.Addr:d.Addr+uint64(d.Len)]...))
		if f.kComp.free(1) == 0 {
			t.Fatal("completion ring full")
		}
		f.kComp.put(d.Addr)
	}
	f.kTX.release(k)
	f.kComp.submit()
}

func frameOf(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i + j)
	}
	return b
}

func TestDataPathConservesFrames(t *testing.T) {
	const frames, ringSize = 64, 16 // 32 RX frames, only 16 fit the fill ring
	f := newFakeXSK(t, frames, ringSize)
	if got := f.kFill.avail(64); got != ringSize {
		t.Fatalf("fill ring starts with %d frames, want %d", got, ringSize)
	}
	if len(f.rx.spare) != frames/2-ringSize {
		t.Fatalf("%d spare RX frames, want %d", len(f.rx.spare), frames/2-ringSize)
	}
	// RX: many rounds of receive, each frame checked inside deliver.
	next, want := 0, 0
	for round := 0; round < 200; round++ {
		for i := 0; i < round%7+1; i++ {
			if !f.kernelReceive(t, frameOf(next, 60+next%900)) {
				break
			}
			next++
		}
		f.RxFrames(round%5+1, func(fr []byte) {
			if !bytes.Equal(fr, frameOf(want, 60+want%900)) {
				t.Fatalf("frame %d corrupted", want)
			}
			want++
		})
	}
	for f.RxFrames(64, func(fr []byte) { want++ }) > 0 {
	}
	if want != next || f.Stats().RxFrames != uint64(next) {
		t.Fatalf("received %d (stats %d) of %d", want, f.Stats().RxFrames, next)
	}
	// Every RX frame is back: in the fill ring or spare.
	if got := int(f.kFill.avail(64)) + len(f.rx.spare); got != frames/2 {
		t.Errorf("%d RX frames accounted for, want %d", got, frames/2)
	}

	// TX: queue until refused, let the "kernel" send some, repeat.
	var sent [][]byte
	queued := 0
	for round := 0; round < 100; round++ {
		for f.TxFrame(frameOf(1000+queued, 64+queued%500)) {
			queued++
		}
		if err := f.Kick(); err != nil {
			t.Fatal(err)
		}
		f.kernelSend(t, round%9+1, &sent)
	}
	for len(sent) < queued {
		f.kernelSend(t, ringSize, &sent)
		if err := f.Kick(); err != nil {
			t.Fatal(err)
		}
	}
	for i, b := range sent {
		if !bytes.Equal(b, frameOf(1000+i, 64+i%500)) {
			t.Fatalf("sent frame %d corrupted", i)
		}
	}
	s := f.Stats()
	if s.TxFrames != uint64(queued) || s.TxRingFull == 0 {
		t.Errorf("TxFrames %d (want %d), TxRingFull %d (want > 0)", s.TxFrames, queued, s.TxRingFull)
	}
	if len(f.tx.free) != frames/2 {
		t.Errorf("%d TX frames free after all completions, want %d", len(f.tx.free), frames/2)
	}
	if f.TxFrame(make([]byte, 1025)) || f.TxFrame(nil) {
		t.Error("TxFrame took a frame longer than MaxFrame, or an empty one")
	}
}

func TestKickOnlyWhenNeeded(t *testing.T) {
	f := newFakeXSK(t, 64, 16)
	kicks := func() uint64 { f.tx.publish(); return f.tx.pub.syscalls.Load() }
	setTXWakeup := func(on bool) {
		v := uint32(0)
		if on {
			v = unix.XDP_RING_NEED_WAKEUP
		}
		f.kTX.flags.Store(v)
	}
	setTXWakeup(true)
	if err := f.Kick(); err != nil || kicks() != 0 {
		t.Fatalf("Kick with nothing queued: %d syscalls, %v", kicks(), err)
	}
	f.TxFrame(frameOf(1, 60))
	if f.kTX.avail(16) != 0 {
		t.Fatal("the kernel saw a descriptor before Kick")
	}
	if err := f.Kick(); err != nil || kicks() != 1 {
		t.Fatalf("Kick with a frame and need_wakeup: %d syscalls (want 1), %v", kicks(), err)
	}
	// The "kernel" has not taken it yet, but did not ask for a wake-up:
	// no syscall.
	setTXWakeup(false)
	f.TxFrame(frameOf(2, 60))
	if err := f.Kick(); err != nil || kicks() != 1 {
		t.Fatalf("Kick without need_wakeup: %d syscalls, want still 1", kicks())
	}
	if f.kTX.avail(16) != 2 {
		t.Fatal("Kick did not submit the frames")
	}
	var sent [][]byte
	f.kernelSend(t, 16, &sent)
	setTXWakeup(true)
	if err := f.Kick(); err != nil || kicks() != 1 {
		t.Fatalf("Kick after the kernel took everything: %d syscalls, want 1", kicks())
	}
	// The one sendto is counted, and its time: tx_kick_ns is what the
	// calls cost the loop, so a call that took no time at all would be a
	// clock that was not read.
	if n := counter(t, f.XSK, "xsk", "tx_kicks"); n != 1 {
		t.Fatalf("tx_kicks %d, want 1", n)
	}
	if ns := counter(t, f.XSK, "xsk", "tx_kick_ns"); ns == 0 || ns > uint64(time.Minute) {
		t.Fatalf("tx_kick_ns %d after one sendto", ns)
	}
}

func TestRxWakeupEvery64EmptyPolls(t *testing.T) {
	f := newFakeXSK(t, 64, 16)
	nop := func([]byte) {}
	for i := 0; i < 1000; i++ {
		f.RxFrames(32, nop)
	}
	if n := f.rx.syscalls.Load(); n != 0 {
		t.Fatalf("%d RX wake-ups while the kernel did not ask", n)
	}
	f.kFill.flags.Store(unix.XDP_RING_NEED_WAKEUP)
	for i := 0; i < 64*10; i++ {
		f.RxFrames(32, nop)
	}
	if n := f.rx.syscalls.Load(); n != 10 {
		t.Fatalf("%d RX wake-ups in 640 empty polls, want 10", n)
	}
	// A frame resets the count.
	for i := 0; i < 63; i++ {
		f.RxFrames(32, nop)
	}
	f.kernelReceive(t, frameOf(0, 60))
	if f.RxFrames(32, nop) != 1 {
		t.Fatal("frame not delivered")
	}
	f.RxFrames(32, nop)
	if n := f.rx.syscalls.Load(); n != 10 {
		t.Fatalf("wake-up after a delivered frame reset the count: %d, want 10", n)
	}
}

func TestRxRejectsForeignDescriptor(t *testing.T) {
	f := newFakeXSK(t, 64, 16)
	// A descriptor pointing into the TX half must never be delivered.
	f.kRX.put(unix.XDPDesc{Addr: f.rx.end + 256, Len: 60})
	f.kRX.submit()
	if n := f.RxFrames(8, func([]byte) { t.Error("delivered a foreign frame") }); n != 0 {
		t.Errorf("RxFrames = %d", n)
	}
	if f.rx.invalid.Load() != 1 {
		t.Errorf("rx_bad_desc = %d, want 1", f.rx.invalid.Load())
	}
}

func TestNoAllocationOnDataPath(t *testing.T) {
	f := newFakeXSK(t, 64, 16)
	frame := frameOf(3, 100)
	var sent [][]byte
	nop := func([]byte) {}
	allocs := testing.AllocsPerRun(200, func() {
		f.kernelReceive(t, frame)
		f.RxFrames(8, nop)
		f.TxFrame(frame)
		f.Kick()
		sent = sent[:0]
	})
	if allocs != 0 {
		t.Errorf("%v allocations per receive+send round, want 0", allocs)
	}
}

// TestKickAgainAfterBusy: a Kick that finds the device busy (EAGAIN, no
// progress) leaves the frame in the TX ring; the receive side wakes the
// kernel again, at the next RxFrames and in Wait, without another send.
// The fake's socket is a Unix datagram pair whose peer queue the test
// fills, so sendto says EAGAIN until the test drains it.
func TestKickAgainAfterBusy(t *testing.T) {
	for _, side := range []string{"RxFrames", "Wait"} {
		t.Run(side, func(t *testing.T) {
			f := newFakeXSK(t, 64, 16)
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
			f.fd = fds[0]
			for _, w := range []**fdwait.Waker{&f.waker, &f.irq} {
				if *w, err = fdwait.NewWaker(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { (*w).Close() })
			}
			queued := 0
			for {
				if _, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fds[0]), 0, 0, unix.MSG_DONTWAIT, 0, 0); e != 0 {
					break
				}
				queued++
			}
			drain := func() int {
				n := 0
				for ; ; n++ {
					if _, _, err := unix.Recvfrom(fds[1], make([]byte, 1), unix.MSG_DONTWAIT); err != nil {
						return n
					}
				}
			}
			f.kTX.flags.Store(unix.XDP_RING_NEED_WAKEUP)
			f.TxFrame(frameOf(1, 60))
			if err := f.Kick(); err != nil {
				t.Fatal(err)
			}
			if got := drain(); got != queued {
				t.Fatalf("drained %d, filled %d: the busy Kick reached the socket", got, queued)
			}
			// The device is free again; nobody sends.
			switch side {
			case "RxFrames":
				f.RxFrames(32, func([]byte) {})
			case "Wait":
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
				f.Wait(ctx)
				cancel()
			}
			if got := drain(); got != 1 {
				t.Fatalf("%s made %d TX wake-ups after a busy Kick, want 1", side, got)
			}
			if f.rx.txStalled.Load() {
				t.Fatal("still marked stalled after the kernel took the wake-up")
			}
			if v := counter(t, f.XSK, "xsk", "tx_rekicks"); v != 1 {
				t.Fatalf("tx_rekicks %d", v)
			}
			// Once taken, no further wake-ups.
			f.RxFrames(32, func([]byte) {})
			if got := drain(); got != 0 {
				t.Fatalf("%d wake-ups after the stall ended", got)
			}
		})
	}
}
