package stack

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	nstack "gvisor.dev/gvisor/pkg/tcpip/stack"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
)

var (
	addrA = netip.MustParseAddr("198.18.0.1")
	addrB = netip.MustParseAddr("198.18.0.2")
)

// loop is a poll loop driving one Stack on its own goroutine, as a
// backend's Rx/Flush/Wait would.
type loop struct {
	s      *Stack
	cancel context.CancelFunc
	done   chan struct{}
	rounds uint64
}

func startLoop(t *testing.T, s *Stack) *loop {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &loop{s: s, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for ctx.Err() == nil {
			n := s.EP.Poll(64)
			if err := s.EP.Flush(); err != nil {
				t.Errorf("flush: %v", err)
				return
			}
			l.rounds++
			if n == 0 {
				if err := s.EP.Sleep(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("sleep: %v", err)
					return
				}
			}
		}
	}()
	return l
}

// stop stops and joins the poll loop, then closes the stack: the order the
// package documentation demands.
func (l *loop) stop() {
	l.cancel()
	<-l.done
	l.s.Close()
}

// pair builds two stacks over a memio pair, each with a running poll loop,
// stopped and closed at cleanup.
func pair(t *testing.T, opts memio.Options) (a, b *Stack, pa, pb *memio.Port) {
	t.Helper()
	pa, pb = memio.NewPair(opts)
	var err error
	a, err = New(pa, Options{Addr: addrA, PrefixLen: 24})
	if err != nil {
		t.Fatal(err)
	}
	b, err = New(pb, Options{Addr: addrB, PrefixLen: 24})
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	la, lb := startLoop(t, a), startLoop(t, b)
	t.Cleanup(func() {
		la.stop()
		lb.stop()
		pa.Close()
		pb.Close()
	})
	return a, b, pa, pb
}

func full(a netip.Addr, port uint16) tcpip.FullAddress {
	return tcpip.FullAddress{NIC: NICID, Addr: tcpip.AddrFrom4(a.As4()), Port: port}
}

