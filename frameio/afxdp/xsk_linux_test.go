package afxdp

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/afxdp/xdpprog"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

const (
	xskPort   = 5000 // the port the XSK takes on A
	otherPort = 5001 // a kernel socket's port on A
	peerPort  = 6000 // the kernel socket on B

	holdEnv = "AFXDP_TEST_HOLD_IFACE" // re-exec: hold an XSK until killed
)

func TestMain(m *testing.M) {
	if iface := os.Getenv(holdEnv); iface != "" {
		os.Exit(holdXSK(iface))
	}
	os.Exit(m.Run())
}

// holdXSK runs in a child process started inside a test namespace: it
// opens an XSK, says so on stdout, and waits to be killed.
func holdXSK(iface string) int {
	x, err := Open(Options{Iface: iface, Port: xskPort})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready", x.Mode())
	time.Sleep(2 * time.Minute)
	return 0
}

// openXSK opens an XSK inside h's namespace; it is closed at cleanup.
func openXSK(t *testing.T, h *testhost.Host, o Options) *XSK {
	t.Helper()
	x, err := tryOpen(h, o)
	testutil.SkipIfNotSupported(t, err)
	t.Cleanup(func() {
		if err := x.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return x
}

func tryOpen(h *testhost.Host, o Options) (*XSK, error) {
	var x *XSK
	err := h.Do(func() error {
		var err error
		x, err = Open(o)
		return err
	})
	return x, err
}

// udpConn makes a kernel UDP socket in h's namespace bound to laddr and,
// when raddr is valid, connected to it.
func udpConn(t *testing.T, h *testhost.Host, laddr, raddr netip.AddrPort) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	err := h.Do(func() error {
		var err error
		if raddr.IsValid() {
			c, err = net.DialUDP("udp4", net.UDPAddrFromAddrPort(laddr), net.UDPAddrFromAddrPort(raddr))
		} else {
			c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(laddr))
		}
		if err == nil {
			err = c.SetReadBuffer(4 << 20)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// payload returns the test message seq of n bytes: the sequence number,
// then bytes derived from it.
func payload(seq uint32, n int) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint32(b, seq)
	for i := 4; i < n; i++ {
		b[i] = byte(seq*7 + uint32(i))
	}
	return b
}

// checkPayload returns the sequence number of b, or an error if b is not a
// payload of n bytes.
func checkPayload(b []byte, n int) (uint32, error) {
	if len(b) != n {
		return 0, fmt.Errorf("payload of %d bytes, want %d", len(b), n)
	}
	seq := binary.BigEndian.Uint32(b)
	for i := 4; i < n; i++ {
		if b[i] != byte(seq*7+uint32(i)) {
			return seq, fmt.Errorf("seq %d: byte %d is %#x, want %#x", seq, i, b[i], byte(seq*7+uint32(i)))
		}
	}
	return seq, nil
}

// buildUDP builds an Ethernet/IPv4/UDP frame with correct checksums.
func buildUDP(t testing.TB, src, dst *testhost.Host, sport, dport uint16, data []byte) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, Flags: layers.IPv4DontFragment,
		SrcIP: src.Addr.AsSlice(), DstIP: dst.Addr.AsSlice()}
	udp := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: src.MAC, DstMAC: dst.MAC, EthernetType: layers.EthernetTypeIPv4}, ip, udp, gopacket.Payload(data))
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// rxFrame is a frame received through the XSK, decoded.
type rxFrame struct {
	eth     *layers.Ethernet
	ip      *layers.IPv4
	udp     *layers.UDP
	payload []byte
	size    int
}

func decode(frame []byte) (rxFrame, error) {
	p := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default) // copies frame
	r := rxFrame{size: len(frame)}
	var ok bool
	if r.eth, ok = p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); !ok {
		return r, errors.New("no Ethernet header")
	}
	if r.ip, ok = p.Layer(layers.LayerTypeIPv4).(*layers.IPv4); !ok {
		return r, errors.New("no IPv4 header")
	}
	if r.udp, ok = p.Layer(layers.LayerTypeUDP).(*layers.UDP); !ok {
		return r, errors.New("no UDP header")
	}
	r.payload = r.udp.Payload
	return r, nil
}

// receive drains the XSK until n frames arrived or the deadline passed,
// sleeping in Wait between polls.
func receive(t *testing.T, x *XSK, n int, within time.Duration, each func(rxFrame)) int {
	t.Helper()
	deadline := time.Now().Add(within)
	got := 0
	for got < n && time.Now().Before(deadline) {
		k := x.RxFrames(64, func(f []byte) {
			r, err := decode(f)
			if err != nil {
				t.Errorf("frame % x: %v", f, err)
				return
			}
			each(r)
		})
		got += k
		if k == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			if err := x.Wait(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Wait: %v", err)
			}
			cancel()
		}
	}
	return got
}

