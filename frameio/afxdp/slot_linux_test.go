package afxdp

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
)

// TestTxSlotToKernelSocket: frames built in the UMEM frames TxSlot hands
// out and queued by TxCommit reach a kernel socket as TxFrame's copies
// do; a second TxSlot before TxCommit returns the same frame; TxCommit
// refuses a length out of range and a call without a slot taken; every
// frame comes back to the free list, the taken one counted apart.
func TestTxSlotToKernelSocket(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	x := openXSK(t, p.A, Options{Iface: p.A.Iface, Port: xskPort})
	c := udpConn(t, p.B, netip.AddrPortFrom(p.B.Addr, peerPort), netip.AddrPort{})

	const n, size = 2000, 1000
	sink := readSeqs(c, netip.AddrPortFrom(p.A.Addr, xskPort), n, size)
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < n && time.Now().Before(deadline); {
		s := x.TxSlot()
		if s == nil {
			x.Kick()
			time.Sleep(100 * time.Microsecond)
			continue
		}
		if len(s) != 0 || cap(s) < 1514 {
			t.Fatalf("slot len %d cap %d", len(s), cap(s))
		}
		if again := x.TxSlot(); &again[:1][0] != &s[:1][0] {
			t.Fatal("a second TxSlot before TxCommit gave another frame")
		}
		f := append(s, buildUDP(t, p.A, p.B, xskPort, peerPort, payload(uint32(i), size))...)
		if x.TxCommit(0) || x.TxCommit(cap(s)+1) {
			t.Fatal("TxCommit took a length out of range")
		}
		if !x.TxCommit(len(f)) {
			x.Kick()
			continue
		}
		i++
		if i%64 == 0 {
			if err := x.Kick(); err != nil {
				t.Fatal(err)
			}
			for sink.received.Load() < int64(i)-256 && time.Now().Before(deadline) {
				time.Sleep(100 * time.Microsecond) // paced: the kernel socket's buffer
			}
		}
	}
	if x.TxCommit(64) {
		t.Fatal("TxCommit without a slot taken")
	}
	for sink.received.Load() < n && time.Now().Before(deadline) {
		x.Kick()
		time.Sleep(time.Millisecond)
	}
	for _, err := range sink.wait() {
		t.Error(err)
	}
	if got := sink.received.Load(); got != n {
		t.Fatalf("B received %d of %d; stats %+v", got, n, x.Stats())
	}
	if s := x.Stats(); s.TxFrames != n {
		t.Errorf("TxFrames %d, want %d", s.TxFrames, n)
	}
	if !waitTxFree(x, func() bool { return time.Now().Before(deadline) }) {
		t.Errorf("%d of %d TX frames back on the free list", len(x.tx.free), cap(x.tx.free))
	}
	x.TxSlot() // taken and never committed: not a frame left unsent
	x.Close()
	if v := x.txUnsentAtClose.Load(); v != 0 {
		t.Errorf("%d TX frames unsent at Close, want 0 (the taken one is not)", v)
	}
}

// TestWaitUntil: WaitUntil on an idle socket returns nil once its
// deadline has passed, not before; the context's deadline, earlier,
// still ends it with DeadlineExceeded.
func TestWaitUntil(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	x := openXSK(t, p.A, Options{Iface: p.A.Iface, Port: xskPort})
	x.RxFrames(1<<10, func([]byte) {})
	t0 := time.Now()
	if err := x.WaitUntil(context.Background(), t0.Add(20*time.Millisecond)); err != nil {
		t.Fatalf("WaitUntil on an idle socket: %v, want nil", err)
	}
	if el := time.Since(t0); el < 20*time.Millisecond {
		t.Errorf("WaitUntil returned after %v, before its deadline", el)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := x.WaitUntil(ctx, time.Now().Add(time.Hour)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitUntil with an earlier context deadline: %v, want DeadlineExceeded", err)
	}
}
