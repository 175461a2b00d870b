package conformance

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Frame is one frame the DUT sent, as the bench received it.
//
// Raw is the whole frame as it was on the wire (destination MAC first, no
// FCS, padding included), a copy the Frame owns. The layer pointers are the
// decoded headers of Raw (nil when absent); Payload is the transport payload
// (the ICMP data, TCP or UDP payload, or an IPv4 fragment's bytes), without
// Ethernet padding.
type Frame struct {
	Raw []byte
	// At is the DUT's clock when the bench took the frame (Clock.Now).
	At time.Duration

	Eth  *layers.Ethernet
	ARP  *layers.ARP
	IP   *layers.IPv4
	ICMP *layers.ICMPv4
	TCP  *layers.TCP
	UDP  *layers.UDP
	// IPv6: the header, the first fragment header of the chain (nil when
	// unfragmented), and ICMPv6 with the message body gopacket decoded
	// (an echo, a neighbour solicitation or advertisement).
	IP6   *layers.IPv6
	Frag6 *layers.IPv6Fragment
	ICMP6 *layers.ICMPv6
	Echo6 *layers.ICMPv6Echo
	NS    *layers.ICMPv6NeighborSolicitation
	NA    *layers.ICMPv6NeighborAdvertisement
	// Payload is the transport payload without padding (nil if none):
	// for ICMPv6, the bytes after its 4-byte header (an error's
	// unused/MTU/pointer word and the invoking packet; an echo's
	// identifier, sequence number and data).
	Payload []byte
	// Bad lists what is wrong with the frame: a decoding error or a
	// checksum that does not verify. Empty for a good frame.
	Bad []string
}

// Decode decodes frame (the Frame keeps it: pass a copy) and checks the
// checksums of its IPv4 header and of its ICMP, TCP or UDP message. It never
// fails: what does not decode or verify is listed in Frame.Bad.
func Decode(frame []byte, at time.Duration) *Frame {
	f := &Frame{Raw: frame, At: at}
	pk := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{NoCopy: true})
	if el := pk.ErrorLayer(); el != nil {
		f.Bad = append(f.Bad, "decode: "+el.Error().Error())
	}
	f.Eth, _ = pk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	f.ARP, _ = pk.Layer(layers.LayerTypeARP).(*layers.ARP)
	f.IP, _ = pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	f.IP6, _ = pk.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	f.Frag6, _ = pk.Layer(layers.LayerTypeIPv6Fragment).(*layers.IPv6Fragment)
	if f.IP6 != nil {
		f.decode6(pk)
	} else if f.IP != nil && (f.IP.FragOffset != 0 || f.IP.Flags&layers.IPv4MoreFragments != 0) {
		// A fragment: gopacket does not decode the transport header of
		// the first fragment either; keep the bytes.
		f.Payload = f.IP.Payload
	} else {
		f.ICMP, _ = pk.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
		f.TCP, _ = pk.Layer(layers.LayerTypeTCP).(*layers.TCP)
		f.UDP, _ = pk.Layer(layers.LayerTypeUDP).(*layers.UDP)
		switch {
		case f.ICMP != nil:
			f.Payload = f.ICMP.Payload
		case f.TCP != nil:
			f.Payload = f.TCP.Payload
		case f.UDP != nil:
			f.Payload = f.UDP.Payload
		}
	}
	f.Bad = append(f.Bad, checkSums(frame)...)
	f.Bad = append(f.Bad, checkSums6(frame)...)
	return f
}

// decode6 takes the upper layer of an IPv6 packet (none from a fragment).
func (f *Frame) decode6(pk gopacket.Packet) {
	if f.Frag6 != nil {
		f.Payload = f.Frag6.Payload
		return
	}
	f.ICMP6, _ = pk.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
	f.Echo6, _ = pk.Layer(layers.LayerTypeICMPv6Echo).(*layers.ICMPv6Echo)
	f.NS, _ = pk.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation)
	f.NA, _ = pk.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	f.TCP, _ = pk.Layer(layers.LayerTypeTCP).(*layers.TCP)
	f.UDP, _ = pk.Layer(layers.LayerTypeUDP).(*layers.UDP)
	switch {
	case f.ICMP6 != nil:
		f.Payload = f.ICMP6.Payload
		if f.Payload != nil {
			// Without the Ethernet padding: the payload length says.
			end := 14 + 40 + int(f.IP6.Length)
			if off := len(f.Raw) - len(f.Payload); end >= off && end < len(f.Raw) {
				f.Payload = f.Raw[off:end]
			}
		}
	case f.TCP != nil:
		f.Payload = f.TCP.Payload
	case f.UDP != nil:
		f.Payload = f.UDP.Payload
	}
}

