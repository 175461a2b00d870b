package conformance

import (
	"encoding/binary"
	"fmt"

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
	return []Mutant{
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
	}
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
// drops) each frame the stack sends, rx each frame it receives. TxFrame is
// serialized by the stack and RxFrames runs on the poll loop only, so each
// rewrite may use its own scratch buffer.
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
	return m.waitFrameIO.RxFrames(max, func(f []byte) { deliver(m.rx(f, m.rxBuf[:0])) })
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
