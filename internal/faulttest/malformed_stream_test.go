package faulttest

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
)

// streamBadCase is a broken or hostile frame for a userspace TCP server.
// on is the 4-tuple it targets: the established connection's (peer is the
// kernel client's address and port) or a fresh one (another source port).
type streamBadCase struct {
	name  string
	frame func(e *wireEnds, conn netip.AddrPort) []byte
}

// evil is the payload of a segment that must never reach the application.
var evil = []byte("EVIL: this must never be delivered")

var streamBadCases = []streamBadCase{
	{"data with a bad checksum on the connection", func(e *wireEnds, c netip.AddrPort) []byte {
		f := e.segOn(c, tcpACK|tcpPSH, evil)
		f[len(f)-1] ^= 1
		return f
	}},
	{"rst with a sequence number out of the window", func(e *wireEnds, c netip.AddrPort) []byte { return e.segOn(c, tcpRST, nil) }},
	{"syn on the established connection", func(e *wireEnds, c netip.AddrPort) []byte { return e.segOn(c, tcpSYN, nil) }},
	{"data out of the window on the connection", func(e *wireEnds, c netip.AddrPort) []byte { return e.segOn(c, tcpACK|tcpPSH, evil) }},
	{"syn+fin to the listener", func(e *wireEnds, _ netip.AddrPort) []byte { return e.tcp(tcpSYN | tcpFIN) }},
	{"syn+rst to the listener", func(e *wireEnds, _ netip.AddrPort) []byte { return e.tcp(tcpSYN | tcpRST) }},
	{"no flags to the listener", func(e *wireEnds, _ netip.AddrPort) []byte { return e.tcp(0) }},
	{"fin+psh+urg to the listener", func(e *wireEnds, _ netip.AddrPort) []byte { return e.tcp(tcpFIN | tcpPSH | tcpURG) }},
	{"data without ack to the listener", func(e *wireEnds, _ netip.AddrPort) []byte { return e.tcp(tcpPSH) }},
	{"truncated tcp header", func(e *wireEnds, _ netip.AddrPort) []byte { return e.tcp(tcpSYN)[:14+20+10] }},
	{"tcp data offset beyond the segment", func(e *wireEnds, c netip.AddrPort) []byte {
		f := e.segOn(c, tcpACK|tcpPSH, evil)
		f[14+20+12] = 15 << 4
		l4Sum(e.src.Addr(), e.dst.Addr(), 6, f[14+20:], 16)
		return f
	}},
	{"ip total length beyond the frame", func(e *wireEnds, c netip.AddrPort) []byte {
		f := e.segOn(c, tcpACK|tcpPSH, evil)
		binary.BigEndian.PutUint16(ip(f)[2:], uint16(len(ip(f))+64))
		fixIPSum(ip(f))
		return f
	}},
	{"bad ip checksum", func(e *wireEnds, c netip.AddrPort) []byte {
		f := e.segOn(c, tcpACK|tcpPSH, evil)
		ip(f)[10] ^= 0x5a
		return f
	}},
	{"fragment of a segment", func(e *wireEnds, c netip.AddrPort) []byte {
		f := e.segOn(c, tcpACK|tcpPSH, evil)
		binary.BigEndian.PutUint16(ip(f)[6:], 0x2000)
		fixIPSum(ip(f))
		return f
	}},
	{"802.1Q tagged segment", func(e *wireEnds, c netip.AddrPort) []byte {
		return ether(e.dstMAC, e.srcMAC, 0x0800, ip(e.segOn(c, tcpACK|tcpPSH, evil)), 0x8100, 7)
	}},
	{"udp to the port", func(e *wireEnds, _ netip.AddrPort) []byte { return e.datagram(evil) }},
}

// segOn is a TCP segment from the connection's client address c to e.dst
// with a sequence number far from anything the connection uses.
func (e *wireEnds) segOn(c netip.AddrPort, flags byte, payload []byte) []byte {
	seg := tcpSeg(c, e.dst, flags, payload)
	binary.BigEndian.PutUint32(seg[4:], 0x7fff0000)
	return ether(e.dstMAC, e.srcMAC, 0x0800, ipv4(c.Addr(), e.dst.Addr(), 6, nil, seg))
}

