package native

// Neighbor Discovery (RFC 4861) messages for address resolution:
// Neighbor Solicitation and Advertisement, read with the validity checks
// of §7.1 and written with their link-layer address options, and the
// addresses they travel to. The state machine that uses them is neigh6.
// engine6.go calls them.

// NDP constants (RFC 4861 §4.3, §4.4, §4.6.1).
const (
	ndLen        = 24 // type, code, checksum, flags/reserved, target
	ndHopLimit   = 255
	ndOptSrcLL   = 1
	ndOptTgtLL   = 2
	ndOptLLLen   = 8 // a link-layer address option for Ethernet: length 1 (RFC 2464 §6)
	naFlagRouter = 0x80
	naFlagSolic  = 0x40
	naFlagOver   = 0x20
)

// allNodes6 is ff02::1, the link-local all-nodes address (RFC 4291 §2.7.1).
var allNodes6 = ip6Addr{0xff, 0x02, 15: 1}

// solicitedNode is the solicited-node multicast address of a,
// ff02::1:ffXX:XXXX with a's low 24 bits (RFC 4291 §2.7.1).
func solicitedNode(a ip6Addr) ip6Addr {
	return ip6Addr{0xff, 0x02, 11: 0x01, 12: 0xff, 13: a[13], 14: a[14], 15: a[15]}
}

// isSolicitedNode says whether a is a solicited-node multicast address.
func isSolicitedNode(a ip6Addr) bool {
	return a == solicitedNode(a)
}

// multicastMAC6 is the Ethernet address an IPv6 multicast address a maps
// to: 33:33 and a's low 32 bits (RFC 2464 §7); for a solicited-node
// address, 33:33:ff:xx:xx:xx.
func multicastMAC6(a ip6Addr) [6]byte {
	return [6]byte{0x33, 0x33, a[12], a[13], a[14], a[15]}
}

// linkLocal6 is the link-local address fe80::/64 with the modified
// EUI-64 interface identifier of mac (RFC 4291 §2.5.6 and Appendix A,
// RFC 2464 §4, §5), the address Linux gives an Ethernet interface.
func linkLocal6(mac [6]byte) ip6Addr {
	return ip6Addr{0xfe, 0x80, 8: mac[0] ^ 0x02, 9: mac[1], 10: mac[2], 11: 0xff, 12: 0xfe,
		13: mac[3], 14: mac[4], 15: mac[5]}
}

// ndMsg is a Neighbor Solicitation or Advertisement read by parseNDP.
type ndMsg struct {
	typ    uint8 // icmp6NeighSol or icmp6NeighAdv
	target ip6Addr
	// The flags of an advertisement (§4.4).
	router, solicited, override bool
	// ll is the link-layer address option of the message, when hasLL:
	// the source's for a solicitation, the target's for an advertisement.
	ll    [6]byte
	hasLL bool
}

// ndpError says why an NDP message was dropped (RFC 4861 §7.1.1,
// §7.1.2: "silently discard").
type ndpError int

const (
	ndpOK               ndpError = iota
	ndpNotND                     // neither a solicitation nor an advertisement
	ndpHopLimit                  // IP hop limit not 255: the message came from off the link
	ndpChecksum                  // wrong ICMPv6 checksum
	ndpCode                      // ICMP code not 0
	ndpShort                     // ICMP length below 24 bytes
	ndpTargetMulticast           // the target is a multicast address
	ndpOptionLength              // an option of length 0, or one running past the message
	ndpBadLLOption               // a link-layer address option not 8 bytes long (Ethernet)
	ndpDADDest                   // unspecified source and a destination not solicited-node multicast
	ndpDADSrcLL                  // unspecified source with a source link-layer address option
	ndpSolicitedToMcast          // an advertisement to a multicast address with S set
	nNDPErrors
)

var ndpErrorNames = [nNDPErrors]string{
	ndpOK:               "ndp_ok",
	ndpNotND:            "ndp_not_nd",
	ndpHopLimit:         "ndp_bad_hop_limit",
	ndpChecksum:         "ndp_bad_checksum",
	ndpCode:             "ndp_bad_code",
	ndpShort:            "ndp_short",
	ndpTargetMulticast:  "ndp_target_multicast",
	ndpOptionLength:     "ndp_bad_option_length",
	ndpBadLLOption:      "ndp_bad_ll_option",
	ndpDADDest:          "ndp_dad_bad_destination",
	ndpDADSrcLL:         "ndp_dad_with_source_ll",
	ndpSolicitedToMcast: "ndp_solicited_to_multicast",
}

func (e ndpError) String() string {
	if e >= 0 && e < nNDPErrors {
		return ndpErrorNames[e]
	}
	return "ndp_unknown_error"
}

