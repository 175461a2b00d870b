// Package ndp is IPv6 neighbour discovery (RFC 4861) for the raw kinds,
// where the kinds' IPv4 path uses package arp: it answers Neighbor
// Solicitations for our address (and our link-local one) with
// Advertisements, and resolves a peer's MAC address with our own
// solicitations, keeping what it learnt in a bounded neighbour cache with
// the states of RFC 4861 §7.3.2. The dpdk kind always uses it for an IPv6
// Config (no kernel owns the address on a DPDK port), the xdp kind with
// Config.XDP.OwnARP.
//
// Frames are read through ParseFrame, which applies the validity checks
// of RFC 4861 §7.1.1 and §7.1.2 and says why a frame was refused, and
// built into caller buffers by AppendNS and AppendNA. A Handler does the
// protocol over a frameio.FrameIO, with the same methods as arp.Handler,
// so package udp drives either the same way.
//
// This package serves the raw kinds; it is not a stable API of its own.
package ndp

import (
	"encoding/binary"
	"net/netip"

	"github.com/dgramio/dgramio/internal/checksum"
)

// Sizes and field values of NDP over Ethernet.
const (
	EthernetLen = 14
	IPv6Len     = 40
	EtherIPv6   = 0x86dd
	ProtoICMPv6 = 58
	// TypeNS and TypeNA are the ICMPv6 types of a Neighbor Solicitation
	// and Advertisement (RFC 4861 §4.3, §4.4).
	TypeNS = 135
	TypeNA = 136
	// MsgLen is the fixed part of a solicitation or advertisement: type,
	// code, checksum, flags or reserved, target.
	MsgLen = 24
	// HopLimit is the only hop limit NDP accepts: 255 proves the sender is
	// on the link (§7.1.1).
	HopLimit = 255
	// OptSrcLL and OptTgtLL are the link-layer address options (§4.6.1).
	OptSrcLL = 1
	OptTgtLL = 2
	// OptLLLen is a link-layer address option for Ethernet: length 1,
	// 8 bytes (RFC 2464 §6).
	OptLLLen = 8
	// FrameLen is a solicitation or advertisement with one link-layer
	// address option in an Ethernet frame (86 bytes: never padded).
	FrameLen = EthernetLen + IPv6Len + MsgLen + OptLLLen
	// The flags of an advertisement (§4.4).
	FlagRouter    = 0x80
	FlagSolicited = 0x40
	FlagOverride  = 0x20
)

// AllNodes is ff02::1, the link-local all-nodes address (RFC 4291
// §2.7.1): where an advertisement answering duplicate address detection
// goes.
var AllNodes = netip.AddrFrom16([16]byte{0xff, 0x02, 15: 1})

// SolicitedNode returns the solicited-node multicast address of a,
// ff02::1:ffXX:XXXX with a's low 24 bits (RFC 4291 §2.7.1), where a
// solicitation to resolve a goes.
func SolicitedNode(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom16([16]byte{0xff, 0x02, 11: 0x01, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]})
}

