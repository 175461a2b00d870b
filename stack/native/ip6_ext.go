package native

import "encoding/binary"

// Next Header values of the extension headers walked (RFC 8200 §4) and
// of "no next header" (§4.7).
const (
	extHopByHop = 0
	extRouting  = 43
	extFragment = 44
	extDestOpts = 60
	extNoNext   = 59
)

// Bounds of the extension-header walk (RFC 8504 §5.3 lets a host limit
// them). A chain longer than either is dropped as ip6ExtTooMany or
// ip6ExtTooLong: no legitimate packet to a host needs more, and the walk
// costs at most this much.
const (
	maxExt6Headers = 8   // extension headers in one chain
	maxExt6Bytes   = 512 // bytes of extension headers in one chain
	maxExt6Options = 8   // options other than padding in one options header
	maxExt6Pad     = 7   // consecutive padding bytes (RFC 4942 §2.1.9.5: more is never needed)
)

// ip6Error says why an IPv6 packet was not taken; ip6OK when it is valid.
// Every reason has its own name (ip6ErrorNames) for a counter.
type ip6Error int

const (
	ip6OK               ip6Error = iota
	ip6Short                     // shorter than the fixed header
	ip6Version                   // version is not 6
	ip6Length                    // the payload length runs past the frame
	ip6SrcMulticast              // a multicast source address (RFC 4291 §2.7)
	ip6HopByHopNotFirst          // Hop-by-Hop options after another header (RFC 8200 §4.1)
	ip6ExtTruncated              // an extension header runs past the payload
	ip6ExtTooMany                // more than maxExt6Headers extension headers
	ip6ExtTooLong                // more than maxExt6Bytes bytes of extension headers
	ip6ExtUnknown                // a Next Header that is neither a walked extension nor TCP, UDP, ICMPv6 (§4: Parameter Problem code 1)
	ip6OptionMalformed           // an option runs past its header, too much padding, too many options
	ip6OptionDiscard             // an unrecognised option whose type says discard silently (§4.2, action 01)
	ip6OptionUnknown             // an unrecognised option whose type says discard and answer (§4.2, actions 10, 11: Parameter Problem code 2)
	ip6RoutingSegments           // a Routing header with Segments Left above 0: a host routes nothing (§4.4, Parameter Problem code 0)
	ip6FragmentTwice             // a second Fragment header, or one in a reassembled packet
	nIP6Errors
)

// ip6ErrorNames are the counter names of the reasons.
var ip6ErrorNames = [nIP6Errors]string{
	ip6OK:               "ip6_ok",
	ip6Short:            "ip6_short",
	ip6Version:          "ip6_bad_version",
	ip6Length:           "ip6_bad_length",
	ip6SrcMulticast:     "ip6_src_multicast",
	ip6HopByHopNotFirst: "ip6_hop_by_hop_not_first",
	ip6ExtTruncated:     "ip6_ext_truncated",
	ip6ExtTooMany:       "ip6_ext_too_many",
	ip6ExtTooLong:       "ip6_ext_too_long",
	ip6ExtUnknown:       "ip6_ext_unknown",
	ip6OptionMalformed:  "ip6_option_malformed",
	ip6OptionDiscard:    "ip6_option_discard",
	ip6OptionUnknown:    "ip6_option_unknown",
	ip6RoutingSegments:  "ip6_routing_segments_left",
	ip6FragmentTwice:    "ip6_fragment_twice",
}

func (e ip6Error) String() string {
	if e >= 0 && e < nIP6Errors {
		return ip6ErrorNames[e]
	}
	return "ip6_unknown_error"
}

// paramProblem is the ICMPv6 Parameter Problem code (RFC 4443 §3.4) that
// RFC 8200 asks for when a packet is dropped for e; ok is false where the
// drop is silent. The pointer is ip6Hdr.bad. An ip6OptionUnknown whose
// option type's action is 11 is answered only when the destination was
// not multicast (§4.2): the caller checks that.
func (e ip6Error) paramProblem() (code uint8, ok bool) {
	switch e {
	case ip6ExtUnknown, ip6HopByHopNotFirst:
		return 1, true
	case ip6OptionUnknown:
		return 2, true
	case ip6RoutingSegments:
		return 0, true
	}
	return 0, false
}

// ip6Hdr is what parseIPv6 found in a packet. Offsets are from the start
// of the packet (the fixed header).
type ip6Hdr struct {
	src, dst ip6Addr
	hops     uint8
	// proto is the upper-layer protocol (TCP, UDP, ICMPv6 or extNoNext);
	// for a fragment, the Next Header of its Fragment header.
	proto uint8
	// off is where the upper-layer data starts (for a fragment: the
	// fragment's data, after the Fragment header), end where the payload
	// ends (ip6Len + the payload length; the frame's end for a quote).
	off, end int
	nExt     int // extension headers walked

	// frag is set for a fragment to reassemble (offset or M not zero):
	// the walk stopped at its Fragment header, at fragAt, named by the
	// Next Header byte at fragPrev.
	frag     bool
	fragID   uint32
	fragOff  int // the fragment's offset in the fragmentable part, bytes
	fragMore bool
	fragAt   int
	fragPrev int
	// atomic is set when the chain held an atomic fragment (offset 0, M
	// clear): processed in isolation (RFC 6946 §4), the walk went on.
	atomic bool
	// bad is the offset of the byte a Parameter Problem points at when
	// the walk failed.
	bad int
}

