package conformance

import "encoding/binary"

// Cases of a hostile link: what a host does with traffic crafted to harm
// it (docs/hardening-net.md).
func init() {
	register(
		Case{
			Name:  "ipv4-fragments-overlap-dropped",
			RFC:   "RFC 5722 §4 (for IPv6; Linux applies it to IPv4 since the FragmentSmack fixes, CVE-2018-5391)",
			Title: "an echo request one of whose fragments overlaps another is discarded whole: no echo reply, even once every fragment has come",
			Needs: []Cap{CapIP},
			Run: func(e *Env) {
				data := Pattern(1000, 21)
				fs := e.Fragments(e.Echo(21, 1, data), 256)
				// fs[1] moved 8 bytes down: it overlaps the end of fs[0].
				over := append([]byte(nil), fs[1]...)
				fo := binary.BigEndian.Uint16(over[14+6:])
				binary.BigEndian.PutUint16(over[14+6:], fo&0xe000|(256-8)/8)
				binary.BigEndian.PutUint16(over[14+10:], 0)
				binary.BigEndian.PutUint16(over[14+10:], ^fold(sum(0, over[14:34])))
				e.SendFrame(fs[0])
				e.SendFrame(over)
				for _, f := range fs[1:] {
					e.SendFrame(f)
				}
				e.ExpectNothing("echo reply to a datagram with overlapping fragments", Quiet, AnyIP)
				// The host still reassembles the next datagram.
				data = Pattern(1000, 22)
				for _, f := range e.Fragments(e.Echo(22, 1, data), 256) {
					e.SendFrame(f)
				}
				e.ExpectEchoReply(22, 1, data)
			},
		},
	)
}
