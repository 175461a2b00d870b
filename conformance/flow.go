package conformance

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Flags are TCP flags for Flow.Send.
type Flags uint8

// TCP flags.
const (
	FIN Flags = 1 << iota
	SYN
	RST
	PSH
	ACK
	URG
)

// SynOpts are the options the bench puts in a SYN or SYN-ACK.
type SynOpts struct {
	MSS    int  // 0: none
	WScale int  // -1: none
	SACK   bool // SACK-permitted
	TS     bool // timestamps
}

// FullOpts offers everything: MSS 1460, window scale 7, SACK-permitted,
// timestamps (as Linux does).
var FullOpts = SynOpts{MSS: 1460, WScale: 7, SACK: true, TS: true}

// PlainOpts offers only the MSS: no window scale, no SACK, no timestamps,
// so that windows are plain bytes and no option is in the way.
var PlainOpts = SynOpts{MSS: 1460, WScale: -1}

// Flow is the bench's end of one TCP connection with the DUT. It keeps the
// sequence numbers the way a TCP would (SndNxt advances by what Send sends,
// RcvNxt by what the case accepts), so that cases say what to send and what
// to expect and the numbers follow.
type Flow struct {
	b *Bench
	// Port is the bench's port, DUTPort the DUT's.
	Port, DUTPort uint16
	// ISS is the bench's initial sequence number, SndNxt the next one it
	// sends.
	ISS, SndNxt uint32
	// IRS is the DUT's initial sequence number, RcvNxt the next byte the
	// bench expects from it.
	IRS, RcvNxt uint32
	// Window is the window the bench advertises (unscaled field value).
	Window uint16
	// Offered are the options the bench put in its SYN or SYN-ACK; Peer
	// those of the DUT's.
	Offered SynOpts
	Peer    TCPOpts
	// SndWnd is the DUT's last advertised window, in bytes (scaled).
	SndWnd int
	// TSVal is the bench's timestamp clock; TSEcr the last DUT TSval seen.
	TSVal, TSEcr uint32
	// PeerFIN: the DUT's FIN was taken (RcvNxt counts it).
	PeerFIN bool
	// V6: the flow runs over IPv6, between BenchAddr6 and Addr6
	// (NewFlow6); Segment is then not used, Build makes the IPv6 frame.
	V6 bool
	// Ext, when set, goes between the IPv6 header and the TCP header of
	// every segment Build makes: an extension header chain whose last
	// Next Header is TCP's (6); ExtNext is the first one's type.
	Ext     []byte
	ExtNext layers.IPProtocol
}

// NewFlow makes a flow from a fresh bench port to dutPort with initial
// sequence number iss.
func (b *Bench) NewFlow(dutPort uint16, iss uint32) *Flow {
	return b.newFlow(b.Port(), dutPort, iss, 1000)
}

// NewFlow6 is NewFlow over IPv6: from BenchAddr6 to the DUT's Addr6.
func (b *Bench) NewFlow6(dutPort uint16, iss uint32) *Flow {
	f := b.NewFlow(dutPort, iss)
	f.V6 = true
	return f
}

// newFlow is a flow between bench port port and dutPort before any SYN:
// the bench's initial sequence number iss, its timestamp clock at tsval, a
// window of 64240, nothing offered yet.
func (b *Bench) newFlow(port, dutPort uint16, iss, tsval uint32) *Flow {
	return &Flow{b: b, Port: port, DUTPort: dutPort, ISS: iss, SndNxt: iss, Window: 64240, TSVal: tsval,
		Offered: SynOpts{WScale: -1}}
}

func (f *Flow) tb() TB { return f.b.tb }

// Segment builds (does not send) a segment of this flow with explicit
// sequence and acknowledgment numbers, flags and payload. Timestamps are
// added when they were negotiated (or offered, on a SYN).
func (f *Flow) Segment(seq, ack uint32, fl Flags, payload []byte) (*layers.IPv4, *layers.TCP) {
	ip := f.b.IPv4(layers.IPProtocolTCP)
	ip.Flags = layers.IPv4DontFragment
	t := f.tcp(seq, ack, fl)
	t.SetNetworkLayerForChecksum(ip)
	return ip, t
}

// tcp is the TCP header of a segment of the flow (see Segment).
func (f *Flow) tcp(seq, ack uint32, fl Flags) *layers.TCP {
	t := &layers.TCP{SrcPort: layers.TCPPort(f.Port), DstPort: layers.TCPPort(f.DUTPort), Seq: seq, Ack: ack,
		FIN: fl&FIN != 0, SYN: fl&SYN != 0, RST: fl&RST != 0, PSH: fl&PSH != 0, ACK: fl&ACK != 0, URG: fl&URG != 0,
		Window: f.Window}
	if fl&SYN != 0 {
		t.Options = synOptions(f.Offered, f.TSVal, f.TSEcr, fl&ACK != 0)
	} else if f.Offered.TS && f.Peer.TS {
		t.Options = tsOption(f.TSVal, f.TSEcr)
	}
	if fl&RST == 0 {
		f.TSVal++
	}
	return t
}

