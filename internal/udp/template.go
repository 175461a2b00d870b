package udp

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/dgramio/dgramio/internal/pad"
)

// Endpoints are what a Template writes into every frame.
type Endpoints struct {
	// SrcMAC and DstMAC are the Ethernet addresses: ours and the next hop's.
	SrcMAC, DstMAC net.HardwareAddr
	// Src and Dst are the IP addresses and UDP ports, both IPv4 or both
	// IPv6.
	Src, Dst netip.AddrPort
	// TTL is the IPv4 time to live or the IPv6 hop limit. 0 means
	// DefaultTTL (64).
	TTL uint8
	// DF sets IPv4's don't-fragment flag (IPv6 routers never fragment).
	DF bool
	// ID is the IPv4 identification of the first frame; each frame built
	// takes the next. IPv6 has none.
	ID uint16
}

// Template builds Ethernet/IPv4/UDP or Ethernet/IPv6/UDP frames for one
// pair of endpoints. The 42 (IPv4) or 62 (IPv6) header bytes are prepared
// once; Append copies them, fills in the lengths (and the IPv4
// identification), and computes the checksums in software, always: the
// IPv4 header checksum from a sum prepared over the fixed fields plus the
// two that change, the UDP checksum from a prepared sum over the
// pseudo-header and ports plus the lengths and the payload. Over IPv6 the
// UDP checksum is mandatory (RFC 8200 §8.1) and IPv6 has no header
// checksum. No offload is asked for, so frames are correct on any card
// and on veth.
//
// A Template is used by one goroutine at a time (Append advances the IPv4
// identification).
type Template struct {
	hdr    [HeaderLen6]byte // hdr[:hlen] is the header
	ipSum  uint64           // the IPv4 header with length, ID and checksum zero
	udpSum uint64           // pseudo-header without the length, plus the ports
	id     uint16
	hlen   uint8 // HeaderLen or HeaderLen6
	v6     bool
	e      Endpoints
	macs   [2][6]byte // e.SrcMAC and e.DstMAC point here
}

// NewTemplate prepares the header for e. Both addresses must be of one
// family (IPv4-mapped IPv6 addresses are not IPv4 here: unmap them first)
// and both MACs 6 bytes long.
func NewTemplate(e Endpoints) (*Template, error) {
	t := &Template{}
	if err := t.Reset(e); err != nil {
		return nil, err
	}
	return t, nil
}

// Reset prepares t for e, as NewTemplate does, without allocating.
func (t *Template) Reset(e Endpoints) error {
	if len(e.SrcMAC) != 6 || len(e.DstMAC) != 6 {
		return fmt.Errorf("udp: template: MAC addresses must be 6 bytes (source %v, destination %v)", e.SrcMAC, e.DstMAC)
	}
	sa, da := e.Src.Addr(), e.Dst.Addr()
	v4 := sa.Is4() && da.Is4()
	v6 := sa.Is6() && da.Is6() && !sa.Is4In6() && !da.Is4In6() && sa.Zone() == "" && da.Zone() == ""
	if !v4 && !v6 {
		return fmt.Errorf("udp: template: addresses must be both IPv4 or both IPv6, without zone (source %v, destination %v)", e.Src, e.Dst)
	}
	if e.TTL == 0 {
		e.TTL = DefaultTTL
	}
	h := &t.hdr
	*h = [HeaderLen6]byte{}
	copy(h[0:6], e.DstMAC)
	copy(h[6:12], e.SrcMAC)
	var u []byte
	var ps uint64 // the pseudo-header's sum without the length
	if v6 {
		binary.BigEndian.PutUint16(h[12:14], EtherIPv6)
		ip := h[EthernetLen : EthernetLen+IPv6Len]
		ip[0] = 0x60 // version 6, traffic class 0, flow label 0
		ip[6] = ProtoUDP
		ip[7] = e.TTL
		src, dst := sa.As16(), da.As16()
		copy(ip[8:24], src[:])
		copy(ip[24:40], dst[:])
		u = h[EthernetLen+IPv6Len:]
		t.ipSum = 0
		ps = pseudoSum6(&src, &dst, 0)
		t.hlen = HeaderLen6
	} else {
		binary.BigEndian.PutUint16(h[12:14], EtherIPv4)
		ip := h[EthernetLen : EthernetLen+IPv4Len]
		ip[0] = 0x45 // version 4, IHL 5
		if e.DF {
			binary.BigEndian.PutUint16(ip[6:8], ipFlagDF)
		}
		ip[8] = e.TTL
		ip[9] = ProtoUDP
		src, dst := sa.As4(), da.As4()
		copy(ip[12:16], src[:])
		copy(ip[16:20], dst[:])
		u = h[EthernetLen+IPv4Len:]
		t.ipSum = uint64(Fold(Sum(0, ip)))
		ps = pseudoSum(src, dst, 0)
		t.hlen = HeaderLen
	}
	binary.BigEndian.PutUint16(u[0:2], e.Src.Port())
	binary.BigEndian.PutUint16(u[2:4], e.Dst.Port())
	// Folded, so that adding the per-frame fields cannot overflow.
	t.udpSum = uint64(Fold(Sum(ps, u[0:4])))
	t.v6 = v6
	t.id = e.ID
	copy(t.macs[0][:], e.SrcMAC)
	copy(t.macs[1][:], e.DstMAC)
	e.SrcMAC, e.DstMAC = t.macs[0][:], t.macs[1][:]
	t.e = e
	return nil
}

