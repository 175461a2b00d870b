package xdpprog

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"runtime"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testutil"
)

const ourPort = 5000

// hostAddr is the destination address of the test frames (ip4).
var hostAddr = netip.MustParseAddr("198.18.0.1")

// classify is the reference model of the program, in Go: the counter the
// program must increment for frame, given the configured port.
func classify(v Variant, port uint16, frame []byte) Counter {
	return classifyPorts(v, port, 1, frame)
}

// classifyPorts is classify for the n ports from port on (SetPorts).
func classifyPorts(v Variant, port, n uint16, frame []byte) Counter {
	return classifyHost(v, port, n, [4]byte{}, frame)
}

// classifyHost is classifyPorts with the host address host (SetHost; zero:
// none) and no SYN limit.
func classifyHost(v Variant, port, n uint16, host [4]byte, frame []byte) Counter {
	if port == 0 {
		return PassNoConfig
	}
	if len(frame) < offIP {
		return PassShort
	}
	takesARP := v == UDPARP || v == TCP
	if frame[offEtherType] != 0x08 {
		return PassNotIPv4
	}
	if takesARP && frame[offEtherType+1] == 0x06 {
		if host != [4]byte{} {
			if len(frame) < offARPEnd {
				return PassShort
			}
			target := [4]byte(frame[offARPTarget:offARPEnd])
			if target != host && target != [4]byte(frame[offARPSender:offARPSender+4]) {
				return PassOtherHost
			}
		}
		return PassNoSocket // redirected if a socket were there
	}
	if frame[offEtherType+1] != 0x00 {
		return PassNotIPv4
	}
	if len(frame) < offL4 {
		return PassShort
	}
	if v == TCP && host != [4]byte{} {
		if [4]byte(frame[offIPDst:offL4]) != host {
			return PassOtherHost
		}
		tcp := frame[offIP] == 0x45 && frame[offIPProto] == 6 && frame[offIPFrag]&0x3f == 0 && frame[offIPFrag+1] == 0
		if tcp && len(frame) < offTCPFlags+1 {
			return PassShort
		}
		return PassNoSocket
	}
	if frame[offIP] != 0x45 {
		return PassIPOptions
	}
	if frame[offIPFrag]&0x3f != 0 || frame[offIPFrag+1] != 0 {
		return PassFragment
	}
	proto, need := byte(17), lenUDPFrame
	if v == TCP {
		proto, need = 6, lenTCPPorts
	}
	if frame[offIPProto] != proto {
		return PassOtherProto
	}
	if len(frame) < need {
		return PassShort
	}
	dst := binary.BigEndian.Uint16(frame[offDstPort:])
	src := binary.BigEndian.Uint16(frame[offSrcPort:])
	if dst == port || (v == TCP && src == port) {
		return PassNoSocket
	}
	if n > 1 && int(dst) >= int(port) && int(dst) < int(port)+int(n) {
		return PassNoSocket
	}
	return PassOtherPort
}

type frameOpt func(ip *layers.IPv4, udp *layers.UDP, tcp *layers.TCP)

func ethIPv4() *layers.Ethernet {
	return &layers.Ethernet{
		SrcMAC:       []byte{0x02, 0, 0, 0, 0, 1},
		DstMAC:       []byte{0x02, 0, 0, 0, 0, 2},
		EthernetType: layers.EthernetTypeIPv4,
	}
}

func ip4(proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{
		Version: 4, TTL: 64, Protocol: proto,
		SrcIP: []byte{198, 18, 0, 2}, DstIP: []byte{198, 18, 0, 1},
	}
}

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func udpFrame(t testing.TB, src, dst uint16, opts ...func(*layers.IPv4)) []byte {
	ip := ip4(layers.IPProtocolUDP)
	for _, o := range opts {
		o(ip)
	}
	udp := &layers.UDP{SrcPort: layers.UDPPort(src), DstPort: layers.UDPPort(dst)}
	_ = udp.SetNetworkLayerForChecksum(ip)
	return serialize(t, ethIPv4(), ip, udp, gopacket.Payload("hello, dgramio"))
}

func tcpFrame(t testing.TB, src, dst uint16) []byte {
	ip := ip4(layers.IPProtocolTCP)
	tcp := &layers.TCP{SrcPort: layers.TCPPort(src), DstPort: layers.TCPPort(dst), SYN: true, Window: 1024}
	_ = tcp.SetNetworkLayerForChecksum(ip)
	return serialize(t, ethIPv4(), ip, tcp)
}

