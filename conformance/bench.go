package conformance

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Waits. They are generous deadlines for something to happen, never
// assertions that something was fast.
const (
	// DefaultAnswer bounds the wait for a frame that answers one the bench
	// sent (Bench.Answer; a DUT may say it needs less, AnswerWaiter).
	DefaultAnswer = 10 * time.Second
	// Quiet is how long the bench listens when it expects nothing: an
	// answer comes within microseconds, so silence this long means none.
	Quiet = 300 * time.Millisecond
	// Step is how far a fake clock moves at a time while the bench waits
	// for a timer.
	Step = 10 * time.Millisecond
	// realCap bounds, in real time, any wait for a timer on a fake clock.
	realCap = 60 * time.Second
)

// Bench is the test bench's side of one DUT: it sends frames built with
// gopacket and reads and decodes what the DUT sends back. Every frame it
// receives is checked (its checksums must verify) and logged; the log is
// printed when the case fails.
type Bench struct {
	tb    TB
	dut   DUT
	link  Link
	info  Info
	clock Clock

	answer   time.Duration
	log      []string
	sent     int
	nextPort uint16
	ipID     uint16
}

func newBench(tb TB, d DUT) *Bench {
	b := &Bench{tb: tb, dut: d, link: d.Link(), info: d.Info(), clock: d.Clock(), nextPort: 40000, ipID: 1, answer: DefaultAnswer}
	if a, ok := d.(AnswerWaiter); ok {
		b.answer = a.AnswerWait()
	}
	return b
}

func (b *Bench) dumpOnFailure() {
	if !b.tb.Failed() {
		return
	}
	b.tb.Logf("frames on the wire (> from the bench, < from the DUT):\n%s", strings.Join(b.log, "\n"))
}

// Port returns a fresh bench port for a new flow.
func (b *Bench) Port() uint16 {
	b.nextPort++
	return b.nextPort
}

// Clock is the DUT's clock.
func (b *Bench) Clock() Clock { return b.clock }

// serialize builds a frame from layers with lengths and checksums fixed.
func (b *Bench) serialize(ls ...gopacket.SerializableLayer) []byte {
	b.tb.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		b.tb.Fatalf("serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// SendFrame puts a frame the case built on the wire.
func (b *Bench) SendFrame(frame []byte) {
	b.tb.Helper()
	b.log = append(b.log, "> "+Decode(append([]byte(nil), frame...), b.clock.Now()).String())
	if err := b.link.Send(frame); err != nil {
		b.tb.Fatalf("send: %v", err)
	}
	b.sent++
}

// Send serializes layers (lengths and checksums computed) and sends the
// frame.
func (b *Bench) Send(ls ...gopacket.SerializableLayer) {
	b.tb.Helper()
	b.SendFrame(b.serialize(ls...))
}

// Build serializes layers into a frame without sending it, for a case that
// damages it first.
func (b *Bench) Build(ls ...gopacket.SerializableLayer) []byte {
	b.tb.Helper()
	return b.serialize(ls...)
}

// Eth is an Ethernet header from the bench to the DUT.
func (b *Bench) Eth(t layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: b.info.BenchMAC, DstMAC: b.info.MAC, EthernetType: t}
}

// IPv4 is an IPv4 header from the bench to the DUT, with a fresh ID.
func (b *Bench) IPv4(p layers.IPProtocol) *layers.IPv4 {
	b.ipID++
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Id: b.ipID, Protocol: p,
		SrcIP: b.info.BenchAddr.AsSlice(), DstIP: b.info.Addr.AsSlice()}
}

// Match selects frames.
type Match func(f *Frame) bool

// receive takes one frame from the link, waiting up to wait, decoded and
// checked: a frame with a bad checksum or that does not decode fails the
// case (the DUT sent it).
func (b *Bench) receive(wait time.Duration) *Frame {
	b.tb.Helper()
	raw, err := b.link.Recv(wait)
	if err != nil {
		b.tb.Fatalf("receive: %v", err)
	}
	if raw == nil {
		return nil
	}
	f := Decode(raw, b.clock.Now())
	b.log = append(b.log, "< "+f.String())
	if len(f.Bad) > 0 {
		b.tb.Errorf("the DUT sent a bad frame: %v", f)
	}
	return f
}

