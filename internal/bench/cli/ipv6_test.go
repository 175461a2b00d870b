package cli

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/dgramio/dgramio/internal/testhost"
)

// tcp-xdp over IPv6 on both engines beside its IPv4 row, over the veth
// pair (the test hosts then have IPv6 on): each row is one of its own, its
// cells keep kind "tcp-xdp", both tools ran the row's engine with IPv6
// addresses of their own (not the kernel's: stackAddr6), every message
// came back and the counters add up. (Had a tool taken the kernel's
// address, the kernel would have reset its connections.)
func TestNetbenchTCPXDPIPv6(t *testing.T) {
	rows := []string{"tcp-xdp", "tcp-xdp+ipv6", "tcp-xdp+netstack+ipv6"}
	rep, _ := netbenchRunWith(t, NetbenchOptions{Kinds: rows, Rates: []float64{2000}, Port: 6700})
	for _, row := range rows {
		c, ok := rep.Cell(row, 2000)
		if !ok || c.Error != "" {
			t.Fatalf("%s: %+v; rows %+v", row, c, rep.Kinds)
		}
		if c.Kind != "tcp-xdp" || c.Name() != row || c.Offered != 1000 || c.Received != c.Offered || c.Unaccounted != 0 {
			t.Fatalf("%s: kind %q variant %q offered %d received %d unaccounted %d: %+v %v",
				row, c.Kind, c.Variant, c.Offered, c.Received, c.Unaccounted, c.Conservation, c.Notes)
		}
		engine := "native"
		if strings.Contains(row, "netstack") {
			engine = "netstack"
		}
		if !strings.Contains(c.Mode, engine) || !strings.Contains(c.EchoMode, engine) {
			t.Fatalf("%s: modes %q / %q do not say %s", row, c.Mode, c.EchoMode, engine)
		}
		notes := strings.Join(c.Notes, "; ")
		if row == "tcp-xdp" {
			if strings.Contains(notes, "IPv6") {
				t.Fatalf("tcp-xdp: %s", notes)
			}
			continue
		}
		i := strings.Index(notes, "IPv6: loadgen ")
		if i < 0 {
			t.Fatalf("%s: no IPv6 note: %s", row, notes)
		}
		f := strings.Fields(strings.NewReplacer(",", " ").Replace(notes[i:]))
		load, err1 := netip.ParseAddr(f[2])
		echo, err2 := netip.ParseAddr(f[4])
		if err1 != nil || err2 != nil || !load.Is6() || !echo.Is6() ||
			!testhost.BenchNet6.Contains(load) || !testhost.BenchNet6.Contains(echo) || load == echo {
			t.Fatalf("%s: addresses %v %v (%v %v): %s", row, load, echo, err1, err2, notes)
		}
	}
}

// The IPv6 rows that cannot run say why before any cell: any on real
// ports (they have IPv4 addresses only), and tcp-xdp+netstack+ipv6 with
// several queues (a netstack client group over IPv6 is refused); the
// native IPv6 row runs with several queues.
func TestIPv6VariantFailure(t *testing.T) {
	nb := &netbench{}
	for _, c := range []struct {
		variant string
		n       int
		iface   string
		fails   bool
	}{
		{"ipv6", 1, "", false},
		{"ipv6", 2, "", false},
		{"netstack+ipv6", 1, "", false},
		{"netstack+ipv6", 2, "", true},
		{"netstack", 2, "", false},
		{"ipv6", 1, "eth1", true},
		{"netstack+ipv6", 1, "eth1", true},
	} {
		nb.o.IfaceA = c.iface
		f := nb.variantFailure(c.variant, c.n)
		if (f != nil) != c.fails || f != nil && f.Class != ClassNotSupported {
			t.Errorf("%s, %d queues, iface %q: %+v", c.variant, c.n, c.iface, f)
		}
	}
}