func counter(t *testing.T, x *XSK, layer, name string) uint64 {
	t.Helper()
	s := x.Stats()
	v, ok := (&dgramio.Stats{Layers: s.Layers}).Counter(layer, name)
	if !ok {
		t.Fatalf("no counter %s/%s in %+v", layer, name, s.Layers)
	}
	return v
}

// xdpAttached returns the XDP attachment of h's veth end as netlink shows it.
func xdpAttached(t *testing.T, h *testhost.Host) *netlink.LinkXdp {
	t.Helper()
	l, err := h.Link()
	if err != nil {
		t.Fatal(err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached && x.ProgId != 0 {
		return x
	}
	return nil
}

func waitDetached(t *testing.T, h *testhost.Host, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for xdpAttached(t, h) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("an XDP program (id %d) is still attached to %s after %v", xdpAttached(t, h).ProgId, h.Iface, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Netlink's IFLA_XDP_ATTACHED values.
const (
	xdpAttachedDrv = 1
	xdpAttachedSKB = 2
)

func TestReceiveFromKernelSocket(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	x := openXSK(t, p.A, Options{Iface: p.A.Iface, Port: xskPort})
	if x.Mode() != "driver copy" {
		t.Errorf("veth: mode %q, want \"driver copy\" (native XDP, no zero-copy)", x.Mode())
	}
	if a := xdpAttached(t, p.A); a == nil || a.AttachMode != xdpAttachedDrv {
		t.Fatalf("no driver-mode program on %s: %+v", p.A.Iface, a)
	}
	if x.MTU() != 1500 || x.MAC().String() != p.A.MAC.String() {
		t.Errorf("MTU %d MAC %s, want 1500 and %s", x.MTU(), x.MAC(), p.A.MAC)
	}
	c := udpConn(t, p.B, netip.AddrPortFrom(p.B.Addr, peerPort), netip.AddrPortFrom(p.A.Addr, xskPort))

	// Warm up: B resolves A's MAC through A's kernel (the program passes
	// ARP), and the first datagrams arrive.
	const size = 64
	warm := 0
	deadline := time.Now().Add(20 * time.Second)
	for warm == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("nothing arrived through the XSK; stats %+v", x.Stats())
		}
		if _, err := c.Write(payload(1<<31, size)); err != nil {
			t.Fatal(err)
		}
		warm += receive(t, x, 1, 200*time.Millisecond, func(rxFrame) {})
	}
	time.Sleep(50 * time.Millisecond)
	warm += x.RxFrames(1<<20, func([]byte) {})
	before := x.Stats()
	redirBefore := counter(t, x, "xdp-prog", "redirected")

	const n = 10000
	seen := make([]bool, n)
	received, bytes := 0, 0
	for sent := 0; sent < n; {
		burst := min(256, n-sent)
		for i := 0; i < burst; i++ {
			if _, err := c.Write(payload(uint32(sent), size)); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		// Let the receiver catch up before the next burst, so the RX ring
		// (2048) never fills on a slow machine.
		received += receive(t, x, sent-received, 20*time.Second, func(r rxFrame) {
			seq, err := checkPayload(r.payload, size)
			switch {
			case err != nil:
				t.Error(err)
			case seq >= n:
				t.Errorf("unexpected seq %d", seq)
			case seen[seq]:
				t.Errorf("seq %d twice", seq)
			default:
				seen[seq] = true
			}
			if r.eth.DstMAC.String() != p.A.MAC.String() || r.ip.SrcIP.String() != p.B.Addr.String() ||
				r.ip.DstIP.String() != p.A.Addr.String() || r.udp.DstPort != xskPort || r.udp.SrcPort != peerPort {
				t.Errorf("frame headers %s→%s %s→%s :%d→:%d", r.eth.SrcMAC, r.eth.DstMAC, r.ip.SrcIP, r.ip.DstIP, r.udp.SrcPort, r.udp.DstPort)
			}
			bytes += r.size
		})
		if received != sent {
			t.Fatalf("%d of %d datagrams arrived; stats %+v", received, sent, x.Stats())
		}
	}
	s := x.Stats()
	if d := s.RxFrames - before.RxFrames; d != n {
		t.Errorf("Stats.RxFrames grew by %d, want %d", d, n)
	}
	if d := s.RxBytes - before.RxBytes; d != uint64(bytes) {
		t.Errorf("Stats.RxBytes grew by %d, want %d", d, bytes)
	}
	if d := counter(t, x, "xdp-prog", "redirected") - redirBefore; d != n {
		t.Errorf("xdp-prog redirected grew by %d, want %d", d, n)
	}
	for _, name := range []string{"rx_dropped", "rx_ring_full", "rx_invalid_descs"} {
		if v := counter(t, x, "xsk", name); v != 0 {
			t.Errorf("xsk %s = %d, want 0", name, v)
		}
	}
	if s.RxDropped != 0 {
		t.Errorf("Stats.RxDropped = %d", s.RxDropped)
	}
	t.Logf("mode %s, %d warm-up frames, %d frames, %d syscalls on the RX side", s.Mode, warm, s.RxFrames, s.Syscalls)
}

func TestTransmitToKernelSocket(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	x := openXSK(t, p.A, Options{Iface: p.A.Iface, Port: xskPort})
	c := udpConn(t, p.B, netip.AddrPortFrom(p.B.Addr, peerPort), netip.AddrPort{})

	const n, size = 10000, 100
	sink := readSeqs(c, netip.AddrPortFrom(p.A.Addr, xskPort), n, size)
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = buildUDP(t, p.A, p.B, xskPort, peerPort, payload(uint32(i), size))
	}
	deadline := time.Now().Add(60 * time.Second)
	transmitPaced(t, x, frames, &sink.received, deadline)
	for sink.received.Load() < n && time.Now().Before(deadline) {
		if err := x.Kick(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	for _, err := range sink.wait() {
		t.Error(err)
	}
	if got := sink.received.Load(); got != n {
		t.Fatalf("B received %d of %d; stats %+v", got, n, x.Stats())
	}
	s := x.Stats()
	if s.TxFrames != n || s.TxBytes != uint64(n*(size+42)) {
		t.Errorf("Stats TxFrames %d TxBytes %d, want %d and %d", s.TxFrames, s.TxBytes, n, n*(size+42))
	}
	if s.TxDropped != 0 || counter(t, x, "xsk", "tx_invalid_descs") != 0 {
		t.Errorf("TX drops: %+v", s)
	}
	// Every TX frame comes back through the completion ring.
	if !waitTxFree(x, func() bool { return time.Now().Before(deadline) }) {
		t.Errorf("%d of %d TX frames back on the free list", len(x.tx.free), cap(x.tx.free))
	}
	t.Logf("mode %s: %d frames, %d syscalls (%.3f per frame), %d ring-full refusals", s.Mode, s.TxFrames, s.Syscalls,
		float64(s.Syscalls)/float64(s.TxFrames), s.TxRingFull)
}

// seqSink reads the datagrams of payload(seq, size), seq < n, that a kernel
// socket receives from one address, on a goroutine of its own.
type seqSink struct {
	received atomic.Int64
	done     chan struct{}
	errs     []error // written by the goroutine until done
}

// readSeqs starts reading n datagrams from `from` on c (each within 20 s);
// a wrong payload, sender or a sequence number seen twice is an error.
func readSeqs(c *net.UDPConn, from netip.AddrPort, n, size int) *seqSink {
	s := &seqSink{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		seen := make([]bool, n)
		buf := make([]byte, 2048)
		for s.received.Load() < int64(n) {
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			k, src, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				s.errs = append(s.errs, err)
				return
			}
			seq, err := checkPayload(buf[:k], size)
			switch {
			case err != nil:
				s.errs = append(s.errs, err)
			case src != from:
				s.errs = append(s.errs, fmt.Errorf("datagram from %s", src))
			case seq >= uint32(n) || seen[seq]:
				s.errs = append(s.errs, fmt.Errorf("seq %d unexpected or twice", seq))
			default:
				seen[seq] = true
			}
			s.received.Add(1)
		}
	}()
	return s
}

// wait waits for the reader to end and returns its errors.
func (s *seqSink) wait() []error { <-s.done; return s.errs }

// transmitPaced sends frames through x, 32 to a Kick, holding back while
// more than 512 are not yet received (so that a kernel socket's buffer
// does not overflow on a slow machine); past deadline it fails.
func transmitPaced(t *testing.T, x *XSK, frames [][]byte, received *atomic.Int64, deadline time.Time) {
	t.Helper()
	for sent := 0; sent < len(frames); {
		if time.Now().After(deadline) {
			t.Fatalf("sent %d of %d, %d received; stats %+v", sent, len(frames), received.Load(), x.Stats())
		}
		if int64(sent)-received.Load() > 512 {
			if err := x.Kick(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
			continue
		}
		queued := 0
		for queued < 32 && sent < len(frames) && x.TxFrame(frames[sent]) {
			sent++
			queued++
		}
		if err := x.Kick(); err != nil {
			t.Fatal(err)
		}
		if queued == 0 {
			runtime.Gosched()
		}
	}
}

// receiveOne writes datagrams of payload(i, size) on c, up to 50, until
// x receives one (200 ms each), and reports whether it did.
func receiveOne(t *testing.T, x *XSK, c *net.UDPConn, size int) bool {
	t.Helper()
	got := 0
	for i := 0; i < 50 && got == 0; i++ {
		c.Write(payload(uint32(i), size))
		got = receive(t, x, 1, 200*time.Millisecond, func(r rxFrame) {
			if _, err := checkPayload(r.payload, size); err != nil {
				t.Error(err)
			}
		})
	}
	return got > 0
}

// waitTxFree kicks x until every TX frame is back on its free list
// (through the completion ring) or more returns false; it reports
// whether all came back.
func waitTxFree(x *XSK, more func() bool) bool {
	for len(x.tx.free) != cap(x.tx.free) && more() {
		x.Kick()
		time.Sleep(time.Millisecond)
	}
	return len(x.tx.free) == cap(x.tx.free)
}

func TestKernelKeepsOtherPorts(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	x := openXSK(t, p.A, Options{Iface: p.A.Iface, Port: xskPort})
	kernel := udpConn(t, p.A, netip.AddrPortFrom(p.A.Addr, otherPort), netip.AddrPort{})
	c := udpConn(t, p.B, netip.AddrPortFrom(p.B.Addr, peerPort), netip.AddrPortFrom(p.A.Addr, otherPort))
	passBefore := counter(t, x, "xdp-prog", "pass_other_port")

	buf := make([]byte, 256)
	var got int
	for i := 0; i < 50 && got == 0; i++ { // the first may wait for ARP
		if _, err := c.Write([]byte("to the kernel")); err != nil {
			t.Fatal(err)
		}
		kernel.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		got, _, _ = kernel.ReadFromUDPAddrPort(buf)
	}
	if string(buf[:got]) != "to the kernel" {
		t.Fatalf("A's kernel socket on port %d got %q while the XSK holds port %d", otherPort, buf[:got], xskPort)
	}
	// And the kernel answers back over the same link.
	if _, err := kernel.WriteToUDPAddrPort([]byte("answer"), netip.AddrPortFrom(p.B.Addr, peerPort)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "answer" {
		t.Fatalf("B got %q, %v", buf[:n], err)
	}
	if counter(t, x, "xdp-prog", "pass_other_port") <= passBefore {
		t.Error("xdp-prog pass_other_port did not count the datagram")
	}
	if x.RxFrames(64, func([]byte) {}) != 0 {
		t.Error("the XSK received a frame for another port")
	}
}

func TestMaxFrameFits(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	for _, fs := range []int{2048, 4096} {
		t.Run(fmt.Sprint(fs), func(t *testing.T) {
			max := MaxFrame(fs)
			if max > 1514 {
				max = 1514 // the link's MTU bounds frames on the wire
			}
			x := openXSK(t, p.A, Options{Iface: p.A.Iface, Port: xskPort, FrameSize: fs, MaxFrame: max, Frames: 256})
			size := max - 42
			c := udpConn(t, p.B, netip.AddrPortFrom(p.B.Addr, peerPort), netip.AddrPortFrom(p.A.Addr, xskPort))
			var got []rxFrame
			for i := 0; i < 50 && len(got) == 0; i++ {
				if _, err := c.Write(payload(uint32(i), size)); err != nil {
					t.Fatal(err)
				}
				receive(t, x, 1, 200*time.Millisecond, func(r rxFrame) { got = append(got, r) })
			}
			if len(got) == 0 {
				t.Fatalf("no %d-byte frame arrived; stats %+v", max, x.Stats())
			}
			if got[0].size != max {
				t.Errorf("frame of %d bytes, want %d", got[0].size, max)
			}
			if _, err := checkPayload(got[0].payload, size); err != nil {
				t.Error(err)
			}
			// The same size leaves through TX; one byte more is refused.
			frame := buildUDP(t, p.A, p.B, xskPort, peerPort, payload(7, size))
			if !x.TxFrame(frame) {
				t.Fatal("TxFrame refused a frame of MaxFrame bytes")
			}
			if x.TxFrame(append(frame, 0)) {
				t.Error("TxFrame took a frame longer than MaxFrame")
			}
			if err := x.Kick(); err != nil {
				t.Fatal(err)
			}
			if counter(t, x, "xsk", "tx_oversize") != 1 {
				t.Error("tx_oversize did not count the refused frame")
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, 4096)
			for {
				n, err := c.Read(buf)
				if err != nil {
					t.Fatalf("B: %v", err)
				}
				if seq, err := checkPayload(buf[:n], size); err == nil && seq == 7 {
					break
				}
			}
		})
	}
	// One byte beyond what an RX buffer holds is refused before anything
	// is made.
	_, err := tryOpen(p.A, Options{Iface: p.A.Iface, Port: xskPort, FrameSize: 2048, MaxFrame: MaxFrame(2048) + 1})
	var ce *dgramio.ConfigError
	if !errors.As(err, &ce) || ce.Field != "MaxFrame" {
		t.Errorf("oversized MaxFrame: %v, want a ConfigError", err)
	}
	if xdpAttached(t, p.A) != nil {
		t.Error("a refused Open left a program attached")
	}
}

func TestCloseDetaches(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	x, err := tryOpen(p.A, Options{Iface: p.A.Iface, Port: xskPort})
	testutil.SkipIfNotSupported(t, err)
	a := xdpAttached(t, p.A)
	if a == nil {
		t.Fatal("no program attached after Open")
	}
	info, err := x.objs.Program.Info()
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := info.ID(); uint32(id) != a.ProgId {
		t.Errorf("attached program id %d, ours %d", a.ProgId, id)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	waitDetached(t, p.A, 10*time.Second)
	if err := x.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if s := x.Stats(); s.Mode != "driver copy" {
		t.Errorf("Stats after Close: %+v", s)
	}
	// The queue is free again: a new socket binds it.
	y := openXSK(t, p.A, Options{Iface: p.A.Iface, Port: xskPort})
	if xdpAttached(t, p.A) == nil {
		t.Error("no program after reopening")
	}
	_ = y
}

func TestSIGKILLDetaches(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	cmd := p.A.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+p.A.Iface)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := p.A.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case l := <-line:
		if l == "" || strings.HasPrefix(l, "error") {
			t.Fatalf("helper: %q", l)
		}
		if strings.Contains(l, "not supported") {
			testutil.Skip(t, l)
		}
		t.Logf("helper: %s", l)
	case <-time.After(60 * time.Second):
		t.Fatal("helper did not open its XSK within 60 s")
	}
	if xdpAttached(t, p.A) == nil {
		t.Fatal("the helper's program is not attached")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waitDetached(t, p.A, 10*time.Second)
}

func TestModes(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	t.Run("skb forced", func(t *testing.T) {
		x := openXSK(t, p.A, Options{Iface: p.A.Iface, Port: xskPort, Mode: "skb"})
		if x.Mode() != "skb copy" || x.Fallback() != nil {
			t.Errorf("mode %q fallback %v, want \"skb copy\" and none", x.Mode(), x.Fallback())
		}
		if a := xdpAttached(t, p.A); a == nil || a.AttachMode != xdpAttachedSKB {
			t.Errorf("attachment %+v, want SKB mode", a)
		}
		c := udpConn(t, p.B, netip.AddrPortFrom(p.B.Addr, peerPort), netip.AddrPortFrom(p.A.Addr, xskPort))
		if !receiveOne(t, x, c, 32) {
			t.Fatalf("nothing received in SKB mode; stats %+v", x.Stats())
		}
	})
	t.Run("zerocopy refused on veth", func(t *testing.T) {
		_, err := tryOpen(p.A, Options{Iface: p.A.Iface, Port: xskPort, Copy: "zerocopy"})
		var ue *dgramio.UnsupportedError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "zero-copy") {
			t.Fatalf("zero-copy on veth: %v, want an UnsupportedError about zero-copy", err)
		}
		if xdpAttached(t, p.A) != nil {
			t.Error("the failed Open left a program attached")
		}
	})
	t.Run("copy forced", func(t *testing.T) {
		x := openXSK(t, p.A, Options{Iface: p.A.Iface, Port: xskPort, Copy: "copy", Mode: "driver"})
		if x.Mode() != "driver copy" {
			t.Errorf("mode %q", x.Mode())
		}
	})
	t.Run("lo falls back to skb, reported", func(t *testing.T) {
		x := openXSK(t, p.A, Options{Iface: "lo", Port: xskPort})
		if x.Mode() != "skb copy (driver mode refused)" || x.Fallback() == nil {
			t.Errorf("lo: mode %q fallback %v", x.Mode(), x.Fallback())
		}
		if x.Stats().Mode != x.Mode() {
			t.Errorf("Stats.Mode %q", x.Stats().Mode)
		}
		// Loopback traffic to our port reaches the socket too.
		c := udpConn(t, p.A, netip.MustParseAddrPort("127.0.0.1:6000"), netip.MustParseAddrPort("127.0.0.1:5000"))
		if !receiveOne(t, x, c, 40) {
			t.Errorf("nothing received on lo; stats %+v", x.Stats())
		}
	})
	t.Run("driver forced on lo", func(t *testing.T) {
		_, err := tryOpen(p.A, Options{Iface: "lo", Port: xskPort, Mode: "driver"})
		if !errors.Is(err, dgramio.ErrNotSupported) {
			t.Errorf("driver mode on lo: %v, want ErrNotSupported", err)
		}
	})
	t.Run("queue out of range", func(t *testing.T) {
		_, err := tryOpen(p.A, Options{Iface: p.A.Iface, Port: xskPort, QueueID: 3})
		var ce *dgramio.ConfigError
		if !errors.As(err, &ce) || ce.Field != "QueueID" {
			t.Errorf("queue 3 of 1: %v", err)
		}
	})
}

func TestProgramRedirectsToSocket(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	x := openXSK(t, p.A, Options{Iface: p.A.Iface, Port: xskPort})
	before, err := x.ProgramCounters()
	if err != nil {
		t.Fatal(err)
	}
	// BPF_PROG_TEST_RUN: rx_queue_index is 0, where our socket is.
	ret, err := x.objs.Program.Run(&ebpf.RunOptions{Data: buildUDP(t, p.B, p.A, peerPort, xskPort, []byte("x"))})
	if err != nil {
		t.Fatal(err)
	}
	if ret != 4 {
		t.Errorf("action %d, want XDP_REDIRECT (4)", ret)
	}
	ret, err = x.objs.Program.Run(&ebpf.RunOptions{Data: buildUDP(t, p.B, p.A, peerPort, otherPort, []byte("x"))})
	if err != nil || ret != 2 {
		t.Errorf("other port: action %d (%v), want XDP_PASS (2)", ret, err)
	}
	after, err := x.ProgramCounters()
	if err != nil {
		t.Fatal(err)
	}
	if after[xdpprog.Redirected]-before[xdpprog.Redirected] != 1 || after[xdpprog.PassOtherPort]-before[xdpprog.PassOtherPort] != 1 {
		t.Errorf("counters before %v after %v", before, after)
	}
}

func TestWait(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	x, err := tryOpen(p.A, Options{Iface: p.A.Iface, Port: xskPort})
	testutil.SkipIfNotSupported(t, err)
	defer x.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if err := x.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait on an idle socket: %v, want DeadlineExceeded", err)
	}
	cancel()

	c := udpConn(t, p.B, netip.AddrPortFrom(p.B.Addr, peerPort), netip.AddrPortFrom(p.A.Addr, xskPort))
	woke := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		woke <- x.Wait(ctx)
	}()
	stop := make(chan struct{})
	go func() { // until the Wait returns (ARP may delay the first)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				c.Write([]byte("wake up"))
			}
		}
	}()
	if err := <-woke; err != nil {
		t.Errorf("Wait with a frame coming: %v", err)
	}
	close(stop)
	if n := x.RxFrames(64, func([]byte) {}); n == 0 {
		t.Error("Wait returned but RxFrames found nothing")
	}

	// Close ends a Wait in progress with net.ErrClosed.
	time.Sleep(150 * time.Millisecond)
	x.RxFrames(1<<10, func([]byte) {})
	go func() {
		woke <- x.Wait(context.Background())
	}()
	time.Sleep(50 * time.Millisecond)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Wait during Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not end the Wait")
	}
	if err := x.Wait(context.Background()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Wait after Close: %v", err)
	}
	waitDetached(t, p.A, 10*time.Second)
}

