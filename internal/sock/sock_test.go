package sock

import (
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/sock/socktest"
)

var lo = netip.MustParseAddr("127.0.0.1")

// loopbacks are the loopback addresses of both families: the tests that
// exchange traffic run over each (forFamilies).
var loopbacks = []netip.Addr{lo, netip.IPv6Loopback()}

// forFamilies runs f once per family, as a subtest named for it, with
// that family's loopback address.
func forFamilies(t *testing.T, f func(t *testing.T, lo netip.Addr)) {
	for _, a := range loopbacks {
		name := "IPv4"
		if a.Is6() {
			name = "IPv6"
		}
		t.Run(name, func(t *testing.T) { f(t, a) })
	}
}

func cfg(role dgramio.Role, port uint16, dests ...netip.Addr) dgramio.Config {
	c := dgramio.Config{Kind: dgramio.KindUDP, Role: role, Port: port}
	for _, d := range dests {
		c.Dests = append(c.Dests, netip.AddrPortFrom(d, port))
	}
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		panic(err)
	}
	return c
}

func TestRawSockaddrRoundTrip(t *testing.T) {
	for _, s := range []string{"198.18.0.1:5000", "127.0.0.1:1", "0.0.0.0:65535", "198.19.255.254:0",
		"[2001:2::1]:5000", "[::1]:1", "[::]:65535", "[2001:2:0:ffff::fffe]:0"} {
		ap := netip.MustParseAddrPort(s)
		var sa Name
		n := PutRaw(&sa, ap)
		if got := FromRaw(&sa); got != ap {
			t.Errorf("FromRaw(PutRaw(%v)) = %v", ap, got)
		}
		// The family and length are what the kernel expects of each.
		if want := uint32(unix.SizeofSockaddrInet4); ap.Addr().Is6() {
			if n != unix.SizeofSockaddrInet6 || sa.Family != unix.AF_INET6 {
				t.Errorf("%v: namelen %d family %d, want sockaddr_in6", ap, n, sa.Family)
			}
		} else if n != want || sa.Family != unix.AF_INET {
			t.Errorf("%v: namelen %d family %d, want sockaddr_in", ap, n, sa.Family)
		}
		// The port is in network order, as the kernel reads it.
		b := (*[2]byte)(portBytes(&sa.Port))
		if uint16(b[0])<<8|uint16(b[1]) != ap.Port() {
			t.Errorf("%v: port bytes %x", ap, b)
		}
	}
	// An IPv4-mapped address is written as IPv4 (the family of the
	// address it maps).
	var sa Name
	mapped := netip.AddrPortFrom(netip.AddrFrom16(netip.MustParseAddr("198.18.0.9").As16()), 7)
	if n := PutRaw(&sa, mapped); n != unix.SizeofSockaddrInet4 || FromRaw(&sa) != netip.MustParseAddrPort("198.18.0.9:7") {
		t.Errorf("PutRaw(%v): namelen %d, read back %v", mapped, n, FromRaw(&sa))
	}
	// After an IPv6 address, an IPv4 one leaves nothing of it behind.
	PutRaw(&sa, netip.MustParseAddrPort("[2001:2::ffff:ffff]:9"))
	PutRaw(&sa, netip.MustParseAddrPort("198.18.0.1:9"))
	if in := (*unix.RawSockaddrInet4)(unsafe.Pointer(&sa)); in.Zero != [8]byte{} {
		t.Errorf("sin_zero = %x after an IPv6 address", in.Zero)
	}
	sa = Name{}
	if got := FromRaw(&sa); got.IsValid() {
		t.Errorf("FromRaw of a zero sockaddr = %v, want invalid", got)
	}
	if n := testing.AllocsPerRun(100, func() {
		PutRaw(&sa, netip.MustParseAddrPort("198.18.0.2:9"))
		_ = FromRaw(&sa)
		PutRaw(&sa, netip.MustParseAddrPort("[2001:2::2]:9"))
		_ = FromRaw(&sa)
	}); n != 0 {
		t.Errorf("PutRaw+FromRaw allocate %v times", n)
	}
}

