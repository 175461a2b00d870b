// Package sock sets up the kernel sockets of the kernel kinds (udp, uring,
// tcp) the same way, so that those kinds differ only in how they cross into
// the kernel, not in socket options: non-blocking, SO_RCVBUF/SO_SNDBUF forced
// where privileged and otherwise as large as the kernel allows, SO_BUSY_POLL,
// connected for unicast. It also reads the kernel's own counters (SO_MEMINFO
// drops, TCP_INFO), holds the raw sendmmsg/recvmmsg calls on preallocated
// message arrays, and the scaffolding the three backends share: Life (the
// Close guard and the counters frozen at Close) and the SO_REUSEPORT group.
// The impairment wire of the tests (internal/wire) uses its buffer and
// mmsg calls too, which is why it lives in the module's internal/ rather
// than under kernel/. It is not API.
//
// Everything here works without privileges; what privilege would add (forced
// buffers) is reported in Granted, never silently dropped.
package sock

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
)

// Granted is what the kernel gave a socket, read back after setting it up.
type Granted struct {
	// RcvBuf and SndBuf are SO_RCVBUF and SO_SNDBUF as getsockopt reports
	// them. Linux doubles the requested value (the other half is for its
	// bookkeeping), so a granted 16 MiB request reads 32 MiB.
	RcvBuf, SndBuf int
	// BufForced is true when SO_RCVBUFFORCE/SO_SNDBUFFORCE took the full
	// request (CAP_NET_ADMIN); false when it was capped by net.dgramio.rmem_max
	// and net.dgramio.wmem_max.
	BufForced bool
	// BusyPollUs is SO_BUSY_POLL as getsockopt reports it after setting it;
	// 0 when off.
	BusyPollUs int
	// BusyPollErr is why SO_BUSY_POLL could not be set, or nil. Current
	// kernels (checked on 6.18) let any user set it to any value; older
	// ones refused (EPERM) to raise it above the socket's current value
	// without CAP_NET_ADMIN, and a kernel built without
	// CONFIG_NET_RX_BUSY_POLL says ENOPROTOOPT. The socket works without it.
	BusyPollErr error
	// Connected is true for a UDP socket connect()ed to its one destination.
	Connected bool
	// Local is the address the socket is bound to.
	Local netip.AddrPort
}

// Mode describes g in a few words for Stats.Mode: buffers, whether they
// were forced, busy poll.
func (g Granted) Mode() string {
	var b strings.Builder
	if g.Connected {
		b.WriteString("connected, ")
	}
	fmt.Fprintf(&b, "rcvbuf %s snd %s", size(g.RcvBuf), size(g.SndBuf))
	if g.BufForced {
		b.WriteString(" forced")
	} else {
		b.WriteString(" capped by rmem_max/wmem_max")
	}
	switch {
	case g.BusyPollErr != nil:
		fmt.Fprintf(&b, ", SO_BUSY_POLL refused (%v)", errors.Unwrap(g.BusyPollErr))
	case g.BusyPollUs > 0:
		fmt.Fprintf(&b, ", SO_BUSY_POLL %dus", g.BusyPollUs)
	default:
		b.WriteString(", SO_BUSY_POLL off")
	}
	return b.String()
}

func size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// SetBuffers sets SO_RCVBUF and SO_SNDBUF to bytes. It first tries
// SO_RCVBUFFORCE/SO_SNDBUFFORCE, which need CAP_NET_ADMIN and ignore
// net.dgramio.rmem_max/wmem_max; without the capability it sets SO_RCVBUF and
// SO_SNDBUF, which the kernel caps at those sysctls. It fills g.RcvBuf,
// g.SndBuf and g.BufForced from getsockopt.
func SetBuffers(fd, bytes int, g *Granted) error {
	forced := true
	for _, o := range [2][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], bytes)
		if err == nil {
			continue
		}
		if err != unix.EPERM {
			return fmt.Errorf("setsockopt %s: %w", optName(o[0]), err)
		}
		forced = false
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], bytes); err != nil {
			return fmt.Errorf("setsockopt %s: %w", optName(o[1]), err)
		}
	}
	rcv, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	if err != nil {
		return fmt.Errorf("getsockopt SO_RCVBUF: %w", err)
	}
	snd, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
	if err != nil {
		return fmt.Errorf("getsockopt SO_SNDBUF: %w", err)
	}
	g.RcvBuf, g.SndBuf, g.BufForced = rcv, snd, forced
	return nil
}

