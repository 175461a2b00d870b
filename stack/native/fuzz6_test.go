package native

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// checkHdr fails t when what a successful parse of p returned lies
// outside p or breaks the walk's bounds.
func checkHdr(t *testing.T, p []byte, h *ip6Hdr) {
	t.Helper()
	if h.off < ip6Len || h.off > h.end || h.end > len(p) {
		t.Fatalf("data [%d:%d] of %d bytes", h.off, h.end, len(p))
	}
	if h.nExt > maxExt6Headers || h.off-ip6Len > maxExt6Bytes {
		t.Fatalf("%d headers, %d bytes walked", h.nExt, h.off-ip6Len)
	}
	if h.frag && (h.fragAt < ip6Len || h.fragAt+8 != h.off || h.fragPrev >= h.fragAt) {
		t.Fatalf("fragment fields %+v", h)
	}
}

// FuzzIPv6Parse: the header check and the extension-header walk never
// panic, and what they accept lies within the packet and the walk's
// bounds, in every mode.
func FuzzIPv6Parse(f *testing.F) {
	up := tcp6(a6B, a6A, 1, 2, []byte("x"))
	f.Add(pkt6(a6B, a6A, 64, nil, protoTCP, up))
	f.Add(pkt6(a6B, a6A, 64, []ext6{optsHdr(extHopByHop, 5, 2, 0, 0), optsHdr(extDestOpts), {extRouting, make([]byte, 6)}}, protoTCP, up))
	f.Add(pkt6(a6B, a6A, 64, []ext6{fragHdr(0, false, 1)}, protoUDP, make([]byte, 8)))
	f.Add(pkt6(a6B, a6A, 64, []ext6{optsHdr(extDestOpts), fragHdr(8, true, 1)}, protoTCP, up))
	f.Add(pkt6(a6B, a6A, 64, []ext6{optsHdr(extDestOpts, 0x9e, 0)}, extNoNext, nil))
	f.Fuzz(func(t *testing.T, p []byte) {
		var h ip6Hdr
		for _, mode := range []int{0, walkReassembled, walkQuote} {
			if e := walk6(p, &h, mode); e == ip6OK {
				checkHdr(t, p, &h)
			} else if e.String() == "ip6_unknown_error" {
				t.Fatalf("reason %d without a name", e)
			}
		}
	})
}

// FuzzICMPv6: checking, reading as an error (Packet Too Big included),
// answering an echo and quoting in an error never panic on any message;
// what is built parses back.
func FuzzICMPv6(f *testing.F) {
	f.Add(icmp6Msg(a6B, a6A, icmp6EchoRequest, 0, []byte{0, 1, 0, 2, 'x'}))
	ours := pkt6(a6A, a6B, 64, nil, protoTCP, tcp6(a6A, a6B, 4000, 80, make([]byte, 100)))
	f.Add(icmp6Msg(a6B, a6A, icmp6TooBig, 0, append([]byte{0, 0, 5, 0}, ours...)))
	f.Add(icmp6Msg(a6B, a6A, icmp6Unreachable, 4, append([]byte{0, 0, 0, 0}, ours[:48]...)))
	f.Fuzz(func(t *testing.T, m []byte) {
		if len(m) >= 4 {
			putICMPv6Checksum(a6B, a6A, m)
		}
		h := ip6Hdr{src: a6B, dst: a6A, hops: 64}
		if checkICMPv6(&h, m) != icmp6OK {
			return
		}
		var e icmp6ErrMsg
		if parseICMPv6Error(m, &e) == icmp6OK {
			q := m[icmp6Len:]
			if e.inner.off > e.inner.end || e.inner.end > len(q) {
				t.Fatalf("quote [%d:%d] of %d", e.inner.off, e.inner.end, len(q))
			}
			if e.typ == icmp6TooBig {
				if mtu, ok := pmtu6(9000, e.param); ok && (mtu < minMTU6 || mtu > 9000) {
					t.Fatalf("path MTU %d", mtu)
				}
			}
		}
		b := make([]byte, 1500)
		if m[0] == icmp6EchoRequest {
			if n := buildEchoReply6(b, a6A, &h, m); n != 0 {
				var rh ip6Hdr
				if parseIPv6(b[:n], &rh) != ip6OK || checkICMPv6(&rh, rh.payload(b[:n])) != icmp6OK ||
					!bytes.Equal(rh.payload(b[:n])[4:], m[4:]) {
					t.Fatal("echo reply does not parse back")
				}
			}
		}
		p := pkt6(a6B, a6A, 64, nil, protoICMPv6, m)
		var ph ip6Hdr
		if parseIPv6(p, &ph) == ip6OK {
			mayAnswerError6(p, &ph, false, icmp6Unreachable, 0)
			if n := buildError6(b, a6A, p, icmp6ParamProblem, 0, 0); n == 0 || n > minMTU6 {
				t.Fatalf("error of %d bytes", n)
			}
		}
	})
}