func arpFrame(t testing.TB) []byte {
	return arpFrameAddrs(t, []byte{198, 18, 0, 2}, []byte{198, 18, 0, 1})
}

// arpFrameAddrs is an ARP request from sender for target.
func arpFrameAddrs(t testing.TB, sender, target []byte) []byte {
	eth := ethIPv4()
	eth.EthernetType = layers.EthernetTypeARP
	eth.DstMAC = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	arp := &layers.ARP{
		AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
		HwAddressSize: 6, ProtAddressSize: 4, Operation: layers.ARPRequest,
		SourceHwAddress: eth.SrcMAC, SourceProtAddress: sender,
		DstHwAddress: make([]byte, 6), DstProtAddress: target,
	}
	return serialize(t, eth, arp)
}

func ipv6Frame(t testing.TB) []byte {
	eth := ethIPv4()
	eth.EthernetType = layers.EthernetTypeIPv6
	ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP,
		SrcIP: make([]byte, 16), DstIP: make([]byte, 16)}
	udp := &layers.UDP{SrcPort: 1, DstPort: ourPort}
	_ = udp.SetNetworkLayerForChecksum(ip)
	return serialize(t, eth, ip, udp, gopacket.Payload("x"))
}

func withOptions(ip *layers.IPv4) {
	ip.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
}
func withMF(ip *layers.IPv4)     { ip.Flags = layers.IPv4MoreFragments }
func withOffset(ip *layers.IPv4) { ip.FragOffset = 185 }
func withDF(ip *layers.IPv4)     { ip.Flags = layers.IPv4DontFragment }