func optName(o int) string {
	switch o {
	case unix.SO_RCVBUFFORCE:
		return "SO_RCVBUFFORCE"
	case unix.SO_SNDBUFFORCE:
		return "SO_SNDBUFFORCE"
	case unix.SO_RCVBUF:
		return "SO_RCVBUF"
	case unix.SO_SNDBUF:
		return "SO_SNDBUF"
	}
	return fmt.Sprint(o)
}

// SetBusyPoll sets SO_BUSY_POLL to us microseconds; us < 0 sets 0 (off,
// whatever net.dgramio.busy_read says) and us == 0 leaves the system default
// (net.dgramio.busy_read). A refusal the socket can live
// without (EPERM on kernels that want CAP_NET_ADMIN to raise it,
// ENOPROTOOPT without CONFIG_NET_RX_BUSY_POLL) is recorded in
// g.BusyPollErr, not returned; any other error is returned. Busy polling
// only acts on devices with NAPI; veth and loopback do little with it.
func SetBusyPoll(fd, us int, g *Granted) error {
	if us != 0 {
		us = max(us, 0)
		err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL, us)
		switch {
		case err == unix.EPERM || err == unix.ENOPROTOOPT:
			g.BusyPollErr = fmt.Errorf("setsockopt SO_BUSY_POLL %d: %w", us, err)
		case err != nil:
			return fmt.Errorf("setsockopt SO_BUSY_POLL %d: %w", us, err)
		}
	}
	v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BUSY_POLL)
	if err != nil && err != unix.ENOPROTOOPT {
		return fmt.Errorf("getsockopt SO_BUSY_POLL: %w", err)
	}
	g.BusyPollUs = v
	return nil
}

// OpenUDP opens the UDP socket of a udp or uring backend and returns its
// file descriptor, which the caller owns and closes. The socket is
// non-blocking and close-on-exec, has its buffers set to cfg.SockBuf (see
// SetBuffers) and SO_BUSY_POLL to cfg.BusyPollUs (see SetBusyPoll).
//
// The socket is of cfg's family (AF_INET6 with IPV6_V6ONLY for an IPv6
// Config, see dgramio.Config.IPv6; AF_INET otherwise). A server binds
// cfg.LocalIP:cfg.Port (0.0.0.0, or :: for IPv6, when LocalIP is unset). A
// client binds cfg.LocalIP:cfg.LocalPort when either is set, and connects
// to its destination when it has exactly one (the kernel then skips the
// route lookup per send, and the socket takes datagrams only from that
// peer); with several Dests it stays unconnected and every message carries
// its address. cfg must have been through WithDefaults and Validate. Works
// without privileges; binding a port below 1024 needs
// CAP_NET_BIND_SERVICE (a *dgramio.PrivilegeError).
func OpenUDP(cfg dgramio.Config) (fd int, g Granted, err error) {
	return openUDP(cfg, false)
}

