package conformance

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/dgramio/dgramio/frameio"
)

// Mutant is one of our stacks over memio (netstack, or the native engine)
// with one defect put in on purpose, by a FrameIO wrapper between the
// stack and the wire. The suite is tested with
// them: a suite that passes a broken stack is broken. Each mutant must fail
// the cases named in Fails, and pass the cases in Control (so that the
// failure comes from the defect, not from a mutant that does not work).
type Mutant struct {
	Factory Factory
	// Defect says what is broken.
	Defect string
	// Fails are the cases that must catch the defect; Control cases that
	// must still pass.
	Fails, Control []string
}

// Mutants returns the mutant DUTs.
func Mutants() []Mutant {
	return append([]Mutant{
		{
			Factory: mutant("mutant-no-pad", trimPadding, nil),
			Defect:  "frames shorter than 60 bytes leave unpadded",
			Fails:   []string{"pad-arp-reply-60", "pad-tcp-rst-60"},
			Control: []string{"arp-request-reply", "tcp-syn-closed-port-rst"},
		},
		{
			Factory: mutant("mutant-no-rst", dropRST, nil),
			Defect:  "no RST ever leaves",
			Fails:   []string{"tcp-syn-closed-port-rst", "tcp-ack-closed-port-rst", "tcp-time-wait-expiry"},
			Control: []string{"tcp-handshake-passive", "tcp-rst-closed-port-ignored"},
		},
		{
			Factory: mutant("mutant-accept-bad-checksums", nil, fixChecksums),
			Defect:  "received frames with bad IPv4 or TCP checksums are taken as good",
			Fails:   []string{"tcp-bad-checksum-dropped", "tcp-bad-checksum-syn-dropped", "ipv4-bad-header-checksum"},
			Control: []string{"icmp-echo", "tcp-handshake-passive"},
		},
		{
			Factory: mutant("mutant-ignore-window", nil, openWindow),
			Defect:  "the peer's advertised window is ignored (taken as 65535)",
			Fails:   []string{"tcp-peer-window-respected", "tcp-persist-probes"},
			Control: []string{"tcp-handshake-passive", "tcp-mss-small-mtu"},
		},
		{
			Factory: mutant("mutant-no-arp-reply", dropARPReply, nil),
			Defect:  "ARP requests for our address are never answered",
			Fails:   []string{"arp-request-reply", "arp-other-address-ignored"},
			Control: []string{"arp-resolve", "icmp-echo"},
		},
		{
			Factory: nativeMutant("mutant-native-probe-broadcast", broadcastARPRequests, nil),
			Defect:  "the native engine's unicast ARP probes leave as broadcast requests (a STALE entry is asked for as if unknown)",
			Fails:   []string{"arp-stale-reprobe"},
			Control: []string{"arp-resolve", "arp-request-reply"},
		},
		{
			Factory: nativeMutant("mutant-native6-na-unsolicited", clearNASolicited, nil),
			Defect:  "the native engine's neighbour advertisements lack the Solicited flag",
			Fails:   []string{"ndp-ns-answered"},
			Control: []string{"ndp-resolve", "icmp6-echo"},
		},
		{
			Factory: nativeMutant("mutant-native6-ns-broadcast", broadcastNS, nil),
			Defect:  "the native engine's neighbour solicitations go to the Ethernet broadcast address (not the solicited-node group, nor the cached MAC of a probe)",
			Fails:   []string{"ndp-resolve", "ndp-stale-reprobe"},
			Control: []string{"ndp-ns-answered"},
		},
		{
			Factory: nativeMutant("mutant-native6-mss-1460", mss6As1460, nil),
			Defect:  "the native engine announces over IPv6 the MSS of IPv4 (1460, 20 bytes too many)",
			Fails:   []string{"tcp6-handshake-passive", "tcp6-handshake-active"},
			Control: []string{"icmp6-echo", "ndp-ns-answered"},
		},
		{
			Factory: nativeMutant("mutant-native6-no-hop-by-hop", nil, dropHopByHop),
			Defect:  "the native engine drops IPv6 packets that carry a Hop-by-Hop Options header",
			Fails:   []string{"ipv6-ext-chain-accepted"},
			Control: []string{"ipv6-destopts-accepted"},
		},
		{
			Factory: nativeMutant("mutant-native6-no-param-problem", dropICMP6Type(4), nil),
			Defect:  "the native engine sends no ICMPv6 Parameter Problem",
			Fails:   []string{"ipv6-destopts-unknown-discard"},
			Control: []string{"ipv6-destopts-accepted"},
		},
		{
			Factory: nativeMutant("mutant-native6-ignore-ptb", nil, dropICMP6Type(2)),
			Defect:  "the native engine ignores ICMPv6 Packet Too Big",
			Fails:   []string{"icmp6-packet-too-big-mss"},
			Control: []string{"tcp6-data-close"},
		},
		{
			Factory: nativeMutant("mutant-native6-trim-overlap", nil, trimOverlap6()),
			Defect:  "the native engine takes overlapping IPv6 fragments, the overlap trimmed (as before RFC 5722)",
			Fails:   []string{"ipv6-fragments-overlap-dropped"},
			Control: []string{"ipv6-fragments-reassembled"},
		},
	}, hostileMutants()...)
}