// Expect waits up to within (real time) for a frame that m accepts and
// returns it; frames it does not accept are logged and dropped. The DUT's
// clock is not moved: use ExpectTimer for what a timer sends. It fails the
// case when none comes.
func (b *Bench) Expect(what string, within time.Duration, m Match) *Frame {
	b.tb.Helper()
	f := b.TryExpect(within, m)
	if f == nil {
		b.tb.Fatalf("expected %s within %v: nothing came", what, within)
	}
	return f
}

// TryExpect is Expect that returns nil instead of failing.
func (b *Bench) TryExpect(within time.Duration, m Match) *Frame {
	b.tb.Helper()
	deadline := time.Now().Add(within)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		f := b.receive(left)
		if f == nil {
			continue
		}
		if m(f) {
			return f
		}
	}
}

// ExpectNothing listens for d (real time; a fake clock does not move) and
// fails the case if a frame that m accepts comes.
func (b *Bench) ExpectNothing(what string, d time.Duration, m Match) {
	b.tb.Helper()
	if f := b.TryExpect(d, m); f != nil {
		b.tb.Errorf("expected no %s, got %v", what, f)
	}
}

// Settle waits until the DUT took every frame sent so far, when it can tell
// (Settler), so that a clock moved next does not overtake them.
func (b *Bench) Settle() {
	if s, ok := b.dut.(Settler); ok {
		s.Settle(b.Answer())
	}
}

// ExpectTimer waits up to within of DUT time for a frame that m accepts,
// for what a timer sends (a retransmission, a probe, a keepalive). On a
// fake clock the bench first lets the DUT take what it was sent, then
// moves the clock in steps while nothing comes (Step, growing to a 32nd
// of the time waited so far); on a real clock it waits. The frame's At is
// the DUT time it was taken (within one step on a fake clock).
func (b *Bench) ExpectTimer(what string, within time.Duration, m Match) *Frame {
	b.tb.Helper()
	f := b.TryExpectTimer(within, m)
	if f == nil {
		b.tb.Fatalf("expected %s within %v of DUT time: nothing came", what, within)
	}
	return f
}

// TryExpectTimer is ExpectTimer that returns nil instead of failing.
func (b *Bench) TryExpectTimer(within time.Duration, m Match) *Frame {
	b.tb.Helper()
	if !b.clock.Fake() {
		return b.TryExpect(within, m)
	}
	b.Settle()
	begin := b.clock.Now()
	end := begin + within
	realEnd := time.Now().Add(realCap)
	for time.Now().Before(realEnd) {
		for {
			// What the timers of the last step sent is already on its
			// way: take all of it before moving again.
			f := b.receive(2 * time.Millisecond)
			if f == nil {
				break
			}
			if m(f) {
				return f
			}
		}
		now := b.clock.Now()
		if now >= end {
			return nil
		}
		// The step grows with the wait, a 32nd of it: a timer is seen
		// within 3% of the time it fired, whatever its scale.
		b.clock.Advance(min(max(Step, (now-begin)/32), end-now))
	}
	b.tb.Errorf("waited %v of real time for a timer on a fake clock", realCap)
	return nil
}

// Pass lets d of DUT time pass with nothing to expect (a fake clock moves
// Step at a time; a real clock is slept). Frames that come meanwhile are
// handed to each, which may be nil.
func (b *Bench) Pass(d time.Duration, each func(*Frame)) {
	b.tb.Helper()
	if !b.clock.Fake() {
		end := time.Now().Add(d)
		for left := time.Until(end); left > 0; left = time.Until(end) {
			if f := b.receive(left); f != nil && each != nil {
				each(f)
			}
		}
		return
	}
	// Nothing is measured here: coarse steps do (the timers due run in
	// order, at their own times, within each Advance).
	step := max(Step, d/50)
	b.Settle()
	end := b.clock.Now() + d
	for {
		for f := b.receive(2 * time.Millisecond); f != nil; f = b.receive(2 * time.Millisecond) {
			if each != nil {
				each(f)
			}
		}
		if b.clock.Now() >= end {
			return
		}
		b.clock.Advance(min(step, end-b.clock.Now()))
	}
}