func pattern(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// TestEcho opens a TCP connection between two stacks over memio (ARP
// resolution first), sends 1 MiB and reads it back echoed, byte-exact.
func TestEcho(t *testing.T) {
	seed := memio.Seed(t)
	a, b, pa, pb := pair(t, memio.Options{Seed: seed})
	ln, err := gonet.ListenTCP(a.NS, full(addrA, 7000), ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		defer c.Close()
		if _, err := io.Copy(c, c); err != nil {
			t.Errorf("echo: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := gonet.DialContextTCP(ctx, b.NS, full(addrA, 7000), ipv4.ProtocolNumber)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	want := pattern(1 << 20)
	go func() {
		if _, err := c.Write(want); err != nil {
			t.Errorf("write: %v", err)
		}
		c.CloseWrite()
	}()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read: %v (after %d bytes)", err, len(got))
	}
	c.Close()
	wg.Wait()
	if !bytes.Equal(got, want) {
		t.Fatalf("echo differs: got %d bytes, want %d", len(got), len(want))
	}
	for _, p := range []*memio.Port{pa, pb} {
		if v, _ := counter(p, "tx_runt"); v != 0 {
			t.Errorf("%v sent %d frames shorter than 60 bytes", p, v)
		}
	}
	st := a.AppendCounters(nil)
	if v := get(st, "netstack", "arp_replies_sent") + get(b.AppendCounters(nil), "netstack", "arp_replies_sent"); v == 0 {
		t.Errorf("no ARP reply was sent: %v", st)
	}
	if get(st, "link", "tx_frames") == 0 || get(st, "link", "kicks") == 0 {
		t.Errorf("link counters did not move: %v", st)
	}
}

func counter(p *memio.Port, name string) (uint64, bool) {
	for _, c := range p.Stats().Layers {
		if c.Name == name {
			return c.Value, true
		}
	}
	return 0, false
}

func get(cs []dgramio.Counter, layer, name string) uint64 {
	for _, c := range cs {
		if c.Layer == layer && c.Name == name {
			return c.Value
		}
	}
	return 0
}

// rawHost plays a peer on port p by hand: it builds frames with gopacket and
// reads what the stack answers.
type rawHost struct {
	t   *testing.T
	p   *memio.Port
	mac net.HardwareAddr
	ip  netip.Addr
}

func (h *rawHost) send(ls ...gopacket.SerializableLayer) {
	h.t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		h.t.Fatal(err)
	}
	if !h.p.TxFrame(buf.Bytes()) {
		h.t.Fatal("TxFrame refused")
	}
	if err := h.p.Kick(); err != nil {
		h.t.Fatal(err)
	}
}

// recv waits for a frame that match accepts and returns a copy.
func (h *rawHost) recv(match func(gopacket.Packet) bool) (gopacket.Packet, int) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var got gopacket.Packet
		var size int
		h.p.RxFrames(16, func(f []byte) {
			if got != nil {
				return
			}
			pk := gopacket.NewPacket(append([]byte(nil), f...), layers.LayerTypeEthernet, gopacket.Default)
			if match(pk) {
				got, size = pk, len(f)
			}
		})
		if got != nil {
			return got, size
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		h.p.Wait(ctx)
		cancel()
	}
	h.t.Fatal("no matching frame within 10s")
	return nil, 0
}

// TestARPAndPing asks the stack for its MAC and pings it, from a peer made
// of hand-built frames: the ARP reply (42 bytes of content) arrives padded
// to 60 bytes, and the echo reply carries our payload.
func TestARPAndPing(t *testing.T) {
	pa, pb := memio.NewPair(memio.Options{})
	s, err := New(pa, Options{Addr: addrA})
	if err != nil {
		t.Fatal(err)
	}
	l := startLoop(t, s)
	defer l.stop()
	h := &rawHost{t: t, p: pb, mac: pb.MAC(), ip: addrB}
	bcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	h.send(&layers.Ethernet{SrcMAC: h.mac, DstMAC: bcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: h.mac, SourceProtAddress: addrB.AsSlice(),
			DstHwAddress: make([]byte, 6), DstProtAddress: addrA.AsSlice()})
	pk, size := h.recv(func(p gopacket.Packet) bool {
		a, ok := p.Layer(layers.LayerTypeARP).(*layers.ARP)
		return ok && a.Operation == layers.ARPReply
	})
	arp := pk.Layer(layers.LayerTypeARP).(*layers.ARP)
	if !bytes.Equal(arp.SourceHwAddress, pa.MAC()) || !bytes.Equal(arp.SourceProtAddress, addrA.AsSlice()) {
		t.Fatalf("ARP reply says %v is at %v", net.IP(arp.SourceProtAddress), net.HardwareAddr(arp.SourceHwAddress))
	}
	if size != 60 {
		t.Errorf("ARP reply is %d bytes on the wire, want 60 (padded)", size)
	}
	payload := []byte("dgramio ping")
	h.send(&layers.Ethernet{SrcMAC: h.mac, DstMAC: pa.MAC(), EthernetType: layers.EthernetTypeIPv4},
		&layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: addrB.AsSlice(), DstIP: addrA.AsSlice()},
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 7, Seq: 1},
		gopacket.Payload(payload))
	pk, _ = h.recv(func(p gopacket.Packet) bool {
		ic, ok := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
		return ok && ic.TypeCode.Type() == layers.ICMPv4TypeEchoReply
	})
	ic := pk.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if ic.Id != 7 || ic.Seq != 1 || !bytes.Equal(ic.Payload, payload) {
		t.Fatalf("echo reply id %d seq %d payload %q", ic.Id, ic.Seq, ic.Payload)
	}
	if err := pk.ErrorLayer(); err != nil {
		t.Fatalf("reply does not decode: %v", err)
	}
	cs := s.AppendCounters(nil)
	if get(cs, "netstack", "icmp_echo_replies_sent") != 1 || get(cs, "netstack", "arp_replies_sent") != 1 {
		t.Errorf("counters: %v", cs)
	}
}