func synOptions(o SynOpts, tsval, tsecr uint32, synack bool) []layers.TCPOption {
	var opts []layers.TCPOption
	if o.MSS > 0 {
		opts = append(opts, layers.TCPOption{OptionType: layers.TCPOptionKindMSS, OptionLength: 4,
			OptionData: binary.BigEndian.AppendUint16(nil, uint16(o.MSS))})
	}
	if o.SACK {
		opts = append(opts, layers.TCPOption{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2})
	}
	if o.TS {
		if !synack {
			tsecr = 0
		}
		opts = append(opts, tsOption(tsval, tsecr)...)
	}
	if o.WScale >= 0 {
		opts = append(opts, layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1},
			layers.TCPOption{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{byte(o.WScale)}})
	}
	return opts
}

func tsOption(val, ecr uint32) []layers.TCPOption {
	d := binary.BigEndian.AppendUint32(nil, val)
	d = binary.BigEndian.AppendUint32(d, ecr)
	return []layers.TCPOption{{OptionType: layers.TCPOptionKindNop, OptionLength: 1}, {OptionType: layers.TCPOptionKindNop, OptionLength: 1},
		{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: d}}
}

// Build is Segment serialized into a frame, for a case that damages it.
func (f *Flow) Build(seq, ack uint32, fl Flags, payload []byte) []byte {
	f.tb().Helper()
	if f.V6 {
		ip := f.b.IPv6(layers.IPProtocolTCP)
		t := f.tcp(seq, ack, fl)
		t.SetNetworkLayerForChecksum(ip)
		if f.Ext != nil {
			ip.NextHeader = f.ExtNext
			return f.b.serialize(f.b.Eth(layers.EthernetTypeIPv6), ip, gopacket.Payload(f.Ext), t, gopacket.Payload(payload))
		}
		return f.b.serialize(f.b.Eth(layers.EthernetTypeIPv6), ip, t, gopacket.Payload(payload))
	}
	ip, t := f.Segment(seq, ack, fl, payload)
	return f.b.serialize(f.b.Eth(layers.EthernetTypeIPv4), ip, t, gopacket.Payload(payload))
}

// SendRaw sends a segment with explicit numbers; the flow's state does not
// change.
func (f *Flow) SendRaw(seq, ack uint32, fl Flags, payload []byte) {
	f.tb().Helper()
	f.b.SendFrame(f.Build(seq, ack, fl, payload))
}

// Send sends a segment at SndNxt acknowledging RcvNxt (when fl has ACK)
// and advances SndNxt past its payload, SYN and FIN.
func (f *Flow) Send(fl Flags, payload []byte) {
	f.tb().Helper()
	ack := uint32(0)
	if fl&ACK != 0 {
		ack = f.RcvNxt
	}
	f.SendRaw(f.SndNxt, ack, fl, payload)
	f.SndNxt += uint32(len(payload))
	if fl&SYN != 0 {
		f.SndNxt++
	}
	if fl&FIN != 0 {
		f.SndNxt++
	}
}

// Mine accepts the frames of this flow sent by the DUT.
func (f *Flow) Mine(fr *Frame) bool {
	if f.V6 {
		return fr.TCP != nil && fr.IP6 != nil && uint16(fr.TCP.SrcPort) == f.DUTPort && uint16(fr.TCP.DstPort) == f.Port &&
			fr.IP6.SrcIP.Equal(f.b.info.Addr6.AsSlice()) && fr.IP6.DstIP.Equal(f.b.info.BenchAddr6.AsSlice())
	}
	return fr.TCP != nil && fr.IP != nil && uint16(fr.TCP.SrcPort) == f.DUTPort && uint16(fr.TCP.DstPort) == f.Port &&
		fr.IP.SrcIP.Equal(f.b.info.Addr.AsSlice()) && fr.IP.DstIP.Equal(f.b.info.BenchAddr.AsSlice())
}

// With accepts the flow's frames that m also accepts.
func (f *Flow) With(m func(*Frame) bool) Match {
	return func(fr *Frame) bool { return f.Mine(fr) && m(fr) }
}

// observe takes what every segment from the DUT tells: its window and
// timestamp.
func (f *Flow) observe(fr *Frame) {
	o := fr.Opts()
	if o.TS {
		f.TSEcr = o.TSVal
	}
	shift := 0
	if !fr.TCP.SYN && f.Offered.WScale >= 0 && f.Peer.WScale >= 0 {
		shift = f.Peer.WScale
	}
	f.SndWnd = int(fr.TCP.Window) << shift
}

