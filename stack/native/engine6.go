package native

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/dgramio/dgramio"
)

// IPv6 in the engine (RFC 8200): the input path of Ethernet type 0x86dd
// (the extension-header walk, reassembly, ICMPv6, neighbour discovery,
// TCP), and what lets the IPv4 code serve IPv6 connections too.
//
// A connection's tuple stays the 8-byte IPv4 one. An IPv6 peer is named
// in it by an alias, an address of 0.0.0.0/8 (never an IPv4 peer: no
// segment from there is taken, RFC 1122 §3.2.1.3, and Dial refuses it)
// whose low 24 bits index engine6.peers, where the 16-byte address is.
// One table, one lookup memory and one TIME-WAIT list serve both
// families; an IPv4 segment's lookup is what it was (docs/ARCHITECTURE.md
// "IPv6 in the native engine" says why). An alias lives while the table
// holds a tuple with it (a connection or a TIME-WAIT record), counted in
// its refs; input and Dial hold it while they run.

// Special aliases: index 0 names the source of the IPv6 packet being
// input (a segment from a peer without an alias, answered by a RST),
// gwIdx the IPv6 gateway as a next hop.
const (
	curIdx   = 0
	gwIdx    = 1<<24 - 1
	maxAlias = gwIdx - 1
)

func aliasOf(i uint32) [4]byte  { return [4]byte{0, byte(i >> 16), byte(i >> 8), byte(i)} }
func aliasIdx(a [4]byte) uint32 { return uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) }

// The IPv6 counters (apart from the IPv4 ones, in engine6.cnt).
type counter6 int

const (
	c6Received         counter6 = iota // IPv6 packets taken off the wire
	c6Delivered                        // IPv6 packets handed to TCP or ICMPv6
	c6NotOurs                          // to an address that is not ours
	c6SourceOurs                       // from one of our addresses: a spoof or a loop
	c6ScopeMismatch                    // TCP between a link-local and a global address
	c6TCPMulticast                     // TCP to a multicast address
	c6NoNextHeader                     // Next Header 59: nothing follows
	c6UDP                              // UDP: no socket here (port unreachable answered)
	c6Fragments                        // fragments taken (ip6_fragments)
	c6FamilyOff                        // ARP or IPv4 on an engine without an IPv4 address
	c6ICMPBad                          // ICMPv6 too short or with a bad checksum
	c6ICMPIgnored                      // ICMPv6 types the engine does not act on
	c6EchoReplies                      // echo replies sent (RFC 4443 §4.2)
	c6EchoTooBig                       // echo requests whose reply would exceed the MTU
	c6ErrorsSent                       // ICMPv6 errors sent
	c6ErrorsLimited                    // errors not sent: the rate limit (RFC 4443 §2.4 (f))
	c6ErrorsNotAllowed                 // errors not sent: RFC 4443 §2.4 (e)
	c6TooBig                           // Packet Too Big received
	c6TooBigIgnored                    // PTB for no connection, out of window, or no lower
	c6TooBigBelowMin                   // PTB reporting an MTU below 1280 (RFC 8201 §4)
	c6NSReceived                       // neighbour solicitations taken
	c6NSNotOurs                        // solicitations for a target that is not ours
	c6NASent                           // advertisements sent (answers)
	c6NAReceived                       // advertisements taken
	c6NADuplicate                      // advertisements for one of our addresses (RFC 4862 §5.4.4)
	c6NSSent                           // solicitations sent (resolution and probes)
	c6NSProbes                         // of them, unicast probes (RFC 4861 §7.3.3)
	c6NeighFull                        // no neighbour entry could be made
	c6NeighUnresolved                  // neighbours given up (no answer)
	c6NeighMACChanged                  // a neighbour's MAC changed (connections follow)
	c6NoAlias                          // segments dropped: every alias is in use
	c6NAShared                         // advertisements another engine of the ARPShare took
	n6Counters
)

