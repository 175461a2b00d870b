package native

import "encoding/binary"

// ICMPv6 (RFC 4443) building blocks: the message check, the echo reply
// and error builders, the rules of when an error may be sent, a token
// bucket to rate-limit errors, and the Packet Too Big reading for path
// MTU discovery (RFC 8201). engine6.go calls them.

// ICMPv6 types (RFC 4443 §2.1, RFC 4861 §4).
const (
	icmp6Unreachable  = 1
	icmp6TooBig       = 2
	icmp6TimeExceeded = 3
	icmp6ParamProblem = 4
	icmp6EchoRequest  = 128
	icmp6EchoReply    = 129
	icmp6RouterSol    = 133
	icmp6RouterAdv    = 134
	icmp6NeighSol     = 135
	icmp6NeighAdv     = 136
	icmp6Redirect     = 137
)

// Destination Unreachable codes (RFC 4443 §3.1).
const (
	unreach6NoRoute    = 0
	unreach6Prohibited = 1
	unreach6Address    = 3
	unreach6Port       = 4
)

// icmp6Len is the fixed part of every message this file reads or writes:
// type, code, checksum and the 32-bit field after them.
const icmp6Len = 8

// icmp6Error says why an ICMPv6 message was not taken.
type icmp6Error int

const (
	icmp6OK       icmp6Error = iota
	icmp6Short               // shorter than 8 bytes
	icmp6Checksum            // wrong checksum over the IPv6 pseudo-header (RFC 4443 §2.3)
	icmp6BadQuote            // an error message whose quoted packet cannot be read
	nICMP6Errors
)

var icmp6ErrorNames = [nICMP6Errors]string{
	icmp6OK:       "icmp6_ok",
	icmp6Short:    "icmp6_short",
	icmp6Checksum: "icmp6_bad_checksum",
	icmp6BadQuote: "icmp6_bad_quote",
}

func (e icmp6Error) String() string {
	if e >= 0 && e < nICMP6Errors {
		return icmp6ErrorNames[e]
	}
	return "icmp6_unknown_error"
}

// checkICMPv6 checks message m, the upper-layer data of the packet parsed
// into h: long enough for its fixed part and a correct checksum over the
// IPv6 pseudo-header (RFC 4443 §2.3).
func checkICMPv6(h *ip6Hdr, m []byte) icmp6Error {
	if len(m) < icmp6Len {
		return icmp6Short
	}
	if !verify6(h.src, h.dst, protoICMPv6, m) {
		return icmp6Checksum
	}
	return icmp6OK
}

// putICMPv6Checksum fills the checksum of message m from src to dst.
func putICMPv6Checksum(src, dst ip6Addr, m []byte) {
	m[2], m[3] = 0, 0
	binary.BigEndian.PutUint16(m[2:], checksum6(src, dst, protoICMPv6, m))
}

// buildEchoReply6 writes into b an IPv6 packet from src answering the
// echo request req (an ICMPv6 message) that came from h.src (RFC 4443
// §4.2: identifier, sequence number and data copied). It returns the
// packet's length, or 0 when b cannot hold it. src is our unicast
// address even when the request went to a multicast one (§4.2).
func buildEchoReply6(b []byte, src ip6Addr, h *ip6Hdr, req []byte) int {
	n := ip6Len + len(req)
	if len(req) < icmp6Len || n > len(b) || len(req) > maxPayload6 {
		return 0
	}
	putIPv6(b, protoICMPv6, hopLimit6, src, h.src, len(req))
	m := b[ip6Len:n]
	copy(m, req)
	m[0], m[1] = icmp6EchoReply, 0
	putICMPv6Checksum(src, h.src, m)
	return n
}

// mayAnswerError6 applies RFC 4443 §2.4 (e) to the invoking packet p,
// parsed into h: no ICMPv6 error answers an ICMPv6 error or a Redirect,
// a packet sent to a multicast address or a link-layer multicast or
// broadcast (llMulticast), or one whose source is not a unicast address
// of one node (unspecified, multicast). Packet Too Big, and Parameter
// Problem code 2 for an option whose type asks for it, are the two
// exceptions to the multicast rules (§2.4 (e.3), (e.4)): pass typ and
// code of the error to be sent.
func mayAnswerError6(p []byte, h *ip6Hdr, llMulticast bool, typ, code uint8) bool {
	if h.proto == protoICMPv6 && !h.frag && h.off < h.end {
		if t := p[h.off]; t < 128 || t == icmp6Redirect {
			return false
		}
	}
	if h.src == ip6Unspecified || isMulticast6(h.src) {
		return false
	}
	if isMulticast6(h.dst) || llMulticast {
		if typ == icmp6TooBig {
			return true
		}
		if typ == icmp6ParamProblem && code == 2 && h.bad < len(p) && p[h.bad]>>6 == 2 {
			return true // option type 10xxxxxx: answer even a multicast destination (RFC 8200 §4.2)
		}
		return false
	}
	return true
}