func TestInstructionsBuild(t *testing.T) {
	for _, v := range []Variant{UDP, UDPARP, TCP} {
		spec, err := Spec{Variant: v}.CollectionSpec()
		if err != nil {
			t.Fatal(err)
		}
		ps := spec.Programs[ProgramName(v)]
		if ps == nil || ps.Type != ebpf.XDP {
			t.Fatalf("%v: no XDP program %q in spec", v, ProgramName(v))
		}
		if len(ProgramName(v)) > 15 {
			t.Errorf("%v: program name %q longer than the kernel keeps", v, ProgramName(v))
		}
		// Every jump target and map reference must resolve.
		refs := map[string]bool{}
		syms := map[string]bool{}
		for _, ins := range ps.Instructions {
			if r := ins.Reference(); r != "" {
				refs[r] = true
			}
			if s := ins.Symbol(); s != "" {
				if syms[s] {
					t.Errorf("%v: symbol %q defined twice", v, s)
				}
				syms[s] = true
			}
		}
		for r := range refs {
			if !syms[r] && spec.Maps[r] == nil {
				t.Errorf("%v: reference %q resolves to nothing", v, r)
			}
		}
		if err := ps.Instructions.Marshal(nopWriter{}, binary.LittleEndian); err != nil {
			t.Errorf("%v: marshal: %v", v, err)
		}
		last := ps.Instructions[len(ps.Instructions)-1]
		if last.OpCode.JumpOp() != asm.Exit {
			t.Errorf("%v: program does not end in exit", v)
		}
	}
	if _, err := (Spec{Variant: Variant(9)}).CollectionSpec(); err == nil {
		t.Error("unknown variant accepted")
	}
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

func TestCounterNames(t *testing.T) {
	seen := map[string]bool{}
	for c := Counter(0); c < NumCounters; c++ {
		n := c.String()
		if n == "" || seen[n] {
			t.Errorf("counter %d: bad or duplicate name %q", c, n)
		}
		seen[n] = true
	}
	var cs Counts
	cs[PassNoSocket] = 3
	ls := cs.Layers()
	if len(ls) != int(NumCounters) {
		t.Fatalf("Layers: %d counters, want %d", len(ls), NumCounters)
	}
	s := dgramio.Stats{Layers: ls}
	if s.Lost() != 3 {
		t.Errorf("Lost() = %d, want 3 (pass_no_socket is a loss)", s.Lost())
	}
}

func TestEncodeConfig(t *testing.T) {
	b := EncodeConfig(0x1388)
	if b != [ConfigSize]byte{0x13, 0x88, 0, 1} {
		t.Errorf("EncodeConfig(5000) = % x", b)
	}
	if b := EncodePorts(0x1388, 0x0203); b != [ConfigSize]byte{0x13, 0x88, 2, 3} {
		t.Errorf("EncodePorts(5000, 515) = % x", b)
	}
}

// TestProgramPortRange checks the ports of a client's queues: the n ports
// from ours on match, the ones around them do not, on every variant.
func TestProgramPortRange(t *testing.T) {
	for _, v := range []Variant{UDP, UDPARP, TCP} {
		o := load(t, v, ourPort)
		for _, n := range []uint16{0, 1, 2, 4, 300} {
			if err := o.SetPorts(ourPort, n); err != nil {
				t.Fatal(err)
			}
			for _, dst := range []uint16{ourPort - 1, ourPort, ourPort + 1, ourPort + 3, ourPort + 4, ourPort + 299, ourPort + 300, 65535, 1} {
				var frame []byte
				if v == TCP {
					frame = tcpFrame(t, 40000, dst)
				} else {
					frame = udpFrame(t, 40000, dst)
				}
				want := classifyPorts(v, ourPort, n, frame)
				inRange := dst == ourPort || (n > 1 && dst > ourPort && dst < ourPort+n)
				if (want == PassNoSocket) != inRange {
					t.Fatalf("model: %v n %d dst %d → %s", v, n, dst, want)
				}
				if ret, got := run(t, o, frame); got != want || ret != xdpPass {
					t.Errorf("%v ports %d+%d, dst %d: counter %s action %d, want %s", v, ourPort, n, dst, got, ret, want)
				}
			}
		}
	}
	o := load(t, UDP, ourPort)
	if err := o.SetPorts(65535, 2); err == nil {
		t.Error("SetPorts(65535, 2) accepted ports past 65535")
	}
}

// load loads variant v with port set, or skips without root.
func load(t testing.TB, v Variant, port uint16) *Objects {
	t.Helper()
	testutil.RequireRoot(t)
	o, err := Load(Spec{Variant: v})
	testutil.SkipIfNotSupported(t, err)
	t.Cleanup(func() {
		if err := o.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := o.SetPort(port); err != nil {
		t.Fatal(err)
	}
	return o
}

// run runs frame through the program (BPF_PROG_TEST_RUN) and returns the
// action and the one counter that moved; it fails if not exactly one moved
// by exactly one.
func run(t testing.TB, o *Objects, frame []byte) (uint32, Counter) {
	t.Helper()
	before, err := o.ReadCounters()
	if err != nil {
		t.Fatal(err)
	}
	ret, err := o.Program.Run(&ebpf.RunOptions{Data: frame})
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	after, err := o.ReadCounters()
	if err != nil {
		t.Fatal(err)
	}
	moved := NumCounters
	for c := Counter(0); c < NumCounters; c++ {
		switch d := after[c] - before[c]; d {
		case 0:
		case 1:
			if moved != NumCounters {
				t.Fatalf("counters %s and %s both moved", moved, c)
			}
			moved = c
		default:
			t.Fatalf("counter %s moved by %d", c, d)
		}
	}
	if moved == NumCounters {
		t.Fatal("no counter moved")
	}
	return ret, moved
}

func TestProgramVerdicts(t *testing.T) {
	short := udpFrame(t, 1, ourPort)[:offL4+4] // IP header complete, UDP cut
	cases := []struct {
		name  string
		frame []byte
		want  map[Variant]Counter
	}{
		{"udp to our port", udpFrame(t, 40000, ourPort), map[Variant]Counter{UDP: PassNoSocket, UDPARP: PassNoSocket, TCP: PassOtherProto}},
		{"udp to our port, DF", udpFrame(t, 40000, ourPort, withDF), map[Variant]Counter{UDP: PassNoSocket, UDPARP: PassNoSocket}},
		{"udp from our port", udpFrame(t, ourPort, 40000), map[Variant]Counter{UDP: PassOtherPort, UDPARP: PassOtherPort}},
		{"udp other port", udpFrame(t, 40000, 5001), map[Variant]Counter{UDP: PassOtherPort, UDPARP: PassOtherPort}},
		{"udp fragment MF", udpFrame(t, 40000, ourPort, withMF), map[Variant]Counter{UDP: PassFragment, TCP: PassFragment}},
		{"udp fragment offset", udpFrame(t, 40000, ourPort, withOffset), map[Variant]Counter{UDP: PassFragment}},
		{"ip options", udpFrame(t, 40000, ourPort, withOptions), map[Variant]Counter{UDP: PassIPOptions, TCP: PassIPOptions}},
		{"arp", arpFrame(t), map[Variant]Counter{UDP: PassNotIPv4, UDPARP: PassNoSocket, TCP: PassNoSocket}},
		{"ipv6", ipv6Frame(t), map[Variant]Counter{UDP: PassNotIPv4, TCP: PassNotIPv4}},
		{"tcp to our port", tcpFrame(t, 40000, ourPort), map[Variant]Counter{UDP: PassOtherProto, TCP: PassNoSocket}},
		{"tcp from our port", tcpFrame(t, ourPort, 40000), map[Variant]Counter{TCP: PassNoSocket}},
		{"tcp other ports", tcpFrame(t, 40000, 5001), map[Variant]Counter{TCP: PassOtherPort}},
		{"udp header cut", short, map[Variant]Counter{UDP: PassShort}},
		{"ethernet only", udpFrame(t, 1, ourPort)[:offIP], map[Variant]Counter{UDP: PassShort, TCP: PassShort}},
	}
	objs := map[Variant]*Objects{}
	for _, v := range []Variant{UDP, UDPARP, TCP} {
		objs[v] = load(t, v, ourPort)
	}
	for _, c := range cases {
		for v, want := range c.want {
			if got := classify(v, ourPort, c.frame); got != want {
				t.Fatalf("%s/%v: reference model says %s, table says %s", c.name, v, got, want)
			}
			ret, got := run(t, objs[v], c.frame)
			if ret != xdpPass {
				t.Errorf("%s/%v: action %d, want XDP_PASS (%d): no socket is in the map", c.name, v, ret, xdpPass)
			}
			if got != want {
				t.Errorf("%s/%v: counter %s, want %s", c.name, v, got, want)
			}
		}
	}
}

func TestProgramNoPort(t *testing.T) {
	o := load(t, UDP, 0)
	ret, got := run(t, o, udpFrame(t, 1, ourPort))
	if ret != xdpPass || got != PassNoConfig {
		t.Errorf("port 0: action %d counter %s, want XDP_PASS and %s", ret, got, PassNoConfig)
	}
}

func TestSetSocketRejectsNonXSK(t *testing.T) {
	o := load(t, UDP, ourPort)
	// A UDP socket is not an AF_XDP socket: the XSKMAP must refuse it.
	fd, err := unixSocketForTest()
	if err != nil {
		t.Fatal(err)
	}
	defer closeFD(fd)
	if err := o.SetSocket(0, fd); err == nil {
		t.Error("XSKMAP accepted a UDP socket")
	}
	if err := o.ClearSocket(0); err != nil {
		t.Errorf("ClearSocket on an empty slot: %v", err)
	}
}

// FuzzProgram runs random frames through the loaded programs and checks
// that the kernel's verdict matches the Go reference model. Without root
// the seed corpus still checks the model against itself.
func FuzzProgram(f *testing.F) {
	seeds := [][]byte{
		udpFrame(f, 40000, ourPort), udpFrame(f, 40000, 1), udpFrame(f, 1, ourPort, withMF),
		udpFrame(f, 1, ourPort, withOptions), tcpFrame(f, ourPort, 2), tcpFrame(f, 2, ourPort),
		arpFrame(f), ipv6Frame(f), make([]byte, 14), make([]byte, 60),
	}
	seeds = append(seeds, udp6Frame(f, hostAddr6, 1, ourPort), tcp6Frame(f, hostAddr6, 1, ourPort, true, false),
		nsFrame(f, solicitedNode(hostAddr6), hostAddr6), naFrame(f, hostAddr6, peerAddr6),
		withExt6(udp6Frame(f, hostAddr6, 1, ourPort), 44), echo6Frame(f, otherAddr6))
	for _, s := range seeds {
		for _, v6 := range []bool{false, true} {
			f.Add(s, uint16(ourPort), uint16(1), false, v6)
			f.Add(s, uint16(ourPort), uint16(1), true, v6)
		}
	}
	f.Add(udpFrame(f, 40000, ourPort+2), uint16(ourPort), uint16(4), false, false)
	f.Add(udp6Frame(f, hostAddr6, 40000, ourPort+2), uint16(ourPort), uint16(4), false, true)
	objs := map[Variant]*Objects{}
	if rootForFuzz() {
		for _, v := range []Variant{UDP, UDPARP, TCP} {
			o, err := Load(Spec{Variant: v})
			if err != nil {
				if errors.Is(err, dgramio.ErrNotSupported) {
					testutil.Skip(f, err.Error())
				}
				f.Fatal(err)
			}
			f.Cleanup(func() { o.Close() })
			objs[v] = o
		}
	}
	f.Fuzz(func(t *testing.T, frame []byte, port, n uint16, host, v6 bool) {
		if len(frame) < 14 || len(frame) > 1500 {
			return // the kernel refuses test runs outside these bounds
		}
		if int(port)+int(n) > 65536 {
			n = uint16(65536 - int(port))
		}
		var h [4]byte
		var h6 [16]byte
		if host {
			h = hostAddr.As4()
			if v6 {
				h6 = hostAddr6.As16()
			}
		}
		for _, v := range []Variant{UDP, UDPARP, TCP} {
			classify6(v, port, n, h, v6, h6, frame)
		}
		for v, o := range objs {
			if err := o.SetPorts(port, n); err != nil {
				t.Fatal(err)
			}
			if err := o.SetIPv6(v6); err != nil {
				t.Fatal(err)
			}
			if v != UDP {
				a, a6 := netip.Addr{}, netip.Addr{}
				if host {
					a = hostAddr
					if v6 {
						a6 = hostAddr6
					}
				}
				if err := o.SetHost(a); err != nil {
					t.Fatal(err)
				}
				if err := o.SetHost6(a6); err != nil {
					t.Fatal(err)
				}
			}
			vh, vh6 := h, h6 // variant UDP takes no host address
			if v == UDP {
				vh, vh6 = [4]byte{}, [16]byte{}
			}
			want := classify6(v, port, n, vh, v6, vh6, frame)
			ret, got := run(t, o, frame)
			if got != want || ret != xdpPass {
				t.Errorf("%v ports %d+%d frame % x: kernel says %s (action %d), model says %s", v, port, n, frame, got, ret, want)
			}
		}
	})
}

func icmpFrame(t testing.TB, dst netip.Addr) []byte {
	ip := ip4(layers.IPProtocolICMPv4)
	ip.DstIP = dst.AsSlice()
	icmp := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 1, Seq: 1}
	return serialize(t, ethIPv4(), ip, icmp, gopacket.Payload("ping"))
}

func tcpFrameTo(t testing.TB, dst netip.Addr, sport, dport uint16, syn, ack bool) []byte {
	ip := ip4(layers.IPProtocolTCP)
	ip.DstIP = dst.AsSlice()
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), SYN: syn, ACK: ack, Window: 1024}
	_ = tcp.SetNetworkLayerForChecksum(ip)
	return serialize(t, ethIPv4(), ip, tcp)
}

