//go:build linux

package native

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/net/icmp"
	xipv6 "golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
)

// rawLink is an AF_PACKET socket on a test host's veth end: our side of
// the wire, where the building blocks speak for the host's IPv6 address
// in place of its kernel.
type rawLink struct {
	t  *testing.T
	fd int
	h  *testhost.Host
}

func newRawLink(t *testing.T, h *testhost.Host) *rawLink {
	r := &rawLink{t: t, h: h, fd: -1}
	err := h.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons6(unix.ETH_P_IPV6)))
		if err != nil {
			return err
		}
		r.fd = fd
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons6(unix.ETH_P_IPV6), Ifindex: h.Index})
	})
	if err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(20 * time.Second))
	if err := unix.SetsockoptTimeval(r.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(r.fd) })
	return r
}

func htons6(v uint16) uint16 { return v<<8 | v>>8 }

// next returns the next IPv6 frame received for which match says true,
// parsed; it fails the test after the socket's timeout.
func (r *rawLink) next(match func(eth []byte, p []byte, h *ip6Hdr) bool) ([]byte, []byte, ip6Hdr) {
	r.t.Helper()
	buf := make([]byte, 9000)
	for {
		n, _, err := unix.Recvfrom(r.fd, buf, 0)
		if err != nil {
			r.t.Fatalf("raw receive: %v", err)
		}
		f := append([]byte(nil), buf[:n]...)
		var h ip6Hdr
		if n < ethLen || binary.BigEndian.Uint16(f[12:]) != etherIPv6 || parseIPv6(f[ethLen:], &h) != ip6OK {
			continue
		}
		if match(f[:ethLen], f[ethLen:], &h) {
			return f[:ethLen], f[ethLen:], h
		}
	}
}

// send puts the IPv6 packet p on the wire to dstMAC from the host's MAC.
func (r *rawLink) send(dstMAC [6]byte, p []byte) {
	r.t.Helper()
	f := make([]byte, ethLen+len(p))
	putEth(f, dstMAC, [6]byte(r.h.MAC), etherIPv6)
	copy(f[ethLen:], p)
	if err := unix.Sendto(r.fd, f, 0, &unix.SockaddrLinklayer{Ifindex: r.h.Index}); err != nil {
		r.t.Fatalf("raw send: %v", err)
	}
}