// openUDP is OpenUDP, with SO_REUSEPORT set before bind when reusePort.
func openUDP(cfg dgramio.Config, reusePort bool) (fd int, g Granted, err error) {
	fd, err = Socket(cfg, unix.SOCK_DGRAM, unix.IPPROTO_UDP)
	if err != nil {
		return -1, g, err
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
			fd = -1
		}
	}()
	if err = SetBuffers(fd, cfg.SockBuf, &g); err != nil {
		return
	}
	if err = SetBusyPoll(fd, cfg.BusyPollUs, &g); err != nil {
		return
	}
	// A server with connected reply sockets (Replies) shares its address
	// and port with them, SO_REUSEPORT; first a probe bound without it
	// says whether another socket holds the port, which is then
	// EADDRINUSE as for any server (not a reuseport group joined).
	replies := !reusePort && ReplySocketsOf(cfg) > 0
	if replies {
		if err = probeFree(cfg); err != nil {
			return
		}
	}
	if reusePort || replies {
		if err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			err = fmt.Errorf("setsockopt SO_REUSEPORT: %w", err)
			return
		}
	}
	if cfg.Role == dgramio.RoleServer {
		if err = Bind(fd, BindAddr(cfg, cfg.Port)); err != nil {
			return
		}
	} else {
		if cfg.LocalIP.IsValid() || cfg.LocalPort != 0 {
			if err = Bind(fd, BindAddr(cfg, cfg.LocalPort)); err != nil {
				return
			}
		}
		if len(cfg.Dests) == 1 {
			dst := cfg.Dests[0]
			if err = unix.Connect(fd, Sockaddr(dst)); err != nil {
				err = fmt.Errorf("connect %s: %w", dst, err)
				return
			}
			g.Connected = true
		}
	}
	g.Local, err = LocalAddr(fd)
	return
}

// probeFree binds a UDP socket of cfg's family, without SO_REUSEPORT, to
// a server's address and port, and closes it: Bind's error when the port
// is taken.
func probeFree(cfg dgramio.Config) error {
	fd, err := Socket(cfg, unix.SOCK_DGRAM, unix.IPPROTO_UDP)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return Bind(fd, BindAddr(cfg, cfg.Port))
}

// Socket opens a non-blocking, close-on-exec socket of type typ (without
// the flags) and protocol proto in cfg's family: AF_INET6 with
// IPV6_V6ONLY set for an IPv6 Config (dgramio.Config.IPv6), so that it
// serves IPv6 only and never sees IPv4-mapped peers; AF_INET otherwise.
// A host without IPv6 is a *dgramio.UnsupportedError.
func Socket(cfg dgramio.Config, typ, proto int) (int, error) {
	family, name := unix.AF_INET, "socket"
	if cfg.IPv6() {
		family, name = unix.AF_INET6, "socket6"
	}
	fd, err := unix.Socket(family, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
	if err == unix.EAFNOSUPPORT && family == unix.AF_INET6 {
		return -1, dgramio.NotSupported("IPv6 sockets (AF_INET6)", "", "use IPv4 addresses, or a kernel with IPv6", err)
	}
	if err != nil {
		return -1, fmt.Errorf("%s: %w", name, err)
	}
	if family == unix.AF_INET6 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("setsockopt IPV6_V6ONLY: %w", err)
		}
	}
	return fd, nil
}

// BindAddr returns the address to bind for cfg and port: cfg.LocalIP:port,
// or every address of cfg's family (0.0.0.0:port, [::]:port) when
// LocalIP is unset.
func BindAddr(cfg dgramio.Config, port uint16) netip.AddrPort {
	ip := cfg.LocalIP.Unmap()
	switch {
	case ip.IsValid():
	case cfg.IPv6():
		ip = netip.IPv6Unspecified()
	default:
		ip = netip.IPv4Unspecified()
	}
	return netip.AddrPortFrom(ip, port)
}

// Bind binds fd to ap. EACCES (a port below 1024 without
// CAP_NET_BIND_SERVICE) is a *dgramio.PrivilegeError.
func Bind(fd int, ap netip.AddrPort) error {
	err := unix.Bind(fd, Sockaddr(ap))
	if err == unix.EACCES || err == unix.EPERM {
		return &dgramio.PrivilegeError{Op: "bind " + ap.String(), Capability: "CAP_NET_BIND_SERVICE (or a port >= 1024)", Err: err}
	}
	if err != nil {
		return fmt.Errorf("bind %s: %w", ap, err)
	}
	return nil
}

