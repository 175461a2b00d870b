package wire

import "encoding/binary"

// EtherTypes the wire looks at.
const (
	etherIPv4  = 0x0800
	etherVLAN  = 0x8100 // IEEE 802.1Q
	etherQinQ  = 0x88a8 // IEEE 802.1ad
	etherHdr   = 14
	vlanTagLen = 4
	maxTags    = 2
)

// ipv4Span finds the IPv4 packet in an Ethernet frame, after up to two VLAN
// tags: its offset and its length (the header's total length, cut to what
// the frame holds; the rest of the frame if the total length is below the
// minimum header). ok is false when the frame does not carry IPv4 or has
// no byte of it.
func ipv4Span(f []byte) (off, n int, ok bool) {
	off = 12
	for tags := 0; ; tags++ {
		if len(f) < off+2 {
			return 0, 0, false
		}
		et := binary.BigEndian.Uint16(f[off:])
		if (et == etherVLAN || et == etherQinQ) && tags < maxTags {
			off += vlanTagLen
			continue
		}
		if et != etherIPv4 {
			return 0, 0, false
		}
		off += 2
		break
	}
	rest := len(f) - off
	if rest <= 0 {
		return 0, 0, false
	}
	n = rest
	if rest >= 4 {
		if tot := int(binary.BigEndian.Uint16(f[off+2:])); tot >= 20 && tot < rest {
			n = tot
		}
	}
	return off, n, true
}

// corrupt XORs one byte of the IPv4 packet in frame f with mask: the byte
// at (at modulo the packet's length) from the start of its header. It
// reports whether it changed the frame (false for frames without IPv4, or
// a zero mask).
func corrupt(f []byte, at uint32, mask byte) bool {
	off, n, ok := ipv4Span(f)
	if !ok || mask == 0 {
		return false
	}
	f[off+int(at%uint32(n))] ^= mask
	return true
}

// insertVLAN puts back the VLAN tag (tpid, tci) that the receiving device
// took out of frame buf[:n] into the packet's metadata, after the two MAC
// addresses, and returns the new length. buf must have room for n+4 bytes
// and n must be at least 12.
func insertVLAN(buf []byte, n int, tpid, tci uint16) int {
	copy(buf[12+vlanTagLen:n+vlanTagLen], buf[12:n])
	binary.BigEndian.PutUint16(buf[12:], tpid)
	binary.BigEndian.PutUint16(buf[14:], tci)
	return n + vlanTagLen
}
