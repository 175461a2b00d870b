//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package iouring

import (
	"encoding/binary"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RecvmsgOutLen is the size of struct io_uring_recvmsg_out, at the start of
// every buffer a multishot RECVMSG fills.
const RecvmsgOutLen = 16

// RecvmsgOut is a view of the buffer a multishot RECVMSG filled: the
// struct io_uring_recvmsg_out header
//
//	u32 namelen     length of the source address the kernel had (may exceed NameLen)
//	u32 controllen  length of the control data the kernel had
//	u32 payloadlen  length of the whole datagram, even when cut
//	u32 flags       msg_flags: MSG_TRUNC when the payload was cut
//
// then NameLen bytes of source address, ControlLen bytes of control data
// and the payload, as much of it as fitted. NameLen and ControlLen are the
// msg_namelen and msg_controllen of the request's msghdr, which fix the
// layout; the kernel's own namelen and controllen only say how much of
// those areas it used. Buf is the buffer cut to the CQE's res.
//
// Call IsValid before any other method.
type RecvmsgOut struct {
	Buf                 []byte
	NameLen, ControlLen int
}

// IsValid reports whether Buf holds the header and the address and control
// areas, and whether the header's lengths fit them.
func (m RecvmsgOut) IsValid() bool {
	if m.NameLen < 0 || m.ControlLen < 0 || len(m.Buf) < RecvmsgOutLen {
		return false
	}
	if len(m.Buf)-RecvmsgOutLen < m.NameLen || len(m.Buf)-RecvmsgOutLen-m.NameLen < m.ControlLen {
		return false
	}
	return m.ControlLenUsed() <= uint32(m.ControlLen)
}

func (m RecvmsgOut) u32(off int) uint32 { return binary.NativeEndian.Uint32(m.Buf[off:]) }

// NameLenUsed is the kernel's namelen: the length of the source address
// (at most NameLen bytes of it are in the buffer).
func (m RecvmsgOut) NameLenUsed() uint32 { return m.u32(0) }

// ControlLenUsed is the kernel's controllen.
func (m RecvmsgOut) ControlLenUsed() uint32 { return m.u32(4) }

// PayloadLen is the datagram's full length, including what did not fit.
func (m RecvmsgOut) PayloadLen() uint32 { return m.u32(8) }

// Flags is the message's msg_flags.
func (m RecvmsgOut) Flags() uint32 { return m.u32(12) }

// Truncated reports whether the payload was cut (MSG_TRUNC), or claims to
// be longer than what is in the buffer.
func (m RecvmsgOut) Truncated() bool {
	return m.Flags()&unix.MSG_TRUNC != 0 || int(m.PayloadLen()) > len(m.Buf)-m.payloadOff()
}

func (m RecvmsgOut) payloadOff() int { return RecvmsgOutLen + m.NameLen + m.ControlLen }

// Name returns the source address area, as much of it as the kernel
// filled. It aliases Buf.
func (m RecvmsgOut) Name() []byte {
	n := int(min(m.NameLenUsed(), uint32(m.NameLen)))
	return m.Buf[RecvmsgOutLen : RecvmsgOutLen+n]
}

// Payload returns the payload in the buffer (aliasing Buf): all of it, or,
// when Truncated, the part that fitted.
func (m RecvmsgOut) Payload() []byte {
	off := m.payloadOff()
	n := len(m.Buf) - off
	if p := int(m.PayloadLen()); p < n {
		n = p
	}
	return m.Buf[off : off+n]
}

// sockaddrInLen is sizeof(struct sockaddr_in).
const sockaddrInLen = int(unsafe.Sizeof(unix.RawSockaddrInet4{}))

// SockaddrIn4 decodes a struct sockaddr_in (family AF_INET in host order,
// port in network order, address). ok is false for anything else.
func SockaddrIn4(b []byte) (ap netip.AddrPort, ok bool) {
	if len(b) < 8 || binary.NativeEndian.Uint16(b) != unix.AF_INET {
		return netip.AddrPort{}, false
	}
	port := binary.BigEndian.Uint16(b[2:])
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port), true
}

// PutSockaddrIn4 writes ap as a struct sockaddr_in into b (16 bytes) and
// returns its length.
func PutSockaddrIn4(b []byte, ap netip.AddrPort) int {
	_ = b[sockaddrInLen-1]
	binary.NativeEndian.PutUint16(b, unix.AF_INET)
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	a := ap.Addr().As4()
	copy(b[4:8], a[:])
	clear(b[8:sockaddrInLen])
	return sockaddrInLen
}

// SockaddrInLen is sizeof(struct sockaddr_in), the NameLen to give a
// multishot RECVMSG on an IPv4 socket.
const SockaddrInLen = sockaddrInLen

// SockaddrIn6Len is sizeof(struct sockaddr_in6), the NameLen to give a
// multishot RECVMSG on an IPv6 socket.
const SockaddrIn6Len = int(unsafe.Sizeof(unix.RawSockaddrInet6{}))

// SockaddrIn6 decodes a struct sockaddr_in6 (family AF_INET6 in host
// order, port in network order, flow information, address, scope). An
// IPv4-mapped address is returned as IPv4; the scope is not kept. ok is
// false for anything else.
func SockaddrIn6(b []byte) (ap netip.AddrPort, ok bool) {
	if len(b) < 24 || binary.NativeEndian.Uint16(b) != unix.AF_INET6 {
		return netip.AddrPort{}, false
	}
	port := binary.BigEndian.Uint16(b[2:])
	return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), port), true
}

// PutSockaddrIn6 writes ap (an IPv6 address) as a struct sockaddr_in6
// into b (28 bytes; no flow label, no scope) and returns its length.
func PutSockaddrIn6(b []byte, ap netip.AddrPort) int {
	_ = b[SockaddrIn6Len-1]
	binary.NativeEndian.PutUint16(b, unix.AF_INET6)
	binary.BigEndian.PutUint16(b[2:], ap.Port())
	clear(b[4:8])
	a := ap.Addr().As16()
	copy(b[8:24], a[:])
	clear(b[24:SockaddrIn6Len])
	return SockaddrIn6Len
}

// Sockaddr decodes a struct sockaddr_in or sockaddr_in6, as its family
// says (SockaddrIn4, SockaddrIn6). ok is false for anything else.
func Sockaddr(b []byte) (ap netip.AddrPort, ok bool) {
	if len(b) >= 2 && binary.NativeEndian.Uint16(b) == unix.AF_INET6 {
		return SockaddrIn6(b)
	}
	return SockaddrIn4(b)
}
