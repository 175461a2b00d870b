package conformance

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// ipv6Case is a case over IPv6: it needs CapIPv6 and asks for IPv6 in its
// Setup.
func ipv6Case(c Case) Case {
	c.Needs = append([]Cap{CapIPv6}, c.Needs...)
	c.Setup.IPv6 = true
	return c
}

// IsIPv6 reports whether the case runs over IPv6 (it needs CapIPv6).
func (c *Case) IsIPv6() bool {
	for _, n := range c.Needs {
		if n == CapIPv6 {
			return true
		}
	}
	return false
}

// mss6 is the MSS of a 1500-byte link over IPv6: the MTU less the 40-byte
// IPv6 header and the 20-byte TCP header (RFC 8200 §8.3, RFC 6691 §2).
const mss6 = 1500 - 40 - 20

// IPv6, ICMPv6, NDP and TCP-over-IPv6 cases.
func init() {
	register(
		ipv6Case(Case{
			Name:  "ndp-ns-answered",
			RFC:   "RFC 4861 §7.2.3, §7.2.4, §4.4",
			Title: "a neighbour solicitation for the DUT's address is answered by a solicited advertisement (S and O set, hop limit 255, the DUT's MAC as target link-layer address) sent to the solicitor",
			Run: func(e *Env) {
				e.SendFrame(e.NS(e.Info.Addr6))
				f := e.Expect("neighbour advertisement for "+e.Info.Addr6.String(), e.Answer(), IsNA(e.Info.Addr6))
				checkNA(e, f)
			},
		}),
		ipv6Case(Case{
			Name:  "ndp-ns-other-address-ignored",
			RFC:   "RFC 4861 §7.2.3 (a solicitation whose target is not the node's address is silently discarded)",
			Title: "a neighbour solicitation for an address the DUT does not own gets no advertisement",
			Run: func(e *Env) {
				e.SendFrame(e.NS(e.Info.Spare6))
				e.ExpectNothing("advertisement for "+e.Info.Spare6.String(), Quiet, IsICMP6Type(layers.ICMPv6TypeNeighborAdvertisement))
				e.SendFrame(e.NS(e.Info.Addr6))
				e.Expect("advertisement for the DUT's own address", e.Answer(), IsNA(e.Info.Addr6))
			},
		}),
		ipv6Case(Case{
			Name:  "ndp-resolve",
			RFC:   "RFC 4861 §7.2.2, §7.2.5",
			Title: "to reach an address without a neighbour entry the DUT multicasts a solicitation to its solicited-node address, then sends to the MAC of the advertisement",
			Run: func(e *Env) {
				spare := e.Info.Spare6
				if _, err := e.DUT.Connect(netip.AddrPortFrom(spare, benchPort), SockOpts{}); err != nil {
					e.Fatalf("connect: %v", err)
				}
				f := e.Expect("neighbour solicitation for "+spare.String(), e.Answer(), IsNSFor(spare))
				sn := solicitedNode(spare)
				if !f.IP6.DstIP.Equal(sn.AsSlice()) || !bytes.Equal(f.Eth.DstMAC, multicastMAC(sn)) {
					e.Errorf("solicitation sent to %v at %v, want the solicited-node address %v at %v", f.IP6.DstIP, f.Eth.DstMAC, sn, multicastMAC(sn))
				}
				if f.IP6.HopLimit != 255 {
					e.Errorf("solicitation has hop limit %d, want 255 (RFC 4861 §4.3)", f.IP6.HopLimit)
				}
				if !f.IP6.SrcIP.Equal(e.Info.Addr6.AsSlice()) {
					e.Errorf("solicitation from %v, want the DUT's address %v, the source of the packet that prompted it (§7.2.2)", f.IP6.SrcIP, e.Info.Addr6)
				}
				if got := lladdrOption(f.NS.Options, layers.ICMPv6OptSourceAddress); !bytes.Equal(got, e.Info.MAC) {
					e.Errorf("solicitation's source link-layer address is %v, want the DUT's %v", got, e.Info.MAC)
				}
				e.SendFrame(e.NAFor(spare))
				syn := e.Expect("SYN to the resolved address", e.Answer(), func(f *Frame) bool {
					return f.TCP != nil && f.TCP.SYN && f.IP6 != nil && f.IP6.DstIP.Equal(spare.AsSlice())
				})
				if !bytes.Equal(syn.Eth.DstMAC, e.Info.BenchMAC) {
					e.Errorf("SYN sent to %s, want the MAC of the advertisement %s", syn.Eth.DstMAC, e.Info.BenchMAC)
				}
			},
		}),
		ipv6Case(Case{
			Name:  "icmp6-echo",
			RFC:   "RFC 4443 §4.1, §4.2",
			Title: "an ICMPv6 echo request is answered by an echo reply with the same identifier, sequence number and data",
			Run: func(e *Env) {
				data := Pattern(56, 61)
				e.SendFrame(e.Echo6(0x6666, 1, data))
				e.ExpectEcho6Reply(0x6666, 1, data)
			},
		}),
		ipv6Case(Case{
			Name:  "icmp6-port-unreachable",
			RFC:   "RFC 4443 §3.1 (code 4), §2.4(c)",
			Title: "a UDP datagram to a closed port is answered by Destination Unreachable, port unreachable, quoting the datagram",
			Run: func(e *Env) {
				fr := udp6Frame(e, closedPort, Pattern(32, 62))
				e.SendFrame(fr)
				f := e.Expect("ICMPv6 port unreachable", e.Answer(), IsICMP6Type(layers.ICMPv6TypeDestinationUnreachable))
				if c := f.ICMP6.TypeCode.Code(); c != layers.ICMPv6CodePortUnreachable {
					e.Errorf("destination unreachable code %d, want %d (port unreachable)", c, layers.ICMPv6CodePortUnreachable)
				}
				checkQuote6(e, f, fr)
			},
		}),
		ipv6Case(Case{
			Name:  "icmp6-error-rate-limited",
			RFC:   "RFC 4443 §2.4(f) (ICMPv6 error messages are rate-limited)",
			Title: "a burst of 100 UDP datagrams to closed ports (beyond Linux's burst of 50 ICMP messages) gets at least one port unreachable and fewer than 100",
			Run: func(e *Env) {
				const n = 100
				for i := range n {
					e.SendFrame(udp6Frame(e, closedPort+uint16(i), Pattern(16, uint32(i))))
				}
				got := 0
				e.Pass(Quiet, func(f *Frame) {
					if IsICMP6(layers.ICMPv6TypeDestinationUnreachable, layers.ICMPv6CodePortUnreachable)(f) {
						got++
					}
				})
				e.Note("%d port unreachables for %d datagrams", got, n)
				if got == 0 || got >= n {
					e.Errorf("%d port unreachables for %d datagrams sent at once, want at least 1 and fewer than %d (rate-limited)", got, n, n)
				}
			},
		}),
		ipv6Case(Case{
			Name:  "tcp6-handshake-passive",
			RFC:   "RFC 9293 §3.5 / RFC 8200 §8.1, §8.3 / RFC 6691 §2",
			Title: "a SYN over IPv6 to a listener is answered by a SYN-ACK from the DUT's IPv6 address, checksummed over the IPv6 pseudo-header, announcing MSS 1440 for a 1500-byte MTU; the handshake completes",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{IPv6: true})
				f := e.NewFlow6(dutPort, 1000)
				f.Offered = PlainOpts
				f.Send(SYN, nil)
				sa := f.ExpectSYNACK()
				if mss := sa.Opts().MSS; mss != mss6 {
					e.Errorf("SYN-ACK announces MSS %d, want %d (MTU 1500 less 40 of IPv6 and 20 of TCP)", mss, mss6)
				}
				f.Send(ACK, nil)
				e.Accept(l)
			},
		}),
		ipv6Case(Case{
			Name:  "tcp6-handshake-active",
			RFC:   "RFC 9293 §3.5 / RFC 8200 §8.3 / RFC 6691 §2",
			Title: "the DUT connecting over IPv6 sends a SYN from its IPv6 address announcing MSS 1440, and acknowledges the SYN-ACK",
			Run: func(e *Env) {
				c, err := e.DUT.Connect(netip.AddrPortFrom(e.Info.BenchAddr6, benchPort), SockOpts{})
				if err != nil {
					e.Fatalf("connect: %v", err)
				}
				e.Cleanup(func() { c.Close() })
				f, syn := e.ExpectSYN(benchPort, 5000)
				f.V6 = true
				if syn.IP6 == nil || !syn.IP6.SrcIP.Equal(e.Info.Addr6.AsSlice()) {
					e.Fatalf("SYN %v, want one from %v", syn, e.Info.Addr6)
				}
				if mss := syn.Opts().MSS; mss != mss6 {
					e.Errorf("SYN announces MSS %d, want %d", mss, mss6)
				}
				f.Accept(syn, PlainOpts)
				f.ExpectAck(f.SndNxt)
				e.WriteWhenConnected(c, []byte("hello6"))
				if got := f.ReadData(6, true); string(got) != "hello6" {
					e.Errorf("bench read %q", got)
				}
			},
		}),
		ipv6Case(Case{
			Name:  "tcp6-data-close",
			RFC:   "RFC 9293 §3.10.2, §3.10.4, §3.6",
			Title: "over IPv6, data flows both ways in MSS-sized segments, the bench's FIN reads as end of stream and the DUT's close sends its FIN",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{IPv6: true})
				f := e.NewFlow6(dutPort, 1000)
				f.Connect(PlainOpts)
				c := e.Accept(l)
				in := Pattern(3000, 63)
				f.SendData(in, mss6)
				f.ExpectAck(f.SndNxt)
				if got := e.ReadAll(c, len(in)); !bytes.Equal(got, in) {
					e.Errorf("DUT read %d bytes that differ from the %d sent", len(got), len(in))
				}
				out := Pattern(4000, 64)
				e.Write(c, out)
				got := f.readData(len(out), true, func(fr *Frame) {
					if len(fr.Payload) > mss6 {
						e.Errorf("segment of %d bytes, more than the MSS %d", len(fr.Payload), mss6)
					}
				})
				if !bytes.Equal(got, out) {
					e.Errorf("bench read %d bytes that differ from the %d written", len(got), len(out))
				}
				f.Send(FIN|ACK, nil)
				f.ExpectAck(f.SndNxt)
				e.expectReadErr(c, io.EOF, "the bench's FIN")
				if err := c.Close(); err != nil {
					e.Fatalf("close: %v", err)
				}
				f.ExpectFIN()
				f.Send(ACK, nil)
			},
		}),
		ipv6Case(Case{
			Name:  "icmp6-packet-too-big-mss",
			RFC:   "RFC 8201 §4 / RFC 4443 §3.2",
			Title: "a Packet Too Big (MTU 1280) for a data segment lowers the connection's segment size: what is sent after it fits in 1280 bytes, and all the data arrives",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{IPv6: true})
				f := e.NewFlow6(dutPort, 1000)
				f.Connect(PlainOpts)
				c := e.Accept(l)
				out := Pattern(8000, 65)
				e.Write(c, out)
				first := f.Expect("first data segment", IsData)
				if size := 40 + int(first.IP6.Length); size <= 1280 {
					e.Fatalf("first data segment is a %d-byte packet: nothing for a 1280-byte path to refuse", size)
				}
				// The rest of the first flight, already on its way.
				e.Pass(Quiet, nil)
				e.SendFrame(e.PacketTooBig(1280, first))
				f.RcvNxt = first.TCP.Seq
				largest := 0
				got := f.readData(len(out), true, func(fr *Frame) {
					size := 40 + int(fr.IP6.Length)
					largest = max(largest, size)
					if size > 1280 {
						e.Errorf("after Packet Too Big (MTU 1280): a %d-byte packet (%d bytes of data)", size, len(fr.Payload))
					}
				})
				if !bytes.Equal(got, out) {
					e.Errorf("bench read %d bytes that differ from the %d written", len(got), len(out))
				}
				e.Note("packets of %d bytes before Packet Too Big, at most %d after", 40+int(first.IP6.Length), largest)
			},
		}),
		ipv6Case(Case{
			Name:  "ipv6-destopts-accepted",
			RFC:   "RFC 8200 §4.2 (option type 00xxxxxx: skip over), §4.6",
			Title: "a SYN behind a Destination Options header (an unknown option whose type says skip, and PadN) is processed: SYN-ACK",
			Run: func(e *Env) {
				e.Listen(dutPort, SockOpts{IPv6: true})
				f := e.NewFlow6(dutPort, 1000)
				f.Offered = PlainOpts
				f.Ext, f.ExtNext = DestOpts(layers.IPProtocolTCP, []byte{0x1e, 2, 0xab, 0xcd}), layers.IPProtocolIPv6Destination
				f.Send(SYN, nil)
				f.ExpectSYNACK()
			},
		}),
		ipv6Case(Case{
			Name:  "ipv6-ext-chain-accepted",
			RFC:   "RFC 8200 §4, §4.1 (order), §4.3, §4.6",
			Title: "a SYN behind a chain of a Hop-by-Hop Options header then a Destination Options header (PadN in both) is processed: SYN-ACK",
			Run: func(e *Env) {
				e.Listen(dutPort, SockOpts{IPv6: true})
				f := e.NewFlow6(dutPort, 1000)
				f.Offered = PlainOpts
				// The Hop-by-Hop header has the Destination Options
				// header's format (§4.3); its Next Header is 60.
				hbh := DestOpts(layers.IPProtocolIPv6Destination, nil)
				f.Ext = append(hbh, DestOpts(layers.IPProtocolTCP, []byte{1, 2, 0, 0})...)
				f.ExtNext = layers.IPProtocolIPv6HopByHop
				f.Send(SYN, nil)
				f.ExpectSYNACK()
			},
		}),
		ipv6Case(Case{
			Name:  "ipv6-destopts-unknown-discard",
			RFC:   "RFC 8200 §4.2 (option type 10xxxxxx: discard, Parameter Problem code 2 pointing at it), RFC 4443 §3.4",
			Title: "a SYN behind a Destination Options header with an unknown option of type 10xxxxxx is dropped (no SYN-ACK) and answered by Parameter Problem code 2 pointing at the option type",
			Run: func(e *Env) {
				e.Listen(dutPort, SockOpts{IPv6: true})
				f := e.NewFlow6(dutPort, 1000)
				f.Offered = PlainOpts
				f.Ext, f.ExtNext = DestOpts(layers.IPProtocolTCP, []byte{0x9e, 2, 0xab, 0xcd}), layers.IPProtocolIPv6Destination
				fr := f.Build(f.SndNxt, 0, SYN, nil)
				e.SendFrame(fr)
				p := e.Expect("Parameter Problem", e.Answer(), func(x *Frame) bool {
					return IsICMP6Type(layers.ICMPv6TypeParameterProblem)(x) || f.Mine(x)
				})
				if p.TCP != nil {
					e.Fatalf("the DUT answered the SYN (%s): the option's type 10xxxxxx says discard", p.Flags())
				}
				if c := p.ICMP6.TypeCode.Code(); c != layers.ICMPv6CodeUnrecognizedIPv6Option {
					e.Errorf("Parameter Problem code %d, want %d (unrecognized IPv6 option)", c, layers.ICMPv6CodeUnrecognizedIPv6Option)
				}
				if len(p.Payload) >= 4 {
					// The option type is the first byte after the
					// header's Next Header and length: 40 + 2.
					if ptr := binary.BigEndian.Uint32(p.Payload); ptr != 42 {
						e.Errorf("pointer %d, want 42 (the unknown option's type)", ptr)
					}
				}
				checkQuote6(e, p, fr)
				f.ExpectNothing("a SYN whose option says discard")
			},
		}),
		ipv6Case(Case{
			Name:  "ipv6-fragments-reassembled",
			RFC:   "RFC 8200 §4.5",
			Title: "an ICMPv6 echo request in three fragments, sent in order, is reassembled and answered with all its data",
			Run: func(e *Env) {
				data := Pattern(1200, 66)
				for _, fr := range e.Fragments6(e.Echo6(21, 1, data), 0x6601, [][2]int{{0, 512}, {512, 512}, {1024, 8 + 1200 - 1024}}) {
					e.SendFrame(fr)
				}
				e.ExpectEcho6Reply(21, 1, data)
			},
		}),
		ipv6Case(Case{
			Name:  "ipv6-fragments-overlap-dropped",
			RFC:   "RFC 5722 §4 (with erratum 3089)",
			Title: "an ICMPv6 echo request whose fragments overlap is dropped whole (no reply); a later unfragmented one is answered",
			Run: func(e *Env) {
				data := Pattern(1200, 67)
				// The second fragment starts 8 bytes inside the first.
				for _, fr := range e.Fragments6(e.Echo6(22, 1, data), 0x6602, [][2]int{{0, 512}, {504, 520}, {1024, 8 + 1200 - 1024}}) {
					e.SendFrame(fr)
				}
				e.ExpectNothing("echo reply to overlapping fragments", Quiet, IsEcho6Reply(22, 1))
				again := Pattern(64, 68)
				e.SendFrame(e.Echo6(22, 2, again))
				e.ExpectEcho6Reply(22, 2, again)
			},
		}),
	)
}

