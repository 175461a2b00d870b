//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package iouring

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// recvmsgBuf builds a buffer as the kernel fills it.
func recvmsgBuf(name []byte, nameLen int, payloadLen uint32, flags uint32, payload []byte) []byte {
	b := make([]byte, RecvmsgOutLen+nameLen+len(payload))
	binary.NativeEndian.PutUint32(b[0:], uint32(len(name)))
	binary.NativeEndian.PutUint32(b[8:], payloadLen)
	binary.NativeEndian.PutUint32(b[12:], flags)
	copy(b[RecvmsgOutLen:], name)
	copy(b[RecvmsgOutLen+nameLen:], payload)
	return b
}

func TestRecvmsgOut(t *testing.T) {
	from := netip.MustParseAddrPort("198.18.0.2:5000")
	name := make([]byte, SockaddrInLen)
	PutSockaddrIn4(name, from)

	m := RecvmsgOut{Buf: recvmsgBuf(name, SockaddrInLen, 5, 0, []byte("hello")), NameLen: SockaddrInLen}
	if !m.IsValid() || m.Truncated() || string(m.Payload()) != "hello" {
		t.Fatalf("whole datagram: valid %v truncated %v payload %q", m.IsValid(), m.Truncated(), m.Payload())
	}
	if got, ok := SockaddrIn4(m.Name()); !ok || got != from {
		t.Fatalf("from %v %v, want %v", got, ok, from)
	}

	cut := RecvmsgOut{Buf: recvmsgBuf(name, SockaddrInLen, 9000, unix.MSG_TRUNC, []byte("hel")), NameLen: SockaddrInLen}
	if !cut.IsValid() || !cut.Truncated() || string(cut.Payload()) != "hel" {
		t.Fatalf("cut datagram: valid %v truncated %v payload %q", cut.IsValid(), cut.Truncated(), cut.Payload())
	}
	// A payload length beyond the buffer counts as cut even without the flag.
	lying := RecvmsgOut{Buf: recvmsgBuf(name, SockaddrInLen, 10, 0, []byte("hel")), NameLen: SockaddrInLen}
	if !lying.Truncated() {
		t.Fatal("payload length beyond the buffer not seen as cut")
	}
	if (RecvmsgOut{Buf: make([]byte, 20), NameLen: SockaddrInLen}).IsValid() {
		t.Fatal("a buffer shorter than header and name is valid")
	}
	if _, ok := SockaddrIn4(make([]byte, 16)); ok {
		t.Fatal("AF_UNSPEC decoded as IPv4")
	}
}

// FuzzRecvmsgOut checks that no buffer makes the view read out of bounds,
// and that what it returns lies inside the buffer.
func FuzzRecvmsgOut(f *testing.F) {
	name := make([]byte, SockaddrInLen)
	PutSockaddrIn4(name, netip.MustParseAddrPort("198.18.0.1:9"))
	f.Add(recvmsgBuf(name, SockaddrInLen, 3, 0, []byte("abc")), SockaddrInLen, 0)
	f.Add(recvmsgBuf(name, SockaddrInLen, 1000, unix.MSG_TRUNC, []byte("abc")), SockaddrInLen, 0)
	f.Add(recvmsgBuf(nil, 0, 0, 0, nil), 0, 0)
	f.Add(make([]byte, 40), 16, 8)
	f.Add([]byte{1, 2, 3}, 16, 0)
	f.Fuzz(func(t *testing.T, buf []byte, nameLen, controlLen int) {
		m := RecvmsgOut{Buf: buf, NameLen: nameLen, ControlLen: controlLen}
		if !m.IsValid() {
			return
		}
		p := m.Payload()
		if len(p) > len(buf) || int(m.PayloadLen()) < len(p) {
			t.Fatalf("payload of %d bytes from a %d-byte buffer claiming %d", len(p), len(buf), m.PayloadLen())
		}
		if !m.Truncated() && len(p) != int(m.PayloadLen()) {
			t.Fatalf("not truncated, but %d of %d payload bytes", len(p), m.PayloadLen())
		}
		if len(p) > 0 && !bytes.Equal(p, buf[len(buf)-(len(buf)-RecvmsgOutLen-nameLen-controlLen):][:len(p)]) {
			t.Fatal("payload not where the layout puts it")
		}
		if len(m.Name()) > nameLen {
			t.Fatalf("name of %d bytes, area %d", len(m.Name()), nameLen)
		}
		SockaddrIn4(m.Name())
	})
}

