package poison

import (
	"bytes"
	"testing"
)

// Fill overwrites the buffer with 0xDB in a dgramio_debug build and leaves
// it alone otherwise.
func TestFill(t *testing.T) {
	b := []byte{1, 2, 3}
	Fill(b)
	want := []byte{1, 2, 3}
	if Debug {
		want = []byte{0xDB, 0xDB, 0xDB}
	}
	if !bytes.Equal(b, want) {
		t.Errorf("Fill (Debug %v): % x, want % x", Debug, b, want)
	}
}