// Extension headers of IPv6 (RFC 8200 §4) and the upper layers checkSums6
// verifies.
const (
	nhHopByHop = 0
	nhTCP      = 6
	nhUDP      = 17
	nhRouting  = 43
	nhFragment = 44
	nhICMPv6   = 58
	nhDestOpts = 60
)

// checkSums6 verifies the TCP, UDP or ICMPv6 checksum of an Ethernet frame
// carrying an unfragmented IPv6 packet (RFC 8200 §8.1: the pseudo-header
// of source, destination, upper-layer length and next header; a UDP
// checksum of zero is an error over IPv6). It walks the hop-by-hop,
// routing and destination options headers; other frames are left to the
// decoder.
func checkSums6(frame []byte) []string {
	const eth = 14
	if len(frame) < eth+40 || binary.BigEndian.Uint16(frame[12:]) != 0x86dd {
		return nil
	}
	ip := frame[eth:]
	n := 40 + int(binary.BigEndian.Uint16(ip[4:]))
	if ip[0]>>4 != 6 || n > len(ip) {
		return []string{fmt.Sprintf("IPv6 header unusable (version %d, payload length %d, %d bytes)", ip[0]>>4, n-40, len(ip))}
	}
	ip = ip[:n]
	next, off := ip[6], 40
	for next == nhHopByHop || next == nhRouting || next == nhDestOpts {
		if off+8 > len(ip) {
			return []string{"IPv6 extension header truncated"}
		}
		next, off = ip[off], off+(int(ip[off+1])+1)*8
	}
	if next == nhFragment || off > len(ip) {
		return nil
	}
	seg := ip[off:]
	acc := sum(0, ip[8:40]) + uint32(len(seg)>>16) + uint32(len(seg)&0xffff) + uint32(next)
	switch next {
	case nhICMPv6:
		if len(seg) >= 4 && fold(sum(acc, seg)) != 0xffff {
			return []string{fmt.Sprintf("ICMPv6 checksum %#04x does not verify", binary.BigEndian.Uint16(seg[2:]))}
		}
	case nhTCP:
		if len(seg) >= 20 && fold(sum(acc, seg)) != 0xffff {
			return []string{fmt.Sprintf("TCP checksum %#04x does not verify (IPv6 pseudo-header)", binary.BigEndian.Uint16(seg[16:]))}
		}
	case nhUDP:
		if len(seg) >= 8 && (binary.BigEndian.Uint16(seg[6:]) == 0 || fold(sum(acc, seg)) != 0xffff) {
			return []string{fmt.Sprintf("UDP checksum %#04x does not verify (zero is not allowed over IPv6, RFC 8200 §8.1)", binary.BigEndian.Uint16(seg[6:]))}
		}
	}
	return nil
}

// checkSums verifies the IPv4 header checksum of an Ethernet frame carrying
// IPv4, and the ICMP, TCP or UDP checksum of an unfragmented datagram (a UDP
// checksum of zero means none, RFC 768). It returns what does not verify.
// Frames that are not IPv4 or too short to check are left to the decoder.
func checkSums(frame []byte) []string {
	const eth = 14
	if len(frame) < eth+20 || binary.BigEndian.Uint16(frame[12:]) != 0x0800 {
		return nil
	}
	ip := frame[eth:]
	ihl := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if ip[0]>>4 != 4 || ihl < 20 || total < ihl || total > len(ip) {
		return []string{fmt.Sprintf("IPv4 header unusable (version %d, IHL %d, total length %d, %d bytes)", ip[0]>>4, ihl, total, len(ip))}
	}
	var bad []string
	if fold(sum(0, ip[:ihl])) != 0xffff {
		bad = append(bad, fmt.Sprintf("IPv4 header checksum %#04x does not verify", binary.BigEndian.Uint16(ip[10:])))
	}
	if binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 {
		return bad // a fragment: the transport checksum covers the whole datagram
	}
	seg := ip[ihl:total]
	pseudo := func(proto byte) uint32 {
		s := sum(0, ip[12:20])
		return s + uint32(proto) + uint32(len(seg))
	}
	switch ip[9] {
	case 1: // ICMP
		if len(seg) >= 8 && fold(sum(0, seg)) != 0xffff {
			bad = append(bad, "ICMP checksum does not verify")
		}
	case 6: // TCP
		if len(seg) >= 20 && fold(sum(pseudo(6), seg)) != 0xffff {
			bad = append(bad, fmt.Sprintf("TCP checksum %#04x does not verify", binary.BigEndian.Uint16(seg[16:])))
		}
	case 17: // UDP
		if len(seg) >= 8 && binary.BigEndian.Uint16(seg[6:]) != 0 && fold(sum(pseudo(17), seg)) != 0xffff {
			bad = append(bad, fmt.Sprintf("UDP checksum %#04x does not verify", binary.BigEndian.Uint16(seg[6:])))
		}
	}
	return bad
}

