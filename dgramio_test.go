package dgramio_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/dgramio/dgramio"
	_ "github.com/dgramio/dgramio/kinds"
)

func TestNewValidatesBeforeAnySyscall(t *testing.T) {
	_, err := dgramio.New(dgramio.Config{Kind: "udp"})
	var ce *dgramio.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Dests" {
		t.Fatalf("client without destinations: got %v, want a ConfigError naming Dests", err)
	}
	_, err = dgramio.New(dgramio.Config{Kind: "carrier-pigeon"})
	if !errors.As(err, &ce) || ce.Field != "Kind" {
		t.Fatalf("unknown kind: got %v, want a ConfigError naming Kind", err)
	}
}

// builtKinds are the kinds wired into New in the default build.
var builtKinds = map[dgramio.Kind]bool{"udp": true, "uring": true, "tcp": true, "xdp": true, "tcp-xdp": true}

func TestEveryKindIsWiredOrSaysWhy(t *testing.T) {
	for _, k := range dgramio.Kinds() {
		cfg := dgramio.Config{
			Kind:    k,
			Iface:   "dgnone0", // no such interface: opening fails after validation
			LocalIP: netip.MustParseAddr("198.18.250.1"),
			Dests:   []netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("198.18.250.2"), 5000)},
			Port:    5000,
		}
		if k == "udp" || k == "uring" || k == "tcp" {
			// This test runs in the root namespace: kernel kinds talk only
			// to loopback here (a UDP connect sends nothing; a TCP connect
			// to a closed loopback port is refused).
			cfg.Dests = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:9")} // discard: nothing listens here
		}
		b, err := dgramio.New(cfg)
		if b != nil {
			b.Close()
		}
		notBuilt := errors.Is(err, dgramio.ErrNoDPDK)
		switch {
		case builtKinds[k] && notBuilt:
			t.Errorf("kind %s is built in but New says: %v", k, err)
		case !builtKinds[k] && !notBuilt:
			t.Errorf("kind %s is not built in, want ErrNoDPDK, got %v", k, err)
		case notBuilt && !errors.Is(err, dgramio.ErrNotSupported):
			t.Errorf("kind %s: %v does not match ErrNotSupported", k, err)
		case notBuilt && (!strings.Contains(err.Error(), "kind "+string(k)) || !strings.Contains(err.Error(), "-tags dpdk")):
			t.Errorf("kind %s: %q does not name the kind and say how to build it in", k, err)
		}
		if notBuilt {
			g, gerr := dgramio.NewGroup(cfg)
			if g != nil {
				g.Close()
			}
			if !errors.Is(gerr, dgramio.ErrNoDPDK) {
				t.Errorf("kind %s: NewGroup = %v, want ErrNoDPDK as New says", k, gerr)
			}
		}
	}
}
