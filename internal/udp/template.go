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
	// Src and Dst are the IPv4 addresses and UDP ports.
	Src, Dst netip.AddrPort
	// TTL is the IPv4 time to live. 0 means DefaultTTL (64).
	TTL uint8
	// DF sets the don't-fragment flag.
	DF bool
	// ID is the IPv4 identification of the first frame; each frame built
	// takes the next.
	ID uint16
}

// Template builds Ethernet/IPv4/UDP frames for one pair of endpoints. The
// 42 header bytes are prepared once; Append copies them, fills in the
// lengths and the IPv4 identification, and computes both checksums in
// software, always: the IPv4 header checksum from a sum prepared over the
// fixed fields plus the two that change, the UDP checksum from a prepared
// sum over the pseudo-header and ports plus the lengths and the payload.
// No offload is asked for, so frames are correct on any card and on veth.
//
// A Template is used by one goroutine at a time (Append advances the IPv4
// identification).
type Template struct {
	hdr    [HeaderLen]byte
	ipSum  uint64 // the IPv4 header with length, ID and checksum zero
	udpSum uint64 // pseudo-header without the length, plus the ports
	id     uint16
	e      Endpoints
	macs   [2][6]byte // e.SrcMAC and e.DstMAC point here
}

// NewTemplate prepares the header for e. Both addresses must be IPv4 and
// both MACs 6 bytes long.
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
	if !e.Src.Addr().Is4() || !e.Dst.Addr().Is4() {
		return fmt.Errorf("udp: template: addresses must be IPv4 (source %v, destination %v)", e.Src, e.Dst)
	}
	if e.TTL == 0 {
		e.TTL = DefaultTTL
	}
	h := &t.hdr
	*h = [HeaderLen]byte{}
	copy(h[0:6], e.DstMAC)
	copy(h[6:12], e.SrcMAC)
	binary.BigEndian.PutUint16(h[12:14], EtherIPv4)
	ip := h[EthernetLen : EthernetLen+IPv4Len]
	ip[0] = 0x45 // version 4, IHL 5
	if e.DF {
		binary.BigEndian.PutUint16(ip[6:8], ipFlagDF)
	}
	ip[8] = e.TTL
	ip[9] = ProtoUDP
	src, dst := e.Src.Addr().As4(), e.Dst.Addr().As4()
	copy(ip[12:16], src[:])
	copy(ip[16:20], dst[:])
	u := h[EthernetLen+IPv4Len:]
	binary.BigEndian.PutUint16(u[0:2], e.Src.Port())
	binary.BigEndian.PutUint16(u[2:4], e.Dst.Port())
	// Folded, so that adding the per-frame fields cannot overflow.
	t.ipSum = uint64(Fold(Sum(0, ip)))
	t.udpSum = uint64(Fold(Sum(pseudoSum(src, dst, 0), u[0:4])))
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

// SetDstMAC changes the destination MAC of the frames built from now on
// (no checksum covers it).
func (t *Template) SetDstMAC(mac [6]byte) {
	copy(t.hdr[0:6], mac[:])
	t.macs[1] = mac
}

// DstMAC returns the destination MAC of the frames built.
func (t *Template) DstMAC() [6]byte { return t.macs[1] }

// Append appends to dst the frame that carries payload and returns the
// extended slice. The frame is HeaderLen+len(payload) bytes, padded with
// zeros to 60 (ETH_ZLEN) when shorter; the IPv4 total length and UDP
// length count the payload only, so receivers ignore the padding. Append
// allocates only when dst lacks capacity; payload is copied, the caller
// keeps it. The payload must fit an IPv4 packet: len(payload) <= 65507.
func (t *Template) Append(dst, payload []byte) []byte {
	n := len(dst)
	dst = append(dst, t.hdr[:]...)
	dst = append(dst, payload...)
	t.fill(dst[n:], len(payload))
	return pad.Extend(dst, n)
}

// Build writes the frame carrying payload into buf and returns its length,
// padded to 60 bytes as Append pads, or 0 when buf is too short for it.
// The payload may already be in place at buf[HeaderLen:] (payload aliasing
// it exactly is allowed: nothing is copied then).
func (t *Template) Build(buf, payload []byte) int {
	n := HeaderLen + len(payload)
	size := max(n, pad.MinFrame)
	if len(buf) < size {
		return 0
	}
	copy(buf, t.hdr[:])
	if len(payload) > 0 && &buf[HeaderLen] != &payload[0] {
		copy(buf[HeaderLen:], payload)
	}
	clear(buf[n:size])
	t.fill(buf[:n], len(payload))
	return size
}

// fill writes the lengths, identification and checksums into f, which
// holds the template's header followed by payloadLen bytes of payload.
func (t *Template) fill(f []byte, payloadLen int) {
	ip := f[EthernetLen : EthernetLen+IPv4Len]
	u := f[EthernetLen+IPv4Len:]
	total := IPv4Len + UDPLen + payloadLen
	ulen := UDPLen + payloadLen
	id := t.id
	t.id++
	binary.BigEndian.PutUint16(ip[2:4], uint16(total))
	binary.BigEndian.PutUint16(ip[4:6], id)
	binary.BigEndian.PutUint16(ip[10:12], ^Fold(t.ipSum+uint64(total)+uint64(id)))
	binary.BigEndian.PutUint16(u[4:6], uint16(ulen))
	// The UDP length is counted twice: in the pseudo-header and the header.
	c := ^Fold(Sum(t.udpSum+2*uint64(ulen), u[UDPLen:UDPLen+payloadLen]))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:8], c)
}
