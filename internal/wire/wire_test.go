//go:build linux

package wire

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testutil"
)

// udpOn opens a UDP socket on h's address, closed when the test ends.
func udpOn(t *testing.T, h *testhost.Host) *net.UDPConn {
	t.Helper()
	c, err := h.ListenUDP(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends a datagram from A to B and the answer back (see
// testhost.Pair.UDPRoundTrip) and returns how long it took.
func roundTrip(t *testing.T, w *Wire, msg string) time.Duration {
	t.Helper()
	rtt, err := w.Pair().UDPRoundTrip(msg, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return rtt
}

func TestUDPRoundTrip(t *testing.T) {
	w := NewT(t, Options{})
	if w.A.Prefix.Masked() != w.B.Prefix.Masked() {
		t.Errorf("A %s and B %s not in one subnet", w.A.Prefix, w.B.Prefix)
	}
	for _, h := range []*testhost.Host{w.MA, w.MB} {
		if a, err := h.Addrs(); err != nil || len(a) != 0 {
			t.Errorf("middle end %s has addresses %v (%v)", h.Iface, a, err)
		}
	}
	for _, h := range []*testhost.Host{w.A, w.MA, w.MB, w.B} {
		off, err := h.Offloads()
		if err != nil {
			t.Fatal(err)
		}
		for name, on := range off {
			if on {
				t.Errorf("%s: offload %s is on", h.Iface, name)
			}
		}
		if err := h.Do(func() error {
			// /proc/sys/net follows the calling thread's namespace.
			b, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + h.Iface + "/disable_ipv6")
			if err == nil && strings.TrimSpace(string(b)) != "1" {
				err = fmt.Errorf("disable_ipv6 is %q", b)
			}
			return err
		}); err != nil {
			t.Errorf("%s: IPv6: %v", h.Iface, err)
		}
	}
	for i := range 3 {
		roundTrip(t, w, fmt.Sprintf("hello %d", i))
	}
	// ARP crossed the wire: each host learned the other's MAC.
	if mac, _, err := w.A.Neigh(w.B.Addr); err != nil || mac.String() != w.B.MAC.String() {
		t.Errorf("A's neighbour entry for B: %s, %v; want %s", mac, err, w.B.MAC)
	}
	balanced(t, w)
	for _, d := range []Direction{AtoB, BtoA} {
		c := w.Stats(d)
		// ARP request or reply plus three datagrams each way.
		if c.Received < 4 || c.Forwarded != c.Received || c.Dropped+c.Duplicated+c.Reordered+c.Corrupted+c.Delayed+c.SocketDrops != 0 {
			t.Errorf("%v: %v", d, c)
		}
	}
}

// snmp reads the kernel's IP, TCP and UDP counters of h's namespace:
// "Tcp.InCsumErrors", "IpExt.InCsumErrors", ...
func snmp(t *testing.T, h *testhost.Host) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	err := h.Do(func() error {
		for _, f := range []string{"snmp", "netstat"} {
			// /proc/self/net is the main thread's namespace; this
			// thread's is under thread-self.
			b, err := os.ReadFile("/proc/thread-self/net/" + f)
			if err != nil {
				return err
			}
			sc := bufio.NewScanner(bytes.NewReader(b))
			for sc.Scan() {
				names := strings.Fields(sc.Text())
				if !sc.Scan() {
					break
				}
				vals := strings.Fields(sc.Text())
				if len(names) != len(vals) || len(names) == 0 {
					continue
				}
				proto := strings.TrimSuffix(names[0], ":")
				for i := 1; i < len(names); i++ {
					v, _ := strconv.ParseUint(vals[i], 10, 64)
					out[proto+"."+names[i]] = v
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTCP16MiB pushes 16 MiB through a kernel TCP connection A→B over a
// wire that loses, duplicates, reorders, corrupts and delays, and checks
// that it arrives byte-exact, that the wire did each of those things, and
// that B's kernel caught the corrupted frames by their checksums.
func TestTCP16MiB(t *testing.T) {
	w := NewT(t, Options{Loss: 0.01, Dup: 0.01, Reorder: 0.01, Corrupt: 0.005,
		Delay: time.Millisecond, Jitter: 500 * time.Microsecond})
	const size = 16 << 20
	data := make([]byte, size)
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], w.Seed())
	rand.NewChaCha8(key).Read(data)
	want := sha256.Sum256(data)
	before := snmp(t, w.B)

	ln, err := w.B.ListenTCP(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	deadline := time.Now().Add(3 * time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	c, err := w.A.DialContext(ctx, "tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ln.SetDeadline(deadline)
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c.SetDeadline(deadline)
	s.SetDeadline(deadline)

	start := time.Now()
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		werr <- err
	}()
	h := sha256.New()
	n, err := io.Copy(h, s)
	if err != nil {
		t.Fatalf("read on B after %d bytes: %v", n, err)
	}
	if err := <-werr; err != nil {
		t.Fatalf("write on A: %v", err)
	}
	if n != size || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("B read %d bytes with SHA-256 %x; A sent %d bytes with %x", n, h.Sum(nil), size, want)
	}
	ab, ba := w.Stats(AtoB), w.Stats(BtoA)
	t.Logf("16 MiB in %v\n  A→B: %v\n  B→A: %v", time.Since(start).Round(time.Millisecond), ab, ba)
	for name, v := range map[string]uint64{"dropped": ab.Dropped, "duplicated": ab.Duplicated,
		"reordered": ab.Reordered, "corrupted": ab.Corrupted, "delayed": ab.Delayed} {
		if v == 0 {
			t.Errorf("A→B: nothing %s over %d frames", name, ab.Received)
		}
	}
	for _, d := range []Direction{AtoB, BtoA} {
		if c := w.Stats(d); c.Truncated+c.Partial != 0 {
			t.Errorf("%v: %d frames too large, %d with partial checksums: offloads are not off", d, c.Truncated, c.Partial)
		}
	}
	after := snmp(t, w.B)
	caught := after["Tcp.InCsumErrors"] - before["Tcp.InCsumErrors"] +
		after["IpExt.InCsumErrors"] - before["IpExt.InCsumErrors"] +
		after["Ip.InHdrErrors"] - before["Ip.InHdrErrors"]
	t.Logf("B's kernel: %d TCP checksum errors, %d IP checksum errors, %d IP header errors",
		after["Tcp.InCsumErrors"]-before["Tcp.InCsumErrors"], after["IpExt.InCsumErrors"]-before["IpExt.InCsumErrors"],
		after["Ip.InHdrErrors"]-before["Ip.InHdrErrors"])
	if ab.Corrupted > 0 && caught == 0 {
		t.Errorf("the wire corrupted %d frames A→B, B's kernel counted no checksum or header error", ab.Corrupted)
	}
}

// sendSeq sends n datagrams carrying their sequence number from A to B,
// paced, and returns how many times B received each. The neighbours are
// static, so the datagrams are the only frames A→B and the i-th frame of
// the direction is datagram i.
func sendSeq(t *testing.T, w *Wire, n int) []int {
	t.Helper()
	if err := w.A.AddNeigh(w.B.Addr, w.B.MAC); err != nil {
		t.Fatal(err)
	}
	if err := w.B.AddNeigh(w.A.Addr, w.A.MAC); err != nil {
		t.Fatal(err)
	}
	a := udpOn(t, w.A)
	b := udpOn(t, w.B)
	to := b.LocalAddr().(*net.UDPAddr).AddrPort()
	got := make([]int, n) // the receiver's until done
	var total atomic.Int64
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		b.SetReadDeadline(time.Now().Add(time.Minute))
		for {
			k, err := b.Read(buf)
			if err != nil {
				done <- err
				return
			}
			if k != 8 {
				done <- fmt.Errorf("datagram of %d bytes", k)
				return
			}
			if seq := binary.BigEndian.Uint64(buf); seq < uint64(n) {
				got[seq]++
				total.Add(1)
			} else {
				done <- fmt.Errorf("sequence %d out of range", seq)
				return
			}
		}
	}()
	var msg [8]byte
	for i := range n {
		binary.BigEndian.PutUint64(msg[:], uint64(i))
		if _, err := a.WriteToUDPAddrPort(msg[:], to); err != nil {
			t.Fatal(err)
		}
		if i%16 == 15 {
			time.Sleep(time.Millisecond)
		}
	}
	// Wait until the wire has read and passed on every frame, then until
	// B's socket is empty.
	if !testutil.Eventually(30*time.Second, func() bool {
		c := w.Stats(AtoB)
		return c.Received+c.SocketDrops >= uint64(n) && c.Queued == 0
	}) {
		t.Fatalf("the wire read %v of %d frames", w.Stats(AtoB), n)
	}
	testutil.Eventually(30*time.Second, func() bool { return total.Load() == int64(w.Stats(AtoB).Forwarded) })
	b.Close()
	if err := <-done; err != nil && !errors.Is(err, net.ErrClosed) {
		t.Fatalf("B after %d datagrams: %v", total.Load(), err)
	}
	if c := w.Stats(AtoB); c.SocketDrops != 0 || c.Received != uint64(n) {
		t.Fatalf("A→B: %v: the wire missed frames, the decisions below cannot be compared", c)
	}
	return got
}

// TestDeterministicUDP runs the same datagram sequence twice over wires
// with the same seed: both runs lose and duplicate exactly the datagrams
// the decision engine predicts for that seed.
func TestDeterministicUDP(t *testing.T) {
	testutil.RequireRoot(t)
	const n = 400
	im := Impairment{Loss: 0.2, Dup: 0.2}
	seed, err := ChooseSeed(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d (replay: %s=%d)", seed, SeedEnv, seed)
	dec := NewDecider(seed, AtoB, im)
	want := make([]int, n)
	for i := range want {
		d := dec.Next()
		switch {
		case d.Drop:
		case d.Dup:
			want[i] = 2
		default:
			want[i] = 1
		}
	}
	for run := range 2 {
		w := NewT(t, Options{Loss: im.Loss, Dup: im.Dup, Seed: seed})
		got := sendSeq(t, w, n)
		var diff []string
		for i := range got {
			if got[i] != want[i] {
				diff = append(diff, fmt.Sprintf("#%d: %d×, want %d×", i, got[i], want[i]))
			}
		}
		if len(diff) > 0 {
			t.Fatalf("run %d, seed %d: %d datagrams differ from the prediction: %s", run, seed, len(diff), strings.Join(diff[:min(len(diff), 10)], "; "))
		}
		c := w.Stats(AtoB)
		t.Logf("run %d: %v", run, c)
		if c.Dropped == 0 || c.Duplicated == 0 {
			t.Errorf("run %d: nothing dropped or duplicated: %v", run, c)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDelay: a round trip takes at least twice the delay.
func TestDelay(t *testing.T) {
	const delay = 25 * time.Millisecond
	w := NewT(t, Options{Delay: delay})
	roundTrip(t, w, "warm-up") // ARP
	rtt := roundTrip(t, w, "timed")
	if rtt < 2*delay {
		t.Errorf("round trip %v over a wire delaying %v each way", rtt, delay)
	}
	if c := w.Stats(AtoB); c.Delayed == 0 || c.Delayed != c.Forwarded {
		t.Errorf("A→B: %v", c)
	}
}

// TestRate: a burst takes at least as long as the rate allows.
func TestRate(t *testing.T) {
	const rate = 4_000_000 // bits per second
	const frames, payload = 100, 1000
	w := NewT(t, Options{Rate: rate})
	roundTrip(t, w, "warm-up")
	a := udpOn(t, w.A)
	b := udpOn(t, w.B)
	to := b.LocalAddr().(*net.UDPAddr).AddrPort()
	b.SetReadDeadline(time.Now().Add(time.Minute))
	msg := make([]byte, payload)
	start := time.Now()
	for range frames {
		if _, err := a.WriteToUDPAddrPort(msg, to); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 2048)
	for i := range frames {
		if _, err := b.Read(buf); err != nil {
			t.Fatalf("datagram %d: %v (%v)", i, err, w.Stats(AtoB))
		}
	}
	el := time.Since(start)
	// Frame: 14 Ethernet + 20 IPv4 + 8 UDP + payload, plus 24 on the wire.
	min := time.Duration(frames*(14+20+8+payload+wireOverhead)*8) * time.Second / rate
	t.Logf("%d frames in %v, the rate allows them in %v at best", frames, el, min)
	if el < min*9/10 {
		t.Errorf("%d frames passed in %v; at %d bit/s they need %v", frames, el, rate, min)
	}
}

// TestSetImpairment: a wire that loses everything, then nothing.
func TestSetImpairment(t *testing.T) {
	w := NewT(t, Options{})
	roundTrip(t, w, "before")
	if err := w.SetImpairment(AtoB, Impairment{Loss: 1}); err != nil {
		t.Fatal(err)
	}
	a := udpOn(t, w.A)
	b := udpOn(t, w.B)
	to := b.LocalAddr().(*net.UDPAddr).AddrPort()
	before := w.Stats(AtoB)
	for range 10 {
		a.WriteToUDPAddrPort([]byte("lost"), to)
	}
	if !testutil.Eventually(30*time.Second, func() bool { return w.Stats(AtoB).Dropped >= before.Dropped+10 }) {
		t.Fatalf("A→B: %v after 10 datagrams into a wire losing everything", w.Stats(AtoB))
	}
	b.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, _, err := b.ReadFromUDPAddrPort(make([]byte, 64)); err == nil {
		t.Fatalf("B received %d bytes through a wire losing everything", n)
	}
	if err := w.SetImpairment(AtoB, Impairment{}); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, w, "after")
	if err := w.SetImpairment(AtoB, Impairment{Loss: 2}); err == nil {
		t.Error("SetImpairment accepted Loss=2")
	}
}

// TestLinkFlap takes the middle end facing A down: frames B→A are refused
// at the egress and counted; once it is up again the wire carries traffic
// as before (the packet socket follows the device down and up).
func TestLinkFlap(t *testing.T) {
	w := NewT(t, Options{})
	roundTrip(t, w, "before")
	if err := w.MA.SetLinkUp(false); err != nil {
		t.Fatal(err)
	}
	if !testutil.Eventually(20*time.Second, func() bool {
		l, err := w.A.Link()
		return err == nil && l.Attrs().OperState != netlink.OperUp
	}) {
		t.Fatal("A kept its carrier with MA down")
	}
	// B knows A's MAC from the round trip: its datagrams reach MB, then
	// have nowhere to go.
	a := udpOn(t, w.A)
	b := udpOn(t, w.B)
	to := a.LocalAddr().(*net.UDPAddr).AddrPort()
	for range 5 {
		if _, err := b.WriteToUDPAddrPort([]byte("into the void"), to); err != nil {
			t.Fatal(err)
		}
	}
	if !testutil.Eventually(20*time.Second, func() bool { return w.Stats(BtoA).SendErrors >= 5 }) {
		t.Fatalf("B→A with MA down: %v", w.Stats(BtoA))
	}
	if err := w.MA.SetLinkUp(true); err != nil {
		t.Fatal(err)
	}
	if !testutil.Eventually(20*time.Second, func() bool {
		l, err := w.A.Link()
		return err == nil && l.Attrs().OperState == netlink.OperUp
	}) {
		t.Fatal("A has no carrier after MA came up")
	}
	roundTrip(t, w, "after")
	balanced(t, w)
}

// balanced waits until the counters of both directions balance (a frame
// the forwarder is handling at the instant of a snapshot is in Received
// and not yet elsewhere).
func balanced(t *testing.T, w *Wire) {
	t.Helper()
	for _, d := range []Direction{AtoB, BtoA} {
		if !testutil.Eventually(10*time.Second, func() bool { return w.Stats(d).Balanced() }) {
			t.Errorf("%v: counters do not balance: %v", d, w.Stats(d))
		}
	}
}

// TestVLAN: a VLAN-tagged frame sent from A arrives at B with its tag,
// although each receiving veth end moves the tag into the packet's
// metadata.
func TestVLAN(t *testing.T) {
	w := NewT(t, Options{})
	var tx, rx int
	open := func(h *testhost.Host, fd *int) {
		if err := h.Do(func() error {
			s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
			if err != nil {
				return err
			}
			*fd = s
			if err := unix.SetsockoptInt(s, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
				return err
			}
			return unix.Bind(s, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: h.Index})
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(*fd) })
	}
	open(w.A, &tx)
	open(w.B, &rx)
	frame := make([]byte, 64)
	copy(frame, w.B.MAC)
	copy(frame[6:], w.A.MAC)
	binary.BigEndian.PutUint16(frame[12:], etherVLAN)
	binary.BigEndian.PutUint16(frame[14:], 0x2123) // priority 1, VLAN 0x123
	binary.BigEndian.PutUint16(frame[16:], 0x88b5) // local experimental EtherType
	copy(frame[18:], "dgramio vlan test")
	if _, err := unix.Write(tx, frame); err != nil {
		t.Fatal(err)
	}
	unix.SetsockoptTimeval(rx, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 10})
	buf := make([]byte, 2048)
	oob := make([]byte, 256)
	for {
		n, oobn, _, _, err := unix.Recvmsg(rx, buf, oob, 0)
		if err != nil {
			t.Fatalf("no tagged frame at B: %v (A→B %v)", err, w.Stats(AtoB))
		}
		if n >= 18 && binary.BigEndian.Uint16(buf[12:]) == etherVLAN && binary.BigEndian.Uint16(buf[16:]) == 0x88b5 {
			// The tag stayed in the frame.
			if tci := binary.BigEndian.Uint16(buf[14:]); tci != 0x2123 {
				t.Fatalf("B got the frame with tag %#x, want 0x2123", tci)
			}
			return
		}
		if n < 14+17 || binary.BigEndian.Uint16(buf[12:]) != 0x88b5 {
			continue // not ours
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) == 0 {
			t.Fatalf("no auxdata: %v", err)
		}
		aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&msgs[0].Data[0]))
		if aux.Status&unix.TP_STATUS_VLAN_VALID == 0 || aux.Vlan_tci != 0x2123 {
			t.Fatalf("B got the frame with status %#x tci %#x, want tag 0x2123", aux.Status, aux.Vlan_tci)
		}
		if !bytes.Equal(buf[14:14+17], []byte("dgramio vlan test")) {
			t.Fatalf("payload %q", buf[14:14+17])
		}
		return
	}
}

// nsids returns the ids the root namespace has given to other namespaces
// (RTM_GETNSID dump); the kernel removes an id when its namespace is
// destroyed.
func nsids(t *testing.T) map[int]bool {
	t.Helper()
	req := nl.NewNetlinkRequest(unix.RTM_GETNSID, unix.NLM_F_DUMP)
	req.AddData(nl.NewRtGenMsg())
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWNSID)
	if err != nil {
		t.Fatalf("dump nsids: %v", err)
	}
	ids := map[int]bool{}
	for _, m := range msgs {
		if len(m) < 4 { // struct rtgenmsg, padded
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[4:])
		if err != nil {
			t.Fatalf("parse nsid message: %v", err)
		}
		for _, a := range attrs {
			const netnsaNSID = 1
			if a.Attr.Type == netnsaNSID && len(a.Value) == 4 {
				ids[int(int32(binary.NativeEndian.Uint32(a.Value)))] = true
			}
		}
	}
	return ids
}

// TestCloseLeavesNothing: after Close, no goroutine of the wire runs, nothing
// in this process refers to its four namespaces, the kernel has destroyed
// them, and no link of theirs is in the root namespace.
func TestCloseLeavesNothing(t *testing.T) {
	testutil.RequireRoot(t)
	g0 := runtime.NumGoroutine()
	w, err := New(Options{Delay: time.Millisecond})
	testutil.SkipIfUnavailable(t, err)
	// The sockets of the round trip are closed when the subtest ends:
	// they would keep A's and B's namespaces alive.
	t.Run("traffic", func(t *testing.T) { roundTrip(t, w, "before close") })
	hosts := []*testhost.Host{w.A, w.MA, w.MB, w.B}
	var inos []uint64
	var ids []int
	for _, h := range hosts {
		inos = append(inos, testutil.NetnsInode(t, int(h.NS)))
		if err := netlink.SetNetNsIdByFd(int(h.NS), -1); err != nil {
			t.Fatal(err)
		}
		id, err := netlink.GetNetNsIdByFd(int(h.NS))
		if err != nil || id < 0 {
			t.Fatalf("nsid of %s: %d, %v", h.Iface, id, err)
		}
		ids = append(ids, id)
	}
	if refs := testutil.NetnsRefs(inos[1]); len(refs) == 0 {
		t.Fatal("before Close nothing refers to MA's namespace: the check below would prove nothing")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	for _, d := range []Direction{AtoB, BtoA} {
		if c := w.Stats(d); !c.Balanced() {
			t.Errorf("%v after Close: counters do not balance: %v", d, c)
		}
	}
	if err := w.SetImpairment(AtoB, Impairment{}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("SetImpairment after Close: %v, want os.ErrClosed", err)
	}
	for i, ino := range inos {
		var refs []string
		if !testutil.Eventually(30*time.Second, func() bool { refs = testutil.NetnsRefs(ino); return len(refs) == 0 }) {
			t.Errorf("namespace of %s still referred to by %v", hosts[i].Iface, refs)
		}
	}
	for i, id := range ids {
		if !testutil.Eventually(60*time.Second, func() bool { return !nsids(t)[id] }) {
			t.Errorf("namespace of %s (nsid %d) not destroyed 60 s after Close", hosts[i].Iface, id)
		}
	}
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		for _, h := range hosts {
			if l.Attrs().Name == h.Iface {
				t.Errorf("link %s is in the root namespace", h.Iface)
			}
		}
	}
	var g int
	if !testutil.Eventually(30*time.Second, func() bool { g = runtime.NumGoroutine(); return g <= g0 }) {
		t.Errorf("%d goroutines after Close, %d before New", g, g0)
	}
}
