package conformance

import (
	"bytes"
	"encoding/binary"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// IPv4, ICMP and UDP cases.
func init() {
	register(
		Case{
			Name:  "icmp-echo",
			RFC:   "RFC 792 (Echo) / RFC 1122 §3.2.2.6",
			Title: "an echo request is answered by an echo reply with the same identifier, sequence number and data",
			Needs: []Cap{CapIP},
			Run: func(e *Env) {
				data := Pattern(56, 1)
				e.SendFrame(e.Echo(0x4242, 1, data))
				e.ExpectEchoReply(0x4242, 1, data)
				e.CounterRose(CounterICMPEchoReplies, 1)
			},
		},
		Case{
			Name:  "icmp-echo-mtu",
			RFC:   "RFC 1122 §3.2.2.6 (echo data of any size up to the MTU is returned)",
			Title: "an echo request filling the MTU (1472 bytes of data) is answered whole",
			Needs: []Cap{CapIP},
			Run: func(e *Env) {
				data := Pattern(e.Info.MTU-28, 2)
				e.SendFrame(e.Echo(7, 9, data))
				e.ExpectEchoReply(7, 9, data)
			},
		},
		Case{
			Name:  "ipv4-bad-header-checksum",
			RFC:   "RFC 1122 §3.2.1.2",
			Title: "a datagram with a bad IPv4 header checksum is silently discarded (an echo request gets no reply)",
			Needs: []Cap{CapIP},
			Run: func(e *Env) {
				fr := e.Echo(1, 1, Pattern(32, 3))
				fr[14+10] ^= 0x5a // the IPv4 header checksum
				e.SendFrame(fr)
				e.ExpectNothing("echo reply to a bad header", Quiet, AnyIP)
				e.CounterRose(CounterIPHeaderErrors, 1)
				data := Pattern(32, 4)
				e.SendFrame(e.Echo(1, 2, data))
				e.ExpectEchoReply(1, 2, data)
			},
		},
		Case{
			Name:  "ipv4-bad-version",
			RFC:   "RFC 1122 §3.2.1.1",
			Title: "a datagram whose version is not 4 is silently discarded",
			Needs: []Cap{CapIP},
			Run: func(e *Env) {
				fr := e.Echo(1, 1, Pattern(32, 5))
				fr[14] = 6<<4 | fr[14]&0x0f
				// Keep the header checksum right, so that only the version
				// is wrong.
				binary.BigEndian.PutUint16(fr[14+10:], 0)
				binary.BigEndian.PutUint16(fr[14+10:], ^fold(sum(0, fr[14:34])))
				e.SendFrame(fr)
				e.ExpectNothing("answer to a datagram of version 6", Quiet, AnyIP)
				e.CounterRose(CounterIPHeaderErrors, 1)
			},
		},
		Case{
			Name:  "ipv4-not-for-us",
			RFC:   "RFC 1122 §3.2.1.3 (a host silently discards a datagram not destined for it)",
			Title: "a datagram to the DUT's MAC but another IPv4 address gets no answer and is not forwarded",
			Needs: []Cap{CapIP},
			Run: func(e *Env) {
				ip := e.IPv4(layers.IPProtocolICMPv4)
				ip.DstIP = e.Info.Spare.AsSlice()
				e.Send(e.Eth(layers.EthernetTypeIPv4), ip,
					&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 3, Seq: 3},
					gopacket.Payload(Pattern(16, 6)))
				e.ExpectNothing("answer or forwarded copy", Quiet, Any)
			},
		},
		Case{
			Name:  "ipv4-fragments-reassembled",
			RFC:   "RFC 791 §3.2 (reassembly) / RFC 1122 §3.3.2",
			Title: "an echo request in four fragments, sent in order, is reassembled and answered with all its data",
			Needs: []Cap{CapIP},
			Run: func(e *Env) {
				data := Pattern(1000, 7)
				for _, f := range e.Fragments(e.Echo(11, 1, data), 256) {
					e.SendFrame(f)
				}
				e.ExpectEchoReply(11, 1, data)
			},
		},
		Case{
			Name:  "ipv4-fragments-reordered",
			RFC:   "RFC 791 §3.2 (fragments may arrive in any order)",
			Title: "an echo request in four fragments sent last first is reassembled and answered",
			Needs: []Cap{CapIP},
			Run: func(e *Env) {
				data := Pattern(1000, 8)
				fs := e.Fragments(e.Echo(12, 1, data), 256)
				for i := len(fs) - 1; i >= 0; i-- {
					e.SendFrame(fs[i])
				}
				e.ExpectEchoReply(12, 1, data)
			},
		},
		Case{
			Name:  "ipv4-unknown-protocol",
			RFC:   "RFC 1122 §3.2.2.1 (Protocol Unreachable) / RFC 792",
			Title: "a datagram for a transport protocol the DUT lacks (253) is answered by ICMP protocol unreachable quoting its header",
			Needs: []Cap{CapIP},
			Run: func(e *Env) {
				ip := e.IPv4(layers.IPProtocol(253))
				fr := e.Build(e.Eth(layers.EthernetTypeIPv4), ip, gopacket.Payload(Pattern(24, 9)))
				e.SendFrame(fr)
				f := e.ExpectICMP(layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4CodeProtocol)
				checkQuote(e, f, fr)
			},
		},
		Case{
			Name:  "udp-closed-port-unreachable",
			RFC:   "RFC 1122 §4.1.3.1 / §3.2.2.1 (Port Unreachable)",
			Title: "a UDP datagram to a port nobody listens on is answered by ICMP port unreachable quoting its header",
			Needs: []Cap{CapIP},
			Run: func(e *Env) {
				ip := e.IPv4(layers.IPProtocolUDP)
				u := &layers.UDP{SrcPort: layers.UDPPort(e.Port()), DstPort: closedPort}
				u.SetNetworkLayerForChecksum(ip)
				fr := e.Build(e.Eth(layers.EthernetTypeIPv4), ip, u, gopacket.Payload(Pattern(20, 10)))
				e.SendFrame(fr)
				f := e.ExpectICMP(layers.ICMPv4TypeDestinationUnreachable, layers.ICMPv4CodePort)
				checkQuote(e, f, fr)
				if _, noUDP := e.Info.Lacks[CapUDP]; !noUDP {
					e.CounterRose(CounterUDPNoPort, 1)
				}
			},
		},
		Case{
			Name:  "udp-zero-checksum",
			RFC:   "RFC 768 (an all-zero checksum means none) / RFC 1122 §4.1.3.4",
			Title: "a UDP datagram with checksum 0 is delivered to the socket",
			Needs: []Cap{CapIP, CapUDP},
			Run: func(e *Env) {
				u := udpSocket(e, 5353)
				data := Pattern(100, 11)
				fr := udpFrame(e, 5353, data)
				binary.BigEndian.PutUint16(fr[14+20+6:], 0)
				e.SendFrame(fr)
				expectUDP(e, u, data)
			},
		},
		Case{
			Name:  "udp-bad-checksum",
			RFC:   "RFC 1122 §4.1.3.4 (a datagram whose checksum fails is silently discarded)",
			Title: "a UDP datagram with a wrong checksum is not delivered; the next good one is",
			Needs: []Cap{CapIP, CapUDP},
			Run: func(e *Env) {
				u := udpSocket(e, 5353)
				fr := udpFrame(e, 5353, Pattern(100, 12))
				fr[len(fr)-1] ^= 0xff
				e.SendFrame(fr)
				buf := make([]byte, 2048)
				if n, _, err := u.Read(buf, Quiet); err != ErrWouldBlock {
					e.Errorf("a datagram with a bad checksum was delivered (%d bytes, %v)", n, err)
				}
				e.CounterRose(CounterUDPChecksumErr, 1)
				data := Pattern(100, 13)
				e.SendFrame(udpFrame(e, 5353, data))
				expectUDP(e, u, data)
			},
		},
		Case{
			Name:  "udp-fragments-reassembled",
			RFC:   "RFC 791 §3.2 / RFC 1122 §3.3.2 (reassembly before UDP)",
			Title: "a 3000-byte UDP datagram in three fragments (reordered) is delivered whole",
			Needs: []Cap{CapIP, CapUDP},
			Run: func(e *Env) {
				u := udpSocket(e, 5353)
				data := Pattern(3000, 14)
				fs := e.Fragments(udpFrame(e, 5353, data), 1480)
				e.SendFrame(fs[1])
				e.SendFrame(fs[2])
				e.SendFrame(fs[0])
				expectUDP(e, u, data)
				e.CounterRose(CounterIPReassembled, 1)
			},
		},
	)
}