var counter6Names = [n6Counters]struct {
	name string
	loss bool
}{
	c6Received:         {"ip6_received", false},
	c6Delivered:        {"ip6_delivered", false},
	c6NotOurs:          {"ip6_not_our_address", false},
	c6SourceOurs:       {"ip6_source_is_ours", true},
	c6ScopeMismatch:    {"ip6_scope_mismatch", false},
	c6TCPMulticast:     {"ip6_tcp_to_multicast", false},
	c6NoNextHeader:     {"ip6_no_next_header", false},
	c6UDP:              {"ip6_udp_no_port", false},
	c6Fragments:        {"ip6_fragments", false},
	c6FamilyOff:        {"rx_family_off", false},
	c6ICMPBad:          {"icmp6_bad", true},
	c6ICMPIgnored:      {"icmp6_ignored", false},
	c6EchoReplies:      {"icmp6_echo_replies", false},
	c6EchoTooBig:       {"icmp6_echo_too_big", false},
	c6ErrorsSent:       {"icmp6_errors_sent", false},
	c6ErrorsLimited:    {"icmp6_errors_limited", false},
	c6ErrorsNotAllowed: {"icmp6_errors_not_allowed", false},
	c6TooBig:           {"icmp6_packet_too_big", false},
	c6TooBigIgnored:    {"icmp6_packet_too_big_ignored", false},
	c6TooBigBelowMin:   {"icmp6_packet_too_big_below_1280", false},
	c6NSReceived:       {"ndp_ns_received", false},
	c6NSNotOurs:        {"ndp_ns_not_ours", false},
	c6NASent:           {"ndp_na_sent", false},
	c6NAReceived:       {"ndp_na_received", false},
	c6NADuplicate:      {"ndp_na_for_our_address", false},
	c6NSSent:           {"ndp_ns_sent", false},
	c6NSProbes:         {"ndp_ns_probes", false},
	c6NeighFull:        {"ndp_neigh_full", false},
	c6NeighUnresolved:  {"ndp_neigh_failed", false},
	c6NeighMACChanged:  {"ndp_neigh_mac_changed", false},
	c6NoAlias:          {"ip6_tcp_no_alias", false},
	c6NAShared:         {"ndp_na_shared", false},
}

// peer6 is an IPv6 peer that has an alias, with what every segment to
// or from it needs: our address towards it (localFor) and the sum of
// the TCP pseudo-header without its length (pseudo6(local, addr,
// protoTCP, 0): the length of a segment, below 64 KiB, adds to it).
type peer6 struct {
	addr, local ip6Addr
	psum        uint64
	refs        int32
}

// setPeer makes p the peer at address a.
func (s *engine6) setPeer(p *peer6, a ip6Addr) {
	p.addr, p.local = a, s.localFor(a)
	p.psum = pseudo6(p.local, a, protoTCP, 0)
}

// engine6 is the IPv6 state of an Engine.
type engine6 struct {
	addr      ip6Addr // Options.Addr6
	ll        ip6Addr // the link-local address (EUI-64 of the MAC)
	prefix    ip6Addr // addr's on-link prefix
	plen      int
	gw        ip6Addr
	hasGW     bool
	allOnLink bool
	mss       int   // the MSS announced over IPv6
	due       int64 // the earliest time timers6 has work (noTimer: none)

	peers  []peer6 // by alias index; [curIdx] is the packet being input
	byAddr map[ip6Addr]uint32
	free   []uint32
	// lastAddr's alias index is lastIdx (0: none): a flow's segments come
	// in runs, and comparing 16 bytes costs less than hashing them.
	lastAddr ip6Addr
	lastIdx  uint32

	neigh neigh6
	reasm reasm6
	icmp  tokenBucket
	hdr   ip6Hdr
	nd    ndMsg
	em    icmp6ErrMsg
	ntx   []neighTx
	inbox ndpInbox // advertisements the ARPShare's other engines took

	cnt      [n6Counters]uint64
	parseErr [nIP6Errors]uint64
	reasmRes [nReasm6Results]uint64
	ndpErr   [nNDPErrors]uint64
}

