package benchnet

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/dgramio/dgramio"
)

func TestCheckBenchAddr(t *testing.T) {
	for _, ok := range []string{"198.18.0.1", "198.19.255.254", "127.0.0.1", "::1", "2001:2::1", "2001:2:0:ffff::2", "::ffff:198.18.0.1"} {
		if err := CheckBenchAddr("a", netip.MustParseAddr(ok)); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	var ce *dgramio.ConfigError
	for _, bad := range []string{"10.0.0.1", "192.168.1.1", "8.8.8.8", "198.20.0.1", "2001:db8::1", "2001:3::1", "fe80::1", "::", "::ffff:10.0.0.1", "2001:2::1%veth0"} {
		if err := CheckBenchAddr("a", netip.MustParseAddr(bad)); !errors.As(err, &ce) || ce.Field != "a" {
			t.Errorf("%s: %v, want a ConfigError naming the field", bad, err)
		}
	}
}
