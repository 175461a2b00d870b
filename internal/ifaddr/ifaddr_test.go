package ifaddr

import (
	"net/netip"
	"testing"
)

// Loopback holds 127.0.0.1 in every network namespace; no interface holds
// an address of the benchmarking range outside a test host.
func TestKernelHas(t *testing.T) {
	if has, err := KernelHas("lo", netip.MustParseAddr("127.0.0.1")); err != nil || !has {
		t.Errorf("KernelHas(lo, 127.0.0.1) = %v, %v; want true", has, err)
	}
	if has, err := KernelHas("lo", netip.MustParseAddr("198.18.255.254")); err != nil || has {
		t.Errorf("KernelHas(lo, 198.18.255.254) = %v, %v; want false", has, err)
	}
	if _, err := KernelHas("no-such-if0", netip.MustParseAddr("127.0.0.1")); err == nil {
		t.Error("KernelHas of a missing interface: no error")
	}
}