// checkQuote checks an ICMP error against the datagram that caused it: it
// quotes the offending IPv4 header and at least 8 bytes after it (RFC 792,
// RFC 1122 §3.2.2), comes from the DUT and goes to the bench.
func checkQuote(e *Env, f *Frame, sent []byte) {
	e.Helper()
	if !f.IP.SrcIP.Equal(e.Info.Addr.AsSlice()) || !f.IP.DstIP.Equal(e.Info.BenchAddr.AsSlice()) {
		e.Errorf("ICMP error %v -> %v, want %v -> %v", f.IP.SrcIP, f.IP.DstIP, e.Info.Addr, e.Info.BenchAddr)
	}
	// The ICMP payload after the 4 unused bytes is the quote; gopacket
	// puts those 4 bytes in Id and Seq.
	quote := f.Payload
	orig := sent[14:]
	if len(quote) < 28 {
		e.Fatalf("ICMP error quotes %d bytes, want the IPv4 header and 8 bytes at least", len(quote))
	}
	// The quoted header may differ in TTL and checksum on a router; a
	// host quotes what it got. Compare from the transport header on, and
	// the addresses.
	if !bytes.Equal(quote[12:20], orig[12:20]) || !bytes.Equal(quote[20:28], orig[20:28]) {
		e.Errorf("quote does not match the datagram sent:\n got % x\nwant % x", quote[:28], orig[:28])
	}
}

func udpSocket(e *Env, port uint16) UDPConn {
	e.Helper()
	u, err := e.DUT.ListenUDP(port)
	if err != nil {
		e.Fatalf("UDP socket: %v", err)
	}
	e.Cleanup(func() { u.Close() })
	return u
}

func udpFrame(e *Env, port uint16, data []byte) []byte {
	e.Helper()
	ip := e.IPv4(layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: 33333, DstPort: layers.UDPPort(port)}
	u.SetNetworkLayerForChecksum(ip)
	return e.Build(e.Eth(layers.EthernetTypeIPv4), ip, u, gopacket.Payload(data))
}

func expectUDP(e *Env, u UDPConn, data []byte) {
	e.Helper()
	buf := make([]byte, 65536)
	n, from, err := u.Read(buf, e.Answer())
	if err != nil {
		e.Fatalf("UDP read: %v", err)
	}
	if !bytes.Equal(buf[:n], data) {
		e.Errorf("datagram of %d bytes differs from the %d sent", n, len(data))
	}
	if from.Addr() != e.Info.BenchAddr || from.Port() != 33333 {
		e.Errorf("datagram from %v, want %v:33333", from, e.Info.BenchAddr)
	}
}