// TestRxFilter feeds frames the endpoint must not deliver: one for another
// MAC (rx_other_host) and one shorter than an Ethernet header.
func TestRxFilter(t *testing.T) {
	pa, pb := memio.NewPair(memio.Options{})
	s, err := New(pa, Options{Addr: addrA})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x99}
	buf := gopacket.NewSerializeBuffer()
	gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: pb.MAC(), DstMAC: other, EthernetType: layers.EthernetTypeIPv4},
		&layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: addrB.AsSlice(), DstIP: addrA.AsSlice()},
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0)})
	pb.TxFrame(buf.Bytes())
	pb.TxFrame([]byte{1, 2, 3})
	pb.Kick()
	n := 0
	for deadline := time.Now().Add(5 * time.Second); n < 2 && time.Now().Before(deadline); {
		n += s.EP.Poll(8)
		time.Sleep(time.Millisecond)
	}
	cs := s.AppendCounters(nil)
	if get(cs, "link", "rx_other_host") != 1 || get(cs, "link", "rx_malformed") != 1 {
		t.Fatalf("counters: %v", cs)
	}
	if get(cs, "netstack", "ip_packets_received") != 0 {
		t.Fatalf("a filtered frame reached IP: %v", cs)
	}
}

// TestCloseRefusesWrites checks the shutdown order: after Close the
// endpoint refuses to send, and Close returns although the stack had a
// connection in progress.
func TestCloseRefusesWrites(t *testing.T) {
	pa, pb := memio.NewPair(memio.Options{})
	defer pb.Close()
	s, err := New(pa, Options{Addr: addrA})
	if err != nil {
		t.Fatal(err)
	}
	l := startLoop(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// Nobody answers the ARP: the dial times out while the stack runs.
	if _, err := gonet.DialContextTCP(ctx, s.NS, full(addrB, 9), ipv4.ProtocolNumber); err == nil {
		t.Fatal("dial to nobody succeeded")
	}
	done := make(chan struct{})
	go func() { l.stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return")
	}
	var pkts nstack.PacketBufferList
	pkt := nstack.NewPacketBuffer(nstack.PacketBufferOptions{Payload: buffer.MakeWithData(make([]byte, 20))})
	pkts.PushBack(pkt)
	if n, err := s.EP.WritePackets(pkts); n != 0 || err == nil {
		t.Fatalf("WritePackets after Close = %d, %v; want 0 and an error", n, err)
	}
	pkt.DecRef()
	pa.Close()
	if err := s.EP.Sleep(context.Background()); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Sleep on a closed FrameIO = %v, want net.ErrClosed", err)
	}
}

// TestSYNFINDropped: a SYN+FIN to a listening port is dropped before
// netstack and counted (rx_syn_fin_dropped), as Linux drops it (RFC 9293
// §3.10.7.2: a FIN in LISTEN cannot be validated); this gVisor version
// would answer it with a SYN-ACK. A plain SYN to the same port that
// follows is answered.
func TestSYNFINDropped(t *testing.T) {
	pa, pb := memio.NewPair(memio.Options{})
	s, err := New(pa, Options{Addr: addrA, Neighbors: map[netip.Addr]net.HardwareAddr{addrB: pb.MAC()}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := gonet.ListenTCP(s.NS, full(addrA, 7000), ipv4.ProtocolNumber)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	l := startLoop(t, s)
	defer l.stop()
	h := &rawHost{t: t, p: pb, mac: pb.MAC(), ip: addrB}
	syn := func(fin bool, sport layers.TCPPort) {
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: addrB.AsSlice(), DstIP: addrA.AsSlice()}
		tcp := &layers.TCP{SrcPort: sport, DstPort: 7000, Seq: 1, SYN: true, FIN: fin, Window: 65535}
		tcp.SetNetworkLayerForChecksum(ip)
		h.send(&layers.Ethernet{SrcMAC: h.mac, DstMAC: pa.MAC(), EthernetType: layers.EthernetTypeIPv4}, ip, tcp)
	}
	syn(true, 40000)
	syn(false, 40001)
	pk, _ := h.recv(func(p gopacket.Packet) bool { _, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP); return ok })
	if tcp := pk.Layer(layers.LayerTypeTCP).(*layers.TCP); tcp.DstPort != 40001 || !tcp.SYN || !tcp.ACK {
		t.Fatalf("first TCP answer: %v; want the SYN-ACK to the plain SYN (port 40001) only", tcp)
	}
	if n := get(s.AppendCounters(nil), "link", "rx_syn_fin_dropped"); n != 1 {
		t.Errorf("rx_syn_fin_dropped %d, want 1", n)
	}
}