// TestProgramHost: with a host address, the TCP variant hands the stack
// every IPv4 frame to that address (TCP to any port, ICMP, UDP, IP
// options, fragments) and the ARP for it or announcing its sender, and
// leaves frames to other addresses, our port and ARP for the kernel's
// address included, to the kernel; without one it matches the port.
func TestProgramHost(t *testing.T) {
	other := netip.MustParseAddr("198.18.0.9")
	cases := []struct {
		name  string
		frame []byte
		want  Counter
	}{
		{"tcp to our port", tcpFrameTo(t, hostAddr, 40000, ourPort, true, false), PassNoSocket},
		{"tcp to a closed port", tcpFrameTo(t, hostAddr, 40000, 22, true, false), PassNoSocket},
		{"icmp echo", icmpFrame(t, hostAddr), PassNoSocket},
		{"udp", udpFrame(t, 40000, 53), PassNoSocket},
		{"ip options", udpFrame(t, 40000, ourPort, withOptions), PassNoSocket},
		{"fragment", udpFrame(t, 40000, ourPort, withMF), PassNoSocket},
		{"arp for our address", arpFrame(t), PassNoSocket},
		{"gratuitous arp (RFC 5227 §3: sender = target)", arpFrameAddrs(t, []byte{198, 18, 0, 7}, []byte{198, 18, 0, 7}), PassNoSocket},
		{"arp for another address (the kernel's)", arpFrameAddrs(t, []byte{198, 18, 0, 2}, other.AsSlice()), PassOtherHost},
		{"arp cut before the target address", arpFrame(t)[:offARPEnd-1], PassShort},
		{"tcp to another address, our port", tcpFrameTo(t, other, 40000, ourPort, true, false), PassOtherHost},
		{"icmp to another address", icmpFrame(t, other), PassOtherHost},
		{"ipv6", ipv6Frame(t), PassNotIPv4},
		{"tcp header cut before the flags", tcpFrameTo(t, hostAddr, 1, 2, false, true)[:offTCPFlags], PassShort},
	}
	o := load(t, TCP, ourPort)
	if err := o.SetHost(hostAddr); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if got := classifyHost(TCP, ourPort, 1, hostAddr.As4(), c.frame); got != c.want {
			t.Fatalf("%s: reference model says %s, table says %s", c.name, got, c.want)
		}
		if ret, got := run(t, o, c.frame); got != c.want || ret != xdpPass {
			t.Errorf("%s: counter %s action %d, want %s and XDP_PASS", c.name, got, ret, c.want)
		}
	}
	if err := o.SetHost(netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	if _, got := run(t, o, tcpFrameTo(t, hostAddr, 40000, 22, true, false)); got != PassOtherPort {
		t.Errorf("without a host address, a closed port: %s, want %s", got, PassOtherPort)
	}
	if _, got := run(t, o, arpFrameAddrs(t, []byte{198, 18, 0, 2}, other.AsSlice())); got != PassNoSocket {
		t.Errorf("without a host address, ARP for another address: %s, want %s (every ARP frame)", got, PassNoSocket)
	}
	if err := load(t, UDP, ourPort).SetHost(hostAddr); err == nil {
		t.Error("the UDP variant took a host address")
	}
	if err := o.SetHost(netip.MustParseAddr("::1")); err == nil {
		t.Error("SetHost took an IPv6 address")
	}
}