// init6 makes the IPv6 half when Options.Addr6 is set.
func (e *Engine) init6() error {
	o := &e.o
	if !o.Addr6.IsValid() {
		return nil
	}
	if n := o.MaxConns + o.MaxTimeWait; n > maxAlias {
		return fmt.Errorf("native: MaxConns+MaxTimeWait %d is above the %d IPv6 peers an engine names", n, maxAlias)
	}
	s := &engine6{addr: o.Addr6.As16(), ll: linkLocal6(e.mac), plen: o.PrefixLen6,
		allOnLink: o.AllOnLink, due: noTimer}
	s.prefix = netip.PrefixFrom(o.Addr6, o.PrefixLen6).Masked().Addr().As16()
	if o.Gateway6.IsValid() && !o.AllOnLink {
		s.gw, s.hasGW = o.Gateway6.As16(), true
	}
	s.mss = min(int(tcpMSS6(o.MTU)), o.MSS)
	s.peers = make([]peer6, 1, min(o.MaxConns+o.MaxTimeWait+1, 4096))
	s.byAddr = make(map[ip6Addr]uint32, min(o.MaxConns, 4096))
	p := defaultNeigh6Params()
	p.ReachableTime, p.RetransTimer = int64(o.ARPReachable), int64(o.ARPTimeout)
	p.MaxMulticastSolicit, p.MaxUnicastSolicit = o.ARPRetries, o.ARPRetries
	s.neigh.init(o.ARPEntries, p)
	s.icmp = newTokenBucket(o.ICMPRateLimit, o.ICMPBurst)
	s.ntx = make([]neighTx, 0, 16)
	e.six = s
	return nil
}

// mssFor is the MSS announced to peer r (an IPv4 address or an IPv6
// alias): MTU-40 over IPv4, MTU-60 over IPv6, each capped by Options.MSS.
func (e *Engine) mssFor(r [4]byte) int {
	if r[0] == 0 && e.six != nil {
		return e.six.mss
	}
	return e.mss
}

// peerAddr is the address of peer r (an IPv4 address or an IPv6 alias).
func (e *Engine) peerAddr(r [4]byte) netip.Addr {
	if r[0] == 0 && e.six != nil {
		return netip.AddrFrom16(e.six.addrOf(r))
	}
	return netip.AddrFrom4(r)
}

// addrOf is the IPv6 address of alias r.
func (s *engine6) addrOf(r [4]byte) ip6Addr {
	i := aliasIdx(r)
	if i == gwIdx {
		return s.gw
	}
	return s.peers[i].addr
}

// localFor is our address towards peer a: the link-local one for a
// link-local peer (or when we have no other), Addr6 otherwise (RFC 6724
// §5 rule 2: the scope that matches).
func (s *engine6) localFor(a ip6Addr) ip6Addr {
	if isLinkLocal6(a) {
		return s.ll
	}
	return s.addr
}

// ours says whether a is one of our unicast addresses.
func (s *engine6) ours(a ip6Addr) bool { return a == s.addr || a == s.ll }

// onLink says whether a is on the link (RFC 4861 §5.2).
func (s *engine6) onLink(a ip6Addr) bool {
	if s.allOnLink || isLinkLocal6(a) {
		return true
	}
	n := s.plen
	for i := 0; n > 0; i, n = i+1, n-8 {
		m := byte(0xff)
		if n < 8 {
			m = 0xff << (8 - n)
		}
		if a[i]&m != s.prefix[i] {
			return false
		}
	}
	return true
}

// alias returns a's alias, making one (with no holder) when a has none;
// false when every alias is in use.
func (s *engine6) alias(a ip6Addr) ([4]byte, bool) {
	if i, ok := s.byAddr[a]; ok {
		return aliasOf(i), true
	}
	var i uint32
	switch {
	case len(s.free) > 0:
		i = s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
	case len(s.peers) <= maxAlias:
		i = uint32(len(s.peers))
		s.peers = append(s.peers, peer6{})
	default:
		return [4]byte{}, false
	}
	s.peers[i] = peer6{}
	s.setPeer(&s.peers[i], a)
	s.byAddr[a] = i
	return aliasOf(i), true
}

// peerRef counts a holder of r when r is an IPv6 alias.
func (e *Engine) peerRef(r [4]byte) {
	if r[0] != 0 || e.six == nil {
		return
	}
	if i := aliasIdx(r); i != curIdx && i != gwIdx {
		e.six.peers[i].refs++
	}
}

// peerUnref drops a holder of r when r is an IPv6 alias; the last one
// frees the alias.
func (e *Engine) peerUnref(r [4]byte) {
	if r[0] != 0 || e.six == nil {
		return
	}
	s := e.six
	i := aliasIdx(r)
	if i == curIdx || i == gwIdx || int(i) >= len(s.peers) {
		return
	}
	p := &s.peers[i]
	if p.refs--; p.refs > 0 {
		return
	}
	delete(s.byAddr, p.addr)
	if s.lastIdx == i {
		s.lastIdx = 0
	}
	*p = peer6{}
	s.free = append(s.free, i)
}

