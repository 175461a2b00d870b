package conformance

import (
	"bytes"
	"encoding/binary"
	"io"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// BuildRawOpts is Build over IPv4 with the TCP options replaced by raw
// bytes as they are, padded with NOPs to a multiple of four: options no
// well-behaved sender writes (a length of zero, one that runs past the
// header, an MSS of zero), which gopacket would fix.
func (f *Flow) BuildRawOpts(seq, ack uint32, fl Flags, payload, raw []byte) []byte {
	f.tb().Helper()
	if f.V6 {
		f.tb().Fatalf("BuildRawOpts builds IPv4 segments only")
	}
	n := (len(raw) + 3) &^ 3
	ip, t := f.Segment(seq, ack, fl, payload)
	t.Options = make([]layers.TCPOption, n)
	for i := range t.Options {
		t.Options[i] = layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1}
	}
	frame := f.b.serialize(f.b.Eth(layers.EthernetTypeIPv4), ip, t, gopacket.Payload(payload))
	const ipAt, tcpAt = 14, 14 + 20
	copy(frame[tcpAt+20:], raw)
	// The TCP checksum again, over the pseudo-header and the segment.
	seg := frame[tcpAt : ipAt+int(binary.BigEndian.Uint16(frame[ipAt+2:]))]
	seg[16], seg[17] = 0, 0
	acc := sum(0, frame[ipAt+12:ipAt+20]) + uint32(layers.IPProtocolTCP) + uint32(len(seg))
	binary.BigEndian.PutUint16(seg[16:], ^fold(sum(acc, seg)))
	return frame
}

// ackedData reads n bytes the DUT sends on f, in order, acknowledging each
// segment, and moving the DUT's clock for segments its timers send (a
// retransmission): the DUT's data after the bench disturbed its sender.
// Each data segment is first given to each, when not nil.
func (f *Flow) ackedData(n int, within time.Duration, each func(*Frame)) []byte {
	f.tb().Helper()
	var got []byte
	for len(got) < n {
		fr := f.ExpectTimer("data", within, IsData)
		if each != nil {
			each(fr)
		}
		if end := fr.TCP.Seq + uint32(len(fr.Payload)); fr.TCP.Seq == f.RcvNxt ||
			int32(fr.TCP.Seq-f.RcvNxt) < 0 && int32(end-f.RcvNxt) > 0 {
			got = append(got, fr.Payload[f.RcvNxt-fr.TCP.Seq:]...)
			f.RcvNxt = end
		}
		f.Send(ACK, nil)
	}
	return got
}

// aliveAfterRetransmits is alive for a connection whose DUT may still
// retransmit data the bench has since acknowledged: such copies are
// acknowledged again and skipped.
func (e *Env) aliveAfterRetransmits(f *Flow, c Conn) {
	e.Helper()
	f.SendData([]byte("still"), 1000)
	if got := e.ReadAll(c, 5); string(got) != "still" {
		e.Errorf("DUT read %q", got)
	}
	e.Write(c, []byte("alive"))
	if got := f.ackedData(5, 30*time.Second, nil); string(got) != "alive" {
		e.Errorf("bench read %q", got)
	}
}

// Cases of hostile and odd peers: flag combinations no TCP sends,
// acknowledgments and sequence numbers out of line, malformed options,
// urgent data, timestamps missing or old, windows retracted, and segments
// that hit TIME-WAIT and SYN-SENT.
// listenerIgnoresRST sends a listener a segment with RST among flags
// (sequence 1, acknowledging ack): it must get no answer and open no
// connection (RFC 9293 §3.10.7.2).
func (e *Env) listenerIgnoresRST(ack uint32, flags Flags, payload []byte, what string) {
	l := e.Listen(dutPort, SockOpts{})
	f := e.NewFlow(dutPort, 1)
	f.Offered = PlainOpts
	f.SendRaw(1, ack, flags, payload)
	f.ExpectNothing("a RST is never answered")
	if c, err := l.Accept(Quiet); err != ErrWouldBlock {
		e.Errorf("accept after %s: %v, %v", what, c, err)
	}
}