// TestInterrupt: Interrupt ends a Wait in progress with nil, or the next
// one when none is; one Interrupt ends one Wait (its eventfd is drained);
// Wait and Interrupt allocate nothing; after Close, Interrupt does nothing.
func TestInterrupt(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	x, err := tryOpen(p.A, Options{Iface: p.A.Iface, Port: xskPort})
	testutil.SkipIfNotSupported(t, err)
	defer x.Close()

	woke := make(chan error, 1)
	go func() { woke <- x.Wait(context.Background()) }()
	time.Sleep(20 * time.Millisecond)
	x.Interrupt()
	select {
	case err := <-woke:
		if err != nil {
			t.Fatalf("interrupted Wait: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Interrupt did not end the Wait")
	}
	x.Interrupt()
	if err := x.Wait(context.Background()); err != nil {
		t.Fatalf("Wait after Interrupt: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	if err := x.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait after the Interrupt was taken: %v, want DeadlineExceeded", err)
	}
	cancel()
	if n := testing.AllocsPerRun(100, func() {
		x.Interrupt()
		x.Wait(context.Background())
	}); n != 0 && !raceEnabled {
		t.Errorf("%.1f allocations per Interrupt and Wait", n)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	x.Interrupt()
	if err := x.Wait(context.Background()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Wait after Close: %v", err)
	}
}

// TestCloseCountsLeftovers: Close counts the frames TxFrame accepted that
// never left (no Kick) as tx_unsent_at_close and the frames left unread in
// the RX ring as rx_unread_at_close, both losses, both in Stats after
// Close, which still shows the kernel's and the program's counters as
// Close read them.
func TestCloseCountsLeftovers(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	x, err := tryOpen(p.A, Options{Iface: p.A.Iface, Port: xskPort})
	testutil.SkipIfNotSupported(t, err)
	defer x.Close()
	c := udpConn(t, p.B, netip.AddrPortFrom(p.B.Addr, peerPort), netip.AddrPortFrom(p.A.Addr, xskPort))
	// B sends until frames arrive; nobody reads them.
	for deadline := time.Now().Add(20 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatalf("nothing arrived; stats %+v", x.Stats())
		}
		if _, err := c.Write(payload(1, 64)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := x.Wait(ctx)
		cancel()
		if err == nil {
			break
		}
	}
	const burst = 20
	for i := 0; i < burst; i++ {
		if _, err := c.Write(payload(uint32(i+2), 64)); err != nil {
			t.Fatal(err)
		}
	}
	redirected := func() uint64 { return counter(t, x, "xdp-prog", "redirected") }
	for deadline := time.Now().Add(20 * time.Second); redirected() < burst+1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d frames redirected", redirected(), burst+1)
		}
	}
	const unsent = 7
	for i := 0; i < unsent; i++ {
		if !x.TxFrame(make([]byte, 60)) {
			t.Fatal("TxFrame refused")
		}
	}
	if got := counter(t, x, "xsk", "tx_unsent_at_close") + counter(t, x, "xsk", "rx_unread_at_close"); got != 0 {
		t.Fatalf("close counters %d before Close", got)
	}
	redir := redirected()
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	s := x.Stats()
	cs := dgramio.Stats{Layers: s.Layers}
	unread, _ := cs.Counter("xsk", "rx_unread_at_close")
	left, _ := cs.Counter("xsk", "tx_unsent_at_close")
	if unread != redir || left != unsent {
		t.Errorf("after Close: rx_unread_at_close %d (want %d, all redirected), tx_unsent_at_close %d (want %d)", unread, redir, left, unsent)
	}
	if s.RxDropped < unread || s.TxDropped < left {
		t.Errorf("RxDropped %d TxDropped %d do not include them", s.RxDropped, s.TxDropped)
	}
	if got := cs.Lost(); got < unread+left {
		t.Errorf("Lost() %d, want at least %d: the close counters are losses", got, unread+left)
	}
	if v, ok := cs.Counter("xdp-prog", "redirected"); !ok || v != redir {
		t.Errorf("after Close: xdp-prog redirected %d (%v), want %d as Close read it", v, ok, redir)
	}
	if _, ok := cs.Counter("xsk", "rx_dropped"); !ok {
		t.Errorf("after Close: the socket's XDP_STATISTICS are gone: %+v", s.Layers)
	}
}