// Endpoints returns what t was prepared for. Its MACs alias t: copy them
// before changing t.
func (t *Template) Endpoints() Endpoints { return t.e }

// HeaderLen returns the length of the headers t writes: HeaderLen (42)
// for IPv4, HeaderLen6 (62) for IPv6.
func (t *Template) HeaderLen() int { return int(t.hlen) }

// SetDstMAC changes the destination MAC of the frames built from now on
// (no checksum covers it).
func (t *Template) SetDstMAC(mac [6]byte) {
	copy(t.hdr[0:6], mac[:])
	t.macs[1] = mac
}

// DstMAC returns the destination MAC of the frames built.
func (t *Template) DstMAC() [6]byte { return t.macs[1] }

// Append appends to dst the frame that carries payload and returns the
// extended slice. The frame is t.HeaderLen()+len(payload) bytes, padded
// with zeros to 60 (ETH_ZLEN) when shorter (an IPv6 frame never is); the
// IP and UDP lengths count the payload only, so receivers ignore the
// padding. Append allocates only when dst lacks capacity; payload is
// copied, the caller keeps it. The payload must fit an IP packet without
// jumbogram: len(payload) <= 65507 (IPv4), 65527 (IPv6).
func (t *Template) Append(dst, payload []byte) []byte {
	n := len(dst)
	dst = append(dst, t.hdr[:t.hlen]...)
	dst = append(dst, payload...)
	t.fill(dst[n:], len(payload))
	return pad.Extend(dst, n)
}

// Build writes the frame carrying payload into buf and returns its length,
// padded to 60 bytes as Append pads, or 0 when buf is too short for it.
// The payload may already be in place at buf[t.HeaderLen():] (payload
// aliasing it exactly is allowed: nothing is copied then).
func (t *Template) Build(buf, payload []byte) int {
	hl := int(t.hlen)
	n := hl + len(payload)
	size := max(n, pad.MinFrame)
	if len(buf) < size {
		return 0
	}
	copy(buf, t.hdr[:hl])
	if len(payload) > 0 && &buf[hl] != &payload[0] {
		copy(buf[hl:], payload)
	}
	clear(buf[n:size])
	t.fill(buf[:n], len(payload))
	return size
}

// fill writes the lengths, identification and checksums into f, which
// holds the template's header followed by payloadLen bytes of payload.
func (t *Template) fill(f []byte, payloadLen int) {
	ulen := UDPLen + payloadLen
	var u []byte
	if t.v6 {
		ip := f[EthernetLen : EthernetLen+IPv6Len]
		u = f[EthernetLen+IPv6Len:]
		binary.BigEndian.PutUint16(ip[4:6], uint16(ulen))
	} else {
		ip := f[EthernetLen : EthernetLen+IPv4Len]
		u = f[EthernetLen+IPv4Len:]
		total := IPv4Len + ulen
		id := t.id
		t.id++
		binary.BigEndian.PutUint16(ip[2:4], uint16(total))
		binary.BigEndian.PutUint16(ip[4:6], id)
		binary.BigEndian.PutUint16(ip[10:12], ^Fold(t.ipSum+uint64(total)+uint64(id)))
	}
	binary.BigEndian.PutUint16(u[4:6], uint16(ulen))
	// The UDP length is counted twice: in the pseudo-header and the header.
	c := ^Fold(Sum(t.udpSum+2*uint64(ulen), u[UDPLen:UDPLen+payloadLen]))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:8], c)
}
