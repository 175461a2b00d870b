package conformance

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// IPv6 frames of the bench (RFC 8200, RFC 4443, RFC 4861), built with
// gopacket from the bench's BenchAddr6 to the DUT's Addr6.

// IPv6 is an IPv6 header from the bench to the DUT carrying next, hop
// limit 64.
func (b *Bench) IPv6(next layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: next,
		SrcIP: b.info.BenchAddr6.AsSlice(), DstIP: b.info.Addr6.AsSlice()}
}

// Echo6 builds an ICMPv6 echo request from the bench to the DUT (RFC 4443
// §4.1).
func (b *Bench) Echo6(id, seq uint16, payload []byte) []byte {
	b.tb.Helper()
	ip := b.IPv6(layers.IPProtocolICMPv6)
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeEchoRequest, 0)}
	icmp.SetNetworkLayerForChecksum(ip)
	return b.serialize(b.Eth(layers.EthernetTypeIPv6), ip, icmp,
		&layers.ICMPv6Echo{Identifier: id, SeqNumber: seq}, gopacket.Payload(payload))
}

// solicitedNode is the solicited-node multicast address of a (RFC 4291
// §2.7.1: ff02::1:ffXX:XXXX with a's last 24 bits).
func solicitedNode(a netip.Addr) netip.Addr {
	s := [16]byte{0: 0xff, 1: 0x02, 11: 0x01, 12: 0xff}
	x := a.As16()
	copy(s[13:], x[13:])
	return netip.AddrFrom16(s)
}

// multicastMAC is the Ethernet address of IPv6 multicast address a (RFC
// 2464 §7: 33:33 and a's last 32 bits).
func multicastMAC(a netip.Addr) net.HardwareAddr {
	x := a.As16()
	return net.HardwareAddr{0x33, 0x33, x[12], x[13], x[14], x[15]}
}

// NS builds a neighbour solicitation from the bench (BenchAddr6, its MAC
// in the source link-layer address option) for target, sent to target's
// solicited-node multicast address with hop limit 255 (RFC 4861 §4.3,
// §7.2.2).
func (b *Bench) NS(target netip.Addr) []byte {
	b.tb.Helper()
	dst := solicitedNode(target)
	ip := b.IPv6(layers.IPProtocolICMPv6)
	ip.HopLimit, ip.DstIP = 255, dst.AsSlice()
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborSolicitation, 0)}
	icmp.SetNetworkLayerForChecksum(ip)
	return b.serialize(&layers.Ethernet{SrcMAC: b.info.BenchMAC, DstMAC: multicastMAC(dst), EthernetType: layers.EthernetTypeIPv6},
		ip, icmp, &layers.ICMPv6NeighborSolicitation{TargetAddress: target.AsSlice(),
			Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: b.info.BenchMAC}}})
}

// NA flags (RFC 4861 §4.4).
const (
	naRouter    = 0x80
	naSolicited = 0x40
	naOverride  = 0x20
)

// NAFor builds a solicited neighbour advertisement from target (an address
// the bench plays) to the DUT, saying target is at the bench's MAC (RFC
// 4861 §7.2.4).
func (b *Bench) NAFor(target netip.Addr) []byte {
	b.tb.Helper()
	ip := b.IPv6(layers.IPProtocolICMPv6)
	ip.HopLimit, ip.SrcIP = 255, target.AsSlice()
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborAdvertisement, 0)}
	icmp.SetNetworkLayerForChecksum(ip)
	return b.serialize(b.Eth(layers.EthernetTypeIPv6), ip, icmp,
		&layers.ICMPv6NeighborAdvertisement{Flags: naSolicited | naOverride, TargetAddress: target.AsSlice(),
			Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: b.info.BenchMAC}}})
}

// PacketTooBig builds an ICMPv6 Packet Too Big from the bench (a router on
// the path, RFC 4443 §3.2) with mtu, quoting the IPv6 packet of the DUT's
// frame f (as much of it as keeps the message within the minimum MTU).
func (b *Bench) PacketTooBig(mtu uint32, f *Frame) []byte {
	b.tb.Helper()
	quote := f.Raw[14:]
	if n := 14 + 40 + int(f.IP6.Length); n <= len(f.Raw) {
		quote = f.Raw[14:n]
	}
	quote = quote[:min(len(quote), 1280-40-8)]
	ip := b.IPv6(layers.IPProtocolICMPv6)
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypePacketTooBig, 0)}
	icmp.SetNetworkLayerForChecksum(ip)
	body := binary.BigEndian.AppendUint32(nil, mtu)
	return b.serialize(b.Eth(layers.EthernetTypeIPv6), ip, icmp, gopacket.Payload(append(body, quote...)))
}

