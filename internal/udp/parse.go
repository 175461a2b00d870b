package udp

import (
	"bytes"
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/pad"
)

// Filter says which frames are ours. Zero fields match anything.
type Filter struct {
	// MAC is our Ethernet address: frames to another (including broadcast
	// and multicast) are not ours. nil: any.
	MAC net.HardwareAddr
	// Addr is our IPv4 or IPv6 address: frames of the other family are
	// not ours (OtherFamily). The zero Addr: any, of either family.
	Addr netip.Addr
	// Port is our UDP port. 0: any.
	Port uint16
}

// Reason is Parse's verdict on a frame. Each reason belongs to one class
// (Class): delivered, filtered (not ours), malformed, or bad checksum.
type Reason uint8

// Parse's verdicts.
const (
	// OK: a datagram for us.
	OK Reason = iota

	// Not ours, seen and ignored (ClassFiltered).

	// NotIPv4: an EtherType other than IPv4 and IPv6 (ARP, ...). The
	// name is the counter's since before IPv6.
	NotIPv4
	// VLAN: an 802.1Q or 802.1ad tagged frame. Our interface is untagged;
	// a tagged frame belongs to a VLAN interface we are not, as the
	// kernel would hand it to a VLAN device, so it is not ours rather
	// than malformed.
	VLAN
	// OtherMAC: to another Ethernet address (or broadcast, multicast).
	OtherMAC
	// OtherProto: IPv4, but not UDP.
	OtherProto
	// OtherAddr: to another IP address.
	OtherAddr
	// OtherFamily: IPv6 to an IPv4 Filter.Addr, or IPv4 to an IPv6 one.
	OtherFamily
	// OtherPort: UDP to another port.
	OtherPort

	// Could be ours but cannot be parsed (ClassMalformed).

	// Short: shorter than the headers it claims.
	Short
	// BadVersion: EtherType IPv4 but the version field is not 4, or
	// EtherType IPv6 and not 6.
	BadVersion
	// BadIHL: an IPv4 header length below 20 bytes.
	BadIHL
	// IPOptions: an IPv4 header with options (IHL > 5), which raw paths do
	// not take. The XDP program leaves such packets to the kernel.
	IPOptions
	// Fragment: an IPv4 fragment, or an IPv6 packet whose first Next
	// Header is a Fragment header; raw paths do not reassemble.
	Fragment
	// ExtHeader: an IPv6 packet with an extension header before UDP
	// (RFC 8200 §4), which raw paths do not walk. The XDP program leaves
	// such packets to the kernel.
	ExtHeader
	// BadTotalLen: the IPv4 total length or the IPv6 payload length
	// disagrees with the frame (longer than the frame, or shorter in a
	// frame longer than the 60-byte minimum, where the rest cannot be
	// padding).
	BadTotalLen
	// BadUDPLen: the UDP length disagrees with the IP length.
	BadUDPLen
	// ZeroUDPChecksum6: an IPv6 UDP datagram with checksum 0, which
	// RFC 8200 §8.1 says to discard (over IPv6 the checksum is
	// mandatory).
	ZeroUDPChecksum6

	// Damaged in flight (ClassBadChecksum).

	// BadIPChecksum: the IPv4 header checksum is wrong. It is checked
	// before the address, so a frame whose destination was damaged counts
	// here, not as someone else's.
	BadIPChecksum
	// BadUDPChecksum: the UDP checksum is wrong (0, "none", is accepted).
	BadUDPChecksum

	numReasons
)

var reasonNames = [numReasons]string{
	OK: "ok", NotIPv4: "not_ipv4", VLAN: "vlan", OtherMAC: "other_mac", OtherProto: "other_proto",
	OtherAddr: "other_addr", OtherFamily: "other_family", OtherPort: "other_port", Short: "short",
	BadVersion: "bad_version", BadIHL: "bad_ihl", IPOptions: "ip_options", Fragment: "fragment",
	ExtHeader: "ip6_ext_header", BadTotalLen: "bad_total_len", BadUDPLen: "bad_udp_len",
	ZeroUDPChecksum6: "udp6_zero_checksum", BadIPChecksum: "bad_ip_checksum", BadUDPChecksum: "bad_udp_checksum",
}