// dialTo is Dial's destination: its address as a tuple's (an IPv6 one's
// alias, held: the caller drops the hold with peerUnref) and its next
// hop; false when the engine cannot reach it.
func (e *Engine) dialTo(dst netip.AddrPort) (r, hop [4]byte, ok bool) {
	a := dst.Addr().Unmap()
	if dst.Port() == 0 || !a.IsValid() {
		return r, hop, false
	}
	if a.Is4() {
		r = a.As4()
		if e.no4 || r[0] == 0 {
			return r, hop, false
		}
		hop, ok = e.nextHop(r)
		return r, hop, ok
	}
	s := e.six
	a16 := a.As16()
	if s == nil || isMulticast6(a16) || a16 == ip6Unspecified || s.ours(a16) || a.IsLoopback() {
		return r, hop, false
	}
	if r, ok = s.alias(a16); !ok {
		e.six.cnt[c6NoAlias]++
		return r, hop, false
	}
	e.peerRef(r)
	if hop, ok = e.nextHop6(r); !ok {
		e.peerUnref(r)
	}
	return r, hop, ok
}

// nextHop6 is the next hop towards alias r: r itself on the link, the
// gateway otherwise.
func (e *Engine) nextHop6(r [4]byte) ([4]byte, bool) {
	s := e.six
	if s == nil {
		return r, false
	}
	if s.onLink(s.addrOf(r)) {
		return r, true
	}
	return aliasOf(gwIdx), s.hasGW
}

// pseudoTo is the pseudo-header sum of n bytes of TCP to peer r, of
// either family.
func (e *Engine) pseudoTo(r [4]byte, n int) uint64 {
	if r[0] == 0 {
		return e.pseudoTo6(r, n)
	}
	return pseudo(e.addr, r, protoTCP, n)
}

// pseudoTo6 is the IPv6 pseudo-header sum (RFC 8200 §8.1) of n bytes of
// TCP to alias r.
func (e *Engine) pseudoTo6(r [4]byte, n int) uint64 {
	return e.six.peers[aliasIdx(r)].psum + uint64(n)
}

// tcpFrame6 is tcpFrame for an IPv6 peer.
func (e *Engine) tcpFrame6(dstMAC [6]byte, r [4]byte, n int) []byte {
	p := &e.six.peers[aliasIdx(r)]
	e.tx = e.tx[:ethLen+ip6Len+n]
	putEth(e.tx, dstMAC, e.mac, etherIPv6)
	putIPv6(e.tx[ethLen:], protoTCP, hopLimit6, p.local, p.addr, n)
	return e.tx[ethLen+ip6Len:]
}

// flowKey6 is flowKey for an IPv6 peer: a keyed hash of both 16-byte
// addresses in the first 8 bytes (where flowKey has the two IPv4 ones),
// then the ports, the salt and extra as flowKey lays them.
func (e *Engine) flowKey6(r [4]byte, lport, rport uint16, salt byte, extra uint32) [16]byte {
	s := e.six
	a := s.addrOf(r)
	l := s.localFor(a)
	var w, m [16]byte
	binary.LittleEndian.PutUint64(w[0:], siphash(&e.secret, l))
	binary.LittleEndian.PutUint64(w[8:], siphash(&e.secret, a))
	binary.LittleEndian.PutUint64(m[0:], siphash(&e.secret, w))
	binary.BigEndian.PutUint16(m[8:], lport)
	binary.BigEndian.PutUint16(m[10:], rport)
	binary.BigEndian.PutUint32(m[12:], extra^uint32(salt)<<24)
	return m
}

