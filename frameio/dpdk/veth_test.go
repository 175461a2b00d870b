//go:build dpdk

package dpdk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
	"golang.org/x/sys/unix"
)

const (
	portA = 7000 // the DPDK side
	portB = 7001 // the kernel socket
)

var vethSeq atomic.Int32

// openOn opens a port of driver (net_af_xdp or net_af_packet) on host h's
// veth end, from a thread inside h's namespace, and closes it at cleanup.
func openOn(t *testing.T, h *testhost.Host, driver string, o Options) *Port {
	t.Helper()
	needEAL(t)
	o.VDev = fmt.Sprintf("%s_v%d,iface=%s", driver, vethSeq.Add(1), h.Iface)
	var p *Port
	err := h.Do(func() error {
		var err error
		p, err = Open(o)
		return err
	})
	if errors.Is(err, dgramio.ErrNotSupported) {
		testutil.Skip(t, err.Error())
	}
	if err != nil {
		t.Fatalf("open %s: %v", o.VDev, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// listenB opens a kernel UDP socket on B's address.
func listenB(t *testing.T, b *testhost.Host) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	err := b.Do(func() error {
		var err error
		c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(b.Addr, portB)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echo answers every UDP datagram to portA on p with the same payload,
// until stop is closed, counting what it echoed and what it ignored.
type echo struct {
	p                 *Port
	echoed, other, tx atomic.Uint64
	refused           atomic.Uint64
	stop              chan struct{}
	done              sync.WaitGroup
}

func startEcho(t *testing.T, p *Port, a, b *testhost.Host) *echo {
	t.Helper()
	tmpl := newUDPFrame(p.MAC(), b.MAC, netip.AddrPortFrom(a.Addr, portA), netip.AddrPortFrom(b.Addr, portB))
	e := &echo{p: p, stop: make(chan struct{})}
	buf := make([]byte, 2048)
	deliver := func(f []byte) {
		payload, ok := parseUDP(f, p.MAC(), a.Addr, portA)
		if !ok {
			e.other.Add(1)
			return
		}
		n := tmpl.build(buf, payload)
		if !p.TxFrame(buf[:n]) {
			e.refused.Add(1)
			return
		}
		e.echoed.Add(1)
	}
	e.done.Add(1)
	go func() {
		defer e.done.Done()
		for {
			select {
			case <-e.stop:
				return
			default:
			}
			if p.RxFrames(32, deliver) > 0 {
				p.Kick()
			} else {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}()
	t.Cleanup(e.halt)
	return e
}

func (e *echo) halt() {
	select {
	case <-e.stop:
	default:
		close(e.stop)
	}
	e.done.Wait()
}

// pingPong sends n numbered datagrams from c to to, at most window
// outstanding, and reads the answers; it fails the test on a loss, with
// the port's counters.
func pingPong(t *testing.T, c *net.UDPConn, to netip.AddrPort, n, window int, p *Port) {
	t.Helper()
	seen := make([]bool, n)
	msg := make([]byte, 100)
	in := make([]byte, 2048)
	sent, got := 0, 0
	for got < n {
		for sent < n && sent-got < window {
			binary.BigEndian.PutUint32(msg, uint32(sent))
			if _, err := c.WriteToUDPAddrPort(msg, to); err != nil {
				t.Fatalf("send %d: %v", sent, err)
			}
			sent++
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		k, _, err := c.ReadFromUDPAddrPort(in)
		if err != nil {
			t.Fatalf("after %d sent, %d answered: %v; port stats %+v", sent, got, err, p.Stats())
		}
		if k != len(msg) {
			t.Fatalf("answer of %d bytes, want %d", k, len(msg))
		}
		seq := binary.BigEndian.Uint32(in)
		if int(seq) >= n || seen[seq] {
			t.Fatalf("answer %d unexpected or twice", seq)
		}
		seen[seq] = true
		got++
	}
}

func layerOf(s interface {
	Counter(string, string) (uint64, bool)
}, name string) uint64 {
	v, _ := s.Counter("dpdk", name)
	return v
}

// checkClean asserts that the interface is as it was found: promiscuous
// flag, no XDP program, and no EAL files under /var/run/dpdk.
func checkClean(t *testing.T, h *testhost.Host, promiscBefore bool) {
	t.Helper()
	if on, err := h.Promisc(); err != nil || on != promiscBefore {
		t.Errorf("promiscuous after Close: %v (%v), want %v", on, err, promiscBefore)
	}
	l, err := h.Link()
	if err != nil {
		t.Fatal(err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached {
		t.Errorf("XDP program %d left on %s", x.ProgId, h.Iface)
	}
	if dir := RuntimeDir(); dir != "" {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind", dir)
		}
		left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), "dgramio_*"))
		for _, d := range left {
			if strings.HasSuffix(d, fmt.Sprintf("_%d", os.Getpid())) {
				t.Errorf("%s left behind", d)
			}
		}
	}
}

// eachDriver runs fn as a subtest for each vdev driver on a veth pair of
// its own (the EAL needed).
func eachDriver(t *testing.T, fn func(t *testing.T, driver string, pair *testhost.Pair)) {
	for _, driver := range []string{"net_af_xdp", "net_af_packet"} {
		t.Run(driver, func(t *testing.T) {
			needEAL(t)
			fn(t, driver, hosttest.New(t, testhost.Options{}))
		})
	}
}

// openRefused opens o in h's namespace, expecting a failure whose message
// contains want (what it must say, described by what), and returns the
// error.
func openRefused(t *testing.T, h *testhost.Host, o Options, want, what string) error {
	t.Helper()
	var got error
	err := h.Do(func() error {
		p, err := Open(o)
		if err == nil {
			p.Close()
			return errors.New("opened")
		}
		got = err
		t.Logf("%v", err)
		if !strings.Contains(err.Error(), want) {
			return fmt.Errorf("error %q does not %s", err, what)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestVethEcho runs 10k datagrams from a kernel UDP socket in namespace B
// through the DPDK port on A's veth end and back, for each vdev driver, and
// checks that every frame is accounted for in the counters and that Close
// leaves the interface as it was.
func TestVethEcho(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string, pair *testhost.Pair) {
		a, b := pair.A, pair.B
		promiscBefore, err := a.Promisc()
		if err != nil {
			t.Fatal(err)
		}
		p := openOn(t, a, driver, Options{})
		info := p.Info()
		if info.Driver != driver || info.Iface != a.Iface {
			t.Fatalf("info %+v", info)
		}
		if p.MAC().String() != a.MAC.String() {
			t.Fatalf("port MAC %v, interface MAC %v", p.MAC(), a.MAC)
		}
		if err := b.AddNeigh(a.Addr, p.MAC()); err != nil {
			t.Fatal(err)
		}
		c := listenB(t, b)
		e := startEcho(t, p, a, b)

		const n = 10000
		pingPong(t, c, netip.AddrPortFrom(a.Addr, portA), n, 64, p)
		e.halt()

		s := p.Stats()
		t.Logf("%s: echoed %d, other %d; stats %+v", driver, e.echoed.Load(), e.other.Load(), s)
		if e.echoed.Load() != n || e.refused.Load() != 0 {
			t.Fatalf("echoed %d refused %d, want %d and 0", e.echoed.Load(), e.refused.Load(), n)
		}
		if s.RxFrames != e.echoed.Load()+e.other.Load() {
			t.Errorf("RxFrames %d != echoed %d + other %d", s.RxFrames, e.echoed.Load(), e.other.Load())
		}
		if s.TxFrames != n || s.TxDropped != 0 || s.TxRingFull != 0 || s.RxDropped != 0 {
			t.Errorf("TxFrames %d TxDropped %d TxRingFull %d RxDropped %d", s.TxFrames, s.TxDropped, s.TxRingFull, s.RxDropped)
		}
		var cs dgramio.Stats
		cs.Layers = s.Layers
		ip, op := layerOf(&cs, "ipackets"), layerOf(&cs, "opackets")
		own, multi := layerOf(&cs, "rx_own"), layerOf(&cs, "rx_multiseg")
		if op != s.TxFrames {
			t.Errorf("opackets %d != TxFrames %d", op, s.TxFrames)
		}
		if ip != s.RxFrames+own+multi {
			t.Errorf("ipackets %d != RxFrames %d + rx_own %d + rx_multiseg %d", ip, s.RxFrames, own, multi)
		}
		if driver == "net_af_xdp" && own != 0 {
			t.Errorf("rx_own %d on net_af_xdp, which never sees our frames", own)
		}
		if driver == "net_af_packet" && own == 0 {
			// A's kernel still has the address: it answers the
			// datagrams with ICMP port unreachable, which the packet
			// socket sees as outgoing frames with our MAC.
			t.Errorf("rx_own 0 on net_af_packet: the kernel's own frames were not seen or not filtered")
		}
		if err := p.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		t.Logf("notes: %q", p.Info().Notes)
		checkClean(t, a, promiscBefore)
	})
}

// TestVethPromiscRestored: an interface that was promiscuous before Open
// stays so, and one that was not is not left so.
func TestVethPromiscRestored(t *testing.T) {
	for _, driver := range []string{"net_af_xdp", "net_af_packet"} {
		for _, before := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/promisc=%v", driver, before), func(t *testing.T) {
				needEAL(t)
				pair := hosttest.New(t, testhost.Options{})
				if err := pair.A.SetPromisc(before); err != nil {
					t.Fatal(err)
				}
				p := openOn(t, pair.A, driver, Options{Promiscuous: !before})
				if on, _ := pair.A.Promisc(); on != true && !before {
					// Promiscuous asked for: the PMD must have set it.
					t.Errorf("Promiscuous asked, interface not promiscuous")
				}
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
				checkClean(t, pair.A, before)
			})
		}
	}
}

// TestVethJumboRefused: net_af_packet in DPDK 22.11 takes no frame over
// 1518 bytes; a jumbo MTU is refused with DPDK's reason, and the
// interface's MTU is left as it was.
func TestVethJumboRefused(t *testing.T) {
	needEAL(t)
	pair := hosttest.New(t, testhost.Options{})
	l, err := pair.A.Link()
	if err != nil {
		t.Fatal(err)
	}
	before := l.Attrs().MTU
	vdev := fmt.Sprintf("net_af_packet_j%d,iface=%s", vethSeq.Add(1), pair.A.Iface)
	openRefused(t, pair.A, Options{VDev: vdev, MTU: 4000}, "max frame size", "give DPDK's reason")
	if l, err = pair.A.Link(); err != nil || l.Attrs().MTU != before {
		t.Fatalf("interface MTU %d (%v), want %d", l.Attrs().MTU, err, before)
	}
	checkClean(t, pair.A, false)
}

// TestVethBadVdev: a vdev on an existing interface that the PMD refuses
// gives an error naming the device and DPDK's reason, and leaves nothing.
func TestVethBadVdev(t *testing.T) {
	needEAL(t)
	pair := hosttest.New(t, testhost.Options{})
	a := pair.A
	bad := fmt.Sprintf("net_af_xdp_bad%d,iface=%s,start_queue=7", vethSeq.Add(1), a.Iface)
	openRefused(t, a, Options{VDev: bad, LinkWait: time.Second}, "net_af_xdp_bad", "name the device")
	// From a thread outside the namespace the interface does not exist.
	if _, err := Open(Options{Iface: a.Iface}); err == nil || !strings.Contains(err.Error(), a.Iface) {
		t.Fatalf("open outside the namespace: %v", err)
	}
	checkClean(t, a, false)
}

// TestVethReopen: net_af_xdp opened and closed five times back to back on
// one interface. DPDK 22.11 leaves the UMEM's AF_XDP socket open on close
// (Close closes it), and the kernel frees a queue a few milliseconds after
// its socket closes (Open retries): each open must work, and no socket of
// the PMD may stay open. While a port is open, its sockets are
// close-on-exec, and the XDP program on the interface is the one the port
// attached through its own link.
func TestVethReopen(t *testing.T) {
	needEAL(t)
	pair := hosttest.New(t, testhost.Options{})
	for i := 0; i < 5; i++ {
		err := pair.A.Do(func() error {
			p, err := Open(Options{VDev: fmt.Sprintf("net_af_xdp_r%d,iface=%s", vethSeq.Add(1), pair.A.Iface)})
			if err != nil {
				return err
			}
			defer p.Close()
			all := processSockets(unix.AF_XDP, false)
			if len(all) == 0 || len(p.xsks) == 0 {
				return fmt.Errorf("AF_XDP sockets seen while the port is open: %d, recorded: %d", len(all), len(p.xsks))
			}
			if inh := dpdkXSKs(); len(inh) != 0 {
				return fmt.Errorf("AF_XDP sockets without close-on-exec: %v", inh)
			}
			if id, err := xdpProgID(pair.A.Iface); err != nil || id == 0 || id != p.Info().XDPProg {
				return fmt.Errorf("XDP program on the interface %d (%v), the port's %d; notes %q", id, err, p.Info().XDPProg, p.Info().Notes)
			}
			return p.Close()
		})
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if left := processSockets(unix.AF_XDP, false); len(left) != 0 {
			t.Fatalf("round %d: AF_XDP sockets left open: %v", i, left)
		}
	}
	checkClean(t, pair.A, false)
}

// TestVethFlood: B's kernel floods A while nobody polls the port, so its
// small RX ring overflows. Every datagram B sent is then either received
// or in a loss counter of the port (net_af_xdp: xsk rx_ring_full;
// net_af_packet: the packet socket's tp_drops).
func TestVethFlood(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string, pair *testhost.Pair) {
		a, b := pair.A, pair.B
		if driver == "net_af_packet" {
			// Else A's kernel answers each datagram with ICMP.
			if err := a.DelAddr(); err != nil {
				t.Fatal(err)
			}
		}
		p := openOn(t, a, driver, Options{RxDesc: 64})
		if err := b.AddNeigh(a.Addr, p.MAC()); err != nil {
			t.Fatal(err)
		}
		c := listenB(t, b)
		const n = 3000
		msg := make([]byte, 100)
		to := netip.AddrPortFrom(a.Addr, portA)
		for i := 0; i < n; i++ {
			if _, err := c.WriteToUDPAddrPort(msg, to); err != nil {
				t.Fatal(err)
			}
		}
		got := 0
		for idle := 0; idle < 200; {
			k := p.RxFrames(64, func(f []byte) {
				if _, ok := parseUDP(f, p.MAC(), a.Addr, portA); ok {
					got++
				}
			})
			if k == 0 {
				idle++
				time.Sleep(time.Millisecond)
			} else {
				idle = 0
			}
		}
		s := p.Stats()
		var lost uint64
		for _, l := range s.Layers {
			if l.Loss {
				lost += l.Value
			}
		}
		t.Logf("%s: sent %d, received %d, lost %d, RxDropped %d; %v", driver, n, got, lost, s.RxDropped, s.Layers)
		if lost == 0 {
			t.Errorf("nothing lost: the flood did not overflow a ring of %d", p.Info().RxDesc)
		}
		if uint64(got)+lost != n || s.RxDropped != lost {
			t.Errorf("received %d + lost %d != sent %d (RxDropped %d)", got, lost, n, s.RxDropped)
		}
	})
}

// TestVethLinkWait: with the peer down, Open waits LinkWait for carrier and
// then fails saying so, leaving nothing; a peer that comes up during the
// wait lets Open succeed.
func TestVethLinkWait(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string, pair *testhost.Pair) {
		a, b := pair.A, pair.B
		if err := b.SetLinkUp(false); err != nil {
			t.Fatal(err)
		}
		vdev := func() string { return fmt.Sprintf("%s_w%d,iface=%s", driver, vethSeq.Add(1), a.Iface) }
		openRefused(t, a, Options{VDev: vdev(), LinkWait: 300 * time.Millisecond}, "still down", "say the link is down")
		checkClean(t, a, false)

		go func() {
			time.Sleep(200 * time.Millisecond)
			b.SetLinkUp(true)
		}()
		err := a.Do(func() error {
			p, err := Open(Options{VDev: vdev(), LinkWait: 20 * time.Second})
			if err == nil {
				err = p.Close()
			}
			return err
		})
		if err != nil {
			t.Fatalf("open while the peer comes up: %v", err)
		}
		checkClean(t, a, false)
	})
}

// TestVethLinkDown: with the peer down, Kick neither hangs nor loses count:
// what the device did not take is in TxDropped.
func TestVethLinkDown(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string, pair *testhost.Pair) {
		a, b := pair.A, pair.B
		p := openOn(t, a, driver, Options{TxWait: 2 * time.Millisecond})
		// The link goes down under a running port (a flap).
		if err := b.SetLinkUp(false); err != nil {
			t.Fatal(err)
		}
		tmpl := newUDPFrame(p.MAC(), b.MAC, netip.AddrPortFrom(a.Addr, portA), netip.AddrPortFrom(b.Addr, portB))
		buf := make([]byte, 2048)
		payload := make([]byte, 100)
		total := 0
		for round := 0; round < 20; round++ {
			for i := 0; i < 256; i++ {
				if p.TxFrame(buf[:tmpl.build(buf, payload)]) {
					total++
				}
			}
			if err := p.Kick(); err != nil {
				t.Fatal(err)
			}
		}
		s := p.Stats()
		var cs dgramio.Stats
		cs.Layers = s.Layers
		op, oerr := layerOf(&cs, "opackets"), layerOf(&cs, "oerrors")
		ifDrop, _ := cs.Counter("iface", "tx_dropped")
		t.Logf("%s with the link down: %d sent, TxDropped %d, opackets %d, oerrors %d, iface tx_dropped %d", driver, total, s.TxDropped, op, oerr, ifDrop)
		if s.TxFrames != uint64(total) || op+s.TxDropped != uint64(total) {
			t.Errorf("TxFrames %d, opackets %d + TxDropped %d != %d", s.TxFrames, op, s.TxDropped, total)
		}
		// What the PMD took but the interface could not send is in the
		// kernel's counter: nothing vanished without a count.
		if ifDrop == 0 && s.TxDropped < uint64(total) {
			t.Errorf("the PMD took %d frames into a link that is down, and no counter shows their loss", op)
		}
		if err := b.SetLinkUp(true); err != nil {
			t.Fatal(err)
		}
	})
}