// String returns the reason's counter name ("other_port", ...).
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Class groups reasons the way dgramio.Stats counts them.
type Class uint8

// The classes.
const (
	ClassDelivered   Class = iota // OK
	ClassFiltered                 // dgramio.Stats.RxFiltered: not ours, not a loss
	ClassMalformed                // dgramio.Stats.RxMalformed
	ClassBadChecksum              // dgramio.Stats.RxBadChecksum
)

// Class returns the class of r.
func (r Reason) Class() Class {
	switch {
	case r == OK:
		return ClassDelivered
	case r <= OtherPort:
		return ClassFiltered
	case r <= ZeroUDPChecksum6:
		return ClassMalformed
	default:
		return ClassBadChecksum
	}
}

// Datagram is what Parse finds in a frame.
type Datagram struct {
	// Payload is the UDP payload. It aliases the frame: valid as long as
	// the frame is.
	Payload []byte
	// From and To are the sender's and receiver's address and port.
	From, To netip.AddrPort
	// SrcMAC is the sender's (or its last router's) Ethernet address: where
	// an answer goes.
	SrcMAC [6]byte
}

// Parse validates frame, an Ethernet II frame without FCS, as an IPv4/UDP
// or IPv6/UDP datagram that f accepts, and returns it with OK, or the
// first reason it is not. Checks, in order: Ethernet header, EtherType
// (VLAN tags and other types are not ours), destination MAC, the family
// (f.Addr's), then for IPv4: version, header length,
// header checksum, protocol and destination address (not ours), options
// and fragments (malformed for us), total length (the frame may carry
// padding up to 60 bytes, not beyond), destination port (not ours), UDP
// length, UDP checksum (0: none); for IPv6 (see parse6): version, next
// header, destination address, payload length, destination port, UDP
// length, UDP checksum (0 refused). Parse does not allocate and does not
// modify frame.
func Parse(frame []byte, f *Filter) (Datagram, Reason) {
	if len(frame) < EthernetLen {
		return Datagram{}, Short
	}
	eth := Ethernet(frame)
	v6 := false
	switch eth.Type() {
	case EtherIPv4:
	case EtherIPv6:
		v6 = true
	case EtherVLAN, EtherQinQ:
		return Datagram{}, VLAN
	default:
		return Datagram{}, NotIPv4
	}
	if f.MAC != nil && !bytes.Equal(eth.Dst(), f.MAC) {
		return Datagram{}, OtherMAC
	}
	if f.Addr.IsValid() && f.Addr.Is4() == v6 {
		return Datagram{}, OtherFamily
	}
	if v6 {
		return parse6(frame, f)
	}
	ip := IPv4(eth.Payload())
	if len(ip) < IPv4Len {
		return Datagram{}, Short
	}
	if ip.Version() != 4 {
		return Datagram{}, BadVersion
	}
	hl := ip.HeaderLen()
	if hl < IPv4Len {
		return Datagram{}, BadIHL
	}
	if len(ip) < hl {
		return Datagram{}, Short
	}
	if Checksum(ip[:hl]) != 0 {
		return Datagram{}, BadIPChecksum
	}
	if ip.Protocol() != ProtoUDP {
		return Datagram{}, OtherProto
	}
	dst := ip.Dst()
	if f.Addr.IsValid() && dst != f.Addr {
		return Datagram{}, OtherAddr
	}
	if hl != IPv4Len {
		return Datagram{}, IPOptions
	}
	if ip.IsFragment() {
		return Datagram{}, Fragment
	}
	tl := ip.TotalLen()
	if tl > len(ip) || tl < IPv4Len+UDPLen || (len(frame) > pad.MinFrame && tl != len(ip)) {
		return Datagram{}, BadTotalLen
	}
	u := Header(ip[IPv4Len:tl])
	if f.Port != 0 && u.DstPort() != f.Port {
		return Datagram{}, OtherPort
	}
	if u.Length() != len(u) {
		return Datagram{}, BadUDPLen
	}
	src := ip.Src()
	if u.Checksum() != 0 {
		acc := pseudoSum(src.As4(), dst.As4(), len(u))
		if ^Fold(Sum(acc, u)) != 0 {
			return Datagram{}, BadUDPChecksum
		}
	}
	d := Datagram{
		Payload: u[UDPLen:],
		From:    netip.AddrPortFrom(src, u.SrcPort()),
		To:      netip.AddrPortFrom(dst, u.DstPort()),
	}
	copy(d.SrcMAC[:], eth.Src())
	return d, OK
}