// malformedStream: a server of a userspace TCP kind on B, one kernel TCP
// client on A connected to it, and the frames of streamBadCases written
// onto B's wire from A with an AF_PACKET socket, three of each, each batch
// followed by a record over the kernel connection as a marker. The server
// delivers only the markers, accepts no other connection, keeps the one it
// has (no reset from a blind RST or SYN), and the connection carries a
// thousand records afterwards.
func malformedStream(t *testing.T, kind string, p *testhost.Pair) {
	onThread(t, p.B, func() error {
		cfg := serverConfig(kind, p.B)
		srv, err := openHere(cfg)
		if err != nil {
			return err
		}
		defer srv.Close()
		conn := dialPolling(t, p.A, srv, netip.AddrPortFrom(cfg.LocalIP, port))
		defer conn.Close()
		client := conn.LocalAddr().(*net.TCPAddr).AddrPort()
		client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
		e := &wireEnds{srcMAC: p.A.MAC, dstMAC: p.B.MAC,
			src: netip.AddrPortFrom(p.A.Addr, 40001), dst: netip.AddrPortFrom(cfg.LocalIP, port)}
		write := func(records ...string) {
			var b []byte
			for _, r := range records {
				b = binary.BigEndian.AppendUint16(b, uint16(len(r)))
				b = append(b, r...)
			}
			if _, err := conn.Write(b); err != nil {
				fatalf(t, "kernel client write: %v", err)
			}
		}
		x := newMarkerRun(t, kind, srv, newRawSender(t, p.A), client, true, func(m []byte) { write(string(m)) })
		x.exchange()
		s0 := srv.Stats()
		for _, c := range streamBadCases {
			f := c.frame(e, client)
			if got := x.exchange(f, f, f); len(got) != 0 {
				t.Errorf("%s: delivered %q", c.name, got)
			}
		}
		// The connection still carries records: a thousand, in order.
		after := make([]string, 1000)
		for i := range after {
			after[i] = afterMsg(i)
		}
		write(after...)
		checkAfter(t, "records that arrived after the broken frames", x.exchange(), 1000)
		s1 := srv.Stats()
		t.Logf("server counters before: %s", allCounters(s0))
		t.Logf("server counters after: %s", allCounters(s1))
		x.finish()
		if s1.Accepts != s0.Accepts || s1.Conns != 1 || s1.Resets != s0.Resets || s1.PeerCloses != s0.PeerCloses {
			t.Errorf("connections: accepts %d→%d, open %d, resets %d→%d, peer closes %d→%d",
				s0.Accepts, s1.Accepts, s1.Conns, s0.Resets, s1.Resets, s0.PeerCloses, s1.PeerCloses)
		}
		return nil
	})
}

// dialPolling connects a kernel TCP client in h's namespace to addr, a
// server of a userspace TCP kind, while it polls srv (netstack answers ARP
// and the handshake only when driven). Whatever the server sends on the
// connection is read and dropped. The caller closes the connection.
func dialPolling(t testing.TB, h *testhost.Host, srv dgramio.Backend, addr netip.AddrPort) *net.TCPConn {
	var conn *net.TCPConn
	dialed := make(chan error, 1)
	go func() {
		c, err := dialTCP(h, addr, 10*time.Second)
		if err == nil {
			conn = c.(*net.TCPConn)
		}
		dialed <- err
	}()
	pkts := make([]dgramio.Packet, 64)
	for dialing := true; dialing; {
		select {
		case err := <-dialed:
			if err != nil {
				fatalf(t, "kernel client: %v", err)
			}
			dialing = false
		default:
			srv.Rx(pkts)
			srv.Flush()
			time.Sleep(100 * time.Microsecond)
		}
	}
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := conn.Read(buf); err != nil {
				return
			}
		}
	}()
	return conn
}
