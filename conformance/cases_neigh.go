package conformance

import (
	"bytes"
	"net/netip"
	"time"

	"github.com/google/gopacket/layers"
)

// staleTimes are the neighbour timers of the stale-entry cases: short, so
// that Linux (which runs them in real time) goes through them in seconds.
// The reachable time (0.5 to 1.5 times the base) outlasts DELAY: Linux
// moves an entry used within delay_first_probe_time of its expiry to DELAY
// rather than STALE, and probes it.
var staleTimes = NeighTimes{Reachable: 3 * time.Second, DelayFirstProbe: time.Second, Retrans: 200 * time.Millisecond}

// probeWait bounds the wait for the probe of a STALE entry: DELAY (RFC
// 4861 §10's DELAY_FIRST_PROBE_TIME is 5 s, for a DUT that keeps it) and a
// few retransmissions. A fake clock moves through it at once.
const probeWait = 10 * time.Second

// Neighbour cache cases (ARP with RFC 4861's states, as Linux runs it, and
// NDP).
func init() {
	register(
		Case{
			Name: "arp-stale-reprobe",
			RFC:  "RFC 1122 §2.3.2.1 (unicast poll) / RFC 4861 §7.3.3 (REACHABLE → STALE → DELAY → PROBE, as Linux applies it to ARP)",
			Title: "a neighbour entry past its reachable time is used as it is, then re-probed by unicast requests to the cached MAC; " +
				"unanswered, the DUT asks by broadcast again and sends to the MAC of the answer",
			Needs: []Cap{CapARP},
			Setup: Setup{Neigh: staleTimes},
			Run:   func(e *Env) { staleReprobe(e, arpFamily(e)) },
		},
		ipv6Case(Case{
			Name: "ndp-stale-reprobe",
			RFC:  "RFC 4861 §7.3.3 (REACHABLE → STALE → DELAY → PROBE), §7.2.2",
			Title: "a neighbour cache entry past its reachable time is used as it is, then probed by unicast solicitations to the cached MAC; " +
				"unanswered, the DUT solicits the solicited-node group again and sends to the MAC of the advertisement",
			Setup: Setup{Neigh: staleTimes},
			Run:   func(e *Env) { staleReprobe(e, ndpFamily(e)) },
		}),
	)
}

// neighFamily is what the stale-entry case needs of ARP or NDP.
type neighFamily struct {
	name  string
	spare netip.Addr
	// ask accepts the DUT's requests (solicitations) for spare; multicast
	// tells one sent to everyone (ARP broadcast, NDP to the solicited-node
	// group) from a unicast probe.
	ask       Match
	multicast func(f *Frame) bool
	// answer says spare is at the bench's MAC.
	answer func() []byte
	// syn accepts the DUT's SYNs to spare; rst refuses one.
	syn Match
	rst func(syn *Frame) []byte
}

func arpFamily(e *Env) neighFamily {
	spare := e.Info.Spare
	return neighFamily{name: "ARP request", spare: spare, ask: isARPRequestFor(spare),
		multicast: func(f *Frame) bool { return bytes.Equal(f.Eth.DstMAC, broadcast) },
		answer:    func() []byte { return e.ARPReplyFor(spare) },
		syn:       isSYNTo(spare), rst: e.RSTFor}
}

func ndpFamily(e *Env) neighFamily {
	spare := e.Info.Spare6
	sn := solicitedNode(spare)
	return neighFamily{name: "neighbour solicitation", spare: spare, ask: IsNSFor(spare),
		multicast: func(f *Frame) bool { return f.IP6.DstIP.Equal(sn.AsSlice()) },
		answer:    func() []byte { return e.NAFor(spare) },
		syn:       isSYNTo(spare), rst: e.RSTFor}
}

