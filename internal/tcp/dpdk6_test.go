//go:build dpdk

package tcp

import (
	"net/netip"
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// TestDPDKTCPNativeIPv6: tcp-dpdk on the native engine over IPv6
// (2001:2::/48 on the test veth), on A's address ::3 that A's kernel does
// not hold: a kernel client on B exchanges 2000 records with it as a
// server (the engine answering B's neighbour solicitation, RFC 4861
// §7.2.4), and as a client it resolves B (§7.2.2) and gets 2000 records
// echoed by a kernel server.
func TestDPDKTCPNativeIPv6(t *testing.T) {
	for _, driver := range []string{"net_af_xdp", "net_af_packet"} {
		t.Run(driver, func(t *testing.T) {
			testutil.RequireRoot(t)
			p := hosttest.New(t, testhost.Options{IPv6: true})
			addr := netip.AddrPortFrom(addr6(p.A, 3), 5000)
			b, err := openTCPDPDK(t, p.A, driver, dgramio.Config{Role: dgramio.RoleServer, Iface: p.A.Iface,
				LocalIP: addr.Addr(), Port: addr.Port(), TCP: dgramio.TCPTuning{Stack: dgramio.TCPStackNative}})
			testutil.SkipIfNotSupported(t, err)
			pl := startPoller(b.(*Backend), echo(t, b.(*Backend)))
			defer pl.stop()
			recordsFromKernel6(t, p, addr, 2000)
			pl.stop()
			if st := b.Stats(); st.Resets != 0 {
				t.Errorf("%d resets", st.Resets)
			} else if v, _ := st.Counter("native", "ndp_na_sent"); v == 0 {
				t.Errorf("the engine answered no solicitation")
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}

			echoedByKernel6(t, p, 5001, dgramio.Config{Iface: p.A.Iface, LocalIP: addr6(p.A, 4), TCP: dgramio.TCPTuning{Stack: dgramio.TCPStackNative}},
				func(cfg dgramio.Config) (dgramio.Backend, error) { return openTCPDPDK(t, p.A, driver, cfg) })
		})
	}
}