// TestSendable: what QueueTo of a kernel kind sends to, per socket
// family; the rest is refused before a slot is taken.
func TestSendable(t *testing.T) {
	mapped := netip.AddrPortFrom(netip.AddrFrom16(netip.MustParseAddr("198.18.0.2").As16()), 9)
	for _, c := range []struct {
		ap     netip.AddrPort
		v4, v6 bool
	}{
		{netip.MustParseAddrPort("198.18.0.2:9"), true, false},
		{netip.MustParseAddrPort("[2001:2::2]:9"), false, true},
		{mapped, false, false}, // QueueTo unmaps before asking
		{netip.AddrPort{}, false, false},
		{netip.MustParseAddrPort("198.18.0.2:0"), false, false},
		{netip.MustParseAddrPort("[2001:2::2]:0"), false, false},
		{netip.AddrPortFrom(netip.MustParseAddr("fe80::1%eth0"), 9), false, false},
		{netip.MustParseAddrPort("[fe80::1]:9"), false, false},
		{netip.MustParseAddrPort("[::]:9"), false, false},
		{netip.MustParseAddrPort("[ff02::1]:9"), false, false},
		{netip.MustParseAddrPort("0.0.0.0:9"), false, false},
	} {
		if got := Sendable(c.ap, false); got != c.v4 {
			t.Errorf("Sendable(%v, IPv4 socket) = %v", c.ap, got)
		}
		if got := Sendable(c.ap, true); got != c.v6 {
			t.Errorf("Sendable(%v, IPv6 socket) = %v", c.ap, got)
		}
	}
}

func openPair(t *testing.T, lo netip.Addr) (srv, cli int, sg, cg Granted) {
	t.Helper()
	// Bind an ephemeral server port through a probe socket first: Port 0 is
	// not a valid Config.
	family := unix.AF_INET
	if lo.Is6() {
		family = unix.AF_INET6
	}
	probe, err := unix.Socket(family, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(probe, Sockaddr(netip.AddrPortFrom(lo, 0))); err != nil {
		t.Fatal(err)
	}
	ap, err := LocalAddr(probe)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(probe)
	sc := cfg(dgramio.RoleServer, ap.Port())
	sc.LocalIP = lo
	srv, sg, err = OpenUDP(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(srv) })
	cli, cg, err = OpenUDP(cfg(dgramio.RoleClient, ap.Port(), lo))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(cli) })
	return
}

func TestOpenUDPGranted(t *testing.T) { forFamilies(t, testOpenUDPGranted) }

func testOpenUDPGranted(t *testing.T, lo netip.Addr) {
	srv, cli, sg, cg := openPair(t, lo)
	if sg.Connected || !cg.Connected {
		t.Errorf("Connected: server %v client %v, want false true", sg.Connected, cg.Connected)
	}
	if sg.Local.Addr() != lo || sg.Local.Port() == 0 {
		t.Errorf("server bound to %v", sg.Local)
	}
	for _, g := range []Granted{sg, cg} {
		if g.RcvBuf <= 0 || g.SndBuf <= 0 {
			t.Errorf("granted buffers %d/%d", g.RcvBuf, g.SndBuf)
		}
		// With CAP_NET_ADMIN the full request is granted, doubled.
		if os.Geteuid() == 0 && (!g.BufForced || g.RcvBuf != 2*dgramio.DefaultSockBuf || g.SndBuf != 2*dgramio.DefaultSockBuf) {
			t.Errorf("as root: forced=%v rcv=%d snd=%d, want forced %d", g.BufForced, g.RcvBuf, g.SndBuf, 2*dgramio.DefaultSockBuf)
		}
		if g.BusyPollErr == nil && g.BusyPollUs != dgramio.DefaultBusyPollUs {
			t.Errorf("busy poll %d, no error", g.BusyPollUs)
		}
		if g.Mode() == "" {
			t.Error("empty Mode")
		}
	}
	for _, fd := range []int{srv, cli} {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil || fl&unix.O_NONBLOCK == 0 {
			t.Errorf("fd %d not non-blocking (flags %x, %v)", fd, fl, err)
		}
	}
}

func TestSendRecvMmsg(t *testing.T) { forFamilies(t, testSendRecvMmsg) }