// checkNA checks a solicited advertisement of the DUT's address to the
// bench (RFC 4861 §7.2.4, §4.4).
func checkNA(e *Env, f *Frame) {
	e.Helper()
	na := f.NA
	if !f.IP6.SrcIP.Equal(e.Info.Addr6.AsSlice()) || !f.IP6.DstIP.Equal(e.Info.BenchAddr6.AsSlice()) {
		e.Errorf("advertisement %v -> %v, want %v -> %v (unicast to the solicitor)", f.IP6.SrcIP, f.IP6.DstIP, e.Info.Addr6, e.Info.BenchAddr6)
	}
	if !bytes.Equal(f.Eth.DstMAC, e.Info.BenchMAC) {
		e.Errorf("advertisement sent to %s, want the solicitor's %s", f.Eth.DstMAC, e.Info.BenchMAC)
	}
	if f.IP6.HopLimit != 255 {
		e.Errorf("advertisement has hop limit %d, want 255 (RFC 4861 §7.1.2)", f.IP6.HopLimit)
	}
	if na.Flags&naSolicited == 0 || na.Flags&naOverride == 0 || na.Flags&naRouter != 0 {
		e.Errorf("advertisement flags %#x, want Solicited and Override, not Router", na.Flags)
	}
	if got := lladdrOption(na.Options, layers.ICMPv6OptTargetAddress); !bytes.Equal(got, e.Info.MAC) {
		e.Errorf("target link-layer address %v, want the DUT's %v", got, e.Info.MAC)
	}
}