// nativeMutant is the Factory of the native engine over memio with its
// frames rewritten by tx (sent) and rx (received); either may be nil.
func nativeMutant(name string, tx, rx func(frame, scratch []byte) []byte) Factory {
	return nativeFactory{name: name, wrap: func(w waitFrameIO) waitFrameIO {
		return &mutantFIO{waitFrameIO: w, tx: tx, rx: rx}
	}}
}

// mutant is the Factory of our stack over memio with its frames rewritten
// by tx (sent) and rx (received); either may be nil.
func mutant(name string, tx, rx func(frame, scratch []byte) []byte) Factory {
	return &oursFactory{name: name, wrap: func(f frameio.FrameIO) frameio.FrameIO {
		w, ok := f.(waitFrameIO)
		if !ok {
			return f // oursFactory refuses a FrameIO that cannot Wait
		}
		return &mutantFIO{waitFrameIO: w, tx: tx, rx: rx}
	}}
}

// MutantResult is what Mutant.Run found: the cases of Fails that failed
// (Caught) and those that did not (Missed), and the cases of Control that
// did not pass (Broken). A good suite misses nothing and breaks nothing.
type MutantResult struct {
	Caught, Missed, Broken []Result
}

// Run runs the mutant's Fails and Control cases against it, outside go
// test. It returns an error when the mutant cannot be made, a case does not
// exist, or a case of Fails already fails on our stack (an accepted
// difference: it could not show the defect).
func (m Mutant) Run() (MutantResult, error) {
	var r MutantResult
	info, err := Probe(m.Factory)
	if err != nil {
		return r, fmt.Errorf("make %s: %w", m.Factory.Name(), err)
	}
	run := func(name string) (Result, error) {
		c, ok := CaseByName(name)
		if !ok {
			return Result{}, fmt.Errorf("%s: no case %q", m.Factory.Name(), name)
		}
		return RunCase(m.Factory, c, info), nil
	}
	for _, name := range m.Fails {
		if d, xfail := expectedFailure(name, KindOurs); xfail {
			return r, fmt.Errorf("%s fails on our stack already (%s): it cannot show the defect of %s", name, d.RFC, m.Factory.Name())
		}
		res, err := run(name)
		if err != nil {
			return r, err
		}
		if res.Outcome == Fail {
			r.Caught = append(r.Caught, res)
		} else {
			r.Missed = append(r.Missed, res)
		}
	}
	for _, name := range m.Control {
		res, err := run(name)
		if err != nil {
			return r, err
		}
		if res.Outcome != Pass {
			r.Broken = append(r.Broken, res)
		}
	}
	return r, nil
}

// mutantFIO wraps our stack's FrameIO: tx rewrites (or, returning nil,
// drops) each frame the stack sends, rx each frame it receives. TxFrame
// is serialized by the stack and RxFrames runs on the poll loop only, so
// each rewrite may use its own scratch buffer.
type mutantFIO struct {
	waitFrameIO
	tx, rx func(frame, scratch []byte) []byte
	txBuf  [1 << 16]byte
	rxBuf  [1 << 16]byte
}

var _ waitFrameIO = (*mutantFIO)(nil)

// TxFrame implements frameio.FrameIO.
func (m *mutantFIO) TxFrame(frame []byte) bool {
	if m.tx != nil {
		if frame = m.tx(frame, m.txBuf[:0]); frame == nil {
			return true // "sent"
		}
	}
	return m.waitFrameIO.TxFrame(frame)
}

// RxFrames implements frameio.FrameIO.
func (m *mutantFIO) RxFrames(max int, deliver func([]byte)) int {
	if m.rx == nil {
		return m.waitFrameIO.RxFrames(max, deliver)
	}
	return m.waitFrameIO.RxFrames(max, func(f []byte) {
		if g := m.rx(f, m.rxBuf[:0]); g != nil { // nil: dropped
			deliver(g)
		}
	})
}

