package conformance

import "testing"

// TestConformance runs every case on every DUT this host can make:
// TestConformance/<dut>/<case>.
func TestConformance(t *testing.T) {
	for _, f := range factories() {
		Run(t, f)
	}
}

func factories() []Factory { return []Factory{Ours(), Linux()} }