// ip6Input takes an IPv6 packet (RFC 8200); llMcast: its frame went to a
// multicast or broadcast MAC.
func (e *Engine) ip6Input(f []byte, llMcast bool) {
	s := e.six
	s.cnt[c6Received]++
	srcMAC := [6]byte(f[6:12])
	p := f[ethLen:]
	h := &s.hdr
	if err := parseIPv6(p, h); err != ip6OK {
		s.parseErr[err]++
		if code, ok := err.paramProblem(); ok && s.forUs(h.dst) {
			e.sendError6(srcMAC, p, h, llMcast, icmp6ParamProblem, code, uint32(h.bad))
		}
		return
	}
	if !s.forUs(h.dst) {
		s.cnt[c6NotOurs]++
		return
	}
	if s.ours(h.src) {
		s.cnt[c6SourceOurs]++
		return
	}
	if h.frag {
		s.cnt[c6Fragments]++
		out, r := s.reasm.input(e.now, p, h)
		s.reasmRes[r]++
		e.wake6()
		if r != reasm6Done {
			if r == reasm6BadLength || r == reasm6TooBig {
				ptr := uint32(h.fragAt + 2) // the offset field (RFC 8200 §4.5)
				if r == reasm6BadLength {
					ptr = 4 // the payload length
				}
				e.sendError6(srcMAC, p, h, llMcast, icmp6ParamProblem, 0, ptr)
			}
			return
		}
		if err := walk6(out, h, walkReassembled); err != ip6OK {
			s.parseErr[err]++
			return
		}
		p = out
	}
	switch h.proto {
	case protoTCP:
		s.cnt[c6Delivered]++
		e.tcp6Input(srcMAC, p, h)
	case protoICMPv6:
		s.cnt[c6Delivered]++
		e.icmp6Input(srcMAC, p, h, llMcast)
	case protoUDP:
		s.cnt[c6UDP]++
		e.sendError6(srcMAC, p, h, llMcast, icmp6Unreachable, unreach6Port, 0)
	default:
		s.cnt[c6NoNextHeader]++
	}
}

// forUs says whether a packet to a is ours to take: one of our
// addresses, all-nodes, or the solicited-node address of one of ours.
func (s *engine6) forUs(a ip6Addr) bool {
	return s.ours(a) || a == allNodes6 || a == solicitedNode(s.ll) || a == solicitedNode(s.addr)
}

// tcp6Input parses a TCP segment over IPv6 (RFC 9293 with the IPv6
// pseudo-header, RFC 8200 §8.1) and hands it on as tcpInput does.
func (e *Engine) tcp6Input(srcMAC [6]byte, p []byte, h *ip6Hdr) {
	s6 := e.six
	if isMulticast6(h.dst) {
		s6.cnt[c6TCPMulticast]++
		return
	}
	if h.dst != s6.localFor(h.src) {
		s6.cnt[c6ScopeMismatch]++
		return
	}
	b := h.payload(p)
	if len(b) < tcpLen {
		e.cnt[cTCPShort]++
		return
	}
	r, i, ok := aliasOf(curIdx), uint32(curIdx), false
	if s6.lastIdx != 0 && h.src == s6.lastAddr {
		r, i, ok = aliasOf(s6.lastIdx), s6.lastIdx, true
	} else if k, known := s6.byAddr[h.src]; known {
		r, i, ok = aliasOf(k), k, true
		s6.lastAddr, s6.lastIdx = h.src, k
	} else if l := e.listeners[binary.BigEndian.Uint16(b[2:])]; l != nil && !l.closed {
		// A listener may make a connection: the peer needs an alias.
		if r, ok = s6.alias(h.src); !ok {
			s6.cnt[c6NoAlias]++
			return
		}
		i = aliasIdx(r)
	} else {
		s6.setPeer(&s6.peers[curIdx], h.src) // a RST at most, to the source
	}
	sum := s6.peers[i].psum // h.dst is localFor(h.src), checked above
	if !ok {
		e.tcpInput(srcMAC, r, sum, b)
		return
	}
	e.peerRef(r) // held while input runs: a TIME-WAIT record's end must not free it
	e.tcpInput(srcMAC, r, sum, b)
	e.peerUnref(r)
}

// wake6 makes the IPv6 timers run at the next poll (they then find when
// they are due next).
func (e *Engine) wake6() {
	e.six.due = min(e.six.due, e.now)
	e.top = min(e.top, e.six.due)
}

