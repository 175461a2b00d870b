package native

import (
	"testing"
	"unsafe"
)

// TestConnLayout: a connection slot is a whole number of cache lines, so
// that in the engine's table every slot's first field starts a line, and
// the fields of the data path (up to the timers) lie in its first seven;
// the engine's own are in its first seven lines, its per-frame counters
// in one. A field added to the hot group, or a slot that grew past its
// padding, fails here rather than in a benchmark.
func TestConnLayout(t *testing.T) {
	var c Conn
	if n := unsafe.Sizeof(c); n%64 != 0 {
		t.Errorf("Conn is %d bytes, not a whole number of 64-byte lines: adjust its padding", n)
	}
	if end := unsafe.Offsetof(c.heapIdx) + unsafe.Sizeof(c.heapIdx); end > 7*64 {
		t.Errorf("Conn's data-path fields end at byte %d, past its seventh line", end)
	}
	var e Engine
	if end := unsafe.Offsetof(e.cnt) + unsafe.Sizeof(e.cnt[0])*uintptr(cTCPPredicted+1); end > 7*64 {
		t.Errorf("the engine's data-path fields and per-frame counters end at byte %d, past its seventh line", end)
	}
	if a, b := unsafe.Offsetof(e.cnt)/64, (unsafe.Offsetof(e.cnt)+8*uintptr(cTCPPredicted))/64; a != b {
		t.Errorf("the per-frame counters span lines %d to %d", a, b)
	}
}
