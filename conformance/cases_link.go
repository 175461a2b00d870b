package conformance

import (
	"bytes"
	"net/netip"

	"github.com/google/gopacket/layers"
)

// ARP and Ethernet cases.
func init() {
	register(
		Case{
			Name:  "arp-request-reply",
			RFC:   "RFC 826 (Packet Reception)",
			Title: "an ARP request for the DUT's address is answered: a reply to the asker, the DUT's MAC for its address",
			Needs: []Cap{CapARP},
			Run: func(e *Env) {
				e.SendFrame(e.ARPRequest(e.Info.Addr))
				f := e.ExpectARPReply()
				a := f.ARP
				if !bytes.Equal(a.SourceHwAddress, e.Info.MAC) || !bytes.Equal(a.SourceProtAddress, e.Info.Addr.AsSlice()) {
					e.Errorf("reply says %s is at %s, want %s at %s", ip4(a.SourceProtAddress), mac(a.SourceHwAddress), e.Info.Addr, e.Info.MAC)
				}
				if !bytes.Equal(a.DstHwAddress, e.Info.BenchMAC) || !bytes.Equal(a.DstProtAddress, e.Info.BenchAddr.AsSlice()) {
					e.Errorf("reply is addressed to %s at %s, want the asker %s at %s", ip4(a.DstProtAddress), mac(a.DstHwAddress), e.Info.BenchAddr, e.Info.BenchMAC)
				}
				if !bytes.Equal(f.Eth.DstMAC, e.Info.BenchMAC) {
					e.Errorf("reply sent to %s, want unicast to the asker %s", f.Eth.DstMAC, e.Info.BenchMAC)
				}
				if a.AddrType != layers.LinkTypeEthernet || a.Protocol != layers.EthernetTypeIPv4 || a.HwAddressSize != 6 || a.ProtAddressSize != 4 {
					e.Errorf("reply has hrd %v pro %v hln %d pln %d, want Ethernet/IPv4/6/4", a.AddrType, a.Protocol, a.HwAddressSize, a.ProtAddressSize)
				}
				if e.Info.Kind == KindOurs {
					e.CounterRose(CounterARPRepliesSent, 1)
				}
			},
		},
		Case{
			Name:  "arp-other-address-ignored",
			RFC:   "RFC 826 (Packet Reception: only for the target protocol address)",
			Title: "an ARP request for an address the DUT does not own gets no reply",
			Needs: []Cap{CapARP},
			Run: func(e *Env) {
				e.SendFrame(e.ARPRequest(e.Info.Spare))
				e.ExpectNothing("ARP reply for "+e.Info.Spare.String(), Quiet, IsARP(layers.ARPReply))
				// The DUT still answers for itself: the silence was not a
				// dead DUT.
				e.SendFrame(e.ARPRequest(e.Info.Addr))
				e.ExpectARPReply() // for its own address
			},
		},
		Case{
			Name:  "arp-resolve",
			RFC:   "RFC 826 (Packet Generation)",
			Title: "to reach an address without a neighbour entry the DUT broadcasts a request for it, then sends to the MAC in the reply",
			Needs: []Cap{CapARP},
			Run: func(e *Env) {
				if _, err := e.DUT.Connect(netip.AddrPortFrom(e.Info.Spare, benchPort), SockOpts{}); err != nil {
					e.Fatalf("connect: %v", err)
				}
				f := e.Expect("ARP request for "+e.Info.Spare.String(), e.Answer(), IsARP(layers.ARPRequest))
				a := f.ARP
				if !bytes.Equal(f.Eth.DstMAC, broadcast) {
					e.Errorf("request sent to %s, want broadcast", f.Eth.DstMAC)
				}
				if !bytes.Equal(a.DstProtAddress, e.Info.Spare.AsSlice()) {
					e.Errorf("request asks for %s, want %s", ip4(a.DstProtAddress), e.Info.Spare)
				}
				if !bytes.Equal(a.SourceHwAddress, e.Info.MAC) || !bytes.Equal(a.SourceProtAddress, e.Info.Addr.AsSlice()) {
					e.Errorf("request says it comes from %s at %s, want %s at %s", ip4(a.SourceProtAddress), mac(a.SourceHwAddress), e.Info.Addr, e.Info.MAC)
				}
				e.SendFrame(e.ARPReplyFor(e.Info.Spare))
				syn := e.Expect("SYN to the resolved address", e.Answer(), func(f *Frame) bool {
					return f.TCP != nil && f.TCP.SYN && f.IP.DstIP.Equal(e.Info.Spare.AsSlice())
				})
				if !bytes.Equal(syn.Eth.DstMAC, e.Info.BenchMAC) {
					e.Errorf("SYN sent to %s, want the MAC from the reply %s", syn.Eth.DstMAC, e.Info.BenchMAC)
				}
				if e.Info.Kind == KindOurs {
					e.CounterRose(CounterARPRequestsSent, 1)
				}
			},
		},
		Case{
			Name:  "pad-arp-reply-60",
			RFC:   "RFC 894 / IEEE 802.3 §4.2.3.3 (minimum frame 64 bytes with FCS: 60 without)",
			Title: "an ARP reply (42 bytes of content) leaves padded to 60 bytes",
			Needs: []Cap{CapARP},
			Run: func(e *Env) {
				e.SendFrame(e.ARPRequest(e.Info.Addr))
				expectPadded(e, "ARP reply", e.ExpectARPReply(), 42)
			},
		},
		Case{
			Name:  "pad-tcp-rst-60",
			RFC:   "RFC 894 / IEEE 802.3 §4.2.3.3 (minimum frame 64 bytes with FCS: 60 without)",
			Title: "a segment without payload (54 bytes of content: a RST) leaves padded to 60 bytes",
			Run: func(e *Env) {
				f := e.NewFlow(closedPort, 1000)
				f.Send(SYN, nil)
				expectPadded(e, "RST", f.ExpectRST(), 54)
			},
		},
	)
}

// expectPadded checks that f, whose content is the first n bytes, left
// padded with zeros to the 60 bytes of a minimum Ethernet frame.
func expectPadded(e *Env, what string, f *Frame, n int) {
	e.Helper()
	e.Note("%s is %d bytes on the wire", what, len(f.Raw))
	if len(f.Raw) < 60 {
		e.Errorf("%s is %d bytes on the wire, want at least 60 (padded)", what, len(f.Raw))
		return
	}
	for _, b := range f.Raw[n:] {
		if b != 0 {
			e.Errorf("padding of the %s is not zeros: % x", what, f.Raw[n:])
			return
		}
	}
}

// closedPort is the DUT port the closed-port cases send to: they open no
// listener on it. It is dutPort, the one TCP port a tcp-xdp DUT's XDP
// program gives to our stack (any other goes to the kernel).
const closedPort = dutPort