func init() {
	register(
		Case{
			Name:  "tcp-syn-rst-listen",
			RFC:   "RFC 9293 §3.10.7.2 (LISTEN, first: an incoming RST is ignored)",
			Title: "a SYN+RST to a listener gets no answer and opens nothing",
			Run: func(e *Env) {
				e.listenerIgnoresRST(0, SYN|RST, nil, "SYN+RST")
			},
		},
		Case{
			Name:  "tcp-all-flags-listen",
			RFC:   "RFC 9293 §3.10.7.2 (LISTEN, first: an incoming RST is ignored, whatever else the segment carries)",
			Title: "a segment with every flag set (FIN SYN RST PSH ACK URG) to a listener gets no answer and opens nothing",
			Run: func(e *Env) {
				e.listenerIgnoresRST(12345, FIN|SYN|RST|PSH|ACK|URG, []byte("xmas"), "an all-flags segment")
			},
		},
		Case{
			Name:  "tcp-syn-fin-data-listen",
			RFC:   "RFC 9293 §3.10.7.2 (LISTEN: data in a SYN may be queued, but a FIN there cannot be validated: drop)",
			Title: "a SYN carrying data and a FIN to a listener gets no SYN-ACK, and no connection delivers the data or EOF",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 1)
				f.Offered = PlainOpts
				f.SendRaw(1, 0, SYN|FIN|PSH, []byte("open, say, close"))
				if fr := e.TryExpect(Quiet, f.Mine); fr != nil {
					e.Errorf("answer to SYN+data+FIN: %v; a host drops it", fr)
				}
				if c, err := l.Accept(Quiet); err != ErrWouldBlock {
					e.Errorf("accept after SYN+data+FIN without a handshake: %v, %v", c, err)
				}
			},
		},
		Case{
			Name:  "tcp-all-flags-established",
			RFC:   "RFC 9293 §3.10.7.4 (second: the RST bit is checked before SYN and ACK) / RFC 5961 §3.2 (RST at RCV.NXT)",
			Title: "a segment with every flag set at RCV.NXT resets an established connection: its data is not delivered",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				f.SendRaw(f.SndNxt, f.RcvNxt, FIN|SYN|RST|PSH|ACK|URG, []byte("xmas"))
				e.expectReadErr(c, ErrReset, "the all-flags segment")
				f.ExpectNothing("no answer to an acceptable RST")
			},
		},
		Case{
			Name:  "tcp-synrcvd-ack-unsent-rst",
			RFC:   "RFC 9293 §3.10.7.4 (SYN-RECEIVED, fifth: an unacceptable ACK gets <SEQ=SEG.ACK><CTL=RST>) / §3.5",
			Title: "in SYN-RECEIVED, an ACK of more than the SYN-ACK is answered by a RST numbered SEG.ACK; the right ACK then completes the handshake",
			Run: func(e *Env) {
				l, f, sa := e.openSYN(PlainOpts, 5000)
				bad := sa.TCP.Seq + 1 + 100000
				f.SendRaw(f.SndNxt, bad, ACK, nil)
				r := f.ExpectRST()
				if r.TCP.Seq != bad || r.TCP.ACK {
					e.Errorf("got %s seq %d, want R seq %d (SEG.ACK) without ACK", r.Flags(), r.TCP.Seq, bad)
				}
				if c, err := l.Accept(Quiet); err != ErrWouldBlock {
					e.Errorf("accept after a bad ACK: %v, %v", c, err)
				}
				f.Send(ACK, nil)
				e.alive(f, e.Accept(l))
			},
		},
		Case{
			Name:  "tcp-ack-unsent-rate-limited",
			RFC:   "RFC 5961 §5.2 and §7 (an ACK of data never sent: drop it and send a rate-limited ACK) / RFC 9293 §3.10.7.4",
			Title: "ten pure ACKs of data the DUT never sent, back to back, and one more after the answer get one ACK, and the connection stays",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				for i := range 10 {
					f.SendRaw(f.SndNxt, f.RcvNxt+100000+uint32(i), ACK, nil)
				}
				a := f.Expect("ACK", Has(ACK))
				if a.TCP.RST || a.TCP.Ack != f.SndNxt || a.TCP.Seq != f.RcvNxt {
					e.Errorf("got %s seq %d ack %d, want . seq %d ack %d", a.Flags(), a.TCP.Seq, a.TCP.Ack, f.RcvNxt, f.SndNxt)
				}
				f.SendRaw(f.SndNxt, f.RcvNxt+100010, ACK, nil)
				f.ExpectNothing("the ACKs after the first are not answered (rate limit)")
				e.alive(f, c)
			},
		},
		Case{
			Name:  "tcp-ack-too-old-dropped",
			RFC:   "RFC 5961 §5.2 (SEG.ACK below SND.UNA-MAX.SND.WND: send an ACK, drop the segment)",
			Title: "data whose ACK lies far below SND.UNA (1 GiB back) is answered by an ACK of RCV.NXT and not delivered",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				e.Write(c, []byte("some data"))
				f.ReadData(9, true)
				f.SendRaw(f.SndNxt, f.RcvNxt-1<<30, ACK|PSH, []byte("blind"))
				if a := f.Expect("ACK", Has(ACK)); a.TCP.Ack != f.SndNxt {
					e.Errorf("answer acknowledges %d: the segment's text was taken; want %d (segment dropped)", a.TCP.Ack, f.SndNxt)
				}
				e.ExpectNoRead(c, "the data of a segment with an ACK too old")
			},
		},
		Case{
			Name:  "tcp-data-straddles-rcvnxt",
			RFC:   "RFC 9293 §3.10.7.4 (a segment that straddles RCV.NXT is acceptable; only its new part is processed)",
			Title: "a segment beginning 3 bytes before RCV.NXT is trimmed: its new bytes are delivered once, after the old ones, and acknowledged",
			Run: func(e *Env) {
				f, c := e.Established(FullOpts, SockOpts{}, 1000)
				f.SendData([]byte("hello"), 1000)
				f.ExpectAck(f.SndNxt)
				f.SendRaw(f.SndNxt-3, f.RcvNxt, ACK|PSH, []byte("llo, world"))
				f.SndNxt += 7
				f.ExpectAck(f.SndNxt)
				if got := e.ReadAll(c, 12); string(got) != "hello, world" {
					e.Errorf("DUT read %q, want %q", got, "hello, world")
				}
				e.ExpectNoRead(c, "the old bytes again")
			},
		},
		Case{
			Name: "tcp-data-straddles-right-edge",
			RFC: "RFC 9293 §3.10.7.4 (a segment whose first byte lies in the window is acceptable; the idealized " +
				"segment does not exceed the window) / §3.8.6",
			Title: "a segment that runs 300 bytes past the right edge of the window has its bytes in the window " +
				"taken (at least up to the edge) and acknowledged; the rest, sent again, completes the stream intact",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				var sent []byte
				acked := f.SndNxt
				edge := acked + uint32(f.SndWnd)
				for room := int(int32(edge - f.SndNxt)); room > 1000; room = int(int32(edge - f.SndNxt)) {
					p := Pattern(min(1400, room-500), f.SndNxt)
					sent = append(sent, p...)
					f.Send(ACK|PSH, p)
					a := f.Expect("ACK", Has(ACK))
					acked, edge = a.TCP.Ack, a.TCP.Ack+uint32(f.SndWnd)
				}
				if acked != f.SndNxt {
					e.Fatalf("bench data acknowledged up to %d, sent up to %d", acked, f.SndNxt)
				}
				n := int(int32(edge-f.SndNxt)) + 300
				if n <= 300 {
					e.Fatalf("no room left in the window (edge %d, SND.NXT %d)", edge, f.SndNxt)
				}
				p := Pattern(n, f.SndNxt)
				sent = append(sent, p...)
				f.SendRaw(f.SndNxt, f.RcvNxt, ACK|PSH, p)
				a := f.Expect("ACK", Has(ACK))
				if int32(a.TCP.Ack-edge) < 0 || int32(a.TCP.Ack-(edge+300)) > 0 {
					e.Errorf("ACK %d, want from the right edge %d to the segment's end %d", a.TCP.Ack, edge, edge+300)
				}
				e.Note("%d of the 300 bytes past the right edge taken", int32(a.TCP.Ack-edge))
				total := len(sent) - int(int32(f.SndNxt+uint32(n)-a.TCP.Ack))
				if total < 0 || total > len(sent) {
					e.Fatalf("ACK %d outside the data sent", a.TCP.Ack)
				}
				if got := e.ReadAll(c, total); !bytes.Equal(got, sent[:total]) {
					e.Errorf("the bytes read differ from those sent")
				}
				e.ExpectNoRead(c, "bytes beyond those acknowledged")
			},
		},
		Case{
			Name: "tcp-urgent-inline",
			RFC: "RFC 9293 §3.8.5 (the urgent pointer marks a point in the stream; the data stays in sequence) / " +
				"RFC 6093 (urgent data is in-line, never out of band; the pointer points past the last urgent byte)",
			Title: "segments with URG set (the pointer inside the data, at zero, and on a segment without data) " +
				"leave the byte stream intact: the application reads every byte once, in order",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				send := func(p []byte, ptr uint16) {
					fr := f.Build(f.SndNxt, f.RcvNxt, ACK|PSH|URG, p)
					binary.BigEndian.PutUint16(fr[14+20+18:], ptr)
					// The urgent pointer is covered by the checksum: fix it.
					binary.BigEndian.PutUint16(fr[14+20+16:], 0)
					seg := fr[14+20 : 14+int(binary.BigEndian.Uint16(fr[16:]))]
					acc := sum(0, fr[14+12:14+20]) + uint32(layers.IPProtocolTCP) + uint32(len(seg))
					binary.BigEndian.PutUint16(seg[16:], ^fold(sum(acc, seg)))
					e.SendFrame(fr)
					f.SndNxt += uint32(len(p))
				}
				send([]byte("urgent!"), 7)
				send(nil, 5)
				send([]byte("zero"), 0)
				f.SendData([]byte(" plain"), 1000)
				f.ExpectAck(f.SndNxt)
				want := "urgent!zero plain"
				if got := e.ReadAll(c, len(want)); string(got) != want {
					e.Errorf("DUT read %q, want %q", got, want)
				}
			},
		},
		Case{
			Name: "tcp-ts-missing-accepted",
			RFC: "RFC 7323 §3.2 (a non-RST segment without TSopt on a connection that negotiated timestamps SHOULD be " +
				"dropped; Linux, netstack and the native engine accept it)",
			Title: "with timestamps negotiated, a data segment without the timestamps option is still delivered and acknowledged",
			Run: func(e *Env) {
				f, c := e.Established(FullOpts, SockOpts{}, 1000)
				f.Peer.TS = false // the bench leaves the option out
				f.SendData([]byte("no stamp"), 1000)
				f.Peer.TS = true
				f.ExpectAck(f.SndNxt)
				if got := e.ReadAll(c, 8); string(got) != "no stamp" {
					e.Errorf("DUT read %q", got)
				}
				e.alive(f, c)
			},
		},
		Case{
			Name:  "tcp-paws-old-ts-dropped",
			RFC:   "RFC 7323 §5.3 (R1: SEG.TSval < TS.Recent and no RST: send an ACK, drop the segment)",
			Title: "a data segment whose TSval is 1000 ticks older than TS.Recent is answered by an ACK of RCV.NXT and not delivered",
			Run: func(e *Env) {
				f, c := e.Established(FullOpts, SockOpts{}, 1000)
				f.SendData([]byte("fresh"), 1000)
				f.ExpectAck(f.SndNxt)
				e.ReadAll(c, 5)
				now := f.TSVal
				f.TSVal -= 1000
				f.SendRaw(f.SndNxt, f.RcvNxt, ACK|PSH, []byte("stale"))
				f.TSVal = now + 1
				a := f.Expect("ACK", Has(ACK))
				if a.TCP.Ack != f.SndNxt {
					e.Errorf("answer acknowledges %d, want %d: the old segment was taken", a.TCP.Ack, f.SndNxt)
				}
				e.ExpectNoRead(c, "the data of a segment PAWS rejects")
				e.alive(f, c)
			},
		},
		Case{
			Name:  "tcp-paws-rst-accepted",
			RFC:   "RFC 7323 §5.3 (R1 applies only when the RST bit is off: a RST with an old TSval is processed)",
			Title: "a RST at RCV.NXT whose TSval is older than TS.Recent still resets the connection",
			Run: func(e *Env) {
				f, c := e.Established(FullOpts, SockOpts{}, 1000)
				f.SendData([]byte("fresh"), 1000)
				f.ExpectAck(f.SndNxt)
				e.ReadAll(c, 5)
				f.TSVal -= 1000
				f.SendRaw(f.SndNxt, 0, RST, nil)
				e.expectReadErr(c, ErrReset, "the RST with an old timestamp")
			},
		},
		Case{
			Name:  "tcp-peer-mss-absent",
			RFC:   "RFC 9293 §3.7.1 (no MSS option: MUST assume a send MSS of 536) / RFC 6691 §2",
			Title: "the bench's SYN has no options at all: the DUT's segments carry at most 536 bytes",
			Run: func(e *Env) {
				f, c := e.Established(SynOpts{WScale: -1}, SockOpts{}, 1)
				e.writeWithin(f, c, 3000, 70, 536, "the default MSS")
			},
		},
		Case{
			Name: "tcp-peer-mss-zero",
			RFC: "RFC 9293 §3.7.1 / RFC 6691 §2 (an MSS of zero allows no segment: it is taken as absent, 536, " +
				"as Linux does; the connection must neither stall nor send empty segments)",
			Title: "the bench's SYN says MSS 0: the DUT still delivers its data, in segments of at most 536 bytes",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 1)
				f.Offered = SynOpts{WScale: -1}
				e.SendFrame(f.BuildRawOpts(f.SndNxt, 0, SYN, nil, []byte{2, 4, 0, 0}))
				f.SndNxt++
				f.ExpectSYNACK()
				f.Send(ACK, nil)
				c := e.Accept(l)
				e.writeWithin(f, c, 2000, 71, 536, "the MSS")
			},
		},
		Case{
			Name:  "tcp-wscale-over-14",
			RFC:   "RFC 7323 §2.3 (a shift greater than 14 is logged and taken as 14)",
			Title: "the bench offers window scale 15 and advertises a window field of 1: the DUT never sends beyond 16384 (1<<14) bytes past the bench's ACK",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 1000)
				f.Connect(SynOpts{MSS: 1460, WScale: 15})
				c := e.Accept(l)
				f.Window = 1
				f.Send(ACK, nil)
				want := Pattern(60000, 72)
				e.Write(c, want)
				// A flight at a time: everything the DUT sends until it
				// falls quiet, then one ACK of it all. From the second
				// flight on, cwnd exceeds 1<<14 and the window limits.
				var got []byte
				ahead := 0
				for len(got) < len(want) {
					edge := f.RcvNxt + 1<<14
					for fr := f.Expect("data", IsData); fr != nil; fr = e.TryExpect(Quiet, f.With(IsData)) {
						end := fr.TCP.Seq + uint32(len(fr.Payload))
						if int32(end-edge) > 0 {
							e.Fatalf("segment %d..%d goes beyond %d, the right edge of a window of 1<<14", fr.TCP.Seq, end, edge)
						}
						ahead = max(ahead, int(int32(end-(edge-1<<14))))
						if fr.TCP.Seq == f.RcvNxt {
							got = append(got, fr.Payload...)
							f.RcvNxt = end
						}
					}
					f.Send(ACK, nil)
				}
				if !bytes.Equal(got, want) {
					e.Errorf("bytes differ")
				}
				e.Note("at most %d bytes in flight beyond the bench's ACK", ahead)
			},
		},
		Case{
			Name: "tcp-option-bad-length-data",
			RFC: "RFC 9293 §3.1 (MUST-7: an illegal option length, zero or past the header, must be handled " +
				"without crashing) / RFC 9293 §3.10.7.4",
			Title: "data segments whose options have length 0, or a length that runs past the header, harm nothing: " +
				"sent again with good options, the data is read once and the connection carries data both ways",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				s := f.SndNxt
				e.SendFrame(f.BuildRawOpts(s, f.RcvNxt, ACK|PSH, []byte("first"), []byte{30, 0, 1, 1}))
				e.SendFrame(f.BuildRawOpts(s+5, f.RcvNxt, ACK|PSH, []byte("second"), []byte{1, 1, 8, 40}))
				e.SendFrame(f.BuildRawOpts(s+11, f.RcvNxt, ACK|PSH, []byte("third"), []byte{2, 4, 5, 180, 4}))
				e.Pass(Quiet, nil)
				f.SendData([]byte("firstsecondthird"), 1000)
				f.ExpectAck(f.SndNxt)
				if got := e.ReadAll(c, 16); string(got) != "firstsecondthird" {
					e.Errorf("DUT read %q", got)
				}
				e.ExpectNoRead(c, "the data of the malformed segments again")
				e.alive(f, c)
			},
		},
		Case{
			Name:  "tcp-option-bad-length-syn",
			RFC:   "RFC 9293 §3.1 (MUST-7: an illegal option length must be handled without crashing) / §3.10.7.2",
			Title: "a SYN whose option has length 0 opens no broken connection: a good SYN after it completes the handshake and data flows",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 1)
				f.Offered = PlainOpts
				e.SendFrame(f.BuildRawOpts(f.SndNxt, 0, SYN, nil, []byte{2, 4, 5, 180, 3, 0, 7, 1}))
				f.SndNxt++
				if sa := e.TryExpect(Quiet, f.With(Has(SYN))); sa != nil {
					e.Note("SYN with a zero-length option answered: %v", sa)
					f.takeSYN(sa)
				} else {
					f.SendRaw(f.ISS, 0, SYN, nil)
					f.ExpectSYNACK()
				}
				f.Send(ACK, nil)
				e.alive(f, e.Accept(l))
			},
		},
		Case{
			Name: "tcp-sack-bogus-blocks",
			RFC: "RFC 2018 §3, §5 / RFC 6675 §5 (SACK blocks describe data sent and not yet cumulatively acknowledged; " +
				"others, reversed, beyond SND.NXT or below SND.UNA, are ignored)",
			Title: "duplicate ACKs with reversed SACK blocks, blocks beyond SND.NXT and below SND.UNA make the DUT send nothing outside what it sent; the stream completes intact",
			Setup: Setup{RTOMin: 50 * time.Millisecond},
			Run: func(e *Env) {
				f, c := e.Established(FullOpts, SockOpts{}, 1000)
				want := Pattern(4000, 73)
				e.Write(c, want)
				first := f.RcvNxt
				f.ReadData(len(want), false)
				max := f.RcvNxt
				f.RcvNxt = first
				blocks := []Block{{max + 1000, max + 3000}, {first + 3000, first + 1000}, {first - 5000, first - 1000}}
				for range 3 {
					ip, t := f.Segment(f.SndNxt, first, ACK, nil)
					var d []byte
					for _, b := range blocks {
						d = binary.BigEndian.AppendUint32(d, b.Left)
						d = binary.BigEndian.AppendUint32(d, b.Right)
					}
					t.Options = append(t.Options, layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1},
						layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1},
						layers.TCPOption{OptionType: layers.TCPOptionKindSACK, OptionData: d})
					e.SendFrame(f.b.serialize(f.b.Eth(layers.EthernetTypeIPv4), ip, t))
				}
				e.Pass(Quiet, func(fr *Frame) {
					if f.Mine(fr) && len(fr.Payload) > 0 {
						if end := fr.TCP.Seq + uint32(len(fr.Payload)); int32(fr.TCP.Seq-first) < 0 || int32(end-max) > 0 {
							e.Errorf("segment %d..%d outside the data sent, %d..%d", fr.TCP.Seq, end, first, max)
						}
					}
				})
				f.RcvNxt = max
				f.Send(ACK, nil)
				e.aliveAfterRetransmits(f, c)
			},
		},
		Case{
			Name: "tcp-time-wait-syn-reuse",
			RFC: "RFC 9293 §3.10.7.4 (TIME-WAIT) / RFC 1122 §4.2.2.13 (a SYN with a sequence number above the old " +
				"connection's may reopen it from TIME-WAIT) / RFC 6191",
			Title: "after an active close, a new SYN from the same port with a higher sequence number gets a SYN-ACK and a working connection",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 1000)
				f.Connect(PlainOpts)
				c := e.Accept(l)
				c.Close()
				f.ExpectFIN()
				f.Send(ACK|FIN, nil)
				f.ExpectAck(f.SndNxt)
				f2 := f.b.newFlow(f.Port, dutPort, f.SndNxt+100000, 2000)
				f2.Connect(PlainOpts)
				e.alive(f2, e.Accept(l))
			},
		},
		Case{
			Name:  "tcp-time-wait-syn-old-seq",
			RFC:   "RFC 9293 §3.10.7.4 (TIME-WAIT: a segment that does not reopen the connection is acknowledged) / RFC 5961 §4.2",
			Title: "in TIME-WAIT, a SYN with a sequence number below RCV.NXT gets an ACK of the old connection, not a SYN-ACK",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 100000)
				c.Close()
				f.ExpectFIN()
				f.Send(ACK|FIN, nil)
				f.ExpectAck(f.SndNxt)
				f.SendRaw(f.SndNxt-50000, 0, SYN, nil)
				a := f.Expect("ACK", func(*Frame) bool { return true })
				if a.TCP.SYN || a.TCP.RST || !a.TCP.ACK || a.TCP.Ack != f.SndNxt || a.TCP.Seq != f.RcvNxt {
					e.Errorf("got %s seq %d ack %d, want . seq %d ack %d (the old connection's)", a.Flags(), a.TCP.Seq, a.TCP.Ack, f.RcvNxt, f.SndNxt)
				}
			},
		},
		Case{
			Name: "tcp-synrcvd-new-syn",
			RFC: "RFC 9293 §3.10.7.4 (SYN-RECEIVED, fourth: a SYN on a passively opened connection returns it to LISTEN) / " +
				"RFC 5961 §4.2",
			Title: "in SYN-RECEIVED, a SYN with another initial sequence number inside the window abandons the half-open " +
				"connection: the ACK of the first SYN-ACK then opens nothing",
			Run: func(e *Env) {
				l, f, sa := e.openSYN(PlainOpts, 5000)
				f.SendRaw(f.ISS+100, 0, SYN, nil)
				if fr := e.TryExpect(Quiet, f.Mine); fr != nil {
					e.Note("answer to the second SYN: %v", fr)
					if fr.TCP.SYN {
						e.Errorf("second SYN answered with %s: the half-open connection took it as a new one", fr.Flags())
					}
				}
				f.SendRaw(f.SndNxt, sa.TCP.Seq+1, ACK, nil)
				r := f.Expect("RST", func(*Frame) bool { return true })
				if !r.TCP.RST || r.TCP.Seq != sa.TCP.Seq+1 {
					e.Errorf("ACK of the abandoned SYN-ACK answered with %s seq %d, want a RST numbered %d (LISTEN, §3.10.7.2)",
						r.Flags(), r.TCP.Seq, sa.TCP.Seq+1)
				}
				if c, err := l.Accept(Quiet); err != ErrWouldBlock {
					e.Errorf("accept after the abandoned handshake: %v, %v", c, err)
				}
			},
		},
		Case{
			Name: "tcp-synack-with-data",
			RFC: "RFC 9293 §3.10.7.3 (SYN-SENT: a SYN-ACK's text is processed from the sixth step on; a receiver that " +
				"drops it leaves it to the retransmission, never delivering it twice)",
			Title: "a SYN-ACK that carries data opens the connection; its data is read exactly once, taken at once or after the bench sends it again",
			Run: func(e *Env) {
				c, f, syn := e.dutConnects(SockOpts{}, 70000)
				f.takeSYN(syn)
				f.Offered = PlainOpts
				f.Send(SYN|ACK|PSH, []byte("early"))
				a := f.Expect("ACK", Has(ACK))
				switch a.TCP.Ack {
				case f.SndNxt:
					e.Note("the SYN-ACK's data was taken")
				case f.ISS + 1:
					e.Note("the SYN-ACK's data was dropped: sent again")
					f.SendRaw(f.ISS+1, f.RcvNxt, ACK|PSH, []byte("early"))
					f.ExpectAck(f.SndNxt)
				default:
					e.Fatalf("ACK %d, want %d (SYN and data) or %d (the SYN only)", a.TCP.Ack, f.SndNxt, f.ISS+1)
				}
				if got := e.ReadAll(c, 5); string(got) != "early" {
					e.Errorf("DUT read %q", got)
				}
				e.ExpectNoRead(c, "the SYN-ACK's data again")
			},
		},
		Case{
			Name:  "tcp-fin-out-of-order",
			RFC:   "RFC 9293 §3.10.7.4 (seventh and eighth: a FIN beyond a hole waits for the data before it; RFC 5681 §4.2)",
			Title: "data with FIN arrives before the data in front of it: only the hole is acknowledged; once it fills, data and FIN are acknowledged and read, then EOF",
			Run: func(e *Env) {
				f, c := e.Established(FullOpts, SockOpts{}, 1000)
				s := f.SndNxt
				f.SendRaw(s+5, f.RcvNxt, ACK|PSH|FIN, []byte(" world"))
				if a := f.Expect("ACK", Has(ACK)); a.TCP.Ack != s {
					e.Errorf("ACK %d for data and FIN beyond a hole, want the hole %d", a.TCP.Ack, s)
				}
				e.ExpectNoRead(c, "the data beyond the hole")
				f.SendRaw(s, f.RcvNxt, ACK|PSH, []byte("hello"))
				f.SndNxt = s + 12
				f.ExpectAck(f.SndNxt)
				if got := e.ReadAll(c, 11); string(got) != "hello world" {
					e.Errorf("DUT read %q", got)
				}
				e.expectReadErr(c, io.EOF, "the FIN after the hole")
			},
		},
		Case{
			Name:  "tcp-time-wait-syn-reuse-ts",
			RFC:   "RFC 6191 §2 (with timestamps, a SYN whose TSval is newer than the old connection's may reopen it from TIME-WAIT, whatever its sequence number)",
			Title: "after an active close with timestamps, a new SYN from the same port with a lower sequence number and a newer TSval gets a SYN-ACK and a working connection",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 500000)
				f.Connect(FullOpts)
				c := e.Accept(l)
				c.Close()
				f.ExpectFIN()
				f.Send(ACK|FIN, nil)
				f.ExpectAck(f.SndNxt)
				f2 := f.b.newFlow(f.Port, dutPort, f.SndNxt-200000, f.TSVal+1000)
				f2.Connect(FullOpts)
				e.alive(f2, e.Accept(l))
			},
		},
		Case{
			Name:  "tcp-synack-to-listener-rst",
			RFC:   "RFC 9293 §3.10.7.2 (LISTEN, second: any acknowledgment is bad: <SEQ=SEG.ACK><CTL=RST>)",
			Title: "a SYN-ACK to a listener is answered by a RST numbered SEG.ACK and opens nothing",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 1)
				f.Offered = PlainOpts
				f.SendRaw(1, 424242, SYN|ACK, nil)
				r := f.ExpectRST()
				if r.TCP.ACK || r.TCP.Seq != 424242 {
					e.Errorf("got %s seq %d, want R seq 424242 without ACK", r.Flags(), r.TCP.Seq)
				}
				if c, err := l.Accept(Quiet); err != ErrWouldBlock {
					e.Errorf("accept after a SYN-ACK to a listener: %v, %v", c, err)
				}
			},
		},
		Case{
			Name:  "tcp-synrcvd-rst-in-window-challenge",
			RFC:   "RFC 5961 §3.2 (in every state but SYN-SENT, a RST in the window but not at RCV.NXT gets a challenge ACK)",
			Title: "in SYN-RECEIVED, a RST inside the window but not at RCV.NXT does not end the handshake: the ACK of the SYN-ACK then opens the connection",
			Run: func(e *Env) {
				l, f, _ := e.openSYN(PlainOpts, 5000)
				f.SendRaw(f.SndNxt+100, 0, RST, nil)
				if fr := e.TryExpect(Quiet, f.Mine); fr != nil {
					e.Note("answer to the RST: %v", fr)
				}
				f.Send(ACK, nil)
				e.alive(f, e.Accept(l))
			},
		},
		Case{
			Name:  "tcp-synack-retransmitted-established",
			RFC:   "RFC 9293 §3.10.7.4 (a SYN on a synchronized connection: an ACK, RFC 5961 §4.2's challenge ACK)",
			Title: "the DUT's ACK of the SYN-ACK was lost: the SYN-ACK sent again is answered by an ACK of it, and the connection works",
			Run: func(e *Env) {
				c, f, syn := e.dutConnects(SockOpts{}, 80000)
				f.Accept(syn, PlainOpts)
				f.ExpectAck(f.SndNxt)
				f.SendRaw(f.ISS, f.RcvNxt, SYN|ACK, nil)
				a := f.Expect("ACK", func(*Frame) bool { return true })
				if a.TCP.SYN || a.TCP.RST || !a.TCP.ACK || a.TCP.Ack != f.SndNxt || a.TCP.Seq != f.RcvNxt {
					e.Errorf("got %s seq %d ack %d, want . seq %d ack %d", a.Flags(), a.TCP.Seq, a.TCP.Ack, f.RcvNxt, f.SndNxt)
				}
				e.WriteWhenConnected(c, []byte("alive"))
				if got := f.ReadData(5, true); string(got) != "alive" {
					e.Errorf("bench read %q", got)
				}
			},
		},
		Case{
			Name:  "tcp-syn-sent-rst-refused",
			RFC:   "RFC 9293 §3.10.7.3 (SYN-SENT: a RST with an acceptable ACK resets the connection: connection refused)",
			Title: "the DUT's SYN is answered by RST+ACK acknowledging it: the connection fails and nothing more is sent",
			Run: func(e *Env) {
				c, f, syn := e.dutConnects(SockOpts{}, 90000)
				f.SendRaw(0, syn.TCP.Seq+1, RST|ACK, nil)
				e.expectReadErr(c, ErrReset, "the RST")
				e.ExpectNothing("segment (the connection was refused)", Quiet, f.Mine)
			},
		},
		Case{
			Name: "tcp-simultaneous-open",
			RFC: "RFC 9293 §3.5 (simultaneous open, figure 8: SYN-SENT → SYN-RECEIVED → ESTABLISHED on the peer's " +
				"SYN-ACK) / §3.10.7.3",
			Title: "the bench answers the DUT's SYN with a SYN of its own, then a SYN-ACK: the DUT sends a SYN-ACK, " +
				"takes the bench's SYN-ACK as completing the handshake, and data flows without waiting for a timer",
			Run: func(e *Env) {
				c, f, syn := e.dutConnects(SockOpts{}, 100000)
				f.takeSYN(syn)
				f.Offered = PlainOpts
				f.Send(SYN, nil)
				sa := f.Expect("SYN-ACK", Has(SYN))
				if !sa.TCP.ACK || sa.TCP.Seq != syn.TCP.Seq || sa.TCP.Ack != f.SndNxt {
					e.Fatalf("answer to the crossing SYN: %s seq %d ack %d, want S. seq %d ack %d", sa.Flags(), sa.TCP.Seq, sa.TCP.Ack, syn.TCP.Seq, f.SndNxt)
				}
				f.SendRaw(f.ISS, f.RcvNxt, SYN|ACK, nil)
				e.WriteWhenConnected(c, []byte("alive"))
				if got := f.ReadData(5, true); string(got) != "alive" {
					e.Errorf("bench read %q", got)
				}
				f.SendData([]byte("still"), 1000)
				f.ExpectAck(f.SndNxt)
				if got := e.ReadAll(c, 5); string(got) != "still" {
					e.Errorf("DUT read %q", got)
				}
			},
		},
		Case{
			Name:  "tcp-mss-option-after-syn-ignored",
			RFC:   "RFC 9293 §3.7.1 (the MSS option is sent only in SYN segments; the send MSS comes from the SYN)",
			Title: "the bench offered MSS 536, then sends an ACK carrying MSS 1460: the DUT still sends at most 536 bytes a segment",
			Run: func(e *Env) {
				f, c := e.Established(SynOpts{MSS: 536, WScale: -1}, SockOpts{}, 1)
				e.SendFrame(f.BuildRawOpts(f.SndNxt, f.RcvNxt, ACK, nil, []byte{2, 4, 0x05, 0xb4}))
				f.ExpectNothing("a pure ACK is not answered")
				e.writeWithin(f, c, 3000, 75, 536, "the SYN's MSS")
			},
		},
		Case{
			Name:  "tcp-peer-zero-window-at-open",
			RFC:   "RFC 9293 §3.8.6.1 / RFC 1122 §4.2.2.17 (a window closed from the start is probed; data flows once it opens)",
			Title: "the bench's SYN and ACK advertise a zero window: the DUT sends no data, probes the window, and sends everything once the bench opens it",
			Setup: Setup{RTOMin: 50 * time.Millisecond},
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 1000)
				f.Window = 0
				f.Connect(PlainOpts)
				c := e.Accept(l)
				want := Pattern(3000, 76)
				e.Write(c, want)
				p := f.ExpectTimer("zero-window probe", 30*time.Second, func(fr *Frame) bool { return true })
				if n := len(p.Payload); n > 1 || p.TCP.Seq != f.RcvNxt && p.TCP.Seq != f.RcvNxt-1 {
					e.Errorf("probe of %d bytes at %d, want at most one byte at %d (or an ACK at %d)", n, p.TCP.Seq, f.RcvNxt, f.RcvNxt-1)
				}
				f.Window = 64240
				f.Send(ACK, nil)
				if got := f.ackedData(len(want), 30*time.Second, nil); !bytes.Equal(got, want) {
					e.Errorf("bytes differ")
				}
			},
		},
		Case{
			Name:  "tcp-fin-in-synrcvd",
			RFC:   "RFC 9293 §3.10.7.4 (SYN-RECEIVED: the ACK moves to ESTABLISHED, then the FIN (eighth) to CLOSE-WAIT)",
			Title: "the ACK that completes the handshake carries a FIN: the connection is accepted, the FIN acknowledged, and the application reads EOF",
			Run: func(e *Env) {
				l, f, _ := e.openSYN(PlainOpts, 5000)
				f.Send(ACK|FIN, nil)
				f.ExpectAck(f.SndNxt)
				c := e.Accept(l)
				e.expectReadErr(c, io.EOF, "the FIN in the handshake's ACK")
			},
		},
		Case{
			Name:  "tcp-data-after-fin-ignored",
			RFC:   "RFC 9293 §3.10.7.4 (CLOSE-WAIT, seventh: text after the peer's FIN cannot occur and is ignored)",
			Title: "after the bench's FIN, a segment with data numbered after it is not delivered: the application still reads the data, then EOF",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				f.Send(ACK|PSH|FIN, []byte("last"))
				f.ExpectAck(f.SndNxt)
				f.SendRaw(f.SndNxt, f.RcvNxt, ACK|PSH, []byte("after the end"))
				if fr := e.TryExpect(Quiet, f.Mine); fr != nil {
					e.Note("answer to data after the FIN: %v", fr)
					if fr.TCP.ACK && !fr.TCP.RST && fr.TCP.Ack != f.SndNxt {
						e.Errorf("ACK %d, want %d: data after the FIN was taken", fr.TCP.Ack, f.SndNxt)
					}
				}
				if got := e.ReadAll(c, 4); string(got) != "last" {
					e.Errorf("DUT read %q", got)
				}
				e.expectReadErr(c, io.EOF, "the FIN")
			},
		},
		Case{
			Name: "tcp-data-beyond-fin-dropped",
			RFC: "RFC 9293 §3.10.7.4 (eighth: the FIN ends the stream; data held out of order beyond it can never be " +
				"delivered) / RFC 2018 §4",
			Title: "data held out of order 10 bytes beyond the point where the bench's FIN then lands is dropped: the " +
				"FIN is acknowledged without SACK blocks, and the application reads the bytes before it, then EOF",
			Run: func(e *Env) {
				f, c := e.Established(FullOpts, SockOpts{}, 1000)
				s := f.SndNxt
				f.SendRaw(s+15, f.RcvNxt, ACK|PSH, []byte("after the end"))
				f.Expect("ACK", Has(ACK))
				f.SendRaw(s, f.RcvNxt, ACK|PSH|FIN, []byte("hello"))
				f.SndNxt = s + 6
				a := f.ExpectAck(f.SndNxt)
				if b := a.Opts().SACK; len(b) > 0 {
					e.Errorf("ACK of the FIN carries SACK blocks %v: data beyond the FIN still held", b)
				}
				if got := e.ReadAll(c, 5); string(got) != "hello" {
					e.Errorf("DUT read %q", got)
				}
				e.expectReadErr(c, io.EOF, "the FIN")
			},
		},
		Case{
			Name: "tcp-time-wait-held-syn-reuse",
			RFC: "RFC 9293 §3.10.7.4 (TIME-WAIT) / RFC 1122 §4.2.2.13 / RFC 6191 (as tcp-time-wait-syn-reuse, with the " +
				"application still holding the connection)",
			Title: "the application shuts its side down and keeps the connection; after both FINs, a new SYN from the same port with a higher sequence number gets a SYN-ACK and a working connection",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 1000)
				f.Connect(PlainOpts)
				c := e.Accept(l)
				if err := c.Shutdown(); err != nil {
					e.Fatalf("shutdown: %v", err)
				}
				f.ExpectFIN()
				f.Send(ACK|FIN, nil)
				f.ExpectAck(f.SndNxt)
				e.expectReadErr(c, io.EOF, "the FIN")
				f2 := f.b.newFlow(f.Port, dutPort, f.SndNxt+100000, 2000)
				f2.Connect(PlainOpts)
				e.alive(f2, e.Accept(l))
			},
		},
		Case{
			Name:  "tcp-syn-sent-rst-bad-ack-ignored",
			RFC:   "RFC 9293 §3.10.7.3 (SYN-SENT: a RST whose ACK is unacceptable, or that has no ACK, is dropped) / RFC 5961 §3.2",
			Title: "while the DUT's SYN waits, a RST with a wrong ACK and a RST without ACK are ignored; the SYN-ACK then opens the connection",
			Run: func(e *Env) {
				c, f, syn := e.dutConnects(SockOpts{}, 50000)
				f.SendRaw(f.ISS, syn.TCP.Seq+1000, RST|ACK, nil)
				f.SendRaw(f.ISS, 0, RST, nil)
				// The SYN may be retransmitted meanwhile; nothing else may leave.
				e.ExpectNothing("segment (a RST is never answered)", Quiet, f.With(func(fr *Frame) bool { return !fr.TCP.SYN }))
				f.Accept(syn, PlainOpts)
				f.ExpectAck(f.SndNxt)
				e.WriteWhenConnected(c, []byte("alive"))
				if got := f.ReadData(5, true); string(got) != "alive" {
					e.Errorf("bench read %q", got)
				}
			},
		},
		Case{
			Name:  "tcp-syn-sent-bad-ack-rst",
			RFC:   "RFC 9293 §3.10.7.3 (SYN-SENT, first: SEG.ACK =< ISS or > SND.NXT without RST: <SEQ=SEG.ACK><CTL=RST>)",
			Title: "a SYN-ACK that acknowledges the wrong number is answered by a RST numbered SEG.ACK; the right SYN-ACK then opens the connection",
			Run: func(e *Env) {
				c, f, syn := e.dutConnects(SockOpts{}, 60000)
				bad := syn.TCP.Seq + 5000
				f.Offered = PlainOpts
				f.SendRaw(f.ISS, bad, SYN|ACK, nil)
				r := f.ExpectRST()
				if r.TCP.Seq != bad {
					e.Errorf("RST seq %d, want SEG.ACK %d", r.TCP.Seq, bad)
				}
				f.Accept(syn, PlainOpts)
				f.ExpectAck(f.SndNxt)
				e.WriteWhenConnected(c, []byte("alive"))
				if got := f.ReadData(5, true); string(got) != "alive" {
					e.Errorf("bench read %q", got)
				}
			},
		},
		Case{
			Name: "tcp-peer-window-retracted",
			RFC: "RFC 9293 §3.8.6 (a receiver SHOULD NOT shrink the window, but a sender MUST be robust to it) / " +
				"RFC 7323 §2.4 / RFC 1122 §4.2.2.16",
			Title: "the bench takes 1000 of 6000 bytes in flight and retracts its window to zero: the DUT keeps the connection, " +
				"and once the window opens it delivers the rest intact, in order",
			Setup: Setup{RTOMin: 50 * time.Millisecond},
			Run: func(e *Env) {
				f, c := e.Established(SynOpts{MSS: 1000, WScale: -1}, SockOpts{}, 1000)
				want := Pattern(6000, 74)
				e.Write(c, want)
				got := f.ReadData(1000, false)
				e.Pass(Quiet, nil) // the rest of the flight, dropped by the bench
				f.Window = 0
				f.Send(ACK, nil)
				// Probes and retransmissions into the closed window: the
				// bench drops them and answers with its closed window.
				e.Pass(2*time.Second, func(fr *Frame) {
					if f.Mine(fr) && len(fr.Payload) > 0 {
						f.Send(ACK, nil)
					}
				})
				f.Window = 64240
				f.Send(ACK, nil)
				got = append(got, f.ackedData(len(want)-1000, 30*time.Second, nil)...)
				if !bytes.Equal(got, want) {
					e.Errorf("bytes differ")
				}
				e.aliveAfterRetransmits(f, c)
			},
		},
	)
}