// Note logs a fact the case observed (a value the report may show).
func (b *Bench) Note(format string, args ...any) {
	b.tb.Helper()
	b.tb.Logf("note: "+format, args...)
}

// Counters reads the DUT's counters now.
func (e *Env) Counters() map[string]uint64 {
	e.Helper()
	cs, err := e.DUT.Counters()
	if err != nil {
		e.Fatalf("counters: %v", err)
	}
	return cs
}

// counterDelta returns how far the DUT's counter name moved since the case
// began. ok is false when the DUT does not keep it: a log line says so,
// except for our stack, which must keep every counter a case names (the
// case fails).
func (e *Env) counterDelta(name string) (d uint64, ok bool) {
	e.Helper()
	v, ok := e.Counters()[name]
	switch {
	case ok:
		return v - e.counters0[name], true
	case e.Info.Kind == KindOurs:
		e.Errorf("our stack does not count %s", name)
	default:
		e.Logf("%s does not count %s", e.Info.Name, name)
	}
	return 0, false
}

// CounterRose asserts that the DUT's counter name rose by at least min
// since the case began. A DUT that does not keep the counter is told by a
// log line, except our stack, which must keep every counter a case names.
// A counter may move a moment after the frame that shows its cause has
// left (netstack counts a fast retransmission after sending it, on its own
// goroutine), so CounterRose waits up to counterWait for the rise before
// it fails.
func (e *Env) CounterRose(name string, min uint64) {
	e.Helper()
	deadline := time.Now().Add(counterWait)
	for {
		d, ok := e.counterDelta(name)
		switch {
		case !ok:
			return
		case d >= min:
			e.Logf("counter %s rose by %d", name, d)
			return
		case time.Now().After(deadline):
			e.Errorf("counter %s rose by %d within %v, want at least %d", name, d, counterWait, min)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// counterWait is how long CounterRose waits for a counter to catch up
// with what the wire already showed: a generous deadline, not a speed.
const counterWait = 5 * time.Second

// CounterStill asserts that the DUT's counter name did not move since the
// case began (when the DUT keeps it; as CounterRose otherwise).
func (e *Env) CounterStill(name string) {
	e.Helper()
	if d, ok := e.counterDelta(name); ok && d != 0 {
		e.Errorf("counter %s rose by %d, want no change", name, d)
	}
}

// Matchers.

// IsARP accepts ARP frames with operation op (layers.ARPRequest or
// layers.ARPReply).
func IsARP(op uint16) Match {
	return func(f *Frame) bool { return f.ARP != nil && f.ARP.Operation == op }
}

// IsICMP accepts ICMPv4 messages of type t and code c from the DUT.
func IsICMP(t, c uint8) Match {
	return func(f *Frame) bool {
		return f.ICMP != nil && f.ICMP.TypeCode.Type() == t && f.ICMP.TypeCode.Code() == c
	}
}

// IsICMPType accepts ICMPv4 messages of type t, any code.
func IsICMPType(t uint8) Match {
	return func(f *Frame) bool { return f.ICMP != nil && f.ICMP.TypeCode.Type() == t }
}

// AnyIP accepts any IPv4 frame.
func AnyIP(f *Frame) bool { return f.IP != nil }

// Any accepts every frame.
func Any(*Frame) bool { return true }

// ARPRequest builds an ARP request from the bench: who has target, tell
// the bench. The frame is broadcast and unpadded (42 bytes).
func (b *Bench) ARPRequest(target netip.Addr) []byte {
	b.tb.Helper()
	return b.serialize(
		&layers.Ethernet{SrcMAC: b.info.BenchMAC, DstMAC: broadcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: b.info.BenchMAC, SourceProtAddress: b.info.BenchAddr.AsSlice(),
			DstHwAddress: make([]byte, 6), DstProtAddress: target.AsSlice()})
}

// ARPReplyFor builds an ARP reply from the bench to the DUT saying that ip
// is at the bench's MAC.
func (b *Bench) ARPReplyFor(ip netip.Addr) []byte {
	b.tb.Helper()
	return b.serialize(
		&layers.Ethernet{SrcMAC: b.info.BenchMAC, DstMAC: b.info.MAC, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPReply, SourceHwAddress: b.info.BenchMAC, SourceProtAddress: ip.AsSlice(),
			DstHwAddress: b.info.MAC, DstProtAddress: b.info.Addr.AsSlice()})
}

var broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// Echo builds an ICMP echo request from the bench to the DUT.
func (b *Bench) Echo(id, seq uint16, payload []byte) []byte {
	b.tb.Helper()
	return b.serialize(b.Eth(layers.EthernetTypeIPv4), b.IPv4(layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: id, Seq: seq},
		gopacket.Payload(payload))
}

// IsEchoReply accepts the echo reply to id and seq.
func IsEchoReply(id, seq uint16) Match {
	return func(f *Frame) bool {
		return f.ICMP != nil && f.ICMP.TypeCode.Type() == layers.ICMPv4TypeEchoReply && f.ICMP.Id == id && f.ICMP.Seq == seq
	}
}

// ExpectEchoReply waits for the reply to an echo request and checks that it
// comes from the DUT to the bench and carries payload back.
func (e *Env) ExpectEchoReply(id, seq uint16, payload []byte) *Frame {
	e.Helper()
	f := e.Expect(fmt.Sprintf("echo reply id %d seq %d", id, seq), e.Answer(), IsEchoReply(id, seq))
	if !f.IP.SrcIP.Equal(e.Info.Addr.AsSlice()) || !f.IP.DstIP.Equal(e.Info.BenchAddr.AsSlice()) {
		e.Errorf("echo reply %v -> %v, want %v -> %v", f.IP.SrcIP, f.IP.DstIP, e.Info.Addr, e.Info.BenchAddr)
	}
	if !bytes.Equal(f.Payload, payload) {
		e.Errorf("echo reply carries %d bytes that differ from the %d sent (RFC 792: the data is returned)", len(f.Payload), len(payload))
	}
	return f
}

// ExpectARPReply waits for an ARP reply from the DUT.
func (b *Bench) ExpectARPReply() *Frame {
	b.tb.Helper()
	return b.Expect("ARP reply", b.Answer(), IsARP(layers.ARPReply))
}

// ExpectICMP waits for an ICMP message of type t from the DUT and checks
// its code.
func (b *Bench) ExpectICMP(t, code uint8) *Frame {
	b.tb.Helper()
	f := b.Expect(fmt.Sprintf("ICMP type %d", t), b.Answer(), IsICMPType(t))
	if c := f.ICMP.TypeCode.Code(); c != code {
		b.tb.Errorf("ICMP %v: code %d, want %d", f.ICMP.TypeCode, c, code)
	}
	return f
}

// Fragments splits an IPv4 datagram (the bytes after the Ethernet header
// of frame, as Build made it) into frames carrying fragments of at most
// size payload bytes (a multiple of 8), in order.
func (b *Bench) Fragments(frame []byte, size int) [][]byte {
	b.tb.Helper()
	pk := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	ip, _ := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if ip == nil || size%8 != 0 || size <= 0 {
		b.tb.Fatalf("fragments: not an IPv4 frame, or size %d not a positive multiple of 8", size)
	}
	payload := ip.Payload
	var out [][]byte
	for off := 0; off < len(payload); off += size {
		end := min(off+size, len(payload))
		h := *ip
		h.Flags = 0
		if end < len(payload) {
			h.Flags = layers.IPv4MoreFragments
		}
		h.FragOffset = uint16(off / 8)
		h.Options = nil
		out = append(out, b.serialize(b.Eth(layers.EthernetTypeIPv4), &h, gopacket.Payload(payload[off:end])))
	}
	return out
}

// Answer is how long the bench waits for an answer from this DUT (real
// time): DefaultAnswer, or what the DUT says it needs (AnswerWaiter).
func (b *Bench) Answer() time.Duration { return b.answer }
