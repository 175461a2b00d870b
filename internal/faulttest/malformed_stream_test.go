package faulttest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
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
func malformedStream(t *testing.T, kind string) {
	p := hosttest.New(t, testhost.Options{})
	onThread(t, p.B, func() error {
		cfg := serverConfig(kind, p.B)
		srv, err := openHere(cfg)
		if err != nil {
			return err
		}
		defer srv.Close()
		// The kernel client connects while the server is polled: netstack
		// answers ARP and the handshake only when driven.
		var conn *net.TCPConn
		dialed := make(chan error, 1)
		go func() {
			dialed <- p.A.Do(func() error {
				c, err := net.DialTimeout("tcp4", netip.AddrPortFrom(cfg.LocalIP, port).String(), 10*time.Second)
				if err == nil {
					conn = c.(*net.TCPConn)
				}
				return err
			})
		}()
		pkts := make([]core.Packet, 64)
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
		defer conn.Close()
		go func() { // whatever the server sends back is read and dropped
			buf := make([]byte, 4096)
			for {
				if _, err := conn.Read(buf); err != nil {
					return
				}
			}
		}()
		client := conn.LocalAddr().(*net.TCPAddr).AddrPort()
		client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
		raw := newRawSender(t, p.A)
		e := &wireEnds{srcMAC: p.A.MAC, dstMAC: p.B.MAC,
			src: netip.AddrPortFrom(p.A.Addr, 40001), dst: netip.AddrPortFrom(cfg.LocalIP, port)}
		var rc calls
		rc.name = kind + " server"
		watch(t, &rc)
		var errs errLog
		marker := 0
		exchange := func(frames ...[]byte) [][]byte {
			for _, f := range frames {
				raw.send(t, f)
			}
			marker++
			m := []byte(fmt.Sprintf("marker %d", marker))
			rec := binary.BigEndian.AppendUint16(nil, uint16(len(m)))
			if _, err := conn.Write(append(rec, m...)); err != nil {
				fatalf(t, "kernel client write: %v", err)
			}
			var got [][]byte
			for end := time.Now().Add(20 * time.Second); time.Now().Before(end); {
				rc.begin(opRx)
				n, err := srv.Rx(pkts)
				rc.end()
				if err != nil {
					errs.add(err)
				}
				rc.begin(opFlush)
				if err := srv.Flush(); err != nil {
					errs.add(err)
				}
				rc.end()
				for _, pk := range pkts[:n] {
					if bytes.Equal(pk.Data, m) {
						return got
					}
					got = append(got, bytes.Clone(pk.Data))
				}
				if n == 0 {
					time.Sleep(200 * time.Microsecond)
				}
			}
			fatalf(t, "marker %d did not arrive; server errors: %v", marker, errs.String())
			return nil
		}
		exchange()
		s0 := srv.Stats()
		for _, c := range streamBadCases {
			f := c.frame(e, client)
			got := exchange(f, f, f)
			if len(got) != 0 {
				t.Errorf("%s: delivered %q", c.name, got)
			}
		}
		// The connection still carries records: a thousand, in order.
		var stream []byte
		for i := 0; i < 1000; i++ {
			r := fmt.Sprintf("after %04d", i)
			stream = binary.BigEndian.AppendUint16(stream, uint16(len(r)))
			stream = append(stream, r...)
		}
		if _, err := conn.Write(stream); err != nil {
			fatalf(t, "kernel client write: %v", err)
		}
		got := exchange()
		if len(got) != 1000 {
			t.Errorf("%d of 1000 records arrived after the broken frames", len(got))
		}
		for i := range got {
			if want := fmt.Sprintf("after %04d", i); string(got[i]) != want {
				t.Errorf("record %d is %q, want %q", i, got[i], want)
				break
			}
		}
		s1 := srv.Stats()
		t.Logf("server counters before: %s", allCounters(s0))
		t.Logf("server counters after: %s", allCounters(s1))
		t.Logf("%v", &rc)
		rc.check(t)
		if errs.count() != 0 {
			t.Errorf("the server reported errors: %v", errs.String())
		}
		if s1.Accepts != s0.Accepts || s1.Conns != 1 || s1.Resets != s0.Resets || s1.PeerCloses != s0.PeerCloses {
			t.Errorf("connections: accepts %d→%d, open %d, resets %d→%d, peer closes %d→%d",
				s0.Accepts, s1.Accepts, s1.Conns, s0.Resets, s1.Resets, s0.PeerCloses, s1.PeerCloses)
		}
		return nil
	})
}