// parseNDP reads m, the ICMPv6 message of the packet parsed into h, as a
// Neighbor Solicitation or Advertisement into nd, with the validity
// checks of RFC 4861 §7.1.1 (solicitations) and §7.1.2 (advertisements).
// Unknown options are skipped (§4.6); of repeated link-layer address
// options the first counts.
func parseNDP(h *ip6Hdr, m []byte, nd *ndMsg) ndpError {
	*nd = ndMsg{}
	if len(m) < 1 || m[0] != icmp6NeighSol && m[0] != icmp6NeighAdv {
		return ndpNotND
	}
	if h.hops != ndHopLimit {
		return ndpHopLimit
	}
	if len(m) < ndLen {
		return ndpShort
	}
	if !verify6(h.src, h.dst, protoICMPv6, m) {
		return ndpChecksum
	}
	if m[1] != 0 {
		return ndpCode
	}
	nd.typ = m[0]
	nd.target = ip6Addr(m[8:24])
	if isMulticast6(nd.target) {
		return ndpTargetMulticast
	}
	want := uint8(ndOptSrcLL)
	if nd.typ == icmp6NeighAdv {
		want = ndOptTgtLL
		nd.router, nd.solicited, nd.override = m[4]&naFlagRouter != 0, m[4]&naFlagSolic != 0, m[4]&naFlagOver != 0
	}
	for o := m[ndLen:]; len(o) > 0; {
		if len(o) < 2 || o[1] == 0 || int(o[1])*8 > len(o) {
			return ndpOptionLength
		}
		l := int(o[1]) * 8
		if o[0] == want && !nd.hasLL {
			if l != ndOptLLLen {
				return ndpBadLLOption
			}
			nd.ll, nd.hasLL = [6]byte(o[2:8]), true
		}
		o = o[l:]
	}
	if nd.typ == icmp6NeighSol && h.src == ip6Unspecified {
		if !isSolicitedNode(h.dst) {
			return ndpDADDest
		}
		if nd.hasLL {
			return ndpDADSrcLL
		}
	}
	if nd.typ == icmp6NeighAdv && isMulticast6(h.dst) && nd.solicited {
		return ndpSolicitedToMcast
	}
	return ndpOK
}

// ndpMsgLen is the IPv6 packet length of a solicitation or advertisement
// with one link-layer address option.
const ndpMsgLen = ip6Len + ndLen + ndOptLLLen

// buildNS writes into b a Neighbor Solicitation for target from src to
// dst (RFC 4861 §4.3, §7.2.2): dst is target's solicited-node address to
// resolve it, or target itself to probe it (§7.3.3). A source link-layer
// address option carries mac unless src is unspecified (duplicate address
// detection, where it must not be sent). It returns the packet's length,
// or 0 when b is too short. Send it with hop limit 255 (set here) to
// multicastMAC6(dst) or the neighbour's MAC.
func buildNS(b []byte, src, dst, target ip6Addr, mac [6]byte) int {
	n := ndpMsgLen
	if src == ip6Unspecified {
		n -= ndOptLLLen
	}
	if len(b) < n {
		return 0
	}
	putIPv6(b, protoICMPv6, ndHopLimit, src, dst, n-ip6Len)
	m := b[ip6Len:n]
	clear(m[:8])
	m[0] = icmp6NeighSol
	copy(m[8:24], target[:])
	if n == ndpMsgLen {
		m[24], m[25] = ndOptSrcLL, 1
		copy(m[26:32], mac[:])
	}
	putICMPv6Checksum(src, dst, m)
	return n
}

// buildNA writes into b a Neighbor Advertisement for target from src to
// dst (RFC 4861 §4.4) with flags (naFlagRouter, naFlagSolic, naFlagOver)
// and a target link-layer address option carrying mac. It returns the
// packet's length, or 0 when b is too short.
func buildNA(b []byte, src, dst, target ip6Addr, mac [6]byte, flags uint8) int {
	if len(b) < ndpMsgLen {
		return 0
	}
	putIPv6(b, protoICMPv6, ndHopLimit, src, dst, ndLen+ndOptLLLen)
	m := b[ip6Len:ndpMsgLen]
	clear(m[:8])
	m[0], m[4] = icmp6NeighAdv, flags&(naFlagRouter|naFlagSolic|naFlagOver)
	copy(m[8:24], target[:])
	m[24], m[25] = ndOptTgtLL, 1
	copy(m[26:32], mac[:])
	putICMPv6Checksum(src, dst, m)
	return ndpMsgLen
}

// answerNS writes into b the advertisement answering solicitation ns,
// which came in the packet parsed into h, for our address addr with our
// mac (RFC 4861 §7.2.4): to the all-nodes address with S clear when the
// solicitation's source was unspecified (duplicate address detection),
// else to its source with S set; O set (our address is not anycast), R
// clear (we are a host). It returns the packet's length and the
// destination MAC, or 0 when ns is not for addr or b is too short. The
// caller learns ns.ll into its neighbour cache first (§7.2.3). A
// solicitation without a source link-layer address (a unicast probe,
// §7.3.3) is answered to ethSrc, the MAC it came from.
func answerNS(b []byte, addr ip6Addr, mac [6]byte, h *ip6Hdr, ns *ndMsg, ethSrc [6]byte) (int, [6]byte) {
	if ns.typ != icmp6NeighSol || ns.target != addr {
		return 0, [6]byte{}
	}
	if h.src == ip6Unspecified {
		return buildNA(b, addr, allNodes6, addr, mac, naFlagOver), multicastMAC6(allNodes6)
	}
	to := ethSrc
	if ns.hasLL {
		to = ns.ll
	}
	return buildNA(b, addr, h.src, addr, mac, naFlagSolic|naFlagOver), to
}