// udpFrame builds Ethernet/IPv4/UDP frames between two fixed endpoints,
// for the tests (package udp imports this one, so it cannot be used here).
// The UDP checksum is left 0 (none), which IPv4 allows.
type udpFrame struct {
	hdr [42]byte
}

func newUDPFrame(src, dst net.HardwareAddr, from, to netip.AddrPort) *udpFrame {
	u := &udpFrame{}
	h := u.hdr[:]
	copy(h[0:6], dst)
	copy(h[6:12], src)
	binary.BigEndian.PutUint16(h[12:], 0x0800)
	ip := h[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	f, d := from.Addr().As4(), to.Addr().As4()
	copy(ip[12:16], f[:])
	copy(ip[16:20], d[:])
	binary.BigEndian.PutUint16(h[34:], from.Port())
	binary.BigEndian.PutUint16(h[36:], to.Port())
	return u
}

// build writes the frame carrying payload into buf and returns its length.
func (u *udpFrame) build(buf, payload []byte) int {
	copy(buf, u.hdr[:])
	ip := buf[14:34]
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	ip[10], ip[11] = 0, 0
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	binary.BigEndian.PutUint16(buf[38:], uint16(8+len(payload)))
	buf[40], buf[41] = 0, 0
	return 42 + copy(buf[42:], payload)
}

// parseUDP returns the payload of an IPv4/UDP frame to mac, addr and port.
func parseUDP(f []byte, mac net.HardwareAddr, addr netip.Addr, port uint16) ([]byte, bool) {
	if len(f) < 42 || !bytes.Equal(f[0:6], mac) || binary.BigEndian.Uint16(f[12:]) != 0x0800 ||
		f[14] != 0x45 || f[23] != 17 || netip.AddrFrom4([4]byte(f[30:34])) != addr ||
		binary.BigEndian.Uint16(f[36:]) != port {
		return nil, false
	}
	n := int(binary.BigEndian.Uint16(f[38:]))
	if n < 8 || 42+n-8 > len(f) {
		return nil, false
	}
	return f[42 : 42+n-8], true
}

// TestVethTxDroppedBeforeOpen: what the interface dropped before Open
// (here a datagram of the kernel's own, sent while the veth's other end
// was down, as the kernel's MLD report or router solicitation is when
// IPv6 comes up first on one end) is layer iface's tx_dropped_before_open,
// not its tx_dropped, which on net_af_xdp is a loss of the port's: a port
// that lost nothing counts no loss.
func TestVethTxDroppedBeforeOpen(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string, pair *testhost.Pair) {
		a, b := pair.A, pair.B
		if err := a.AddNeigh(b.Addr, b.MAC); err != nil {
			t.Fatal(err)
		}
		if err := b.SetLinkUp(false); err != nil {
			t.Fatal(err)
		}
		kernelDrops := func() uint64 {
			var n uint64
			if err := a.Do(func() error {
				l, err := a.Link()
				if err != nil {
					return err
				}
				if st := l.Attrs().Statistics; st != nil {
					n = st.TxDropped
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if err := a.Do(func() error {
			c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(b.Addr, portB)))
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("the kernel's own"))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		before := kernelDrops()
		if before == 0 {
			t.Fatal("the kernel's datagram into a veth whose other end is down was not counted in tx_dropped")
		}
		if err := b.SetLinkUp(true); err != nil {
			t.Fatal(err)
		}
		p := openOn(t, a, driver, Options{})
		var s dgramio.Stats
		s.Layers = p.Stats().Layers
		drop, _ := s.Counter("iface", "tx_dropped")
		prior, _ := s.Counter("iface", "tx_dropped_before_open")
		if drop != 0 || prior != before {
			t.Errorf("iface tx_dropped %d, tx_dropped_before_open %d; want 0 and the %d dropped before Open", drop, prior, before)
		}
		for _, c := range s.Layers {
			if c.Loss && c.Value != 0 {
				t.Errorf("a port that sent nothing counts a loss: %s.%s %d", c.Layer, c.Name, c.Value)
			}
		}
	})
}