// trimPadding cuts a frame to its content: an ARP packet's 28 bytes or an
// IPv4 datagram's total length after the Ethernet header.
func trimPadding(f, _ []byte) []byte {
	if len(f) < 14 {
		return f
	}
	switch binary.BigEndian.Uint16(f[12:]) {
	case 0x0806:
		if len(f) > 42 {
			return f[:42]
		}
	case 0x0800:
		if len(f) >= 34 {
			if n := 14 + int(binary.BigEndian.Uint16(f[16:])); n < len(f) {
				return f[:n]
			}
		}
	}
	return f
}

// tcpHeader returns the offset of the TCP header of an IPv4 frame carrying
// an unfragmented TCP segment, or -1.
func tcpHeader(f []byte) int {
	if len(f) < 34 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != 6 ||
		binary.BigEndian.Uint16(f[20:])&0x3fff != 0 {
		return -1
	}
	off := 14 + int(f[14]&0x0f)*4
	if off+20 > len(f) {
		return -1
	}
	return off
}

func dropRST(f, _ []byte) []byte {
	if t := tcpHeader(f); t >= 0 && f[t+13]&0x04 != 0 {
		return nil
	}
	return f
}

func dropARPReply(f, _ []byte) []byte {
	if len(f) >= 42 && binary.BigEndian.Uint16(f[12:]) == 0x0806 && binary.BigEndian.Uint16(f[20:]) == 2 {
		return nil
	}
	return f
}

// broadcastARPRequests sends every ARP request to the broadcast address.
func broadcastARPRequests(f, scratch []byte) []byte {
	if len(f) < 42 || binary.BigEndian.Uint16(f[12:]) != 0x0806 || binary.BigEndian.Uint16(f[20:]) != 1 {
		return f
	}
	out := append(scratch, f...)
	copy(out[:6], broadcast)
	return out
}

// icmp6At returns the offset of the ICMPv6 message of an IPv6 frame
// without extension headers, or -1.
func icmp6At(f []byte) int {
	if len(f) < 14+40+4 || binary.BigEndian.Uint16(f[12:]) != 0x86dd || f[14+6] != nhICMPv6 {
		return -1
	}
	return 14 + 40
}

// tcp6At returns the offset of the TCP header of an IPv6 frame without
// extension headers, or -1.
func tcp6At(f []byte) int {
	if len(f) < 14+40+20 || binary.BigEndian.Uint16(f[12:]) != 0x86dd || f[14+6] != nhTCP {
		return -1
	}
	return 14 + 40
}

// setChecksum6 recomputes the ICMPv6 or TCP checksum of an IPv6 frame
// without extension headers, in place.
func setChecksum6(f []byte) {
	at, field := icmp6At(f), 2
	if at < 0 {
		at, field = tcp6At(f), 16
	}
	if at < 0 {
		return
	}
	end := min(14+40+int(binary.BigEndian.Uint16(f[14+4:])), len(f))
	if end < at+field+2 {
		return // the payload length leaves no room for the checksum
	}
	seg := f[at:end]
	acc := sum(0, f[14+8:14+40]) + uint32(len(seg)) + uint32(f[14+6])
	binary.BigEndian.PutUint16(seg[field:], 0)
	binary.BigEndian.PutUint16(seg[field:], ^fold(sum(acc, seg)))
}

// clearNASolicited clears the Solicited flag of neighbour advertisements.
func clearNASolicited(f, scratch []byte) []byte {
	at := icmp6At(f)
	if at < 0 || f[at] != 136 || len(f) < at+5 {
		return f
	}
	out := append(scratch, f...)
	out[at+4] &^= naSolicited
	setChecksum6(out)
	return out
}

// broadcastNS sends neighbour solicitations to the Ethernet broadcast.
func broadcastNS(f, scratch []byte) []byte {
	if at := icmp6At(f); at < 0 || f[at] != 135 {
		return f
	}
	out := append(scratch, f...)
	copy(out[:6], broadcast)
	return out
}

// mss6As1460 rewrites an MSS option of 1440 in a TCP segment over IPv6 to
// 1460.
func mss6As1460(f, scratch []byte) []byte {
	at := tcp6At(f)
	if at < 0 {
		return f
	}
	hl := int(f[at+12]>>4) * 4
	if at+hl > len(f) {
		return f
	}
	out := append(scratch, f...)
	for i := at + 20; i+4 <= at+hl; {
		switch out[i] {
		case 0:
			i = at + hl
		case 1:
			i++
		default:
			if out[i] == 2 && out[i+1] == 4 && binary.BigEndian.Uint16(out[i+2:]) == 1440 {
				binary.BigEndian.PutUint16(out[i+2:], 1460)
			}
			i += max(int(out[i+1]), 2)
		}
	}
	setChecksum6(out)
	return out
}