// staleReprobe resolves the spare address, refuses the SYN, lets the
// entry age past its reachable time (answering the probes of an entry used
// just before it aged), then connects again: the SYN must leave to the
// cached MAC at once, a unicast probe follow, and unanswered a request to
// everyone, whose answer carries the SYN.
func staleReprobe(e *Env, nf neighFamily) {
	e.Helper()
	spare := nf.spare
	// The entry: asked for by multicast and answered, REACHABLE.
	if _, err := e.DUT.Connect(netip.AddrPortFrom(spare, benchPort), SockOpts{}); err != nil {
		e.Fatalf("connect: %v", err)
	}
	req := e.Expect(nf.name+" for "+spare.String(), e.Answer(), nf.ask)
	if !nf.multicast(req) {
		e.Errorf("first %s for %s sent to %s, want to everyone (no entry yet): %v", nf.name, spare, req.Eth.DstMAC, req)
	}
	e.SendFrame(nf.answer())
	syn := e.Expect("SYN to "+spare.String(), e.Answer(), nf.syn)
	// Refused: no retransmission of this SYN uses the entry.
	e.SendFrame(nf.rst(syn))

	// Until it is STALE: 0.5 to 1.5 times the base reachable time after
	// its last confirmation. An entry used shortly before it ages may be
	// probed first (Linux: REACHABLE → DELAY when used within
	// delay_first_probe_time, which staleTimes avoids); the bench is
	// alive and answers such probes, which must be unicast to it.
	confirmed, probed := e.Clock().Now(), 0
	for {
		left := confirmed + staleTimes.Reachable*3/2 + staleTimes.Reachable/4 - e.Clock().Now()
		if left <= 0 {
			break
		}
		e.Pass(left, func(f *Frame) {
			if !nf.ask(f) {
				return
			}
			if probed++; probed > 3 {
				e.Fatalf("the DUT keeps probing %s, which answers and which nothing uses: %v", spare, f)
			}
			if nf.multicast(f) || !bytes.Equal(f.Eth.DstMAC, e.Info.BenchMAC) {
				e.Errorf("%s for %s, which answered, sent to %s: want a unicast probe to %s", nf.name, spare, f.Eth.DstMAC, e.Info.BenchMAC)
			}
			e.Note("probed %v after the first answer while the entry aged", f.At)
			e.SendFrame(nf.answer())
			confirmed = e.Clock().Now()
		})
	}

	// Used while STALE: the SYN leaves to the cached MAC without waiting
	// for an answer (no request to everyone first), and the entry is
	// probed by unicast (Linux: after DELAY; a DUT without DELAY probes at
	// once).
	if _, err := e.DUT.Connect(netip.AddrPortFrom(spare, benchPort+1), SockOpts{}); err != nil {
		e.Fatalf("connect: %v", err)
	}
	var first, probe *Frame
	e.ExpectTimer("SYN through the STALE entry and a probe of it", probeWait, func(f *Frame) bool {
		switch {
		case first == nil && nf.syn(f):
			first = f
		case probe == nil && nf.ask(f):
			if nf.multicast(f) {
				e.Fatalf("the DUT asked everyone for %s instead of probing its STALE entry: %v", spare, f)
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
		e.Fatalf("probe of the STALE entry sent to %s, want unicast to the cached %s", probe.Eth.DstMAC, e.Info.BenchMAC)
	}
	if a := probe.ARP; a != nil && (!bytes.Equal(a.SourceHwAddress, e.Info.MAC) || !bytes.Equal(a.SourceProtAddress, e.Info.Addr.AsSlice())) {
		e.Errorf("probe says it comes from %s at %s, want %s at %s", ip4(a.SourceProtAddress), mac(a.SourceHwAddress), e.Info.Addr, e.Info.MAC)
	}
	if p := probe.IP6; p != nil && !p.DstIP.Equal(spare.AsSlice()) {
		e.Errorf("probe sent to %v, want the neighbour's own address %v (RFC 4861 §7.3.3: unicast)", p.DstIP, spare)
	}

	// Unanswered, the neighbour may have moved: the DUT asks everyone
	// (after its unicast probes).
	unicast := 1
	again := e.ExpectTimer(nf.name+" to everyone after the unanswered probes", probeWait, func(f *Frame) bool {
		if !nf.ask(f) {
			return false
		}
		if nf.multicast(f) {
			return true
		}
		unicast++
		return false
	})
	e.Note("%d unicast probes, then a %s to everyone %v after the first", unicast, nf.name, again.At-probe.At)
	e.SendFrame(nf.answer())
	syn = e.ExpectTimer("SYN after the answer", probeWait, nf.syn)
	if !bytes.Equal(syn.Eth.DstMAC, e.Info.BenchMAC) {
		e.Errorf("SYN after the answer sent to %s, want %s", syn.Eth.DstMAC, e.Info.BenchMAC)
	}
}

// isARPRequestFor accepts the DUT's ARP requests for ip.
func isARPRequestFor(ip netip.Addr) Match {
	return func(f *Frame) bool {
		return f.ARP != nil && f.ARP.Operation == layers.ARPRequest && bytes.Equal(f.ARP.DstProtAddress, ip.AsSlice())
	}
}

// isSYNTo accepts the DUT's SYNs to ip (either family).
func isSYNTo(ip netip.Addr) Match {
	return func(f *Frame) bool {
		if f.TCP == nil || !f.TCP.SYN || f.TCP.ACK {
			return false
		}
		return f.IP != nil && f.IP.DstIP.Equal(ip.AsSlice()) || f.IP6 != nil && f.IP6.DstIP.Equal(ip.AsSlice())
	}
}

// RSTFor builds the RST (with ACK) that refuses the DUT's SYN syn, from the
// address it was sent to (RFC 9293 §3.10.7.1).
func (b *Bench) RSTFor(syn *Frame) []byte {
	b.tb.Helper()
	t := &layers.TCP{SrcPort: syn.TCP.DstPort, DstPort: syn.TCP.SrcPort, Ack: syn.TCP.Seq + 1, RST: true, ACK: true}
	if syn.IP6 != nil {
		ip := b.IPv6(layers.IPProtocolTCP)
		ip.SrcIP = syn.IP6.DstIP
		t.SetNetworkLayerForChecksum(ip)
		return b.serialize(b.Eth(layers.EthernetTypeIPv6), ip, t)
	}
	ip := b.IPv4(layers.IPProtocolTCP)
	ip.SrcIP = syn.IP.DstIP
	t.SetNetworkLayerForChecksum(ip)
	return b.serialize(b.Eth(layers.EthernetTypeIPv4), ip, t)
}
