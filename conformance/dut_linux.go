//go:build linux

package conformance

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
)

// Linux is the Factory of the Linux kernel's stack as a DUT: for each case,
// a testhost pair of network namespaces joined by a veth. The DUT is A's
// kernel with its address; the bench is a raw AF_PACKET socket on B, whose
// own kernel has its address taken away (testhost DelAddr), so that it
// neither answers ARP for the bench's address nor sends RSTs for the
// bench's crafted flows; A has a permanent neighbour entry for the bench.
// The DUT's sockets are made inside A (Host.Do). Needs root.
func Linux() Factory { return linuxFactory{} }

type linuxFactory struct{}

// Name implements Factory.
func (linuxFactory) Name() string { return "linux" }

// New implements Factory.
func (linuxFactory) New(tb TB, s Setup) (DUT, error) {
	v, err := newVeth(s)
	if err != nil {
		return nil, fmt.Errorf("linux: %w", err)
	}
	d := &linuxDUT{veth: v, start: time.Now(), fds: map[int]bool{}}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	if err := v.dut.AddNeigh(v.bench.Addr, v.bench.MAC); err != nil {
		return nil, fmt.Errorf("linux: bench neighbour on A: %w", err)
	}
	if s.IPv6 {
		if err := v.dut.AddNeigh(v.bench.Addr6, v.bench.MAC); err != nil {
			return nil, fmt.Errorf("linux: bench IPv6 neighbour on A: %w", err)
		}
	}
	if s.RTOMin > 0 {
		if err := d.setRTOMin(s.RTOMin); err != nil {
			return nil, err
		}
	}
	if err := setNeighTimes(v.dut, s.Neigh); err != nil {
		return nil, err
	}
	if s.SYNCookies {
		if err := setSysctl(v.dut, "net/ipv4/tcp_syncookies", "2"); err != nil {
			return nil, err
		}
	}
	ok = true
	return d, nil
}

// setNeighTimes writes the timers of t that are not zero into h's
// net.ipv4.neigh.<dev> settings (and net.ipv6.neigh.<dev> where IPv6 is
// on), from a thread inside h's namespace (/proc/sys/net follows the
// thread's namespace), and reads each back.
func setNeighTimes(h *testhost.Host, t NeighTimes) error {
	var kv [][2]string
	if t.Reachable > 0 {
		kv = append(kv, [2]string{"base_reachable_time_ms", strconv.FormatInt(t.Reachable.Milliseconds(), 10)})
	}
	if t.DelayFirstProbe > 0 {
		kv = append(kv, [2]string{"delay_first_probe_time", strconv.Itoa(secs(t.DelayFirstProbe))})
	}
	if t.Retrans > 0 {
		kv = append(kv, [2]string{"retrans_time_ms", strconv.FormatInt(t.Retrans.Milliseconds(), 10)})
	}
	return h.Do(func() error {
		for _, fam := range []string{"ipv4", "ipv6"} {
			dir := "/proc/sys/net/" + fam + "/neigh/" + h.Iface + "/"
			if _, err := os.Stat(dir); fam == "ipv6" && err != nil {
				continue // IPv6 off on the device
			}
			for _, x := range kv {
				if err := os.WriteFile(dir+x[0], []byte(x[1]+"\n"), 0); err != nil {
					return fmt.Errorf("linux: neighbour timers: %w", err)
				}
				b, err := os.ReadFile(dir + x[0])
				if err != nil {
					return fmt.Errorf("linux: neighbour timers: %w", err)
				}
				if strings.TrimSpace(string(b)) != x[1] {
					return fmt.Errorf("linux: %s%s reads back %q, want %s", dir, x[0], b, x[1])
				}
			}
		}
		return nil
	})
}