// buildError6 writes into b an IPv6 packet from src carrying the ICMPv6
// error typ/code with the 32-bit field param (unused, MTU or pointer)
// about the invoking packet p (RFC 4443 §3), sent back to p's source. It
// quotes as much of p as fits without the packet exceeding the IPv6
// minimum MTU (§2.4 (c): 1280 bytes) nor b. It returns the length, or 0
// when b cannot hold the headers and the invoking fixed header. Check
// mayAnswerError6 and the rate limit first.
func buildError6(b []byte, src ip6Addr, p []byte, typ, code uint8, param uint32) int {
	if len(p) < ip6Len {
		return 0
	}
	q := min(len(p), minMTU6-ip6Len-icmp6Len, len(b)-ip6Len-icmp6Len)
	if q < ip6Len {
		return 0
	}
	dst := ipv6(p).src()
	putIPv6(b, protoICMPv6, hopLimit6, src, dst, icmp6Len+q)
	m := b[ip6Len : ip6Len+icmp6Len+q]
	m[0], m[1] = typ, code
	binary.BigEndian.PutUint32(m[4:], param)
	copy(m[icmp6Len:], p[:q])
	putICMPv6Checksum(src, dst, m)
	return ip6Len + len(m)
}

// tokenBucket rate-limits what the engine sends (RFC 4443 §2.4 (f):
// ICMPv6 errors): rate tokens a second up to burst, one per message,
// driven by explicit times in nanoseconds. Credit is kept in nanotokens
// (1e9 per token), so no floating point is needed. The zero value allows
// nothing; make it with newTokenBucket.
type tokenBucket struct {
	rate   int64 // tokens a second
	burst  int64 // tokens at most
	credit int64 // nanotokens
	last   int64 // time of the last refill
	primed bool
}

// maxTokens bounds rate and burst, so that credit (burst × 1e9) and a
// refill (rate × nanoseconds, up to that) stay within an int64.
const maxTokens = 1 << 30

// newTokenBucket makes a bucket that starts full; rate and burst are
// taken between 0 and maxTokens.
func newTokenBucket(rate, burst int) tokenBucket {
	r, b := int64(min(max(rate, 0), maxTokens)), int64(min(max(burst, 0), maxTokens))
	return tokenBucket{rate: r, burst: b, credit: b * 1e9}
}

// allow takes one token at time now and says whether there was one. A
// time before the last one refills nothing.
func (b *tokenBucket) allow(now int64) bool {
	if !b.primed {
		b.primed, b.last = true, now
	}
	if el := now - b.last; el > 0 {
		full := b.burst * 1e9
		if b.rate > 0 && el >= (full-b.credit)/b.rate+1 {
			b.credit = full
		} else {
			b.credit = min(full, b.credit+el*b.rate)
		}
		b.last = now
	}
	if b.credit < 1e9 {
		return false
	}
	b.credit -= 1e9
	return true
}

// icmp6ErrMsg is an ICMPv6 error message read by parseICMPv6Error: its
// type, code and 32-bit parameter, and the invoking packet it quotes
// (our own, for the errors that matter) with the ports of its upper-layer
// header when the quote holds them.
type icmp6ErrMsg struct {
	typ, code    uint8
	param        uint32
	inner        ip6Hdr
	sport, dport uint16
	hasPorts     bool
}

// parseICMPv6Error reads m, an ICMPv6 error message (type below 128)
// already checked by checkICMPv6, into e. The quoted packet must have a
// whole fixed header and whole extension headers (RFC 4443 §2.4 (c)
// quotes as much as fits, which always includes them for our packets).
func parseICMPv6Error(m []byte, e *icmp6ErrMsg) icmp6Error {
	if len(m) < icmp6Len+ip6Len {
		return icmp6Short
	}
	*e = icmp6ErrMsg{typ: m[0], code: m[1], param: binary.BigEndian.Uint32(m[4:])}
	if m[0] >= 128 {
		return icmp6BadQuote
	}
	q := m[icmp6Len:]
	if parseIPv6Quote(q, &e.inner) != ip6OK {
		return icmp6BadQuote
	}
	if u := q[e.inner.off:e.inner.end]; !e.inner.frag && len(u) >= 4 &&
		(e.inner.proto == protoTCP || e.inner.proto == protoUDP) {
		e.sport, e.dport, e.hasPorts = binary.BigEndian.Uint16(u), binary.BigEndian.Uint16(u[2:]), true
	}
	return icmp6OK
}

// pmtu6 is the path MTU after a Packet Too Big reporting mtu reached a
// path whose estimate is cur (RFC 8201 §4): a report below the IPv6
// minimum link MTU (1280) is discarded (ok false), and the estimate is
// never raised by a report.
func pmtu6(cur int, mtu uint32) (int, bool) {
	if mtu < minMTU6 {
		return cur, false
	}
	if int64(mtu) >= int64(cur) {
		return cur, true
	}
	return int(mtu), true
}