// TestProgramSYNLimit: SYNs to the host address pass while the CPU's
// bucket holds tokens (a burst of 3, refilled at 1 per second) and are
// dropped (XDP_DROP, dropped_syn) beyond it; segments with ACK and SYN-ACKs
// are never limited, and the port setting keeps the limit.
func TestProgramSYNLimit(t *testing.T) {
	o := load(t, TCP, ourPort)
	if err := o.SetHost(hostAddr); err != nil {
		t.Fatal(err)
	}
	if err := o.SetSYNLimit(1, 3); err != nil {
		t.Fatal(err)
	}
	if err := o.SetPort(ourPort); err != nil { // keeps host and limit
		t.Fatal(err)
	}
	if err := o.SetSYNLimit(5, 0); err == nil {
		t.Error("a rate without a burst accepted")
	}
	// The bucket is per CPU: stay on one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pinToOneCPU(t)
	syn := tcpFrameTo(t, hostAddr, 40000, ourPort, true, false)
	for i := range 3 {
		if ret, got := run(t, o, syn); got != PassNoSocket || ret != xdpPass {
			t.Fatalf("SYN %d of the burst: counter %s action %d, want %s", i, got, ret, PassNoSocket)
		}
	}
	for i := range 3 {
		if ret, got := run(t, o, syn); got != DroppedSYN || ret != xdpDrop {
			t.Fatalf("SYN %d past the burst: counter %s action %d, want %s and XDP_DROP", i, got, ret, DroppedSYN)
		}
		other := tcpFrameTo(t, hostAddr, 40000, ourPort, false, true)
		if i == 1 {
			other = tcpFrameTo(t, hostAddr, 40000, ourPort, true, true)
		}
		if ret, got := run(t, o, other); got != PassNoSocket || ret != xdpPass {
			t.Errorf("a segment with ACK behind the flood: counter %s action %d, want %s", got, ret, PassNoSocket)
		}
	}
	if err := o.SetSYNLimit(0, 0); err != nil {
		t.Fatal(err)
	}
	if _, got := run(t, o, syn); got != PassNoSocket {
		t.Errorf("without a limit: %s, want %s", got, PassNoSocket)
	}
	var c Counts
	if c, _ = o.ReadCounters(); c[DroppedSYN] != 3 {
		t.Errorf("dropped_syn %d, want 3", c[DroppedSYN])
	}
}