// icmp6Input takes an ICMPv6 message (RFC 4443).
func (e *Engine) icmp6Input(srcMAC [6]byte, p []byte, h *ip6Hdr, llMcast bool) {
	s := e.six
	m := h.payload(p)
	if checkICMPv6(h, m) != icmp6OK {
		s.cnt[c6ICMPBad]++
		return
	}
	switch m[0] {
	case icmp6EchoRequest:
		if m[1] != 0 {
			s.cnt[c6ICMPIgnored]++
			return
		}
		n := ethLen + ip6Len + len(m)
		if n > cap(e.tx) || ip6Len+len(m) > e.o.MTU {
			s.cnt[c6EchoTooBig]++
			return
		}
		e.tx = e.tx[:n]
		if buildEchoReply6(e.tx[ethLen:], s.localFor(h.src), h, m) == 0 {
			s.cnt[c6EchoTooBig]++
			return
		}
		putEth(e.tx, srcMAC, e.mac, etherIPv6)
		if e.send() {
			s.cnt[c6EchoReplies]++
		}
	case icmp6NeighSol, icmp6NeighAdv:
		e.ndpInput(srcMAC, h, m)
	case icmp6TooBig:
		s.cnt[c6TooBig]++
		e.tooBig6(m)
	default:
		s.cnt[c6ICMPIgnored]++
	}
}

// sendError6 answers invoking packet p (parsed into h, which came from
// srcMAC) with ICMPv6 error typ/code/param, within RFC 4443 §2.4 (e)'s
// rules and the rate limit (§2.4 (f)).
func (e *Engine) sendError6(srcMAC [6]byte, p []byte, h *ip6Hdr, llMcast bool, typ, code uint8, param uint32) {
	s := e.six
	if !mayAnswerError6(p, h, llMcast, typ, code) {
		s.cnt[c6ErrorsNotAllowed]++
		return
	}
	if !s.icmp.allow(e.now) {
		s.cnt[c6ErrorsLimited]++
		return
	}
	e.tx = e.tx[:ethLen+min(cap(e.tx)-ethLen, e.o.MTU)]
	n := buildError6(e.tx[ethLen:], s.localFor(h.src), p, typ, code, param)
	if n == 0 {
		s.cnt[c6ErrorsNotAllowed]++
		return
	}
	e.tx = e.tx[:ethLen+n]
	putEth(e.tx, srcMAC, e.mac, etherIPv6)
	if e.send() {
		s.cnt[c6ErrorsSent]++
	}
}

// tooBig6 takes a Packet Too Big for a connection (RFC 8201 §4, RFC 4443
// §3.2): the quote must be of a segment we sent on it whose sequence
// number is in flight (RFC 5927 §5.1, as for IPv4), the MTU at least
// 1280; the connection's MSS then follows the smaller path MTU, and what
// was in flight goes again.
func (e *Engine) tooBig6(m []byte) {
	s := e.six
	em := &s.em
	if parseICMPv6Error(m, em) != icmp6OK || !em.hasPorts || em.inner.proto != protoTCP ||
		em.inner.src != s.localFor(em.inner.dst) {
		s.cnt[c6TooBigIgnored]++
		return
	}
	ai, ok := s.byAddr[em.inner.dst]
	if !ok {
		s.cnt[c6TooBigIgnored]++
		return
	}
	i, ok := e.table[tuple{aliasOf(ai), em.sport, em.dport}]
	u := m[icmp6Len+em.inner.off : icmp6Len+em.inner.end]
	if !ok || i < 0 || len(u) < 8 {
		s.cnt[c6TooBigIgnored]++
		return
	}
	c := &e.conns[i]
	seq := binary.BigEndian.Uint32(u[4:])
	if c.state < SynSent || c.state == TimeWait || !seqLEQ(c.sndUna, seq) || !seqLT(seq, c.sndMax) {
		s.cnt[c6TooBigIgnored]++
		return
	}
	mtu, ok := pmtu6(c.peerMSS+ip6Len+tcpLen, em.param)
	if !ok {
		s.cnt[c6TooBigBelowMin]++
		return
	}
	mss := mtu - ip6Len - tcpLen
	if mss >= c.peerMSS {
		s.cnt[c6TooBigIgnored]++ // no smaller than what we send
		return
	}
	c.peerMSS, c.smss = mss, mss
	if c.tsOK {
		c.smss -= 12
	}
	e.cnt[cTCPPMTULowered]++
	if c.state.synchronized() && seqLT(c.sndUna, c.sndNxt) {
		c.sndNxt = c.sndUna
		c.rttTiming = false // Karn: what is timed goes again
		e.markDirty(c)
	}
}