// dropICMP6Type drops the ICMPv6 messages of type t.
func dropICMP6Type(t byte) func(f, scratch []byte) []byte {
	return func(f, _ []byte) []byte {
		if at := icmp6At(f); at >= 0 && f[at] == t {
			return nil
		}
		return f
	}
}

// dropHopByHop drops IPv6 frames whose first extension header is
// Hop-by-Hop Options.
func dropHopByHop(f, _ []byte) []byte {
	if len(f) >= 14+40 && binary.BigEndian.Uint16(f[12:]) == 0x86dd && f[14+6] == nhHopByHop {
		return nil
	}
	return f
}

// trimOverlap6 rewrites IPv6 fragments that overlap what came before of
// their datagram into ones that start where it ended (the overlap cut off),
// as a reassembler that trims overlaps would take them. RxFrames runs on
// the poll loop only; the mutex keeps the state safe all the same.
func trimOverlap6() func(f, scratch []byte) []byte {
	var mu sync.Mutex
	end := map[uint32]int{} // fragment identification → end of the bytes seen
	return func(f, scratch []byte) []byte {
		const fh = 14 + 40
		if len(f) < fh+8 || binary.BigEndian.Uint16(f[12:]) != 0x86dd || f[14+6] != nhFragment {
			return f
		}
		id := binary.BigEndian.Uint32(f[fh+4:])
		off := int(binary.BigEndian.Uint16(f[fh+2:]) &^ 7)
		n := 14 + 40 + int(binary.BigEndian.Uint16(f[14+4:])) - (fh + 8)
		mu.Lock()
		defer mu.Unlock()
		seen := end[id]
		end[id] = max(seen, off+n)
		if off >= seen || seen >= off+n {
			return f
		}
		cut := seen - off // a multiple of 8: both are
		out := append(scratch, f[:fh+8]...)
		out = append(out, f[fh+8+cut:fh+8+n]...)
		binary.BigEndian.PutUint16(out[14+4:], uint16(8+n-cut))
		binary.BigEndian.PutUint16(out[fh+2:], uint16(seen)|binary.BigEndian.Uint16(f[fh+2:])&1)
		return out
	}
}

// openWindow rewrites the window of every TCP segment to 65535 and fixes
// its checksum.
func openWindow(f, scratch []byte) []byte {
	t := tcpHeader(f)
	if t < 0 {
		return f
	}
	out := append(scratch, f...)
	binary.BigEndian.PutUint16(out[t+14:], 0xffff)
	setTransportChecksum(out)
	return out
}

// fixChecksums recomputes the IPv4 header checksum and the TCP, UDP or
// ICMP checksum of a frame, so that a corrupt frame reads as good.
func fixChecksums(f, scratch []byte) []byte {
	if len(f) < 34 || binary.BigEndian.Uint16(f[12:]) != 0x0800 {
		return f
	}
	out := append(scratch, f...)
	ihl := int(out[14]&0x0f) * 4
	if ihl < 20 || 14+ihl > len(out) {
		return f
	}
	binary.BigEndian.PutUint16(out[24:], 0)
	binary.BigEndian.PutUint16(out[24:], ^fold(sum(0, out[14:14+ihl])))
	setTransportChecksum(out)
	return out
}

// setTransportChecksum recomputes the checksum of the TCP, UDP or ICMP
// message of an unfragmented IPv4 frame in place.
func setTransportChecksum(f []byte) {
	if binary.BigEndian.Uint16(f[20:])&0x3fff != 0 {
		return
	}
	ihl := int(f[14]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(f[16:]))
	if total < ihl || 14+total > len(f) {
		return
	}
	seg := f[14+ihl : 14+total]
	var at int
	pseudo := sum(0, f[26:34]) + uint32(f[23]) + uint32(len(seg))
	switch f[23] {
	case 1:
		at, pseudo = 2, 0
	case 6:
		at = 16
	case 17:
		at = 6
	default:
		return
	}
	if len(seg) < at+2 {
		return
	}
	binary.BigEndian.PutUint16(seg[at:], 0)
	binary.BigEndian.PutUint16(seg[at:], ^fold(sum(pseudo, seg)))
}