// TestIPv6AgainstLinux: the building blocks speak for B's IPv6 address,
// taken off B's kernel, to A's Linux: Linux's neighbour solicitation
// passes parseNDP's checks (RFC 4861 §7.1.1) and our advertisement
// resolves it (A's entry REACHABLE with B's MAC, §7.2.5); Linux's UDP
// datagram passes the walk and the pseudo-header checksum (RFC 8200
// §8.1); Linux takes our echo reply (RFC 4443 §4.2) and our port
// unreachable (§3.1: the connected socket gets ECONNREFUSED).
func TestIPv6AgainstLinux(t *testing.T) {
	p := hosttest.New(t, testhost.Options{IPv6: true})
	if err := p.B.DelAddr6(); err != nil {
		t.Fatal(err)
	}
	raw := newRawLink(t, p.B)
	b6, a6 := ip6Addr(p.B.Addr6.As16()), ip6Addr(p.A.Addr6.As16())
	bMAC, aMAC := [6]byte(p.B.MAC), [6]byte(p.A.MAC)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := p.A.DialContext(ctx, "udp6", net.JoinHostPort(p.B.Addr6.String(), "5000"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	msg := []byte("to an address no kernel owns")
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}

	// Linux resolves B's address: its solicitation, answered by ours.
	eth, pkt, h := raw.next(func(_ []byte, p []byte, h *ip6Hdr) bool {
		return h.proto == protoICMPv6 && h.off < h.end && p[h.off] == icmp6NeighSol
	})
	var nd ndMsg
	if e := parseNDP(&h, h.payload(pkt), &nd); e != ndpOK {
		t.Fatalf("Linux's solicitation fails %v", e)
	}
	if nd.target != b6 || !nd.hasLL || nd.ll != aMAC || h.dst != solicitedNode(b6) || [6]byte(eth[:6]) != multicastMAC6(solicitedNode(b6)) {
		t.Fatalf("Linux's solicitation: %+v to %x", nd, eth[:6])
	}
	out := make([]byte, 1500)
	n, to := answerNS(out, b6, bMAC, &h, &nd, [6]byte(eth[6:12]))
	if n == 0 || to != aMAC {
		t.Fatalf("answer: %d bytes to %x", n, to)
	}
	raw.send(to, out[:n])

	// The datagram Linux held for the resolution.
	_, pkt, h = raw.next(func(_ []byte, _ []byte, h *ip6Hdr) bool { return h.proto == protoUDP && h.dst == b6 })
	u := h.payload(pkt)
	if h.src != a6 || !verify6(h.src, h.dst, protoUDP, u) || !bytes.Equal(u[8:], msg) {
		t.Fatalf("Linux's datagram: %+v, checksum ok %v, %q", h, verify6(h.src, h.dst, protoUDP, u), u)
	}
	if mac, state, err := p.A.Neigh(p.B.Addr6); err != nil || !bytes.Equal(mac, p.B.MAC) || state&netlink.NUD_REACHABLE == 0 {
		t.Errorf("A's entry for B: %v state %#x %v, want %v REACHABLE", mac, state, err, p.B.MAC)
	}

	// Port unreachable for it: Linux reports it to the connected socket.
	if !mayAnswerError6(pkt, &h, false, icmp6Unreachable, unreach6Port) {
		t.Fatal("mayAnswerError6 refuses a unicast UDP datagram")
	}
	n = buildError6(out, b6, pkt, icmp6Unreachable, unreach6Port, 0)
	raw.send(aMAC, out[:n])
	if _, err := c.Read(make([]byte, 64)); !errors.Is(err, unix.ECONNREFUSED) {
		t.Errorf("A's socket after our port unreachable: %v, want ECONNREFUSED", err)
	}

	// Echo: Linux pings B's address, we answer.
	var ic *icmp.PacketConn
	if err := p.A.Do(func() (err error) { ic, err = icmp.ListenPacket("ip6:ipv6-icmp", p.A.Addr6.String()); return }); err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	ic.SetDeadline(time.Now().Add(20 * time.Second))
	req, _ := (&icmp.Message{Type: xipv6.ICMPTypeEchoRequest, Body: &icmp.Echo{ID: 0x4d2, Seq: 9, Data: []byte("ping from Linux")}}).Marshal(nil)
	if _, err := ic.WriteTo(req, &net.IPAddr{IP: p.B.Addr6.AsSlice()}); err != nil {
		t.Fatal(err)
	}
	_, pkt, h = raw.next(func(_ []byte, p []byte, h *ip6Hdr) bool {
		return h.proto == protoICMPv6 && h.off < h.end && p[h.off] == icmp6EchoRequest
	})
	if e := checkICMPv6(&h, h.payload(pkt)); e != icmp6OK {
		t.Fatalf("Linux's echo request: %v", e)
	}
	n = buildEchoReply6(out, b6, &h, h.payload(pkt))
	raw.send(aMAC, out[:n])
	buf := make([]byte, 1500)
	for {
		k, _, err := ic.ReadFrom(buf)
		if err != nil {
			t.Fatalf("A waiting for our echo reply: %v", err)
		}
		m, err := icmp.ParseMessage(58, buf[:k])
		if err != nil || m.Type != xipv6.ICMPTypeEchoReply {
			continue // the socket also sees A's own request and others
		}
		if e, ok := m.Body.(*icmp.Echo); !ok || e.ID != 0x4d2 || e.Seq != 9 || string(e.Data) != "ping from Linux" {
			t.Fatalf("echo reply as Linux read it: %+v", m.Body)
		}
		break
	}
}