// MulticastMAC returns the Ethernet address of the IPv6 multicast address
// a: 33:33 and a's low 32 bits (RFC 2464 §7).
func MulticastMAC(a netip.Addr) [6]byte {
	b := a.As16()
	return [6]byte{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

// LinkLocal returns the link-local address fe80::/64 with the modified
// EUI-64 interface identifier of mac (RFC 4291 §2.5.6 and Appendix A,
// RFC 2464 §5): the address Linux gives an Ethernet interface, which
// peers may solicit us on.
func LinkLocal(mac [6]byte) netip.Addr {
	return netip.AddrFrom16([16]byte{0xfe, 0x80, 8: mac[0] ^ 0x02, 9: mac[1], 10: mac[2], 11: 0xff, 12: 0xfe,
		13: mac[3], 14: mac[4], 15: mac[5]})
}

// Reason says why ParseFrame refused a frame; OK when it did not.
type Reason uint8

// ParseFrame's verdicts.
const (
	OK Reason = iota
	// NotNDP: not an Ethernet/IPv6/ICMPv6 frame carrying a solicitation or
	// an advertisement right after the fixed header (an NDP message after
	// extension headers is not taken either). Not counted by a Handler:
	// the frame goes on to the datagram parser.
	NotNDP
	// Short: shorter than its headers say, or than a message (§7.1.1:
	// "ICMP length ... is 24 or more octets").
	Short
	// BadHopLimit: a hop limit other than 255 (§7.1.1, §7.1.2): the
	// message came from off the link.
	BadHopLimit
	// BadChecksum: the ICMPv6 checksum is wrong (RFC 4443 §2.3).
	BadChecksum
	// BadCode: ICMP code not 0.
	BadCode
	// TargetMulticast: the target is a multicast address.
	TargetMulticast
	// BadOptionLength: an option of length 0, or one running past the
	// message (§4.6, §7.1.1).
	BadOptionLength
	// BadLLOption: a link-layer address option that is not 8 bytes long
	// (an Ethernet one, RFC 2464 §6).
	BadLLOption
	// DADBadDest: a solicitation from the unspecified address not sent to
	// a solicited-node address (§7.1.1).
	DADBadDest
	// DADWithSrcLL: a solicitation from the unspecified address with a
	// source link-layer address option (§7.1.1).
	DADWithSrcLL
	// SolicitedToMulticast: an advertisement to a multicast address with
	// the Solicited flag set (§7.1.2).
	SolicitedToMulticast
	numReasons
)

var reasonNames = [numReasons]string{
	OK: "ok", NotNDP: "not_ndp", Short: "short", BadHopLimit: "bad_hop_limit", BadChecksum: "bad_checksum",
	BadCode: "bad_code", TargetMulticast: "target_multicast", BadOptionLength: "bad_option_length",
	BadLLOption: "bad_ll_option", DADBadDest: "dad_bad_destination", DADWithSrcLL: "dad_with_source_ll",
	SolicitedToMulticast: "solicited_to_multicast",
}

// String returns the reason's name ("bad_hop_limit", ...).
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Message is a parsed solicitation or advertisement, copied out of its
// frame.
type Message struct {
	// EthDst and EthSrc are the Ethernet header's addresses.
	EthDst, EthSrc [6]byte
	// Src and Dst are the IPv6 addresses.
	Src, Dst netip.Addr
	// Type is TypeNS or TypeNA.
	Type uint8
	// Target is the address solicited or advertised.
	Target netip.Addr
	// Flags are an advertisement's (FlagRouter, FlagSolicited,
	// FlagOverride); 0 in a solicitation.
	Flags uint8
	// LL is the link-layer address option when HasLL: the source's in a
	// solicitation, the target's in an advertisement.
	LL    [6]byte
	HasLL bool
}

// ParseFrame reads frame, an Ethernet II frame without FCS, as a Neighbor
// Solicitation or Advertisement with the validity checks of RFC 4861
// §7.1.1 and §7.1.2, in the order of the Reason constants. Unknown
// options are skipped (§4.6); of repeated link-layer address options the
// first counts. It does not allocate or modify frame.
func ParseFrame(frame []byte) (Message, Reason) {
	var m Message
	if len(frame) < EthernetLen+IPv6Len || binary.BigEndian.Uint16(frame[12:14]) != EtherIPv6 {
		return m, NotNDP
	}
	ip := frame[EthernetLen:]
	if ip[0]>>4 != 6 || ip[6] != ProtoICMPv6 {
		return m, NotNDP
	}
	pl := int(binary.BigEndian.Uint16(ip[4:6]))
	if pl < 1 || len(ip) < IPv6Len+1 {
		return m, NotNDP
	}
	if t := ip[IPv6Len]; t != TypeNS && t != TypeNA {
		return m, NotNDP
	}
	if IPv6Len+pl > len(ip) || pl < MsgLen {
		return m, Short
	}
	msg := ip[IPv6Len : IPv6Len+pl]
	copy(m.EthDst[:], frame[0:6])
	copy(m.EthSrc[:], frame[6:12])
	src, dst := [16]byte(ip[8:24]), [16]byte(ip[24:40])
	m.Src, m.Dst = netip.AddrFrom16(src), netip.AddrFrom16(dst)
	m.Type = msg[0]
	if ip[7] != HopLimit {
		return m, BadHopLimit
	}
	if checksum.Fold(checksum.Sum(pseudoSum(&src, &dst, len(msg)), msg)) != 0xffff {
		return m, BadChecksum
	}
	if msg[1] != 0 {
		return m, BadCode
	}
	m.Target = netip.AddrFrom16([16]byte(msg[8:24]))
	if m.Target.IsMulticast() {
		return m, TargetMulticast
	}
	want := uint8(OptSrcLL)
	if m.Type == TypeNA {
		want = OptTgtLL
		m.Flags = msg[4] & (FlagRouter | FlagSolicited | FlagOverride)
	}
	for o := msg[MsgLen:]; len(o) > 0; {
		if len(o) < 2 || o[1] == 0 || int(o[1])*8 > len(o) {
			return m, BadOptionLength
		}
		l := int(o[1]) * 8
		if o[0] == want && !m.HasLL {
			if l != OptLLLen {
				return m, BadLLOption
			}
			m.LL, m.HasLL = [6]byte(o[2:8]), true
		}
		o = o[l:]
	}
	if m.Type == TypeNS && m.Src.IsUnspecified() {
		if SolicitedNode(m.Target) != m.Dst {
			return m, DADBadDest
		}
		if m.HasLL {
			return m, DADWithSrcLL
		}
	}
	if m.Type == TypeNA && m.Dst.IsMulticast() && m.Flags&FlagSolicited != 0 {
		return m, SolicitedToMulticast
	}
	return m, OK
}

// pseudoSum is the sum of the IPv6 pseudo-header of ICMPv6 (RFC 8200
// §8.1, RFC 4443 §2.3).
func pseudoSum(src, dst *[16]byte, n int) uint64 {
	return checksum.Sum(checksum.Sum(0, src[:]), dst[:]) + ProtoICMPv6 + uint64(n)
}

// appendFrame appends the Ethernet and IPv6 headers of an NDP message and
// the message msg (its checksum field zero), computing the checksum.
func appendFrame(dst []byte, ethDst, ethSrc [6]byte, src, to netip.Addr, msg []byte) []byte {
	dst = append(dst, ethDst[:]...)
	dst = append(dst, ethSrc[:]...)
	dst = binary.BigEndian.AppendUint16(dst, EtherIPv6)
	dst = append(dst, 0x60, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(msg)))
	dst = append(dst, ProtoICMPv6, HopLimit)
	s, d := src.As16(), to.As16()
	dst = append(dst, s[:]...)
	dst = append(dst, d[:]...)
	m := len(dst)
	dst = append(dst, msg...)
	c := ^checksum.Fold(checksum.Sum(pseudoSum(&s, &d, len(msg)), dst[m:]))
	binary.BigEndian.PutUint16(dst[m+2:m+4], c)
	return dst
}

// AppendNS appends to dst a Neighbor Solicitation for target from src
// (our address) with a source link-layer address option carrying mac
// (RFC 4861 §4.3, §7.2.2). With to unset it resolves target: the frame
// goes to target's solicited-node address and its multicast MAC;
// otherwise it probes a cached neighbour (§7.3.3): to target itself at
// the MAC to.
func AppendNS(dst []byte, mac [6]byte, src, target netip.Addr, to *[6]byte) []byte {
	var msg [MsgLen + OptLLLen]byte
	msg[0] = TypeNS
	t := target.As16()
	copy(msg[8:24], t[:])
	msg[24], msg[25] = OptSrcLL, 1
	copy(msg[26:32], mac[:])
	ipDst, ethDst := SolicitedNode(target), [6]byte{}
	if to != nil {
		ipDst, ethDst = target, *to
	} else {
		ethDst = MulticastMAC(ipDst)
	}
	return appendFrame(dst, ethDst, mac, src, ipDst, msg[:])
}

// AppendNA appends to dst a Neighbor Advertisement for target (our
// address) at mac, from target to the IPv6 address to at the MAC ethTo,
// with flags and a target link-layer address option (RFC 4861 §4.4).
func AppendNA(dst []byte, mac [6]byte, target, to netip.Addr, ethTo [6]byte, flags uint8) []byte {
	var msg [MsgLen + OptLLLen]byte
	msg[0] = TypeNA
	msg[4] = flags & (FlagRouter | FlagSolicited | FlagOverride)
	t := target.As16()
	copy(msg[8:24], t[:])
	msg[24], msg[25] = OptTgtLL, 1
	copy(msg[26:32], mac[:])
	return appendFrame(dst, ethTo, mac, target, to, msg[:])
}