// sum adds b to the ones' complement accumulator acc as 16-bit big-endian
// words (an odd last byte is padded with zero).
func sum(acc uint32, b []byte) uint32 {
	for len(b) >= 2 {
		acc += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

// fold folds the carries of acc into 16 bits.
func fold(acc uint32) uint16 {
	for acc>>16 != 0 {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}

// String describes the frame in one line, as tcpdump would, for logs.
func (f *Frame) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%v] %d bytes", f.At.Round(time.Microsecond), len(f.Raw))
	switch {
	case f.ARP != nil:
		op := "request"
		if f.ARP.Operation == layers.ARPReply {
			op = "reply"
		}
		fmt.Fprintf(&b, " ARP %s %v(%v) -> %v(%v)", op, ip4(f.ARP.SourceProtAddress), mac(f.ARP.SourceHwAddress),
			ip4(f.ARP.DstProtAddress), mac(f.ARP.DstHwAddress))
		if f.Eth != nil && f.ARP.Operation == layers.ARPRequest && !bytes.Equal(f.Eth.DstMAC, broadcast) {
			fmt.Fprintf(&b, " unicast to %v", f.Eth.DstMAC)
		}
	case f.IP != nil:
		fmt.Fprintf(&b, " %v -> %v", f.IP.SrcIP, f.IP.DstIP)
		switch {
		case f.TCP != nil:
			t := f.TCP
			fmt.Fprintf(&b, " TCP %d -> %d [%s] seq %d ack %d win %d len %d", t.SrcPort, t.DstPort, flagString(t),
				t.Seq, t.Ack, t.Window, len(f.Payload))
			if o := optString(t); o != "" {
				b.WriteString(" opts " + o)
			}
		case f.UDP != nil:
			fmt.Fprintf(&b, " UDP %d -> %d len %d", f.UDP.SrcPort, f.UDP.DstPort, len(f.Payload))
		case f.ICMP != nil:
			fmt.Fprintf(&b, " ICMP %v id %d seq %d len %d", f.ICMP.TypeCode, f.ICMP.Id, f.ICMP.Seq, len(f.Payload))
		default:
			fmt.Fprintf(&b, " proto %v frag %d mf %v len %d", f.IP.Protocol, f.IP.FragOffset,
				f.IP.Flags&layers.IPv4MoreFragments != 0, len(f.Payload))
		}
	case f.IP6 != nil:
		fmt.Fprintf(&b, " %v -> %v", f.IP6.SrcIP, f.IP6.DstIP)
		if f.Eth != nil && f.Eth.DstMAC[0]&1 != 0 {
			fmt.Fprintf(&b, " (to %v)", f.Eth.DstMAC)
		}
		switch {
		case f.Frag6 != nil:
			fmt.Fprintf(&b, " frag %d mf %v id %#x len %d", f.Frag6.FragmentOffset*8, f.Frag6.MoreFragments, f.Frag6.Identification, len(f.Payload))
		case f.TCP != nil:
			t := f.TCP
			fmt.Fprintf(&b, " TCP %d -> %d [%s] seq %d ack %d win %d len %d", t.SrcPort, t.DstPort, flagString(t),
				t.Seq, t.Ack, t.Window, len(f.Payload))
			if o := optString(t); o != "" {
				b.WriteString(" opts " + o)
			}
		case f.UDP != nil:
			fmt.Fprintf(&b, " UDP %d -> %d len %d", f.UDP.SrcPort, f.UDP.DstPort, len(f.Payload))
		case f.NS != nil:
			fmt.Fprintf(&b, " ICMPv6 neighbour solicitation who has %v", f.NS.TargetAddress)
		case f.NA != nil:
			fmt.Fprintf(&b, " ICMPv6 neighbour advertisement %v flags %#x", f.NA.TargetAddress, f.NA.Flags)
		case f.Echo6 != nil:
			fmt.Fprintf(&b, " ICMPv6 %v id %d seq %d len %d", f.ICMP6.TypeCode, f.Echo6.Identifier, f.Echo6.SeqNumber, len(f.Payload)-4)
		case f.ICMP6 != nil:
			fmt.Fprintf(&b, " ICMPv6 %v len %d", f.ICMP6.TypeCode, len(f.Payload))
		default:
			fmt.Fprintf(&b, " next header %v len %d", f.IP6.NextHeader, f.IP6.Length)
		}
	case f.Eth != nil:
		fmt.Fprintf(&b, " ethertype %v", f.Eth.EthernetType)
	}
	if len(f.Bad) > 0 {
		b.WriteString(" BAD: " + strings.Join(f.Bad, "; "))
	}
	return b.String()
}

func ip4(b []byte) string {
	if len(b) != 4 {
		return fmt.Sprintf("%x", b)
	}
	return fmt.Sprintf("%d.%d.%d.%d", b[0], b[1], b[2], b[3])
}

func mac(b []byte) string {
	s := make([]string, len(b))
	for i, x := range b {
		s[i] = fmt.Sprintf("%02x", x)
	}
	return strings.Join(s, ":")
}

// flagString writes TCP flags tcpdump's way: S, F, R, P, U, E, W and . for
// ACK.
func flagString(t *layers.TCP) string {
	var s []byte
	for _, x := range []struct {
		on bool
		c  byte
	}{{t.SYN, 'S'}, {t.FIN, 'F'}, {t.RST, 'R'}, {t.PSH, 'P'}, {t.URG, 'U'}, {t.ECE, 'E'}, {t.CWR, 'W'}, {t.ACK, '.'}} {
		if x.on {
			s = append(s, x.c)
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return string(s)
}

func optString(t *layers.TCP) string {
	var s []string
	for _, o := range t.Options {
		switch o.OptionType {
		case layers.TCPOptionKindNop, layers.TCPOptionKindEndList:
		case layers.TCPOptionKindMSS:
			if len(o.OptionData) == 2 {
				s = append(s, fmt.Sprintf("mss %d", binary.BigEndian.Uint16(o.OptionData)))
			}
		case layers.TCPOptionKindWindowScale:
			if len(o.OptionData) == 1 {
				s = append(s, fmt.Sprintf("wscale %d", o.OptionData[0]))
			}
		case layers.TCPOptionKindSACKPermitted:
			s = append(s, "sackOK")
		case layers.TCPOptionKindSACK:
			s = append(s, fmt.Sprintf("sack %v", sackBlocks(o.OptionData)))
		case layers.TCPOptionKindTimestamps:
			if len(o.OptionData) == 8 {
				s = append(s, fmt.Sprintf("TS val %d ecr %d", binary.BigEndian.Uint32(o.OptionData), binary.BigEndian.Uint32(o.OptionData[4:])))
			}
		default:
			s = append(s, fmt.Sprintf("opt-%d", o.OptionType))
		}
	}
	return strings.Join(s, ",")
}

// Block is a SACK block: the bytes Left..Right-1 (RFC 2018 §3).
type Block struct{ Left, Right uint32 }

func sackBlocks(b []byte) []Block {
	var out []Block
	for len(b) >= 8 {
		out = append(out, Block{binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])})
		b = b[8:]
	}
	return out
}

// TCPOpts are the options of a TCP segment, decoded.
type TCPOpts struct {
	MSS        int  // 0: absent
	WScale     int  // -1: absent
	SACKOK     bool // SACK-permitted
	SACK       []Block
	TS         bool
	TSVal, TSE uint32
}

// Opts decodes the options of the frame's TCP header (zero TCPOpts, WScale
// -1, when it has no TCP header).
func (f *Frame) Opts() TCPOpts {
	o := TCPOpts{WScale: -1}
	if f.TCP == nil {
		return o
	}
	for _, x := range f.TCP.Options {
		switch x.OptionType {
		case layers.TCPOptionKindMSS:
			if len(x.OptionData) == 2 {
				o.MSS = int(binary.BigEndian.Uint16(x.OptionData))
			}
		case layers.TCPOptionKindWindowScale:
			if len(x.OptionData) == 1 {
				o.WScale = int(x.OptionData[0])
			}
		case layers.TCPOptionKindSACKPermitted:
			o.SACKOK = true
		case layers.TCPOptionKindSACK:
			o.SACK = sackBlocks(x.OptionData)
		case layers.TCPOptionKindTimestamps:
			if len(x.OptionData) == 8 {
				o.TS = true
				o.TSVal = binary.BigEndian.Uint32(x.OptionData)
				o.TSE = binary.BigEndian.Uint32(x.OptionData[4:])
			}
		}
	}
	return o
}

// Flags returns the frame's TCP flags in tcpdump's letters ("S.", "R",
// "F.", "." for a pure ACK), or "" without a TCP header.
func (f *Frame) Flags() string {
	if f.TCP == nil {
		return ""
	}
	return flagString(f.TCP)
}