// ndpInput takes a neighbour solicitation or advertisement (RFC 4861
// §7.1, §7.2): a solicitation for one of our addresses is answered, its
// source learnt (§7.2.3); an advertisement updates the entry it is for
// (§7.2.5) and lets the connections waiting for it send.
func (e *Engine) ndpInput(srcMAC [6]byte, h *ip6Hdr, m []byte) {
	s := e.six
	nd := &s.nd
	if err := parseNDP(h, m, nd); err != ndpOK {
		s.ndpErr[err]++
		return
	}
	if nd.typ == icmp6NeighSol {
		s.cnt[c6NSReceived]++
		if !s.ours(nd.target) {
			s.cnt[c6NSNotOurs]++
			return
		}
		if h.src != ip6Unspecified && nd.hasLL {
			old := s.neigh.get(h.src)
			changed := old != nil && old.state != neighIncomplete && old.mac != nd.ll
			if s.neigh.solicited(h.src, nd.ll, e.now) {
				e.neighResolved6(h.src)
			} else if changed {
				s.cnt[c6NeighMACChanged]++
				e.arpEpoch++
			}
			e.wake6()
		}
		e.tx = e.tx[:cap(e.tx)]
		n, to := answerNS(e.tx[ethLen:], nd.target, e.mac, h, nd, srcMAC)
		if n == 0 {
			return
		}
		e.tx = e.tx[:ethLen+n]
		putEth(e.tx, to, e.mac, etherIPv6)
		if e.send() {
			s.cnt[c6NASent]++
		}
		return
	}
	s.cnt[c6NAReceived]++
	if s.ours(nd.target) {
		s.cnt[c6NADuplicate]++ // another node claims our address: nothing learnt
		return
	}
	if e.share != nil && nd.hasLL {
		// Perhaps the answer to another queue's solicitation: the
		// engines that asked take it (takeShared6).
		e.share.publish6(e, nd)
	}
	e.advert6(nd)
}

// advert6 applies advertisement nd (not for one of our addresses) to the
// neighbour cache (RFC 4861 §7.2.5) and lets the connections waiting for
// its target send.
func (e *Engine) advert6(nd *ndMsg) {
	s := e.six
	old := s.neigh.get(nd.target)
	var was [6]byte
	if old != nil {
		was = old.mac
	}
	if s.neigh.advert(nd, e.now) {
		e.neighResolved6(nd.target)
	} else if en := s.neigh.get(nd.target); en != nil && old != nil && en.mac != was {
		s.cnt[c6NeighMACChanged]++
		e.arpEpoch++ // the connections through it take the new MAC (refreshMAC)
	}
	e.wake6()
}

// neighResolved6 lets the connections waiting for neighbour a send.
func (e *Engine) neighResolved6(a ip6Addr) {
	s := e.six
	en := s.neigh.get(a)
	if en == nil || len(e.arpWait) == 0 {
		return
	}
	w := e.arpWait[:0]
	for _, i := range e.arpWait {
		c := &e.conns[i]
		if !e.waiting(i, c.hop) {
			continue
		}
		if c.hop[0] == 0 && s.addrOf(c.hop) == a {
			c.mac, c.macOK, c.arpEpoch = en.mac, true, e.arpEpoch
			e.markDirty(c)
			continue
		}
		w = append(w, i)
	}
	e.arpWait = w
}

// resolve6 is resolve for an IPv6 next hop (alias r): the MAC when it may
// be used, a solicitation sent when it is new (RFC 4861 §7.2.2).
func (e *Engine) resolve6(r [4]byte) ([6]byte, bool) {
	s := e.six
	if s == nil {
		return [6]byte{}, false
	}
	a := s.addrOf(r)
	mac, res := s.neigh.resolve(a, e.now)
	e.wake6()
	switch res {
	case neighHit:
		return mac, true
	case neighSolicit:
		e.sendNS(a, false, [6]byte{})
	case neighFull:
		s.cnt[c6NeighFull]++
	}
	return [6]byte{}, false
}