// Expect waits for the next segment of the flow that m accepts (other
// segments of the flow are logged and dropped) and notes its window and
// timestamp.
func (f *Flow) Expect(what string, m func(*Frame) bool) *Frame {
	f.tb().Helper()
	fr := f.b.Expect(what, f.b.Answer(), f.With(m))
	f.observe(fr)
	return fr
}

// ExpectTimer is Expect for a segment a timer sends, moving a fake clock
// (Bench.ExpectTimer).
func (f *Flow) ExpectTimer(what string, within time.Duration, m func(*Frame) bool) *Frame {
	f.tb().Helper()
	fr := f.b.ExpectTimer(what, within, f.With(m))
	f.observe(fr)
	return fr
}

// ExpectNothing asserts that the DUT sends nothing on this flow for Quiet.
func (f *Flow) ExpectNothing(why string) {
	f.tb().Helper()
	f.b.ExpectNothing("segment ("+why+")", Quiet, f.Mine)
}

// Flag predicates.

// Is accepts segments whose flags are exactly fl, PSH ignored.
func Is(fl Flags) func(*Frame) bool {
	return func(fr *Frame) bool { return flagsOf(fr.TCP)&^PSH == fl&^PSH }
}

// Has accepts segments that carry every flag of fl.
func Has(fl Flags) func(*Frame) bool {
	return func(fr *Frame) bool { return flagsOf(fr.TCP)&fl == fl }
}

// AckIs accepts segments with ACK set and acknowledgment number ack.
func AckIs(ack uint32) func(*Frame) bool {
	return func(fr *Frame) bool { return fr.TCP.ACK && fr.TCP.Ack == ack }
}

// IsData accepts segments that carry payload.
func IsData(fr *Frame) bool { return len(fr.Payload) > 0 }

func flagsOf(t *layers.TCP) Flags {
	var fl Flags
	for _, x := range []struct {
		on bool
		f  Flags
	}{{t.FIN, FIN}, {t.SYN, SYN}, {t.RST, RST}, {t.PSH, PSH}, {t.ACK, ACK}, {t.URG, URG}} {
		if x.on {
			fl |= x.f
		}
	}
	return fl
}

// String writes flags tcpdump's way.
func (fl Flags) String() string {
	return flagString(&layers.TCP{FIN: fl&FIN != 0, SYN: fl&SYN != 0, RST: fl&RST != 0, PSH: fl&PSH != 0, ACK: fl&ACK != 0, URG: fl&URG != 0})
}

// Connect opens the flow to a DUT listener: it sends a SYN with opts,
// expects the SYN-ACK (acknowledging the SYN) and acknowledges it. It
// returns the SYN-ACK.
func (f *Flow) Connect(opts SynOpts) *Frame {
	f.tb().Helper()
	f.Offered = opts
	f.Send(SYN, nil)
	sa := f.ExpectSYNACK()
	f.Send(ACK, nil)
	return sa
}

// ExpectSYNACK expects the DUT's SYN-ACK to the bench's SYN: ACK of ISS+1.
// It takes the DUT's initial sequence number and options.
func (f *Flow) ExpectSYNACK() *Frame {
	f.tb().Helper()
	sa := f.Expect("SYN-ACK", Has(SYN))
	if !sa.TCP.ACK || sa.TCP.RST || sa.TCP.FIN {
		f.tb().Fatalf("answer to SYN has flags %s, want SYN-ACK", sa.Flags())
	}
	if sa.TCP.Ack != f.ISS+1 {
		f.tb().Errorf("SYN-ACK acknowledges %d, want ISS+1 = %d (RFC 9293 §3.5)", sa.TCP.Ack, f.ISS+1)
	}
	f.takeSYN(sa)
	return sa
}

func (f *Flow) takeSYN(sa *Frame) {
	f.IRS = sa.TCP.Seq
	f.RcvNxt = sa.TCP.Seq + 1
	f.Peer = sa.Opts()
	f.observe(sa)
}

// Accept takes a SYN the DUT sent to the bench's port (as returned by
// ExpectSYN) and answers it with a SYN-ACK carrying opts; the DUT's ACK is
// left to the case.
func (f *Flow) Accept(syn *Frame, opts SynOpts) {
	f.tb().Helper()
	f.takeSYN(syn)
	f.Offered = opts
	f.Send(SYN|ACK, nil)
}