// payload is the upper-layer data of p (for a fragment, its data).
func (h *ip6Hdr) payload(p []byte) []byte { return p[h.off:h.end] }

// Walk modes.
const (
	walkReassembled = 1 << iota // the packet was reassembled: no Fragment header may remain
	walkQuote                   // the packet is quoted in an ICMPv6 error: it may be cut short
)

// parseIPv6 checks the fixed header of p (RFC 8200 §3) and walks its
// extension headers (§4) into h, within the bounds above. Ethernet
// padding after the payload is ignored.
func parseIPv6(p []byte, h *ip6Hdr) ip6Error { return walk6(p, h, 0) }

// parseIPv6Quote parses the packet quoted by an ICMPv6 error (RFC 4443
// §2.4 (c): as much of the invoking packet as fits): the payload may be
// cut short, and so may the upper-layer header; the extension headers
// present must be whole.
func parseIPv6Quote(p []byte, h *ip6Hdr) ip6Error { return walk6(p, h, walkQuote) }

func walk6(p []byte, h *ip6Hdr, mode int) ip6Error {
	*h = ip6Hdr{}
	if len(p) < ip6Len {
		return ip6Short
	}
	if p[0]>>4 != 6 {
		return ip6Version
	}
	q := ipv6(p)
	h.src, h.dst, h.hops = q.src(), q.dst(), q.hopLimit()
	h.end = ip6Len + q.payloadLen()
	if h.end > len(p) {
		if mode&walkQuote == 0 {
			h.bad = 4
			return ip6Length
		}
		h.end = len(p)
	}
	if isMulticast6(h.src) {
		return ip6SrcMulticast
	}
	next, prev, off := p[6], 6, ip6Len
	for {
		switch next {
		case protoTCP, protoUDP, protoICMPv6, extNoNext:
			h.proto, h.off = next, off
			return ip6OK
		case extHopByHop, extRouting, extFragment, extDestOpts:
		default:
			h.bad = prev
			return ip6ExtUnknown
		}
		if next == extHopByHop && off != ip6Len {
			h.bad = prev
			return ip6HopByHopNotFirst
		}
		if h.nExt == maxExt6Headers {
			return ip6ExtTooMany
		}
		if off+8 > h.end {
			return ip6ExtTruncated
		}
		n := 8
		if next != extFragment {
			n = (int(p[off+1]) + 1) * 8
		}
		if off+n > h.end {
			return ip6ExtTruncated
		}
		if off+n-ip6Len > maxExt6Bytes {
			return ip6ExtTooLong
		}
		h.nExt++
		switch next {
		case extHopByHop, extDestOpts:
			if e := walkOptions(p, off, n, next == extHopByHop, h); e != ip6OK {
				return e
			}
		case extRouting:
			if p[off+3] != 0 { // Segments Left: no routing type is recognised (RFC 5095 deprecates type 0)
				h.bad = off + 2
				return ip6RoutingSegments
			}
		case extFragment:
			if h.atomic || mode&walkReassembled != 0 {
				h.bad = prev
				return ip6FragmentTwice
			}
			fo := binary.BigEndian.Uint16(p[off+2:])
			if fo&0xfff9 == 0 { // offset 0, M clear: an atomic fragment
				h.atomic = true
				break
			}
			h.frag, h.fragOff, h.fragMore = true, int(fo&0xfff8), fo&1 != 0
			h.fragID = binary.BigEndian.Uint32(p[off+4:])
			h.fragAt, h.fragPrev = off, prev
			h.proto, h.off = p[off], off+8
			return ip6OK
		}
		next, prev, off = p[off], off, off+n
	}
}

// walkOptions checks the options of the Hop-by-Hop or Destination
// Options header p[off:off+n] (RFC 8200 §4.2). Pad1, PadN and, in
// Hop-by-Hop, Router Alert (RFC 2711) are recognised; others act as the
// two high bits of their type say.
func walkOptions(p []byte, off, n int, hbh bool, h *ip6Hdr) ip6Error {
	pad, opts := 0, 0
	for i := off + 2; i < off+n; {
		t := p[i]
		if t == 0 { // Pad1
			i++
			if pad++; pad > maxExt6Pad {
				return ip6OptionMalformed
			}
			continue
		}
		if i+2 > off+n || i+2+int(p[i+1]) > off+n {
			h.bad = i
			return ip6OptionMalformed
		}
		l := 2 + int(p[i+1])
		switch {
		case t == 1: // PadN
			if pad += l; pad > maxExt6Pad {
				return ip6OptionMalformed
			}
			i += l
			continue
		case t == 5 && hbh && l == 4: // Router Alert
		default:
			switch t >> 6 {
			case 1:
				h.bad = i
				return ip6OptionDiscard
			case 2, 3:
				h.bad = i
				return ip6OptionUnknown
			}
		}
		if opts++; opts > maxExt6Options {
			return ip6OptionMalformed
		}
		pad = 0
		i += l
	}
	return ip6OK
}
