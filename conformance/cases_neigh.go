package conformance

import (
	"bytes"
	"net/netip"
	"time"

	"github.com/google/gopacket/layers"
)

// staleTimes are the neighbour timers of the stale-entry case: short, so
// that Linux (which runs them in real time) goes through them in seconds.
var staleTimes = NeighTimes{Reachable: time.Second, DelayFirstProbe: time.Second, Retrans: 200 * time.Millisecond}

// Neighbour cache cases (ARP with RFC 4861's states, as Linux runs it).
func init() {
	register(Case{
		Name: "arp-stale-reprobe",
		RFC:  "RFC 1122 §2.3.2.1 (unicast poll) / RFC 4861 §7.3.3 (REACHABLE → STALE → DELAY → PROBE, as Linux applies it to ARP)",
		Title: "a neighbour entry past its reachable time is used as it is, then re-probed by unicast requests to the cached MAC; " +
			"unanswered, the DUT asks by broadcast again and sends to the MAC of the answer",
		Needs: []Cap{CapARP},
		Setup: Setup{Neigh: staleTimes},
		Run: func(e *Env) {
			spare := e.Info.Spare
			// The entry: asked for by broadcast and answered, REACHABLE.
			if _, err := e.DUT.Connect(netip.AddrPortFrom(spare, benchPort), SockOpts{}); err != nil {
				e.Fatalf("connect: %v", err)
			}
			req := e.Expect("ARP request for "+spare.String(), e.Answer(), isARPRequestFor(spare))
			if !bytes.Equal(req.Eth.DstMAC, broadcast) {
				e.Errorf("first request for %s sent to %s, want broadcast (no entry yet)", spare, req.Eth.DstMAC)
			}
			e.SendFrame(e.ARPReplyFor(spare))
			syn := e.Expect("SYN to "+spare.String(), e.Answer(), isSYNTo(spare))
			// Refused: no retransmission of this SYN uses the entry.
			e.SendFrame(e.RSTFor(syn))

			// Until it is STALE: 0.5 to 1.5 times the base reachable time
			// after its last confirmation. An entry used shortly before it
			// ages may be probed first (Linux: REACHABLE → DELAY when used
			// within delay_first_probe_time); the bench is alive and
			// answers such probes, which must be unicast to it.
			confirmed := e.Clock().Now()
			for {
				left := confirmed + staleTimes.Reachable*3/2 + staleTimes.Reachable/4 - e.Clock().Now()
				if left <= 0 {
					break
				}
				e.Pass(left, func(f *Frame) {
					if !isARPRequestFor(spare)(f) {
						return
					}
					if !bytes.Equal(f.Eth.DstMAC, e.Info.BenchMAC) {
						e.Errorf("request for %s, which answered, sent to %s: want a unicast probe to %s", spare, f.Eth.DstMAC, e.Info.BenchMAC)
					}
					e.Note("probed %v after the first answer while the entry aged", f.At)
					e.SendFrame(e.ARPReplyFor(spare))
					confirmed = e.Clock().Now()
				})
			}

			// Used while STALE: the SYN leaves to the cached MAC without
			// waiting for an answer (no broadcast request first), and the
			// entry is probed by unicast (Linux: after DELAY; a DUT
			// without DELAY probes at once).
			if _, err := e.DUT.Connect(netip.AddrPortFrom(spare, benchPort+1), SockOpts{}); err != nil {
				e.Fatalf("connect: %v", err)
			}
			var first, probe *Frame
			e.ExpectTimer("SYN through the STALE entry and a probe of it", staleTimes.DelayFirstProbe+10*staleTimes.Retrans, func(f *Frame) bool {
				switch {
				case first == nil && isSYNTo(spare)(f):
					first = f
				case probe == nil && isARPRequestFor(spare)(f):
					if bytes.Equal(f.Eth.DstMAC, broadcast) {
						e.Fatalf("the DUT asked for %s by broadcast instead of probing its STALE entry (RFC 1122 §2.3.2.1): %v", spare, f)
					}
					probe = f
				}
				return first != nil && probe != nil
			})
			if !bytes.Equal(first.Eth.DstMAC, e.Info.BenchMAC) {
				e.Errorf("SYN through the STALE entry sent to %s, want the cached %s", first.Eth.DstMAC, e.Info.BenchMAC)
			}
			e.Note("first probe %v after the SYN through the STALE entry", probe.At-first.At)
			if !bytes.Equal(probe.Eth.DstMAC, e.Info.BenchMAC) {
				e.Fatalf("probe of the STALE entry sent to %s, want unicast to the cached %s (RFC 1122 §2.3.2.1)", probe.Eth.DstMAC, e.Info.BenchMAC)
			}
			a := probe.ARP
			if !bytes.Equal(a.SourceHwAddress, e.Info.MAC) || !bytes.Equal(a.SourceProtAddress, e.Info.Addr.AsSlice()) {
				e.Errorf("probe says it comes from %s at %s, want %s at %s", ip4(a.SourceProtAddress), mac(a.SourceHwAddress), e.Info.Addr, e.Info.MAC)
			}

			// Unanswered, the neighbour may have moved: the DUT asks by
			// broadcast (after its unicast probes).
			unicast := 1
			bcast := e.ExpectTimer("broadcast request after the unanswered probes", 10*time.Second, func(f *Frame) bool {
				if !isARPRequestFor(spare)(f) {
					return false
				}
				if bytes.Equal(f.Eth.DstMAC, broadcast) {
					return true
				}
				unicast++
				return false
			})
			e.Note("%d unicast probes, then a broadcast request %v after the first", unicast, bcast.At-probe.At)
			e.SendFrame(e.ARPReplyFor(spare))
			again := e.ExpectTimer("SYN after the answer to the broadcast", 10*time.Second, isSYNTo(spare))
			if !bytes.Equal(again.Eth.DstMAC, e.Info.BenchMAC) {
				e.Errorf("SYN after the answer sent to %s, want %s", again.Eth.DstMAC, e.Info.BenchMAC)
			}
		},
	})
}

// isARPRequestFor accepts the DUT's ARP requests for ip.
func isARPRequestFor(ip netip.Addr) Match {
	return func(f *Frame) bool {
		return f.ARP != nil && f.ARP.Operation == layers.ARPRequest && bytes.Equal(f.ARP.DstProtAddress, ip.AsSlice())
	}
}

// isSYNTo accepts the DUT's SYNs to ip.
func isSYNTo(ip netip.Addr) Match {
	return func(f *Frame) bool {
		return f.TCP != nil && f.TCP.SYN && !f.TCP.ACK && f.IP != nil && f.IP.DstIP.Equal(ip.AsSlice())
	}
}

// RSTFor builds the RST (with ACK) that refuses the DUT's SYN syn, from the
// address it was sent to (RFC 9293 §3.10.7.1).
func (b *Bench) RSTFor(syn *Frame) []byte {
	b.tb.Helper()
	ip := b.IPv4(layers.IPProtocolTCP)
	ip.SrcIP = syn.IP.DstIP
	t := &layers.TCP{SrcPort: syn.TCP.DstPort, DstPort: syn.TCP.SrcPort, Ack: syn.TCP.Seq + 1, RST: true, ACK: true}
	t.SetNetworkLayerForChecksum(ip)
	return b.serialize(b.Eth(layers.EthernetTypeIPv4), ip, t)
}