// The differences of these cases between our stack (netstack) and Linux.
// The native engine passes every one of them.
func init() {
	accepted = append(accepted,
		Difference{
			Case: "tcp-urgent-inline", Ours: Pass, Linux: Fail,
			RFC: "RFC 9293 §3.8.5 / RFC 6093",
			Reason: "Linux, without SO_OOBINLINE (its default), takes the byte before the urgent pointer out of the " +
				"stream as BSD's \"out-of-band\" byte: the application reads 16 of the 17 bytes. RFC 6093 records this as " +
				"common practice that departs from the specifications (urgent data is in-line) and asks applications " +
				"that use urgent data to set SO_OOBINLINE. netstack and the native engine keep every byte in the stream.",
		},
		Difference{
			Case: "tcp-data-straddles-right-edge", Ours: Pass, Linux: Fail,
			RFC: "RFC 9293 §3.10.7.4",
			Reason: "Linux (6.18 here) drops a segment that ends beyond its receive window whole and acknowledges " +
				"RCV.NXT, where §3.10.7.4 takes the segment (its first byte is in the window) and trims it to the window. " +
				"A sender that respects the window never sends one; Linux's peer sends the bytes again in segments that " +
				"fit. netstack takes the whole segment, the native engine what its ring holds (the window and at most " +
				"its slack), both at least up to the right edge.",
		},
		Difference{
			Case: "tcp-ack-unsent-rate-limited", Ours: Fail, Linux: Pass,
			RFC: "RFC 5961 §5.2 and §7",
			Reason: "gVisor netstack does not answer a pure ACK of data it never sent (it drops it silently), where " +
				"RFC 9293 §3.10.7.4 and RFC 5961 §5.2 ask for an ACK (rate-limited, §7). The peer's next segment " +
				"resynchronises anyway; fixing it means patching gVisor.",
		},
		Difference{
			Case: "tcp-ack-too-old-dropped", Ours: Fail, Linux: Pass,
			RFC: "RFC 5961 §5.2",
			Reason: "gVisor netstack takes the text of a segment whose ACK lies more than the window below SND.UNA, " +
				"where RFC 5961 §5.2 drops it (blind data injection needs then only a sequence number in the window). " +
				"Fixing it means patching gVisor.",
		},
		Difference{
			Case: "tcp-all-flags-established", Ours: Fail, Linux: Pass,
			RFC: "RFC 9293 §3.10.7.4",
			Reason: "gVisor netstack does not reset a connection on a segment at RCV.NXT that carries every flag, RST " +
				"among them (§3.10.7.4 checks the RST bit second, before the SYN bit, and Linux and the native engine " +
				"reset). The connection goes on as if the segment had not come; fixing it means patching gVisor.",
		},
		Difference{
			Case: "tcp-paws-old-ts-dropped", Ours: Fail, Linux: Pass,
			RFC: "RFC 7323 §5.3",
			Reason: "gVisor netstack takes a data segment whose TSval is older than TS.Recent (it has no PAWS check on " +
				"the receive path that drops it), where RFC 7323 §5.3 R1 drops it and sends an ACK. Fixing it means " +
				"patching gVisor.",
		},
		Difference{
			Case: "tcp-time-wait-syn-old-seq", Ours: Fail, Linux: Pass,
			RFC: "RFC 9293 §3.10.7.4",
			Reason: "gVisor netstack answers a SYN below RCV.NXT in TIME-WAIT with nothing, where Linux and the native " +
				"engine acknowledge it with the old connection's numbers (a SYN on a synchronized connection, RFC 5961 " +
				"§4.2). Either way no connection opens; fixing it means patching gVisor.",
		},
		Difference{
			Case: "tcp-synrcvd-rst-in-window-challenge", Ours: Fail, Linux: Pass,
			RFC: "RFC 5961 §3.2",
			Reason: "gVisor netstack drops a half-open connection on any RST inside the window, where RFC 5961 §3.2 " +
				"(which covers every state but SYN-SENT) resets only on a RST at RCV.NXT and challenges the others, as " +
				"Linux and the native engine do: a blind attacker needs one guess in the window, not the exact number, " +
				"to kill a handshake. Fixing it means patching gVisor.",
		},
		Difference{
			Case: "tcp-simultaneous-open", Ours: Fail, Linux: Pass,
			RFC: "RFC 9293 §3.5",
			Reason: "gVisor netstack does not take the peer's SYN-ACK as completing a simultaneous open's SYN-RECEIVED " +
				"(figure 8, line 6): the connection stays half-open until a retransmission's challenge ACK, beyond the " +
				"case's wait. Linux takes it (tcp_validate_incoming lets that SYN-ACK pass), and so does the native " +
				"engine since this case found the same wait in it. Fixing it means patching gVisor.",
		},
		Difference{
			Case: "tcp-data-beyond-fin-dropped", Ours: Fail, Linux: Pass,
			RFC: "RFC 9293 §3.10.7.4 / RFC 2018 §4",
			Reason: "gVisor netstack keeps data it holds out of order beyond the peer's FIN and goes on reporting it in " +
				"SACK blocks after acknowledging the FIN; Linux drops it when it takes the FIN (tcp_fin), and so does the " +
				"native engine since this case and FuzzSegmentSequenceOnLiveConnection found the same in it. No byte of " +
				"it is delivered either way; fixing it means patching gVisor.",
		},
		Difference{
			Case: "tcp-time-wait-syn-reuse-ts", Ours: Fail, Linux: Pass,
			RFC: "RFC 6191 §2",
			Reason: "gVisor netstack reopens a TIME-WAIT connection only for a SYN above RCV.NXT, without RFC 6191's " +
				"timestamp test: a new SYN with a lower sequence number and a newer TSval gets no SYN-ACK until TIME-WAIT " +
				"ends. Fixing it means patching gVisor.",
		},
	)
}