// LocalAddr returns the address and port fd is bound to, IPv4 or IPv6.
func LocalAddr(fd int) (netip.AddrPort, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("getsockname: %w", err)
	}
	if ap, ok := AddrPortOf(sa); ok {
		return ap, nil
	}
	return netip.AddrPort{}, fmt.Errorf("getsockname: not an IP socket address: %T", sa)
}

// AddrPortOf returns the address and port of an IPv4 or IPv6 sa (what
// accept or getsockname gave): an IPv4-mapped address as IPv4, the scope
// of a link-local one not kept. ok is false for another family.
func AddrPortOf(sa unix.Sockaddr) (ap netip.AddrPort, ok bool) {
	switch in := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port)), true
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(in.Addr).Unmap(), uint16(in.Port)), true
	}
	return netip.AddrPort{}, false
}

// Sockaddr converts ap for the x/sys/unix calls that take a unix.Sockaddr
// (it allocates; not for the data path): a sockaddr_in for an IPv4 ap
// (IPv4-mapped ones included), a sockaddr_in6 otherwise.
func Sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if a := ap.Addr().Unmap(); a.Is4() {
		return &unix.SockaddrInet4{Addr: a.As4(), Port: int(ap.Port())}
	}
	return &unix.SockaddrInet6{Addr: ap.Addr().As16(), Port: int(ap.Port())}
}

// Name is a socket address slot for msg_name, large enough for either
// family: a struct sockaddr_in6, or a struct sockaddr_in in its first 16
// bytes. PutRaw fills it, the kernel fills it on receive (give it
// NameLen), FromRaw reads it.
type Name unix.RawSockaddrInet6

// NameLen is the msg_namelen to give the kernel with a Name on receive.
const NameLen = unix.SizeofSockaddrInet6

// PutRaw writes ap into sa, the form the kernel reads from msg_name, and
// returns the msg_namelen to give with it: a sockaddr_in for an IPv4 ap
// (an IPv4-mapped one included), a sockaddr_in6 (no flow label, no scope)
// for an IPv6 one. An invalid ap writes the zero IPv4 address and port.
// It does not allocate.
func PutRaw(sa *Name, ap netip.AddrPort) uint32 {
	p := ap.Port()
	pb := (*[2]byte)(portBytes(&sa.Port))
	pb[0], pb[1] = byte(p>>8), byte(p)
	if a := ap.Addr(); a.Is6() && !a.Is4In6() {
		sa.Family = unix.AF_INET6
		sa.Flowinfo, sa.Scope_id = 0, 0
		sa.Addr = a.As16()
		return unix.SizeofSockaddrInet6
	}
	in := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
	in.Family = unix.AF_INET
	in.Addr = [4]byte{}
	if ap.Addr().IsValid() {
		in.Addr = ap.Addr().Unmap().As4()
	}
	in.Zero = [8]uint8{}
	return unix.SizeofSockaddrInet4
}

// FromRaw returns the address and port in sa (filled by the kernel in
// msg_name): IPv4 for AF_INET, IPv6 for AF_INET6 (an IPv4-mapped one as
// IPv4; the scope of a link-local one is not kept). It does not allocate.
// Another family gives the zero AddrPort.
func FromRaw(sa *Name) netip.AddrPort {
	pb := (*[2]byte)(portBytes(&sa.Port))
	port := uint16(pb[0])<<8 | uint16(pb[1])
	switch sa.Family {
	case unix.AF_INET:
		in := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(in.Addr), port)
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port)
	}
	return netip.AddrPort{}
}

// Sendable reports whether a socket of the family v6 says (AF_INET6 when
// true) answers ap: a dgramio.Unicast address and port of that family (IPv4
// for an AF_INET socket; IPv6, not IPv4-mapped, for an AF_INET6 one, which
// is IPV6_V6ONLY). QueueTo refuses the others (ErrNoRoute, counted) before
// taking a slot.
func Sendable(ap netip.AddrPort, v6 bool) bool {
	if !dgramio.Unicast(ap) {
		return false
	}
	if v6 {
		return ap.Addr().Is6() && !ap.Addr().Is4In6()
	}
	return ap.Addr().Is4()
}