// setSysctl writes value to /proc/sys/<key> from a thread inside h's
// namespace (a per-namespace setting, gone with the namespace) and reads
// it back.
func setSysctl(h *testhost.Host, key, value string) error {
	return h.Do(func() error {
		path := "/proc/sys/" + key
		if err := os.WriteFile(path, []byte(value+"\n"), 0); err != nil {
			return fmt.Errorf("linux: %s: %w", key, err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("linux: %s: %w", key, err)
		}
		if strings.TrimSpace(string(b)) != value {
			return fmt.Errorf("linux: %s reads back %q, want %s", path, b, value)
		}
		return nil
	})
}

// veth is what the DUTs reached over a veth share: a testhost pair whose A
// end is the DUT's and whose B end is the bench's, B's kernel without its
// address (so that it neither answers ARP for the bench's address nor
// resets the bench's crafted flows), and a packet socket on B.
type veth struct {
	p          *testhost.Pair
	dut, bench *testhost.Host
	spare      netip.Addr
	spare6     netip.Addr // with Setup.IPv6
	mtu        int
	link       *packetLink
}

// newVeth makes the pair for s (A's MTU set to s.MTU) and the bench's
// socket; on error nothing is left.
func newVeth(s Setup) (*veth, error) {
	if os.Geteuid() != 0 {
		return nil, &dgramio.PrivilegeError{Op: "make network namespaces for a veth DUT", Capability: "CAP_SYS_ADMIN and CAP_NET_ADMIN", Err: os.ErrPermission}
	}
	// The MTU is set on A alone, after New: testhost's Options.MTU below
	// 1280 fails (the kernel removes an interface's IPv6 settings, which
	// testhost writes, when its MTU is too small for IPv6).
	p, err := testhost.New(testhost.Options{IPv6: s.IPv6})
	if err != nil {
		return nil, err
	}
	v := &veth{p: p, dut: p.A, bench: p.B, mtu: 1500}
	ok := false
	defer func() {
		if !ok {
			v.close()
		}
	}()
	if err := p.B.DelAddr(); err != nil {
		return nil, fmt.Errorf("bench address off B: %w", err)
	}
	v.spare = p.B.Addr.Next()
	if v.spare == p.A.Addr {
		v.spare = v.spare.Next()
	}
	if s.IPv6 {
		// B keeps its link-local address, which the bench never uses.
		if err := p.B.DelAddr6(); err != nil {
			return nil, fmt.Errorf("bench IPv6 address off B: %w", err)
		}
		v.spare6 = p.B.Addr6.Next()
		if v.spare6 == p.A.Addr6 {
			v.spare6 = v.spare6.Next()
		}
	}
	if s.MTU > 0 {
		if err := v.setMTU(s.MTU); err != nil {
			return nil, err
		}
		v.mtu = s.MTU
	}
	err = p.B.Do(func() error {
		fd, err := openPacket(p.B.Index)
		if err == nil {
			v.link = &packetLink{fd: fd}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	ok = true
	return v, nil
}

// close closes the bench's socket and the pair.
func (v *veth) close() error {
	if v.link != nil {
		unix.Close(v.link.fd)
		v.link = nil
	}
	return v.p.Close()
}

// setMTU sets the MTU of A's veth end.
func (v *veth) setMTU(mtu int) error {
	h, err := netlink.NewHandleAt(v.dut.NS)
	if err != nil {
		return fmt.Errorf("netlink handle: %w", err)
	}
	defer h.Close()
	l, err := h.LinkByIndex(v.dut.Index)
	if err != nil {
		return fmt.Errorf("link %s: %w", v.dut.Iface, err)
	}
	if err := h.LinkSetMTU(l, mtu); err != nil {
		return fmt.Errorf("MTU %d on %s: %w", mtu, v.dut.Iface, err)
	}
	return nil
}

type linuxDUT struct {
	*veth
	start time.Time

	mu  sync.Mutex
	fds map[int]bool
}

var (
	_ DUT      = (*linuxDUT)(nil)
	_ Clock    = (*linuxDUT)(nil)
	_ Listener = (*linuxListener)(nil)
	_ Conn     = (*linuxConn)(nil)
	_ UDPConn  = (*linuxUDP)(nil)
	_ Link     = (*packetLink)(nil)
)

// setRTOMin replaces the on-link route of A with one whose RTO minimum is
// d, locked (RTAX_RTO_MIN with RTAX_LOCK, as ip route's rto_min sets it),
// so that every connection on the link uses it.
func (d *linuxDUT) setRTOMin(rto time.Duration) error {
	h, err := netlink.NewHandleAt(d.dut.NS)
	if err != nil {
		return fmt.Errorf("linux: netlink handle: %w", err)
	}
	defer h.Close()
	pfx := d.dut.Prefix.Masked()
	r := &netlink.Route{LinkIndex: d.dut.Index, Scope: netlink.SCOPE_LINK, Protocol: unix.RTPROT_KERNEL,
		Src: d.dut.Addr.AsSlice(), Dst: prefixNet(pfx), RtoMin: int(rto / time.Millisecond), RtoMinLock: true}
	if err := h.RouteReplace(r); err != nil {
		return fmt.Errorf("linux: route rto_min %v: %w", rto, err)
	}
	return nil
}

// Info implements DUT.
func (d *linuxDUT) Info() Info {
	return Info{Name: "linux", Kind: KindLinux, MAC: d.dut.MAC, BenchMAC: d.bench.MAC,
		Addr: d.dut.Addr, BenchAddr: d.bench.Addr, Spare: d.spare, MTU: d.mtu,
		Addr6: d.dut.Addr6, BenchAddr6: d.bench.Addr6, Spare6: d.spare6,
		Lacks: linuxLacks}
}

// linuxLacks is what the Linux DUT cannot do.
var linuxLacks = map[Cap]string{
	CapFastTimeWait: "Linux's TIME-WAIT is a fixed 60 s (TCP_TIMEWAIT_LEN), too long to wait out in make test",
}

// Link implements DUT.
func (d *linuxDUT) Link() Link { return d.link }

// Clock implements DUT: the wall clock.
func (d *linuxDUT) Clock() Clock { return d }

// Now implements Clock.
func (d *linuxDUT) Now() time.Duration { return time.Since(d.start) }

// Advance implements Clock: it sleeps.
func (d *linuxDUT) Advance(dur time.Duration) { time.Sleep(dur) }

// Fake implements Clock.
func (d *linuxDUT) Fake() bool { return false }

// Close implements DUT: sockets first (an open socket keeps its namespace
// alive), then the pair.
func (d *linuxDUT) Close() error {
	d.mu.Lock()
	for fd := range d.fds {
		unix.Close(fd)
	}
	d.fds = map[int]bool{}
	d.mu.Unlock()
	return d.veth.close()
}

func (d *linuxDUT) track(fd int) {
	d.mu.Lock()
	d.fds[fd] = true
	d.mu.Unlock()
}

func (d *linuxDUT) untrack(fd int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.fds[fd] {
		return nil
	}
	delete(d.fds, fd)
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// socket makes a socket inside A with o set: IPv6 when o.IPv6.
func (d *linuxDUT) socket(typ int, o SockOpts) (int, error) {
	fd := -1
	family := unix.AF_INET
	if o.IPv6 {
		family = unix.AF_INET6
	}
	err := d.dut.Do(func() error {
		var err error
		fd, err = unix.Socket(family, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("linux: socket: %w", err)
		}
		return nil
	})
	if err != nil {
		return -1, err
	}
	d.track(fd)
	set := func(level, opt, v int, name string) error {
		if err := unix.SetsockoptInt(fd, level, opt, v); err != nil {
			return fmt.Errorf("linux: setsockopt %s: %w", name, err)
		}
		return nil
	}
	errs := []error{set(unix.SOL_SOCKET, unix.SO_REUSEADDR, 1, "SO_REUSEADDR")}
	if typ == unix.SOCK_STREAM {
		errs = append(errs, set(unix.IPPROTO_TCP, unix.TCP_NODELAY, 1, "TCP_NODELAY"))
		if o.RecvBuf > 0 {
			errs = append(errs, set(unix.SOL_SOCKET, unix.SO_RCVBUF, o.RecvBuf, "SO_RCVBUF"))
		}
		if k := o.KeepAlive; k != nil {
			errs = append(errs, set(unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1, "SO_KEEPALIVE"),
				set(unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, secs(k.Idle), "TCP_KEEPIDLE"),
				set(unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, secs(k.Interval), "TCP_KEEPINTVL"),
				set(unix.IPPROTO_TCP, unix.TCP_KEEPCNT, k.Count, "TCP_KEEPCNT"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		d.untrack(fd)
		return -1, err
	}
	return fd, nil
}

// secs rounds d up to whole seconds, at least 1 (the unit of Linux's
// keepalive options).
func secs(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// bind binds fd to port on the DUT's address, its IPv6 one when v6.
func (d *linuxDUT) bind(fd int, port uint16, v6 bool) error {
	sa := sockaddr(netip.AddrPortFrom(d.dut.Addr, port))
	if v6 {
		sa = sockaddr(netip.AddrPortFrom(d.dut.Addr6, port))
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fmt.Errorf("linux: bind %d: %w", port, err)
	}
	return nil
}

// Listen implements DUT.
func (d *linuxDUT) Listen(port uint16, o SockOpts) (Listener, error) {
	fd, err := d.socket(unix.SOCK_STREAM, o)
	if err != nil {
		return nil, err
	}
	if err := d.bind(fd, port, o.IPv6); err != nil {
		d.untrack(fd)
		return nil, err
	}
	if err := unix.Listen(fd, 16); err != nil {
		d.untrack(fd)
		return nil, fmt.Errorf("linux: listen: %w", err)
	}
	return &linuxListener{d: d, fd: fd}, nil
}

// Connect implements DUT.
func (d *linuxDUT) Connect(to netip.AddrPort, o SockOpts) (Conn, error) {
	o.IPv6 = to.Addr().Is6()
	fd, err := d.socket(unix.SOCK_STREAM, o)
	if err != nil {
		return nil, err
	}
	err = unix.Connect(fd, sockaddr(to))
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		d.untrack(fd)
		return nil, fmt.Errorf("linux: connect %v: %w", to, err)
	}
	return &linuxConn{d: d, fd: fd}, nil
}

// ListenUDP implements DUT.
func (d *linuxDUT) ListenUDP(port uint16) (UDPConn, error) {
	fd, err := d.socket(unix.SOCK_DGRAM, SockOpts{})
	if err != nil {
		return nil, err
	}
	if err := d.bind(fd, port, false); err != nil {
		d.untrack(fd)
		return nil, err
	}
	return &linuxUDP{d: d, fd: fd}, nil
}

// sockaddr converts ap to a socket address of its family.
func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}

// waitFD polls fd for events up to wait. It returns nil when an event
// came or the wait is over: the caller tries again and tells which.
func waitFD(fd int, events int16, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		ms := int((max(time.Until(deadline), 0) + time.Millisecond - 1) / time.Millisecond)
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: events}}, ms)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return fmt.Errorf("poll: %w", err)
		case n > 0 || !time.Now().Before(deadline):
			return nil
		}
	}
}

// retryFD calls try until it is done (again false), waiting between
// tries, up to wait in all, until fd is ready for events. It returns
// try's error, waitFD's, or ErrWouldBlock when wait passed with try still
// to retry.
func retryFD(fd int, events int16, wait time.Duration, try func() (again bool, err error)) error {
	deadline := time.Now().Add(wait)
	for {
		again, err := try()
		if !again {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return ErrWouldBlock
		}
		if err := waitFD(fd, events, left); err != nil {
			return err
		}
	}
}

// linuxErr maps an errno to the suite's errors.
func linuxErr(op string, err error) error {
	switch {
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINPROGRESS), errors.Is(err, unix.ENOTCONN):
		return ErrWouldBlock
	case errors.Is(err, unix.ECONNRESET), errors.Is(err, unix.ECONNREFUSED), errors.Is(err, unix.EPIPE):
		return ErrReset
	case errors.Is(err, unix.ETIMEDOUT):
		return ErrTimedOut
	}
	return fmt.Errorf("linux: %s: %w", op, err)
}

type linuxListener struct {
	d  *linuxDUT
	fd int
}

// Accept implements Listener.
func (l *linuxListener) Accept(wait time.Duration) (Conn, error) {
	var c *linuxConn
	err := retryFD(l.fd, unix.POLLIN, wait, func() (bool, error) {
		nfd, _, err := unix.Accept4(l.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err == nil {
			l.d.track(nfd)
			c = &linuxConn{d: l.d, fd: nfd}
			return false, nil
		}
		if !errors.Is(err, unix.EAGAIN) {
			return false, fmt.Errorf("linux: accept: %w", err)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Close implements Listener.
func (l *linuxListener) Close() error { return l.d.untrack(l.fd) }

type linuxConn struct {
	d  *linuxDUT
	fd int
}

// Write implements Conn.
func (c *linuxConn) Write(p []byte) (int, error) {
	n, err := unix.Write(c.fd, p)
	if err != nil {
		return 0, linuxErr("write", err)
	}
	return n, nil
}

// Read implements Conn.
func (c *linuxConn) Read(p []byte, wait time.Duration) (int, error) {
	var n int
	err := retryFD(c.fd, unix.POLLIN|unix.POLLRDHUP, wait, func() (bool, error) {
		var err error
		n, err = unix.Read(c.fd, p)
		switch {
		case err == nil && n == 0 && len(p) > 0:
			return false, io.EOF
		case err == nil:
			return false, nil
		}
		if e := linuxErr("read", err); e != ErrWouldBlock {
			return false, e
		}
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Shutdown implements Conn.
func (c *linuxConn) Shutdown() error {
	if err := unix.Shutdown(c.fd, unix.SHUT_WR); err != nil {
		return linuxErr("shutdown", err)
	}
	return nil
}

// Close implements Conn.
func (c *linuxConn) Close() error { return c.d.untrack(c.fd) }

type linuxUDP struct {
	d  *linuxDUT
	fd int
}

// Read implements UDPConn.
func (u *linuxUDP) Read(p []byte, wait time.Duration) (int, netip.AddrPort, error) {
	var n int
	var ap netip.AddrPort
	err := retryFD(u.fd, unix.POLLIN, wait, func() (bool, error) {
		var from unix.Sockaddr
		var err error
		n, from, err = unix.Recvfrom(u.fd, p, 0)
		if err == nil {
			if sa, ok := from.(*unix.SockaddrInet4); ok {
				ap = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
			}
			return false, nil
		}
		if !errors.Is(err, unix.EAGAIN) {
			return false, fmt.Errorf("linux: recvfrom: %w", err)
		}
		return true, nil
	})
	if err != nil {
		return 0, netip.AddrPort{}, err
	}
	return n, ap, nil
}

// Close implements UDPConn.
func (u *linuxUDP) Close() error { return u.d.untrack(u.fd) }

// snmpNames maps /proc/net/snmp and /proc/net/netstat counters to the
// suite's common names.
var snmpNames = map[string]string{
	"Ip.InHdrErrors":        CounterIPHeaderErrors,
	"Ip.ReasmOKs":           CounterIPReassembled,
	"Ip.InDelivers":         CounterIPDeliveredLocal,
	"Icmp.OutEchoReps":      CounterICMPEchoReplies,
	"Tcp.InCsumErrors":      CounterTCPChecksumErr,
	"Tcp.OutRsts":           CounterTCPResetsSent,
	"Tcp.RetransSegs":       CounterTCPRetransmits,
	"Tcp.PassiveOpens":      CounterTCPPassiveOpens,
	"Tcp.ActiveOpens":       CounterTCPActiveOpens,
	"Tcp.InSegs":            CounterTCPSegmentsIn,
	"TcpExt.TCPFastRetrans": CounterTCPFastRetrans,
	"TcpExt.TCPTimeouts":    CounterTCPTimeouts,
	"Udp.NoPorts":           CounterUDPNoPort,
	"Udp.InCsumErrors":      CounterUDPChecksumErr,
}

// Counters implements DUT: the SNMP MIB of A's namespace, read from
// /proc/thread-self/net on a thread inside it.
func (d *linuxDUT) Counters() (map[string]uint64, error) {
	out := map[string]uint64{}
	err := d.dut.Do(func() error {
		for _, file := range []string{"/proc/thread-self/net/snmp", "/proc/thread-self/net/netstat"} {
			b, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("linux: counters: %w", err)
			}
			if err := parseSNMP(string(b), func(name string, v uint64) {
				if common, ok := snmpNames[name]; ok {
					out[common] = v
				}
			}); err != nil {
				return fmt.Errorf("linux: %s: %w", file, err)
			}
		}
		return nil
	})
	return out, err
}

// parseSNMP reads the pairs of lines of /proc/net/snmp and netstat
// ("Tcp: RtoAlgorithm RtoMin ..." then "Tcp: 1 200 ...") and calls each
// with "Tcp.RtoMin" and its value.
func parseSNMP(s string, each func(name string, v uint64)) error {
	sc := bufio.NewScanner(strings.NewReader(s))
	var head []string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if head == nil || head[0] != f[0] {
			head = f
			continue
		}
		if len(f) != len(head) {
			return fmt.Errorf("%s has %d values for %d names", f[0], len(f)-1, len(head)-1)
		}
		grp := strings.TrimSuffix(f[0], ":")
		for i := 1; i < len(f); i++ {
			v, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				return fmt.Errorf("%s.%s: %w", grp, head[i], err)
			}
			each(grp+"."+head[i], uint64(v))
		}
		head = nil
	}
	return sc.Err()
}

// packetLink is a raw AF_PACKET socket on the bench's veth end.
type packetLink struct {
	fd  int
	buf [1 << 16]byte
}

// openPacket opens an AF_PACKET socket bound to ifindex that does not see
// its own host's outgoing frames (PACKET_IGNORE_OUTGOING, Linux 4.20).
// Call it inside the namespace.
func openPacket(ifindex int) (int, error) {
	proto := int(htons(unix.ETH_P_ALL))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return -1, fmt.Errorf("bench: packet socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		unix.Close(fd)
		return -1, dgramio.NotSupported("PACKET_IGNORE_OUTGOING", "4.20", "", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bench: bind packet socket: %w", err)
	}
	// Drop what arrived before the bind (from any interface).
	var b [2048]byte
	for {
		if _, err := unix.Read(fd, b[:]); err != nil {
			break
		}
	}
	return fd, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Send implements Link.
func (l *packetLink) Send(frame []byte) error {
	if _, err := unix.Write(l.fd, frame); err != nil {
		return fmt.Errorf("bench: write: %w", err)
	}
	return nil
}

// Recv implements Link.
func (l *packetLink) Recv(wait time.Duration) ([]byte, error) {
	var frame []byte
	err := retryFD(l.fd, unix.POLLIN, wait, func() (bool, error) {
		n, err := unix.Read(l.fd, l.buf[:])
		if err == nil {
			frame = append([]byte(nil), l.buf[:n]...)
			return false, nil
		}
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			return false, fmt.Errorf("bench: read: %w", err)
		}
		return true, nil
	})
	if err == ErrWouldBlock {
		return nil, nil // nothing within wait
	}
	return frame, err
}

// prefixNet converts p to the *net.IPNet netlink takes.
func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