// FuzzNDP: parseNDP never panics, whatever the message, hop limit and
// addresses; a valid solicitation for our address is answered with an
// advertisement that passes the same checks.
func FuzzNDP(f *testing.F) {
	b := make([]byte, 200)
	n := buildNS(b, a6B, solicitedNode(a6A), a6A, mac6B)
	f.Add(append([]byte(nil), b[ip6Len:n]...), uint8(255), false)
	n = buildNS(b, ip6Unspecified, solicitedNode(a6A), a6A, mac6B)
	f.Add(append([]byte(nil), b[ip6Len:n]...), uint8(255), true)
	n = buildNA(b, a6B, a6A, a6B, mac6B, naFlagSolic)
	f.Add(append([]byte(nil), b[ip6Len:n]...), uint8(255), false)
	f.Fuzz(func(t *testing.T, m []byte, hops uint8, dad bool) {
		h := ip6Hdr{src: a6B, dst: a6A, hops: hops}
		if dad {
			h.src, h.dst = ip6Unspecified, solicitedNode(a6A)
		}
		if len(m) >= 4 {
			putICMPv6Checksum(h.src, h.dst, m)
		}
		var nd ndMsg
		e := parseNDP(&h, m, &nd)
		if e.String() == "ndp_unknown_error" {
			t.Fatalf("reason %d without a name", e)
		}
		if e != ndpOK {
			return
		}
		if hops != ndHopLimit || isMulticast6(nd.target) || len(m) < ndLen {
			t.Fatalf("accepted %+v with hop limit %d", nd, hops)
		}
		c := newNeigh(4)
		if nd.typ == icmp6NeighSol && nd.hasLL {
			c.solicited(h.src, nd.ll, 0)
		}
		c.advert(&nd, 0)
		out := make([]byte, 200)
		k, _ := answerNS(out, nd.target, mac6A, &h, &nd, mac6B)
		if nd.typ != icmp6NeighSol {
			if k != 0 {
				t.Fatal("answered an advertisement")
			}
			return
		}
		var ah ip6Hdr
		var an ndMsg
		if parseIPv6(out[:k], &ah) != ip6OK || parseNDP(&ah, ah.payload(out[:k]), &an) != ndpOK || an.target != nd.target {
			t.Fatal("our advertisement fails the checks")
		}
	})
}

// FuzzReasm6 drives the reassembly table with a sequence of fragments
// described by the input: per fragment 5 bytes (identification 0..3,
// offset in 8-byte units, length in 8-byte units, flags: M and a time
// step) followed by its data. The table never panics, never holds more
// than its slots, keeps each slot's ranges sorted and apart, and what it
// returns is a packet the walk takes, whose length is its header's.
func FuzzReasm6(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 1, 0, 0, 3, 2, 0})
	f.Add([]byte{1, 0, 0, 2, 1, 1, 0, 2, 2, 0, 1, 0, 1, 2, 0})
	f.Add([]byte{2, 0, 0, 4, 1, 2, 0, 3, 2, 1, 2, 0, 4, 1, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		var r reasm6
		var h ip6Hdr
		data := make([]byte, 8*256)
		for i := range data {
			data[i] = byte(i * 7)
		}
		now := int64(0)
		for len(in) >= 5 {
			id, off, n, fl := uint32(in[0]&3), int(binary.BigEndian.Uint16(in[1:])&0x1fff)*8, int(in[3])*8+int(in[4]>>4&7), in[4]
			in = in[5:]
			now += int64(fl>>1&7) * 20e9
			if n > len(data) {
				n = len(data)
			}
			var p []byte
			if off == 0 {
				up := tcp6(a6B, a6A, 1, 2, data[:max(n, tcpLen)-tcpLen])
				p = pkt6(a6B, a6A, 64, []ext6{fragHdr(0, fl&1 != 0, id)}, protoTCP, up)
			} else {
				p = pkt6(a6B, a6A, 64, []ext6{fragHdr(off, fl&1 != 0, id)}, protoTCP, data[:n])
			}
			if parseIPv6(p, &h) != ip6OK || !h.frag {
				r.expire(now)
				continue
			}
			out, res := r.input(now, p, &h)
			if res.String() == "ip6_fragment_unknown_result" {
				t.Fatalf("result %d without a name", res)
			}
			if res == reasm6Done {
				var oh ip6Hdr
				if e := walk6(out, &oh, walkReassembled); e != ip6OK {
					t.Fatalf("reassembled packet refused: %v", e)
				}
				if ipv6(out).payloadLen() != len(out)-ip6Len || oh.proto != protoTCP {
					t.Fatalf("reassembled packet of %d bytes says %d", len(out), ipv6(out).payloadLen())
				}
			}
			r.expire(now)
			used := 0
			for i := range r.slots {
				s := &r.slots[i]
				if !s.used {
					continue
				}
				used++
				for j := 0; j < s.n; j++ {
					b := s.ranges[j]
					if b.start >= b.end || j > 0 && s.ranges[j-1].end >= b.start || int(b.end) > maxPayload6 {
						t.Fatalf("slot %d ranges %v", i, s.ranges[:s.n])
					}
				}
			}
			if used != r.used || used > reasm6Slots {
				t.Fatalf("%d slots used, table says %d", used, r.used)
			}
		}
	})
}