func FuzzSockaddrIn4(f *testing.F) {
	b := make([]byte, SockaddrInLen)
	PutSockaddrIn4(b, netip.MustParseAddrPort("198.18.0.1:5000"))
	f.Add(b)
	f.Add([]byte{2, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ap, ok := SockaddrIn4(b)
		if !ok {
			return
		}
		out := make([]byte, SockaddrInLen)
		PutSockaddrIn4(out, ap)
		if !bytes.Equal(out[:8], b[:8]) {
			t.Fatalf("round trip %x -> %v -> %x", b[:8], ap, out[:8])
		}
	})
}

// TestSockaddrIn6: a sockaddr_in6 written and read back, and Sockaddr
// telling the families apart by sa_family.
func TestSockaddrIn6(t *testing.T) {
	b := make([]byte, SockaddrIn6Len)
	for i := range b {
		b[i] = 0xee // PutSockaddrIn6 clears flow information and scope
	}
	ap := netip.MustParseAddrPort("[2001:2::1]:5000")
	if n := PutSockaddrIn6(b, ap); n != 28 {
		t.Fatalf("PutSockaddrIn6 wrote %d bytes, want 28", n)
	}
	if !bytes.Equal(b[4:8], make([]byte, 4)) || !bytes.Equal(b[24:], make([]byte, 4)) {
		t.Fatalf("flow information or scope not cleared: %x", b)
	}
	if got, ok := Sockaddr(b); !ok || got != ap {
		t.Fatalf("Sockaddr(sockaddr_in6) = %v, %v", got, ok)
	}
	if _, ok := SockaddrIn4(b); ok {
		t.Fatal("SockaddrIn4 took a sockaddr_in6")
	}
	in4 := make([]byte, SockaddrInLen)
	PutSockaddrIn4(in4, netip.MustParseAddrPort("198.18.0.1:9"))
	if got, ok := Sockaddr(in4); !ok || got != netip.MustParseAddrPort("198.18.0.1:9") {
		t.Fatalf("Sockaddr(sockaddr_in) = %v, %v", got, ok)
	}
	if _, ok := Sockaddr(b[:20]); ok {
		t.Fatal("Sockaddr took a cut sockaddr_in6")
	}
}

func FuzzSockaddr(f *testing.F) {
	b := make([]byte, SockaddrIn6Len)
	PutSockaddrIn6(b, netip.MustParseAddrPort("[2001:2::1]:5000"))
	f.Add(b)
	f.Add([]byte{10, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ap, ok := Sockaddr(b)
		if !ok {
			return
		}
		if ap.Addr().Is4() && len(b) >= 2 && b[0] == 10 && b[1] == 0 {
			return // an IPv4-mapped sockaddr_in6 reads as IPv4
		}
		out := make([]byte, SockaddrIn6Len)
		n := SockaddrInLen
		if ap.Addr().Is6() {
			n = PutSockaddrIn6(out, ap)
			if !bytes.Equal(out[:4], b[:4]) || !bytes.Equal(out[8:24], b[8:24]) {
				t.Fatalf("round trip %x -> %v -> %x", b, ap, out[:n])
			}
			return
		}
		PutSockaddrIn4(out, ap)
		if !bytes.Equal(out[:8], b[:8]) {
			t.Fatalf("round trip %x -> %v -> %x", b[:8], ap, out[:8])
		}
	})
}