// lladdrOption returns the link-layer address option of type t, nil when
// there is none.
func lladdrOption(opts layers.ICMPv6Options, t layers.ICMPv6Opt) []byte {
	for _, o := range opts {
		if o.Type == t {
			return o.Data
		}
	}
	return nil
}

// udp6Frame is a UDP datagram over IPv6 from the bench to the DUT's port.
func udp6Frame(e *Env, port uint16, data []byte) []byte {
	e.Helper()
	ip := e.IPv6(layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: 40000, DstPort: layers.UDPPort(port)}
	u.SetNetworkLayerForChecksum(ip)
	return e.Build(e.Eth(layers.EthernetTypeIPv6), ip, u, gopacket.Payload(data))
}

// checkQuote6 checks that ICMPv6 error f comes from the DUT to the bench
// and quotes the invoking packet of frame sent (RFC 4443 §2.4(c): as much
// of it as fits in the minimum MTU), after the 4-byte word.
func checkQuote6(e *Env, f *Frame, sent []byte) {
	e.Helper()
	if !f.IP6.SrcIP.Equal(e.Info.Addr6.AsSlice()) || !f.IP6.DstIP.Equal(e.Info.BenchAddr6.AsSlice()) {
		e.Errorf("ICMPv6 error %v -> %v, want %v -> %v", f.IP6.SrcIP, f.IP6.DstIP, e.Info.Addr6, e.Info.BenchAddr6)
	}
	pkt := sent[14:]
	if len(f.Payload) < 4+40 {
		e.Errorf("ICMPv6 error quotes %d bytes, want the invoking packet", len(f.Payload)-4)
		return
	}
	q := f.Payload[4:]
	n := min(len(q), len(pkt))
	if !bytes.Equal(q[:n], pkt[:n]) || len(q) < len(pkt) && 40+8+len(q) < 1280 {
		e.Errorf("ICMPv6 error quotes %d bytes that are not the %d-byte invoking packet", len(q), len(pkt))
	}
}
