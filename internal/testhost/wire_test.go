//go:build linux

package testhost

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// capture opens an AF_PACKET socket on h's veth end, inside its namespace.
func capture(t *testing.T, h *Host) int {
	t.Helper()
	var fd int
	err := h.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			return err
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 64<<20)
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: h.Index})
	})
	if err != nil {
		t.Fatalf("packet socket on %s: %v", h.Iface, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// tcpChecksumOK verifies the TCP checksum of an IPv4 packet.
func tcpChecksumOK(ip []byte) bool {
	ihl := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	if total > len(ip) || ihl < 20 || total < ihl+20 {
		return false
	}
	seg := ip[ihl:total]
	var sum uint32
	add := func(b []byte) {
		for len(b) >= 2 {
			sum += uint32(binary.BigEndian.Uint16(b))
			b = b[2:]
		}
		if len(b) == 1 {
			sum += uint32(b[0]) << 8
		}
	}
	add(ip[12:20]) // source and destination
	sum += uint32(unix.IPPROTO_TCP) + uint32(len(seg))
	add(seg)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return sum == 0xffff
}

// sendTCP moves n bytes from A to B over kernel TCP inside the namespaces
// and returns the frames B's capture saw from A: their lengths on the wire
// and whether each TCP checksum was valid.
func sendTCP(t *testing.T, p *Pair, n int) (lens []int, badSum int) {
	t.Helper()
	fd := capture(t, p.B)
	ln, err := p.B.ListenTCP(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		m, _ := io.Copy(io.Discard, c)
		got <- m
	}()
	var c net.Conn
	if err := p.A.Do(func() error {
		var err error
		c, err = net.DialTimeout("tcp4", ln.Addr().String(), 20*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if m := <-got; m != int64(n) {
		t.Fatalf("B received %d bytes, want %d", m, n)
	}
	buf := make([]byte, 1<<17)
	src := p.A.Addr.As4()
	for {
		m, _, err := unix.Recvfrom(fd, buf, unix.MSG_TRUNC)
		if err == unix.EAGAIN {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		f := buf[:min(m, len(buf))]
		if len(f) < 14+20 || binary.BigEndian.Uint16(f[12:14]) != unix.ETH_P_IP || f[14+9] != unix.IPPROTO_TCP ||
			[4]byte(f[14+12:14+16]) != src {
			continue
		}
		lens = append(lens, m)
		if !tcpChecksumOK(f[14:]) {
			badSum++
		}
	}
	return lens, badSum
}

// TestFramesLikeAWire checks what a raw path would see on B when a kernel
// TCP sender on A writes a burst: no frame longer than MTU + Ethernet
// header, every checksum complete. With the offloads kept on, the same
// capture shows super-frames or partial checksums, so the check can fail.
func TestFramesLikeAWire(t *testing.T) {
	const n = 512 << 10
	p := newT(t, Options{})
	lens, bad := sendTCP(t, p, n)
	if len(lens) < n/1500 {
		t.Fatalf("captured only %d TCP frames from A", len(lens))
	}
	for _, l := range lens {
		if l > 1514 {
			t.Errorf("frame of %d bytes on a 1500-byte MTU link", l)
			break
		}
	}
	if bad != 0 {
		t.Errorf("%d of %d frames with a bad TCP checksum", bad, len(lens))
	}

	k := newT(t, Options{KeepOffloads: true})
	lens, bad = sendTCP(t, k, n)
	big := 0
	for _, l := range lens {
		if l > 1514 {
			big++
		}
	}
	t.Logf("offloads on: %d frames, %d longer than 1514, %d with a partial checksum", len(lens), big, bad)
	if big == 0 && bad == 0 {
		t.Error("with offloads on, every frame still looked like a wire's: this test cannot tell")
	}
}