// noNeighbour says whether next hop a has no neighbour entry (the cache
// is full of entries that must stay): its connection fails.
func (e *Engine) noNeighbour(a [4]byte) bool {
	if a[0] == 0 {
		return e.six == nil || e.six.neigh.get(e.six.addrOf(a)) == nil
	}
	return e.arp.get(a) == nil
}

// refreshMAC6 is refreshMAC for a connection over IPv6.
func (e *Engine) refreshMAC6(c *Conn) {
	s := e.six
	if en := s.neigh.get(s.addrOf(c.hop)); en != nil && en.state != neighIncomplete {
		c.mac = en.mac
	}
}

// sendNS sends a solicitation for target: to its solicited-node address
// (resolution), or unicast to mac (a probe, RFC 4861 §7.3.3).
func (e *Engine) sendNS(target ip6Addr, probe bool, mac [6]byte) {
	s := e.six
	dst, to := solicitedNode(target), multicastMAC6(solicitedNode(target))
	if probe {
		dst, to = target, mac
	}
	e.tx = e.tx[:cap(e.tx)]
	n := buildNS(e.tx[ethLen:], s.localFor(target), dst, target, e.mac)
	if n == 0 {
		return
	}
	e.tx = e.tx[:ethLen+n]
	putEth(e.tx, to, e.mac, etherIPv6)
	if e.send() {
		s.cnt[c6NSSent]++
		if probe {
			s.cnt[c6NSProbes]++
		}
	}
}

// timers6 runs the neighbour cache's and reassembly's timers due.
func (e *Engine) timers6() {
	s := e.six
	var failed int
	s.ntx, failed = s.neigh.timers(e.now, s.ntx[:0])
	for _, t := range s.ntx {
		e.sendNS(t.addr, !t.mcast, t.mac)
	}
	if failed > 0 {
		s.cnt[c6NeighUnresolved] += uint64(failed)
		// The connections waiting for a neighbour that is gone fail.
		w := e.arpWait[:0]
		for _, i := range e.arpWait {
			c := &e.conns[i]
			if !e.waiting(i, c.hop) {
				continue
			}
			if c.hop[0] == 0 && s.neigh.get(s.addrOf(c.hop)) == nil {
				c.fail(ErrHostUnreachable)
				continue
			}
			w = append(w, i)
		}
		e.arpWait = w
	}
	s.reasm.expire(e.now)
	s.due = noTimer // runDue's setTop takes the new due into top
	if at, ok := s.neigh.next(); ok {
		s.due = at
	}
	if at, ok := s.reasm.next(); ok {
		s.due = min(s.due, at)
	}
}

// appendCounters6 appends the IPv6 counters (none without Addr6).
func (e *Engine) appendCounters6(dst []dgramio.Counter) []dgramio.Counter {
	if e.six == nil {
		return dst
	}
	e.each6(func(name string, v uint64, loss bool) {
		dst = append(dst, dgramio.Counter{Layer: Layer, Name: name, Value: v, Loss: loss})
	})
	return dst
}

// counter6 is Counter for the IPv6 counters.
func (e *Engine) counter6(name string) (v uint64, ok bool) {
	if e.six == nil {
		return 0, false
	}
	e.each6(func(n string, x uint64, _ bool) {
		if n == name {
			v, ok = x, true
		}
	})
	return v, ok
}

// each6 calls fn for every IPv6 counter: engine6.cnt, then the drops of
// the building blocks by their reason's name.
func (e *Engine) each6(fn func(name string, v uint64, loss bool)) {
	s := e.six
	for i := counter6(0); i < n6Counters; i++ {
		fn(counter6Names[i].name, s.cnt[i], counter6Names[i].loss)
	}
	for i := ip6Error(1); i < nIP6Errors; i++ {
		fn(ip6ErrorNames[i], s.parseErr[i], true)
	}
	for i := reasm6Result(0); i < nReasm6Results; i++ {
		fn(reasm6Names[i], s.reasmRes[i], i != reasm6Queued && i != reasm6Done && i != reasm6Duplicate)
	}
	fn("ip6_reassembly_timeout", s.reasm.timeouts, true)
	for i := ndpError(1); i < nNDPErrors; i++ {
		fn(ndpErrorNames[i], s.ndpErr[i], false)
	}
	fn("ndp_neigh_evicted", s.neigh.evicted, false)
}
