package udp

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// Sizes and field values of the headers a raw datagram carries.
const (
	EthernetLen  = 14 // destination MAC, source MAC, EtherType
	IPv4Len      = 20 // IPv4 header without options (IHL 5)
	UDPLen       = 8
	HeaderLen    = EthernetLen + IPv4Len + UDPLen // 42: the template's length for IPv4
	IPv6Len      = 40                             // the IPv6 fixed header (RFC 8200 §3)
	HeaderLen6   = EthernetLen + IPv6Len + UDPLen // 62: the template's length for IPv6
	EtherIPv4    = 0x0800
	EtherIPv6    = 0x86dd
	EtherARP     = 0x0806
	EtherVLAN    = 0x8100 // IEEE 802.1Q tag
	EtherQinQ    = 0x88a8 // IEEE 802.1ad outer tag
	ProtoUDP     = 17
	ProtoICMPv6  = 58
	DefaultTTL   = 64
	ipFlagDF     = 0x4000
	ipFlagMF     = 0x2000
	ipFragOffset = 0x1fff
)

// MaxPayload returns the largest UDP payload an IPv4 packet of mtu bytes
// carries without options: mtu - 28.
func MaxPayload(mtu int) int { return mtu - IPv4Len - UDPLen }

// MaxPayloadFor returns the largest UDP payload a packet of mtu bytes
// carries: mtu - 28 for IPv4 (no options), mtu - 48 for IPv6 (no
// extension header).
func MaxPayloadFor(mtu int, ipv6 bool) int {
	if ipv6 {
		return mtu - IPv6Len - UDPLen
	}
	return MaxPayload(mtu)
}

// HeaderLenFor returns the length of the headers of a frame of the
// family: HeaderLen (42) for IPv4, HeaderLen6 (62) for IPv6.
func HeaderLenFor(ipv6 bool) int {
	if ipv6 {
		return HeaderLen6
	}
	return HeaderLen
}

// FrameLen returns the length of the IPv4 frame carrying payloadLen bytes,
// before padding: HeaderLen + payloadLen.
func FrameLen(payloadLen int) int { return HeaderLen + payloadLen }

// Ethernet is a view of an Ethernet II header and what follows. Its
// accessors assume len >= EthernetLen: check that first.
type Ethernet []byte

// Dst returns the destination MAC; it aliases the frame.
func (e Ethernet) Dst() net.HardwareAddr { return net.HardwareAddr(e[0:6]) }

// Src returns the source MAC; it aliases the frame.
func (e Ethernet) Src() net.HardwareAddr { return net.HardwareAddr(e[6:12]) }

// Type returns the EtherType.
func (e Ethernet) Type() uint16 { return binary.BigEndian.Uint16(e[12:14]) }

// Payload returns what follows the header.
func (e Ethernet) Payload() []byte { return e[EthernetLen:] }

// IPv4 is a view of an IPv4 header and what follows. Its accessors assume
// len >= IPv4Len; HeaderLen, TotalLen and the others are only meaningful on
// a view that Parse has validated.
type IPv4 []byte

// Version returns the version field (4 for IPv4).
func (h IPv4) Version() uint8 { return h[0] >> 4 }

// HeaderLen returns the header length in bytes (IHL * 4).
func (h IPv4) HeaderLen() int { return int(h[0]&0x0f) * 4 }

// TotalLen returns the total length field: header plus payload.
func (h IPv4) TotalLen() int { return int(binary.BigEndian.Uint16(h[2:4])) }

// ID returns the identification field.
func (h IPv4) ID() uint16 { return binary.BigEndian.Uint16(h[4:6]) }

// DF reports whether the don't-fragment flag is set.
func (h IPv4) DF() bool { return binary.BigEndian.Uint16(h[6:8])&ipFlagDF != 0 }

// IsFragment reports whether the packet is a fragment: more fragments
// follow, or it is not the first.
func (h IPv4) IsFragment() bool {
	f := binary.BigEndian.Uint16(h[6:8])
	return f&ipFlagMF != 0 || f&ipFragOffset != 0
}

// TTL returns the time to live.
func (h IPv4) TTL() uint8 { return h[8] }

// Protocol returns the transport protocol number (17 for UDP).
func (h IPv4) Protocol() uint8 { return h[9] }

// Checksum returns the header checksum field.
func (h IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(h[10:12]) }

// Src returns the source address.
func (h IPv4) Src() netip.Addr { return netip.AddrFrom4([4]byte(h[12:16])) }

// Dst returns the destination address.
func (h IPv4) Dst() netip.Addr { return netip.AddrFrom4([4]byte(h[16:20])) }

// IPv6 is a view of an IPv6 fixed header (RFC 8200 §3) and what follows.
// Its accessors assume len >= IPv6Len.
type IPv6 []byte

// Version returns the version field (6 for IPv6).
func (h IPv6) Version() uint8 { return h[0] >> 4 }

// PayloadLen returns the payload length field: what follows the fixed
// header.
func (h IPv6) PayloadLen() int { return int(binary.BigEndian.Uint16(h[4:6])) }

// NextHeader returns the type of the header after the fixed one (17 for
// UDP).
func (h IPv6) NextHeader() uint8 { return h[6] }

// HopLimit returns the hop limit.
func (h IPv6) HopLimit() uint8 { return h[7] }

// Src returns the source address.
func (h IPv6) Src() netip.Addr { return netip.AddrFrom16([16]byte(h[8:24])) }

// Dst returns the destination address.
func (h IPv6) Dst() netip.Addr { return netip.AddrFrom16([16]byte(h[24:40])) }

// isExtHeader reports whether nh is an IPv6 extension header type
// (RFC 8200 §4, the IANA list of RFC 7045 §2): Hop-by-Hop, Routing,
// Fragment, ESP, AH, Destination Options, Mobility, HIP, Shim6 and the
// experimental 253 and 254.
func isExtHeader(nh uint8) bool {
	switch nh {
	case 0, 43, 44, 50, 51, 60, 135, 139, 140, 253, 254:
		return true
	}
	return false
}

// Header is a view of a UDP header and its payload. Its accessors assume
// len >= UDPLen.
type Header []byte

// SrcPort returns the source port.
func (u Header) SrcPort() uint16 { return binary.BigEndian.Uint16(u[0:2]) }

// DstPort returns the destination port.
func (u Header) DstPort() uint16 { return binary.BigEndian.Uint16(u[2:4]) }

// Length returns the length field: header plus payload.
func (u Header) Length() int { return int(binary.BigEndian.Uint16(u[4:6])) }

// Checksum returns the checksum field; 0 means none was computed.
func (u Header) Checksum() uint16 { return binary.BigEndian.Uint16(u[6:8]) }