// TestEchoTwoGoroutines runs the receive side and the transmit side of one
// XSK in two goroutines at once (the FrameIO threading rule; run it with
// -race): a kernel UDP socket in B sends 10k datagrams, A's RX goroutine
// hands their sequence numbers to A's TX goroutine, which echoes each back.
func TestEchoTwoGoroutines(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	x := openXSK(t, p.A, Options{Iface: p.A.Iface, Port: xskPort})
	c := udpConn(t, p.B, netip.AddrPortFrom(p.B.Addr, peerPort), netip.AddrPortFrom(p.A.Addr, xskPort))
	// B resolves A through A's kernel (ARP passes); A's frames carry B's MAC.
	const n, size, window = 10000, 80, 256
	replies := make([][]byte, n)
	for i := range replies {
		replies[i] = buildUDP(t, p.A, p.B, xskPort, peerPort, payload(uint32(i), size))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	seqs := make(chan uint32, n)
	var wg sync.WaitGroup
	var rxErr, txErr error
	wg.Add(2)
	go func() { defer wg.Done(); rxErr = echoRX(ctx, x, n, size, seqs) }()
	go func() { defer wg.Done(); txErr = echoTX(ctx, x, replies, seqs) }()
	echoed := sendWindowed(t, ctx, c, x, n, size, window)
	cancel()
	wg.Wait()
	if rxErr != nil || txErr != nil {
		t.Fatalf("rx: %v, tx: %v", rxErr, txErr)
	}
	if echoed != n {
		t.Fatalf("%d of %d echoed", echoed, n)
	}
	s := x.Stats()
	cs := dgramio.Stats{Layers: s.Layers}
	if s.RxFrames < n || s.TxFrames != n || cs.Lost() != 0 {
		t.Errorf("stats: %+v (lost %d)", s, cs.Lost())
	}
	t.Logf("%s: %d echoed, %d syscalls", s.Mode, echoed, s.Syscalls)
}

// echoRX is the receive side of TestEchoTwoGoroutines: it takes n frames
// of payload(seq, size) from x, waiting in Wait when idle, and hands their
// sequence numbers to seqs, which it closes at the end. A bad frame is
// its error.
func echoRX(ctx context.Context, x *XSK, n, size int, seqs chan<- uint32) error {
	defer close(seqs)
	var bad error
	for got := 0; got < n && ctx.Err() == nil; {
		k := x.RxFrames(32, func(f []byte) {
			r, err := decode(f)
			if err == nil {
				var seq uint32
				if seq, err = checkPayload(r.payload, size); err == nil && seq < uint32(n) {
					seqs <- seq
					return
				}
			}
			if bad == nil {
				bad = fmt.Errorf("bad frame % x: %v", f, err)
			}
		})
		got += k
		if k == 0 {
			wctx, wcancel := context.WithTimeout(ctx, 20*time.Millisecond)
			x.Wait(wctx)
			wcancel()
		}
	}
	return bad
}

// echoTX is the transmit side: it sends replies[seq] for each seq, kicking
// when the ring is full and when no seq is waiting, then kicks until every
// TX frame is back.
func echoTX(ctx context.Context, x *XSK, replies [][]byte, seqs <-chan uint32) error {
	for seq := range seqs {
		for !x.TxFrame(replies[seq]) {
			if err := x.Kick(); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return nil
			}
			runtime.Gosched()
		}
		if len(seqs) == 0 {
			if err := x.Kick(); err != nil {
				return err
			}
		}
	}
	waitTxFree(x, func() bool { return ctx.Err() == nil })
	return nil
}

