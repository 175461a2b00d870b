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

// KernelHoldsAnywhere looks at every interface: 127.0.0.1 (also as an
// IPv4-mapped address) is held, an address of the benchmarking range
// that no test host gave the root namespace is not.
func TestKernelHoldsAnywhere(t *testing.T) {
	for _, c := range []struct {
		addr string
		want bool
	}{{"127.0.0.1", true}, {"::ffff:127.0.0.1", true}, {"198.18.255.254", false}, {"2001:2:ffff::fe", false}} {
		if got, err := KernelHoldsAnywhere(netip.MustParseAddr(c.addr)); err != nil || got != c.want {
			t.Errorf("KernelHoldsAnywhere(%s) = %v, %v; want %v", c.addr, got, err, c.want)
		}
	}
}