// Fragments6 splits the IPv6 packet of frame (as Build made it, no
// extension headers) into frames carrying fragments of at most size bytes
// of its payload (a multiple of 8), with Fragment headers of
// identification id (RFC 8200 §4.5). Each is (offset, bytes) of the
// original payload: spans lets a case choose them (overlapping ones, for
// RFC 5722); nil spans cut the payload in order.
func (b *Bench) Fragments6(frame []byte, id uint32, spans [][2]int) [][]byte {
	b.tb.Helper()
	if len(frame) < 14+40 || frame[14]>>4 != 6 {
		b.tb.Fatalf("fragments6: not an IPv6 frame")
	}
	hdr := frame[14 : 14+40]
	payload := frame[14+40:]
	var out [][]byte
	for _, sp := range spans {
		off, n := sp[0], sp[1]
		if off%8 != 0 || off+n > len(payload) || n <= 0 {
			b.tb.Fatalf("fragments6: span %v of a %d-byte payload", sp, len(payload))
		}
		more := off+n < len(payload)
		fh := make([]byte, 8)
		fh[0] = hdr[6] // the upper layer's Next Header
		v := uint16(off)
		if more {
			v |= 1
		}
		binary.BigEndian.PutUint16(fh[2:], v)
		binary.BigEndian.PutUint32(fh[4:], id)
		ip := &layers.IPv6{Version: 6, HopLimit: hdr[7], NextHeader: layers.IPProtocolIPv6Fragment,
			SrcIP: net.IP(hdr[8:24]), DstIP: net.IP(hdr[24:40])}
		out = append(out, b.serialize(b.Eth(layers.EthernetTypeIPv6), ip, gopacket.Payload(fh), gopacket.Payload(payload[off:off+n])))
	}
	return out
}

// DestOpts is a Destination Options header (RFC 8200 §4.6) carrying
// options (type, length, data already laid out), padded with PadN to a
// multiple of 8 bytes, followed by next.
func DestOpts(next layers.IPProtocol, options []byte) []byte {
	h := append([]byte{byte(next), 0}, options...)
	switch pad := (8 - len(h)%8) % 8; pad {
	case 0:
	case 1:
		h = append(h, 0) // Pad1
	default:
		h = append(h, 1, byte(pad-2))
		h = append(h, make([]byte, pad-2)...)
	}
	h[1] = byte(len(h)/8 - 1)
	return h
}

// Matchers of IPv6 frames.

// IsICMP6 accepts ICMPv6 messages of type t and code c.
func IsICMP6(t, c uint8) Match {
	return func(f *Frame) bool {
		return f.ICMP6 != nil && f.ICMP6.TypeCode.Type() == t && f.ICMP6.TypeCode.Code() == c
	}
}

// IsICMP6Type accepts ICMPv6 messages of type t, any code.
func IsICMP6Type(t uint8) Match {
	return func(f *Frame) bool { return f.ICMP6 != nil && f.ICMP6.TypeCode.Type() == t }
}

// IsNA accepts neighbour advertisements for target.
func IsNA(target netip.Addr) Match {
	return func(f *Frame) bool { return f.NA != nil && f.NA.TargetAddress.Equal(target.AsSlice()) }
}

// IsNSFor accepts neighbour solicitations for target.
func IsNSFor(target netip.Addr) Match {
	return func(f *Frame) bool { return f.NS != nil && f.NS.TargetAddress.Equal(target.AsSlice()) }
}

// IsEcho6Reply accepts the ICMPv6 echo reply to id and seq.
func IsEcho6Reply(id, seq uint16) Match {
	return func(f *Frame) bool {
		return f.Echo6 != nil && f.ICMP6.TypeCode.Type() == layers.ICMPv6TypeEchoReply &&
			f.Echo6.Identifier == id && f.Echo6.SeqNumber == seq
	}
}

// ExpectEcho6Reply waits for the reply to an ICMPv6 echo request and checks
// that it comes from the DUT to the bench and carries payload back (RFC
// 4443 §4.2).
func (e *Env) ExpectEcho6Reply(id, seq uint16, payload []byte) *Frame {
	e.Helper()
	f := e.Expect(fmt.Sprintf("ICMPv6 echo reply id %d seq %d", id, seq), e.Answer(), IsEcho6Reply(id, seq))
	if !f.IP6.SrcIP.Equal(e.Info.Addr6.AsSlice()) || !f.IP6.DstIP.Equal(e.Info.BenchAddr6.AsSlice()) {
		e.Errorf("echo reply %v -> %v, want %v -> %v", f.IP6.SrcIP, f.IP6.DstIP, e.Info.Addr6, e.Info.BenchAddr6)
	}
	if len(f.Payload) < 4 || !bytes.Equal(f.Payload[4:], payload) {
		e.Errorf("echo reply carries %d bytes that differ from the %d sent (RFC 4443 §4.2: the data is returned)", max(len(f.Payload)-4, 0), len(payload))
	}
	return f
}