// sendWindowed sends n datagrams of payload(seq, size) on c with at most
// window unanswered, reads the echoes (each once) and returns how many
// came back.
func sendWindowed(t *testing.T, ctx context.Context, c *net.UDPConn, x *XSK, n, size, window int) int {
	t.Helper()
	seen := make([]bool, n)
	buf := make([]byte, 2048)
	sent, echoed := 0, 0
	for echoed < n && ctx.Err() == nil {
		for sent < n && sent-echoed < window {
			if _, err := c.Write(payload(uint32(sent), size)); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		k, err := c.Read(buf)
		if err != nil {
			t.Fatalf("B: %d sent, %d echoed: %v; stats %+v", sent, echoed, err, x.Stats())
		}
		seq, err := checkPayload(buf[:k], size)
		if err != nil || seen[seq] {
			t.Fatalf("echo %d: %v (or twice)", seq, err)
		}
		seen[seq] = true
		echoed++
	}
	return echoed
}

// dropCaps removes caps from the calling thread's effective set. Call it
// only on a thread that is thrown away afterwards (inside Host.Do).
func dropCaps(caps ...int) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	for _, c := range caps {
		data[c/32].Effective &^= 1 << (c % 32)
	}
	return unix.Capset(&hdr, &data[0])
}

func TestPrivilegeErrors(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	o := Options{Iface: p.A.Iface, Port: xskPort}
	try := func(setup func() error, drop ...int) error {
		var err error
		if e := p.A.Do(func() error {
			if err := dropCaps(drop...); err != nil {
				return err
			}
			if setup != nil {
				if err := setup(); err != nil {
					return err
				}
			}
			var x *XSK
			x, err = Open(o)
			if err == nil {
				x.Close()
			}
			return nil
		}); e != nil {
			t.Fatal(e)
		}
		return err
	}
	cases := []struct {
		name  string
		drop  []int
		want  string
		setup func() error
	}{
		{"no CAP_NET_RAW", []int{unix.CAP_NET_RAW}, "CAP_NET_RAW", nil},
		{"no CAP_BPF", []int{unix.CAP_BPF, unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN}, "CAP_BPF", nil},
	}
	for _, c := range cases {
		err := try(c.setup, c.drop...)
		var pe *dgramio.PrivilegeError
		if !errors.As(err, &pe) || !strings.Contains(pe.Capability, c.want) || !errors.Is(err, os.ErrPermission) {
			t.Errorf("%s: %v, want a PrivilegeError naming %s", c.name, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "MEMLOCK") {
			t.Errorf("%s: %v: blames MEMLOCK for a missing capability", c.name, err)
		}
		if xdpAttached(t, p.A) != nil {
			t.Errorf("%s: the failed Open left a program attached", c.name)
		}
		t.Logf("%s: %v", c.name, err)
	}

	// RLIMIT_MEMLOCK is the process's: lower it for this one Open only.
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		t.Fatal(err)
	}
	err := try(func() error {
		return unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 1 << 20, Max: old.Max})
	}, unix.CAP_IPC_LOCK)
	if e := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old); e != nil {
		t.Fatal(e)
	}
	var pe *dgramio.PrivilegeError
	if !errors.As(err, &pe) || !strings.Contains(pe.Capability, "RLIMIT_MEMLOCK") || !strings.Contains(pe.Capability, "CAP_IPC_LOCK") {
		t.Errorf("UMEM over RLIMIT_MEMLOCK: %v, want a PrivilegeError naming CAP_IPC_LOCK and RLIMIT_MEMLOCK", err)
	} else {
		t.Log(err)
	}
}

func TestNoCarrier(t *testing.T) {
	p := hosttest.New(t, testhost.Options{})
	if err := p.B.SetLinkUp(false); err != nil {
		t.Fatal(err)
	}
	_, err := tryOpen(p.A, Options{Iface: p.A.Iface, Port: xskPort, CarrierWait: 300 * time.Millisecond})
	if !errors.Is(err, ErrNoCarrier) {
		t.Fatalf("peer down: %v, want ErrNoCarrier", err)
	}
	// Everything Open made is undone: no program, and the queue is free.
	waitDetached(t, p.A, 10*time.Second)
	if err := p.B.SetLinkUp(true); err != nil {
		t.Fatal(err)
	}
	x := openXSK(t, p.A, Options{Iface: p.A.Iface, Port: xskPort, CarrierWait: 20 * time.Second})
	if x.Mode() == "" {
		t.Error("no mode")
	}
}
