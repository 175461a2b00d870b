package dgramio

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// withoutKind runs fn with kind taken out of the registry (as in a program
// that does not import its package), then puts it back.
func withoutKind(t *testing.T, kind Kind, fn func()) {
	t.Helper()
	registry.Lock()
	d, had := registry.drivers[kind]
	delete(registry.drivers, kind)
	registry.Unlock()
	defer func() {
		if had {
			registry.Lock()
			registry.drivers[kind] = d
			registry.Unlock()
		}
	}()
	fn()
}

func TestNewOfAKindNotLinkedNamesTheImport(t *testing.T) {
	withoutKind(t, KindUDP, func() {
		_, err := New(Config{Kind: KindUDP, Role: RoleServer, Port: 5000})
		if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), `"github.com/dgramio/dgramio/kinds/udp"`) {
			t.Fatalf("New of an unlinked kind: %v; want ErrNotSupported naming kinds/udp", err)
		}
		if _, err := NewGroup(Config{Kind: KindUDP, Role: RoleServer, Port: 5000, Queues: 2, Poll: PollYield}); !errors.Is(err, ErrNotSupported) {
			t.Fatalf("NewGroup of an unlinked kind: %v; want ErrNotSupported", err)
		}
	})
	withoutKind(t, KindDPDK, func() {
		_, err := New(Config{Kind: KindDPDK, Role: RoleServer, Iface: "eth0", LocalIP: netip.MustParseAddr("198.18.0.1"), Port: 5000})
		if !errors.Is(err, ErrNoDPDK) || !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "kinds/dpdk") {
			t.Fatalf("New of an unlinked DPDK kind: %v; want ErrNoDPDK naming kinds/dpdk", err)
		}
	})
}

func TestRegisterRefusesDuplicatesAndNil(t *testing.T) {
	const kind Kind = "test-kind"
	mustPanic := func(what string, fn func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", what)
			}
		}()
		fn()
	}
	mustPanic("Register with a nil Open", func() { Register(kind, Driver{}) })
	open := func(Config) (Backend, error) { return nil, errors.New("test kind") }
	Register(kind, Driver{Open: open})
	defer withoutKind(t, kind, func() {})
	mustPanic("a second Register", func() { Register(kind, Driver{Open: open}) })
	reg := Registered()
	if len(reg) == 0 || reg[len(reg)-1] != kind {
		t.Errorf("Registered() = %v; want the test kind last (after the known kinds)", reg)
	}
	if _, err := driver(kind); err != nil {
		t.Errorf("driver of a registered kind: %v", err)
	}
}
