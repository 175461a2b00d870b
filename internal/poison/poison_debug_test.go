//go:build dgramio_debug

package poison

import "testing"

// The dgramio_debug build poisons: make test's debug pass runs this
// package (and TestFill with it) with the tag.
func TestDebugBuildPoisons(t *testing.T) {
	if !Debug {
		t.Fatal("Debug is false in a dgramio_debug build")
	}
	b := make([]byte, 64)
	Fill(b)
	for i, c := range b {
		if c != 0xDB {
			t.Fatalf("byte %d is %#x after Fill, want 0xdb", i, c)
		}
	}
}