// ExpectSYN waits for a SYN from the DUT to bench port port and returns a
// Flow for it (not yet answered) with the SYN.
func (b *Bench) ExpectSYN(port uint16, iss uint32) (*Flow, *Frame) {
	b.tb.Helper()
	syn := b.Expect(fmt.Sprintf("SYN to bench port %d", port), b.Answer(), func(fr *Frame) bool {
		return fr.TCP != nil && uint16(fr.TCP.DstPort) == port && fr.TCP.SYN
	})
	if syn.TCP.ACK || syn.TCP.RST || syn.TCP.FIN {
		b.tb.Fatalf("DUT's opening segment has flags %s, want SYN", syn.Flags())
	}
	return b.newFlow(port, uint16(syn.TCP.SrcPort), iss, 5000), syn
}

// SendData sends payload in segments of at most mss bytes (ACK|PSH),
// advancing SndNxt.
func (f *Flow) SendData(payload []byte, mss int) {
	f.tb().Helper()
	for len(payload) > 0 {
		n := min(mss, len(payload))
		f.Send(ACK|PSH, payload[:n])
		payload = payload[n:]
	}
}

// ExpectRST waits for a RST on the flow.
func (f *Flow) ExpectRST() *Frame {
	f.tb().Helper()
	return f.Expect("RST", Has(RST))
}

// ExpectAck waits for a segment acknowledging ack (exactly).
func (f *Flow) ExpectAck(ack uint32) *Frame {
	f.tb().Helper()
	return f.Expect(fmt.Sprintf("ACK of %d", ack), AckIs(ack))
}

// ReadData collects n bytes of payload the DUT sends on the flow, in
// order, acknowledging each in-order segment (when ack), and advances
// RcvNxt. Out-of-order or repeated bytes fail the case.
func (f *Flow) ReadData(n int, ack bool) []byte {
	f.tb().Helper()
	return f.readData(n, ack, nil)
}

// writeWithin has the DUT write n bytes of Pattern(n, seed) on c and reads
// them, acknowledging each segment, reporting any segment of more than mss
// bytes (what is the MSS it must respect) and bytes that differ.
func (e *Env) writeWithin(f *Flow, c Conn, n int, seed uint32, mss int, what string) {
	f.tb().Helper()
	want := Pattern(n, seed)
	e.Write(c, want)
	got := f.readData(len(want), true, func(fr *Frame) {
		if len(fr.Payload) > mss {
			e.Errorf("segment of %d bytes, over %s of %d", len(fr.Payload), what, mss)
		}
	})
	if !bytes.Equal(got, want) {
		e.Errorf("bench read %d bytes that differ from the %d written", len(got), len(want))
	}
}

// readData is ReadData that also calls each, when not nil, with every data
// segment before it is taken.
func (f *Flow) readData(n int, ack bool, each func(*Frame)) []byte {
	f.tb().Helper()
	var got []byte
	for len(got) < n {
		fr := f.Expect(fmt.Sprintf("data (have %d of %d bytes)", len(got), n), IsData)
		if each != nil {
			each(fr)
		}
		if fr.TCP.Seq != f.RcvNxt {
			f.tb().Fatalf("data at seq %d, want %d (RFC 9293 §3.4: in order, nothing skipped)", fr.TCP.Seq, f.RcvNxt)
		}
		got = append(got, fr.Payload...)
		f.takeData(fr)
		if ack {
			f.Send(ACK, nil)
		}
	}
	if len(got) > n {
		f.tb().Errorf("DUT sent %d bytes, want %d", len(got), n)
	}
	return got
}

// takeData advances RcvNxt past an in-order segment's payload and FIN.
func (f *Flow) takeData(fr *Frame) {
	f.RcvNxt += uint32(len(fr.Payload))
	if fr.TCP.FIN {
		f.PeerFIN = true
		f.RcvNxt++
	}
}

// ExpectFIN expects the DUT's FIN at RcvNxt (unless ReadData already took
// it with the last data) and takes it; it does not acknowledge it.
func (f *Flow) ExpectFIN() {
	f.tb().Helper()
	if f.PeerFIN {
		return
	}
	fin := f.Expect("FIN", Has(FIN))
	if fin.TCP.Seq+uint32(len(fin.Payload)) != f.RcvNxt || len(fin.Payload) > 0 && fin.TCP.Seq != f.RcvNxt {
		f.tb().Errorf("FIN at %d with %d bytes, want it at %d after the data", fin.TCP.Seq, len(fin.Payload), f.RcvNxt)
	}
	f.RcvNxt = fin.TCP.Seq + uint32(len(fin.Payload)) + 1
	f.PeerFIN = true
}

// Pattern returns n bytes of a fixed pseudo-random pattern (the same for
// the same n and seed), so that reordering or corruption shows.
func Pattern(n int, seed uint32) []byte {
	b := make([]byte, n)
	x := seed*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}