// parse6 is Parse for an IPv6 frame, after the Ethernet checks. The
// datagram must follow the fixed header: an extension header first is
// ExtHeader (Fragment for a Fragment header), after the address test, as
// IPv4 options are. IPv6 has no header checksum; the UDP checksum covers
// the addresses through the pseudo-header (RFC 8200 §8.1), and 0 is
// refused.
func parse6(frame []byte, f *Filter) (Datagram, Reason) {
	ip := IPv6(frame[EthernetLen:])
	if len(ip) < IPv6Len {
		return Datagram{}, Short
	}
	if ip.Version() != 6 {
		return Datagram{}, BadVersion
	}
	nh := ip.NextHeader()
	if nh != ProtoUDP && !isExtHeader(nh) {
		return Datagram{}, OtherProto
	}
	dst := ip.Dst()
	if f.Addr.IsValid() && dst != f.Addr {
		return Datagram{}, OtherAddr
	}
	switch {
	case nh == 44:
		return Datagram{}, Fragment
	case nh != ProtoUDP:
		return Datagram{}, ExtHeader
	}
	pl := ip.PayloadLen()
	tl := IPv6Len + pl
	if tl > len(ip) || pl < UDPLen || (len(frame) > pad.MinFrame && tl != len(ip)) {
		return Datagram{}, BadTotalLen
	}
	u := Header(ip[IPv6Len:tl])
	if f.Port != 0 && u.DstPort() != f.Port {
		return Datagram{}, OtherPort
	}
	if u.Length() != len(u) {
		return Datagram{}, BadUDPLen
	}
	if u.Checksum() == 0 {
		return Datagram{}, ZeroUDPChecksum6
	}
	src := ip.Src()
	s16, d16 := [16]byte(ip[8:24]), [16]byte(ip[24:40])
	if ^Fold(Sum(pseudoSum6(&s16, &d16, len(u)), u)) != 0 {
		return Datagram{}, BadUDPChecksum
	}
	d := Datagram{
		Payload: u[UDPLen:],
		From:    netip.AddrPortFrom(src, u.SrcPort()),
		To:      netip.AddrPortFrom(dst, u.DstPort()),
	}
	copy(d.SrcMAC[:], frame[6:12])
	return d, OK
}

// Counters count Parse's verdicts. The zero value is ready; it must not be
// copied after first use. Counting and reading are atomic, so Stats may
// read while the poll loop counts.
type Counters struct {
	n [numReasons]atomic.Uint64
}

// Count adds one frame with verdict r.
func (c *Counters) Count(r Reason) {
	if r < numReasons {
		c.n[r].Add(1)
	}
}

// Get returns the count of r.
func (c *Counters) Get(r Reason) uint64 {
	if r < numReasons {
		return c.n[r].Load()
	}
	return 0
}

// Class returns the sum of the counts of the reasons in class k.
func (c *Counters) Class(k Class) uint64 {
	var s uint64
	for r := OK; r < numReasons; r++ {
		if r.Class() == k {
			s += c.n[r].Load()
		}
	}
	return s
}

// AppendLayers appends one dgramio.Counter per reason other than OK, named as
// Reason.String names them, under layer. Loss is false on all: they are
// the breakdown of dgramio.Stats.RxFiltered, RxMalformed and RxBadChecksum,
// which count the losses already.
func (c *Counters) AppendLayers(dst []dgramio.Counter, layer string) []dgramio.Counter {
	for r := OK + 1; r < numReasons; r++ {
		dst = append(dst, dgramio.Counter{Layer: layer, Name: r.String(), Value: c.n[r].Load()})
	}
	return dst
}
