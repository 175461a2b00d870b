//go:build dpdk

package tcp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

var dpdkTCPSeq int

// openTCPDPDK opens kind tcp-dpdk with a vdev of driver on h's veth end,
// inside h's namespace. A client connects here.
func openTCPDPDK(t *testing.T, h *testhost.Host, driver string, cfg dgramio.Config) (dgramio.Backend, error) {
	t.Helper()
	dpdkTCPSeq++
	cfg.Kind = dgramio.KindTCPDPDK
	if cfg.TCP.Stack == "" {
		cfg.TCP.Stack = testStack
	}
	cfg.DPDK.VDev = fmt.Sprintf("%s_t%d,iface=%s", driver, dpdkTCPSeq, h.Iface)
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 20 * time.Second
	}
	var b dgramio.Backend
	var err error
	func() {
		// A panic in the constructor fails this test, not the whole binary.
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("tcp.NewDPDK panicked: %v", r)
			}
		}()
		err = h.Do(func() error {
			var err error
			b, err = NewDPDK(cfg)
			return err
		})
	}()
	if err == nil {
		t.Cleanup(func() { b.Close() })
	}
	return b, err
}

// dpdkTCPPrepare makes the pair for driver: on net_af_packet A's address
// goes off the kernel's interface (else the kernel resets our connections;
// see NewDPDK), and B's kernel forgets A so that netstack's ARP answers.
func dpdkTCPPrepare(t *testing.T, driver string) *testhost.Pair {
	t.Helper()
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	if driver == "net_af_packet" {
		if err := p.A.DelAddr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.B.DelNeigh(p.A.Addr); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDPDKTCPClientKernelServer: tcp-dpdk on A connects to a kernel TCP
// echo server on B and sends 10k records, which come back in order.
func TestDPDKTCPClientKernelServer(t *testing.T) { engines(t, testDPDKTCPClientKernelServer) }

func testDPDKTCPClientKernelServer(t *testing.T) {
	for _, driver := range []string{"net_af_xdp", "net_af_packet"} {
		t.Run(driver, func(t *testing.T) {
			p := dpdkTCPPrepare(t, driver)
			ln, wait := peertest.Echo(t, p.B, netip.AddrPortFrom(p.B.Addr, 5000))
			b, err := openTCPDPDK(t, p.A, driver, dgramio.Config{Iface: p.A.Iface, LocalIP: p.A.Addr,
				Dests: []netip.AddrPort{netip.AddrPortFrom(p.B.Addr, 5000)}, Port: 5000})
			testutil.SkipIfNotSupported(t, err)
			s := echoedRecords(t, b, 10000)
			t.Logf("mode %q; stats %+v", s.Mode, s)
			if err := b.Wait(context.Background()); !errors.Is(err, dgramio.ErrNotSupported) {
				t.Errorf("Wait on tcp-dpdk: %v, want an error matching ErrNotSupported", err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			peertest.Ended(t, ln, wait) // the kernel's side saw the close (FIN or RST)
			peertest.Clean(t, p.A)
		})
	}
}

// TestDPDKTCPServerKernelClient: a kernel TCP client on B connects to
// tcp-dpdk serving on A and sends 10k records; the server echoes each to its
// sender.
func TestDPDKTCPServerKernelClient(t *testing.T) { engines(t, testDPDKTCPServerKernelClient) }

func testDPDKTCPServerKernelClient(t *testing.T) {
	for _, driver := range []string{"net_af_xdp", "net_af_packet"} {
		t.Run(driver, func(t *testing.T) {
			p := dpdkTCPPrepare(t, driver)
			b, err := openTCPDPDK(t, p.A, driver, dgramio.Config{Role: dgramio.RoleServer, Iface: p.A.Iface, LocalIP: p.A.Addr, Port: 5000})
			testutil.SkipIfNotSupported(t, err)

			serveKernelClient(t, b, p.B, netip.AddrPortFrom(p.A.Addr, 5000), 10000)
			peertest.CloseClean(t, b, p.A)
		})
	}
}

// TestDPDKTCPAfPacketKernelAddress: on net_af_packet with LocalIP still on
// the kernel's interface, the kernel would reset every connection; NewDPDK
// refuses with a ConfigError on LocalIP, and leaves the interface clean.
func TestDPDKTCPAfPacketKernelAddress(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	_, err := openTCPDPDK(t, p.A, "net_af_packet", dgramio.Config{Role: dgramio.RoleServer, Iface: p.A.Iface, LocalIP: p.A.Addr, Port: 5000})
	testutil.SkipIfNotSupported(t, func() error {
		if errors.Is(err, dgramio.ErrNotSupported) {
			return err
		}
		return nil
	}())
	var ce *dgramio.ConfigError
	if !errors.As(err, &ce) || ce.Field != "LocalIP" {
		t.Fatalf("%v, want a *dgramio.ConfigError on LocalIP", err)
	}
	t.Logf("%v", err)
	peertest.Clean(t, p.A)
}

// TestDPDKTCPConnectRefused: a client whose server port is closed gets an
// error (B's kernel answers the SYN with a RST), and nothing is left on
// the interface.
func TestDPDKTCPConnectRefused(t *testing.T) { engines(t, testDPDKTCPConnectRefused) }

func testDPDKTCPConnectRefused(t *testing.T) {
	p := dpdkTCPPrepare(t, "net_af_xdp")
	_, err := openTCPDPDK(t, p.A, "net_af_xdp", dgramio.Config{Iface: p.A.Iface, LocalIP: p.A.Addr,
		Dests: []netip.AddrPort{netip.AddrPortFrom(p.B.Addr, 5999)}, Port: 5999, ConnectTimeout: 5 * time.Second})
	if err == nil {
		t.Fatal("connected to a closed port")
	}
	if strings.Contains(err.Error(), "panicked") {
		t.Fatal(err)
	}
	t.Logf("%v", err)
	peertest.Clean(t, p.A)
}
