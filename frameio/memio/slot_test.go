package memio

import (
	"bytes"
	"testing"
)

// TestTxSlot: a frame built in the slot TxSlot hands out arrives as
// TxFrame's copy would; the slot stays taken (the same memory) until
// TxCommit; TxCommit refuses a length out of range and, on a full ring,
// keeps the slot and counts the ring full; nothing is taken after Close.
func TestTxSlot(t *testing.T) {
	a, b := NewPair(Options{TxSlots: 2})
	defer b.Close()
	for i := uint32(0); i < 3; i++ {
		s := a.TxSlot()
		if len(s) != 0 || cap(s) < 1514 {
			t.Fatalf("slot len %d cap %d", len(s), cap(s))
		}
		if again := a.TxSlot(); &again[:1][0] != &s[:1][0] {
			t.Fatal("a second TxSlot before TxCommit gave another slot")
		}
		s = append(s, frame(i)...)
		if a.TxCommit(0) || a.TxCommit(cap(s)+1) {
			t.Fatal("TxCommit took a length out of range")
		}
		ok := a.TxCommit(len(s))
		if i < 2 && !ok {
			t.Fatalf("TxCommit %d refused", i)
		}
		if i == 2 {
			if ok {
				t.Fatal("TxCommit took a frame into a full ring")
			}
			if got := a.Stats().TxRingFull; got != 1 {
				t.Fatalf("tx_ring_full %d, want 1", got)
			}
			if got := a.TxSlot(); !bytes.Equal(got[:len(s)], frame(2)) {
				t.Fatal("the refused frame's slot was not kept")
			}
		}
	}
	if a.TxCommit(64) {
		t.Fatal("TxCommit into a ring still full")
	}
	if err := a.Kick(); err != nil {
		t.Fatal(err)
	}
	got := drain(b)
	if len(got) != 2 || !bytes.Equal(got[0], frame(0)) || !bytes.Equal(got[1], frame(1)) {
		t.Fatalf("received %d frames: %x", len(got), got)
	}
	if !a.TxCommit(64) {
		t.Fatal("TxCommit of the kept slot after the ring drained")
	}
	a.Kick()
	if got := drain(b); len(got) != 1 || !bytes.Equal(got[0], frame(2)) {
		t.Fatalf("the kept frame: %x", got)
	}
	if a.TxCommit(64) {
		t.Fatal("TxCommit without a slot taken")
	}
	if st := a.Stats(); st.TxFrames != 3 {
		t.Fatalf("TxFrames %d, want 3", st.TxFrames)
	}
	a.Close()
	if a.TxSlot() != nil {
		t.Fatal("TxSlot after Close")
	}
}
