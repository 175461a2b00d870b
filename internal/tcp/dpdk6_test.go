//go:build dpdk

package tcp

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/peertest"
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
			ctx, cancel := context.WithTimeout(context.Background(), peertest.DialTimeout)
			defer cancel()
			c, err := peertest.Dialer(p.B)(ctx, "tcp6", addr.String())
			if err != nil {
				pl.stop()
				t.Fatalf("kernel client connect to %s: %v", addr, err)
			}
			if err := peertest.Records(c, 0, 2000, 100, 120*time.Second); err != nil {
				pl.stop()
				t.Fatal(err)
			}
			c.Close()
			pl.stop()
			if st := b.Stats(); st.Resets != 0 {
				t.Errorf("%d resets", st.Resets)
			} else if v, _ := st.Counter("native", "ndp_na_sent"); v == 0 {
				t.Errorf("the engine answered no solicitation")
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}

			srv := netip.AddrPortFrom(p.B.Addr6, 5001)
			ln := listen6(t, p.B, srv)
			wait := peertest.ServeEcho(ln)
			cb, err := openTCPDPDK(t, p.A, driver, dgramio.Config{Iface: p.A.Iface, LocalIP: addr6(p.A, 4),
				Dests: []netip.AddrPort{srv}, Port: 5001, TCP: dgramio.TCPTuning{Stack: dgramio.TCPStackNative}})
			testutil.SkipIfNotSupported(t, err)
			s := echoedRecords(t, cb, 2000)
			if v, _ := s.Counter("native", "ndp_ns_sent"); v == 0 {
				t.Errorf("B resolved without a solicitation?")
			}
			if err := cb.Close(); err != nil {
				t.Fatal(err)
			}
			peertest.Ended(t, ln, wait)
			peertest.Clean(t, p.A)
		})
	}
}
