// Package arp answers ARP requests for our IPv4 address and resolves a
// peer's MAC address with our own requests, where no kernel owns the
// address: the dpdk kind always, the xdp kind when Config.XDP.OwnARP says
// so. Without it a peer with an IP stack asks who has our address, gets no
// answer and sends nothing, which from outside looks like a dead card.
//
// Frames are parsed through a validated view (Packet, IsValid) and built
// into caller buffers padded to the 60-byte minimum (an ARP frame is 42
// bytes; a card or peer may drop a runt). A Handler does the protocol over
// a frameio.FrameIO: Handle answers and learns from received frames,
// Resolve sends requests with retries and a timeout, a small cache keeps
// what was learnt, and counters show it all in Stats.
//
// This package serves the raw kinds; it is not a stable API of its own.
package arp

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"

	"github.com/dgramio/dgramio/internal/pad"
)

// Sizes and field values of ARP for Ethernet and IPv4 (RFC 826).
const (
	EthernetLen = 14
	// Len is the ARP payload for Ethernet/IPv4.
	Len = 28
	// FrameLen is an ARP frame before padding; frames are sent padded to 60.
	FrameLen  = EthernetLen + Len
	EtherARP  = 0x0806
	EtherIPv4 = 0x0800
	HWEther   = 1
	OpRequest = 1
	OpReply   = 2
)

// Broadcast is the Ethernet broadcast address, where requests go.
var Broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// Packet is a view of an ARP payload (after the Ethernet header). Call
// IsValid before any other method.
type Packet []byte

// IsValid reports whether p is an Ethernet/IPv4 ARP request or reply: at
// least 28 bytes, hardware type 1 with 6-byte addresses, protocol type
// IPv4 with 4-byte addresses, operation 1 or 2. Bytes after the 28 (frame
// padding) are ignored.
func (p Packet) IsValid() bool {
	if len(p) < Len {
		return false
	}
	op := p.Op()
	return binary.BigEndian.Uint16(p[0:2]) == HWEther && binary.BigEndian.Uint16(p[2:4]) == EtherIPv4 &&
		p[4] == 6 && p[5] == 4 && (op == OpRequest || op == OpReply)
}

// Op returns the operation: OpRequest or OpReply.
func (p Packet) Op() uint16 { return binary.BigEndian.Uint16(p[6:8]) }

// SenderMAC returns the sender hardware address (aliasing p).
func (p Packet) SenderMAC() net.HardwareAddr { return net.HardwareAddr(p[8:14]) }

// SenderIP returns the sender protocol address.
func (p Packet) SenderIP() netip.Addr { return netip.AddrFrom4([4]byte(p[14:18])) }

// TargetMAC returns the target hardware address (aliasing p); zero in a
// request.
func (p Packet) TargetMAC() net.HardwareAddr { return net.HardwareAddr(p[18:24]) }

// TargetIP returns the target protocol address.
func (p Packet) TargetIP() netip.Addr { return netip.AddrFrom4([4]byte(p[24:28])) }

// Message is a parsed ARP frame, copied out of it.
type Message struct {
	// EthDst and EthSrc are the Ethernet header's addresses.
	EthDst, EthSrc [6]byte
	// Op is OpRequest or OpReply.
	Op uint16
	// SenderMAC, SenderIP, TargetMAC and TargetIP are the ARP fields.
	SenderMAC, TargetMAC [6]byte
	SenderIP, TargetIP   netip.Addr
}

// Errors of ParseARP. They are values, so parsing never allocates.
var (
	// ErrNotARP: the frame's EtherType is not ARP.
	ErrNotARP = errors.New("arp: not an ARP frame")
	// ErrMalformed: an ARP frame that is too short, or not Ethernet/IPv4,
	// or has an unknown operation.
	ErrMalformed = errors.New("arp: malformed ARP frame")
)

// IsARP reports whether frame has the ARP EtherType.
func IsARP(frame []byte) bool {
	return len(frame) >= EthernetLen && binary.BigEndian.Uint16(frame[12:14]) == EtherARP
}

// ParseARP parses frame, an Ethernet frame without FCS. It returns
// ErrNotARP for another EtherType (or a frame shorter than the Ethernet
// header) and ErrMalformed when the ARP payload is not valid. It does not
// allocate; the Message holds copies.
func ParseARP(frame []byte) (Message, error) {
	if !IsARP(frame) {
		return Message{}, ErrNotARP
	}
	p := Packet(frame[EthernetLen:])
	if !p.IsValid() {
		return Message{}, ErrMalformed
	}
	m := Message{Op: p.Op(), SenderIP: p.SenderIP(), TargetIP: p.TargetIP()}
	copy(m.EthDst[:], frame[0:6])
	copy(m.EthSrc[:], frame[6:12])
	copy(m.SenderMAC[:], p.SenderMAC())
	copy(m.TargetMAC[:], p.TargetMAC())
	return m, nil
}

// appendFrame appends an ARP frame, padded to 60 bytes.
func appendFrame(dst []byte, ethDst, src net.HardwareAddr, op uint16, srcIP netip.Addr, targetMAC net.HardwareAddr, targetIP netip.Addr) []byte {
	n := len(dst)
	dst = append(dst, ethDst[:6]...)
	dst = append(dst, src[:6]...)
	dst = binary.BigEndian.AppendUint16(dst, EtherARP)
	dst = binary.BigEndian.AppendUint16(dst, HWEther)
	dst = binary.BigEndian.AppendUint16(dst, EtherIPv4)
	dst = append(dst, 6, 4)
	dst = binary.BigEndian.AppendUint16(dst, op)
	dst = append(dst, src[:6]...)
	s := srcIP.As4()
	dst = append(dst, s[:]...)
	dst = append(dst, targetMAC[:6]...)
	t := targetIP.As4()
	dst = append(dst, t[:]...)
	return pad.Extend(dst, n)
}

var zeroMAC = net.HardwareAddr{0, 0, 0, 0, 0, 0}

// AppendRequest appends to dst a broadcast request from srcMAC/srcIP
// asking who has target, padded to 60 bytes, and returns the extended
// slice. srcMAC must be 6 bytes and the addresses IPv4. It allocates only
// when dst lacks capacity.
func AppendRequest(dst []byte, srcMAC net.HardwareAddr, srcIP, target netip.Addr) []byte {
	return appendFrame(dst, Broadcast, srcMAC, OpRequest, srcIP, zeroMAC, target)
}

// AppendReply appends to dst a unicast reply from srcMAC/srcIP ("srcIP is
// at srcMAC") to dstMAC/dstIP, padded to 60 bytes, and returns the
// extended slice. The MACs must be 6 bytes and the addresses IPv4.
func AppendReply(dst []byte, srcMAC net.HardwareAddr, srcIP netip.Addr, dstMAC net.HardwareAddr, dstIP netip.Addr) []byte {
	return appendFrame(dst, dstMAC, srcMAC, OpReply, srcIP, dstMAC, dstIP)
}