func testSendRecvMmsg(t *testing.T, lo netip.Addr) {
	srv, cli, sg, cg := openPair(t, lo)
	const n = 8
	bufs := make([][64]byte, n)
	iov := make([]unix.Iovec, n)
	msgs := make([]unix.Mmsghdr, n)
	for i := range msgs {
		bufs[i][0] = byte(i)
		iov[i].Base = &bufs[i][0]
		iov[i].SetLen(10 + i)
		msgs[i].Hdr.Iov = &iov[i]
		msgs[i].Hdr.SetIovlen(1)
	}
	sent, e := Sendmmsg(cli, msgs, 0)
	if e != 0 || sent != n {
		t.Fatalf("sendmmsg = %d, %v", sent, e)
	}
	rbufs := make([][32]byte, n)
	riov := make([]unix.Iovec, n)
	names := make([]Name, n)
	rmsgs := make([]unix.Mmsghdr, n)
	for i := range rmsgs {
		riov[i].Base = &rbufs[i][0]
		riov[i].SetLen(len(rbufs[i]))
		rmsgs[i].Hdr.Iov = &riov[i]
		rmsgs[i].Hdr.SetIovlen(1)
		rmsgs[i].Hdr.Name = NamePtr(&names[i])
		rmsgs[i].Hdr.Namelen = NameLen
	}
	got := 0
	for deadline := time.Now().Add(10 * time.Second); got < n && time.Now().Before(deadline); {
		r, e := Recvmmsg(srv, rmsgs[got:], unix.MSG_DONTWAIT)
		if e == unix.EAGAIN {
			time.Sleep(time.Millisecond)
			continue
		}
		if e != 0 {
			t.Fatal(e)
		}
		got += r
	}
	if got != n {
		t.Fatalf("received %d of %d", got, n)
	}
	for i := range rmsgs {
		if int(rmsgs[i].Len) != 10+i || rbufs[i][0] != byte(i) {
			t.Errorf("message %d: len %d first byte %d", i, rmsgs[i].Len, rbufs[i][0])
		}
		if from := FromRaw(&names[i]); from != cg.Local {
			t.Errorf("message %d from %v, want %v", i, from, cg.Local)
		}
		if rmsgs[i].Hdr.Flags&unix.MSG_TRUNC != 0 {
			t.Errorf("message %d truncated", i)
		}
	}
	_ = sg
}

func TestDropsCounted(t *testing.T) { forFamilies(t, testDropsCounted) }

func testDropsCounted(t *testing.T, lo netip.Addr) {
	srv, cli, _, _ := openPair(t, lo)
	// Shrink the server's receive buffer and overflow it: the kernel's own
	// counter must see the drops.
	var g Granted
	if err := SetBuffers(srv, 4096, &g); err != nil {
		t.Fatal(err)
	}
	before, err := Drops(srv)
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 1000)
	for i := 0; i < 200; i++ {
		if _, err := unix.Write(cli, payload); err != nil && err != unix.EAGAIN {
			t.Fatal(err)
		}
	}
	var after uint64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if after, err = Drops(srv); err != nil {
			t.Fatal(err)
		}
		if after > before {
			break
		}
	}
	if after <= before {
		t.Fatalf("SO_MEMINFO drops stayed at %d after overflowing a %d-byte buffer", after, g.RcvBuf)
	}
}

func TestTuneTCP(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	c := dgramio.Config{Kind: dgramio.KindTCP, Port: 1, Dests: []netip.AddrPort{netip.AddrPortFrom(lo, 1)}}.WithDefaults()
	g, err := TuneTCP(fd, c)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY); v == 0 {
		t.Error("TCP_NODELAY not set")
	}
	if g.RcvBuf <= 0 || g.SndBuf <= 0 {
		t.Errorf("granted %d/%d", g.RcvBuf, g.SndBuf)
	}
	c.Nagle = true
	fd2, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	defer unix.Close(fd2)
	if _, err := TuneTCP(fd2, c); err != nil {
		t.Fatal(err)
	}
	if v, _ := unix.GetsockoptInt(fd2, unix.IPPROTO_TCP, unix.TCP_NODELAY); v != 0 {
		t.Error("TCP_NODELAY set with Nagle")
	}
	if _, err := ReadTCPInfo(fd); err != nil {
		t.Errorf("ReadTCPInfo: %v", err)
	}
}

// TestUnprivilegedGrant opens sockets as user nobody: no forced buffers
// (capped by rmem_max, reported as such), and SO_BUSY_POLL either granted
// or refused with the reason recorded, never an error.
func TestUnprivilegedGrant(t *testing.T) {
	if socktest.AsNobody(t) {
		return
	}
	srv, cli, sg, cg := openPair(t, lo)
	_, _ = srv, cli
	for _, g := range []Granted{sg, cg} {
		if os.Geteuid() != 0 && g.BufForced {
			t.Errorf("buffers forced without CAP_NET_ADMIN: %+v", g)
		}
		if g.BusyPollErr == nil && g.BusyPollUs != dgramio.DefaultBusyPollUs {
			t.Errorf("busy poll %d without an error", g.BusyPollUs)
		}
		t.Logf("uid %d: %s", os.Geteuid(), g.Mode())
	}
}

func TestBusyPollOff(t *testing.T) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var g Granted
	if err := SetBusyPoll(fd, 50, &g); err != nil || (g.BusyPollErr == nil && g.BusyPollUs != 50) {
		t.Fatalf("set 50: %v %+v", err, g)
	}
	if err := SetBusyPoll(fd, -1, &g); err != nil || g.BusyPollUs != 0 {
		t.Fatalf("set off: %v %+v", err, g)
	}
	if !strings.Contains(g.Mode(), "SO_BUSY_POLL off") {
		t.Errorf("Mode %q", g.Mode())
	}
}
