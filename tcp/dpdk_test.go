//go:build dpdk

package tcp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

var dpdkTCPSeq int

// openTCPDPDK opens kind tcp-dpdk with a vdev of driver on h's veth end,
// inside h's namespace. A client connects here.
func openTCPDPDK(t *testing.T, h *testhost.Host, driver string, cfg core.Config) (core.Backend, error) {
	t.Helper()
	dpdkTCPSeq++
	cfg.Kind = core.KindTCPDPDK
	if cfg.TCP.Stack == "" {
		cfg.TCP.Stack = testStack
	}
	cfg.DPDK.VDev = fmt.Sprintf("%s_t%d,iface=%s", driver, dpdkTCPSeq, h.Iface)
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 20 * time.Second
	}
	var b core.Backend
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

// dpdkTCPClean checks that A's interface is as it was: no XDP program, not
// promiscuous.
func dpdkTCPClean(t *testing.T, h *testhost.Host) {
	t.Helper()
	l, err := h.Link()
	if err != nil {
		t.Fatal(err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached {
		t.Errorf("XDP program left on %s", h.Iface)
	}
	if on, _ := h.Promisc(); on {
		t.Errorf("%s left promiscuous", h.Iface)
	}
}

// TestDPDKTCPClientKernelServer: tcp-dpdk on A connects to a kernel TCP
// echo server on B and sends 10k records, which come back in order.
func TestDPDKTCPClientKernelServer(t *testing.T) { engines(t, testDPDKTCPClientKernelServer) }

func testDPDKTCPClientKernelServer(t *testing.T) {
	for _, driver := range []string{"net_af_xdp", "net_af_packet"} {
		t.Run(driver, func(t *testing.T) {
			p := dpdkTCPPrepare(t, driver)
			var ln net.Listener
			if err := p.B.Do(func() error {
				var err error
				ln, err = net.Listen("tcp4", netip.AddrPortFrom(p.B.Addr, 5000).String())
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := ln.Accept()
				if err != nil {
					return
				}
				io.Copy(c, c) // the byte stream back, records and all
				c.Close()
			}()
			b, err := openTCPDPDK(t, p.A, driver, core.Config{Iface: p.A.Iface, LocalIP: p.A.Addr,
				Dests: []netip.Addr{p.B.Addr}, Port: 5000})
			testutil.SkipIfNotSupported(t, err)

			const n = 10000
			roundTrips(t, b, n, 100, 64)
			s := b.Stats()
			t.Logf("mode %q: %d records back; stats %+v", s.Mode, n, s)
			if s.TxSent != n || s.RxDelivered != n || s.Resets != 0 {
				t.Fatalf("TxSent %d RxDelivered %d Resets %d, want %d, %d, 0", s.TxSent, s.RxDelivered, s.Resets, n, n)
			}
			if err := b.Wait(context.Background()); !errors.Is(err, core.ErrNotSupported) {
				t.Errorf("Wait on tcp-dpdk: %v, want an error matching ErrNotSupported", err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			ln.Close()
			wg.Wait() // the kernel's side saw the close (FIN or RST) and ended
			dpdkTCPClean(t, p.A)
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
			b, err := openTCPDPDK(t, p.A, driver, core.Config{Role: core.RoleServer, Iface: p.A.Iface, LocalIP: p.A.Addr, Port: 5000})
			testutil.SkipIfNotSupported(t, err)

			// The server's poll loop: echo every record to its sender.
			ctx, cancel := context.WithCancel(context.Background())
			var peerErr error
			var loop sync.WaitGroup
			loop.Add(1)
			go func() {
				defer loop.Done()
				pkts := make([]core.Packet, 64)
				for ctx.Err() == nil {
					k, err := b.Rx(pkts)
					if err != nil {
						var pe *core.PeerError
						if errors.As(err, &pe) {
							peerErr = err
							continue
						}
						return
					}
					for _, pk := range pkts[:k] {
						for !b.QueueTo(pk.Data, pk.From) && ctx.Err() == nil {
							b.Flush()
						}
					}
					b.Flush()
					if k == 0 {
						time.Sleep(20 * time.Microsecond)
					}
				}
			}()
			defer func() { cancel(); loop.Wait() }()

			var c net.Conn
			if err := p.B.Do(func() error {
				var err error
				c, err = net.DialTimeout("tcp4", netip.AddrPortFrom(p.A.Addr, 5000).String(), 20*time.Second)
				return err
			}); err != nil {
				t.Fatalf("kernel client connect: %v", err)
			}
			defer c.Close()

			const n = 10000
			errc := make(chan error, 1)
			go func() {
				rec := make([]byte, HeaderLen+100)
				for i := 0; i < n; i++ {
					binary.BigEndian.PutUint16(rec, 100)
					binary.BigEndian.PutUint32(rec[HeaderLen:], uint32(i))
					if _, err := c.Write(rec); err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			c.SetReadDeadline(time.Now().Add(60 * time.Second))
			in := make([]byte, HeaderLen+100)
			for i := 0; i < n; i++ {
				if _, err := io.ReadFull(c, in); err != nil {
					t.Fatalf("record %d back: %v", i, err)
				}
				if l := binary.BigEndian.Uint16(in); l != 100 || binary.BigEndian.Uint32(in[HeaderLen:]) != uint32(i) {
					t.Fatalf("record %d back: length %d seq %d", i, l, binary.BigEndian.Uint32(in[HeaderLen:]))
				}
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			c.Close()
			// The server sees the kernel client's FIN as a peer close.
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				if b.Stats().PeerCloses == 1 {
					break
				}
			}
			cancel()
			loop.Wait()
			s := b.Stats()
			t.Logf("mode %q; peer error %v; stats %+v", s.Mode, peerErr, s)
			if s.Accepts != 1 || s.RxDelivered != n || s.TxSent != n || s.PeerCloses != 1 || s.Resets != 0 {
				t.Fatalf("Accepts %d RxDelivered %d TxSent %d PeerCloses %d Resets %d", s.Accepts, s.RxDelivered, s.TxSent, s.PeerCloses, s.Resets)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			dpdkTCPClean(t, p.A)
		})
	}
}

// TestDPDKTCPAfPacketKernelAddress: on net_af_packet with LocalIP still on
// the kernel's interface, the kernel would reset every connection; NewDPDK
// refuses with a ConfigError on LocalIP, and leaves the interface clean.
func TestDPDKTCPAfPacketKernelAddress(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	_, err := openTCPDPDK(t, p.A, "net_af_packet", core.Config{Role: core.RoleServer, Iface: p.A.Iface, LocalIP: p.A.Addr, Port: 5000})
	testutil.SkipIfNotSupported(t, func() error {
		if errors.Is(err, core.ErrNotSupported) {
			return err
		}
		return nil
	}())
	var ce *core.ConfigError
	if !errors.As(err, &ce) || ce.Field != "LocalIP" {
		t.Fatalf("%v, want a *core.ConfigError on LocalIP", err)
	}
	t.Logf("%v", err)
	dpdkTCPClean(t, p.A)
}

// TestDPDKTCPConnectRefused: a client whose server port is closed gets an
// error (B's kernel answers the SYN with a RST), and nothing is left on
// the interface.
func TestDPDKTCPConnectRefused(t *testing.T) { engines(t, testDPDKTCPConnectRefused) }

func testDPDKTCPConnectRefused(t *testing.T) {
	p := dpdkTCPPrepare(t, "net_af_xdp")
	_, err := openTCPDPDK(t, p.A, "net_af_xdp", core.Config{Iface: p.A.Iface, LocalIP: p.A.Addr,
		Dests: []netip.Addr{p.B.Addr}, Port: 5999, ConnectTimeout: 5 * time.Second})
	if err == nil {
		t.Fatal("connected to a closed port")
	}
	if strings.Contains(err.Error(), "panicked") {
		t.Fatal(err)
	}
	t.Logf("%v", err)
	dpdkTCPClean(t, p.A)
}
