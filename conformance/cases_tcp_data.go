package conformance

import (
	"bytes"

	"github.com/dgramio/dgramio/internal/tcp"
)

// TCP data transfer cases: checksums, reordering, SACK, duplicates,
// sequence wrap, records, flags, RSTs.
func init() {
	register(
		Case{
			Name:  "tcp-bad-checksum-dropped",
			RFC:   "RFC 9293 §3.1 (Checksum) / RFC 1122 §4.2.2.7 (the receiver MUST check it)",
			Title: "a data segment with a wrong checksum is dropped unacknowledged; resent correctly it is taken",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				data := []byte("checksummed data")
				fr := f.Build(f.SndNxt, f.RcvNxt, ACK|PSH, data)
				fr[14+20+16] ^= 0x40 // the TCP checksum
				e.SendFrame(fr)
				f.ExpectNothing("no ACK for a corrupt segment")
				e.ExpectNoRead(c, "the corrupt segment's data")
				e.CounterRose(CounterTCPChecksumErr, 1)
				f.SendData(data, 1000)
				f.ExpectAck(f.SndNxt)
				if got := e.ReadAll(c, len(data)); !bytes.Equal(got, data) {
					e.Errorf("DUT read %q", got)
				}
			},
		},
		Case{
			Name:  "tcp-bad-checksum-syn-dropped",
			RFC:   "RFC 9293 §3.1 (Checksum) / RFC 1122 §4.2.2.7",
			Title: "a SYN with a wrong checksum to a listener gets no SYN-ACK",
			Run: func(e *Env) {
				e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 1)
				f.Offered = FullOpts
				fr := f.Build(1, 0, SYN, nil)
				fr[14+20+16] ^= 0x01
				e.SendFrame(fr)
				f.ExpectNothing("no answer to a corrupt SYN")
				e.CounterRose(CounterTCPChecksumErr, 1)
			},
		},
		Case{
			Name:  "tcp-out-of-order-dupack",
			RFC:   "RFC 5681 §4.2 (immediate duplicate ACK for an out-of-order segment; immediate ACK when a gap fills) / RFC 9293 §3.10.7.4",
			Title: "a segment beyond a hole gets an immediate ACK of the hole; filling it gets an ACK of both; data is read in order",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				data := Pattern(600, 30)
				start := f.SndNxt
				f.SendRaw(start+300, f.RcvNxt, ACK|PSH, data[300:])
				dup := f.Expect("duplicate ACK", Has(ACK))
				if dup.TCP.Ack != start {
					e.Errorf("ACK for the out-of-order segment acknowledges %d, want the hole at %d", dup.TCP.Ack, start)
				}
				e.ExpectNoRead(c, "the segment after the hole is not readable yet")
				f.SendRaw(start, f.RcvNxt, ACK|PSH, data[:300])
				f.SndNxt = start + 600
				f.ExpectAck(start + 600)
				if got := e.ReadAll(c, 600); !bytes.Equal(got, data) {
					e.Errorf("DUT read bytes out of order")
				}
			},
		},
		Case{
			Name:  "tcp-sack-blocks",
			RFC:   "RFC 2018 §4 (SACK blocks for out-of-order data; the first block holds the segment that triggered the ACK)",
			Title: "with SACK on, two segments beyond holes are reported in SACK blocks, the latest first",
			Run: func(e *Env) {
				f, c := e.Established(FullOpts, SockOpts{}, 1000)
				data := Pattern(800, 31)
				s := f.SndNxt
				f.SendRaw(s+200, f.RcvNxt, ACK|PSH, data[200:400])
				a1 := f.Expect("ACK with SACK", Has(ACK))
				if b := a1.Opts().SACK; len(b) < 1 || b[0] != (Block{s + 200, s + 400}) {
					e.Errorf("first out-of-order segment: SACK %v, want first block {%d %d}", b, s+200, s+400)
				}
				f.SendRaw(s+600, f.RcvNxt, ACK|PSH, data[600:])
				a2 := f.Expect("ACK with SACK", Has(ACK))
				b := a2.Opts().SACK
				if a2.TCP.Ack != s {
					e.Errorf("ACK %d, want the first hole %d", a2.TCP.Ack, s)
				}
				if len(b) < 2 || b[0] != (Block{s + 600, s + 800}) || b[1] != (Block{s + 200, s + 400}) {
					e.Errorf("second out-of-order segment: SACK %v, want {%d %d} then {%d %d}", b, s+600, s+800, s+200, s+400)
				}
				f.SendRaw(s, f.RcvNxt, ACK|PSH, data[:200])
				f.SendRaw(s+400, f.RcvNxt, ACK|PSH, data[400:600])
				f.SndNxt = s + 800
				f.ExpectAck(s + 800)
				if got := e.ReadAll(c, 800); !bytes.Equal(got, data) {
					e.Errorf("DUT read bytes out of order")
				}
			},
		},
		Case{
			Name:  "tcp-duplicate-segment",
			RFC:   "RFC 9293 §3.10.7.4 (a segment wholly before RCV.NXT is not acceptable: acknowledge it, deliver nothing)",
			Title: "a segment received twice is acknowledged again and its data read once",
			Run: func(e *Env) {
				f, c := e.Established(FullOpts, SockOpts{}, 1000)
				data := []byte("only once")
				s := f.SndNxt
				f.SendData(data, 1000)
				f.ExpectAck(f.SndNxt)
				f.SendRaw(s, f.RcvNxt, ACK|PSH, data)
				a := f.ExpectAck(f.SndNxt)
				if b := a.Opts().SACK; len(b) > 0 {
					e.Note("ACK of the duplicate carries SACK %v (D-SACK, RFC 2883)", b)
				}
				if got := e.ReadAll(c, len(data)); !bytes.Equal(got, data) {
					e.Errorf("DUT read %q", got)
				}
				e.ExpectNoRead(c, "the duplicate's data")
			},
		},
		Case{
			Name:  "tcp-out-of-window-data",
			RFC:   "RFC 9293 §3.10.7.4 (a segment outside the window is not acceptable: send an ACK, drop it)",
			Title: "data far beyond the receive window is answered with an ACK of RCV.NXT and not delivered",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				f.SendRaw(f.SndNxt+1<<30, f.RcvNxt, ACK|PSH, []byte("far away"))
				f.ExpectAck(f.SndNxt)
				e.ExpectNoRead(c, "out-of-window data")
			},
		},
		Case{
			Name:  "tcp-ack-unsent-data",
			RFC:   "RFC 9293 §3.10.7.4 (SEG.ACK > SND.NXT: send an ACK, drop the segment) / RFC 5961 §5.2",
			Title: "a segment acknowledging data the DUT never sent is answered with an ACK and its data is dropped",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				f.SendRaw(f.SndNxt, f.RcvNxt+100000, ACK|PSH, []byte("bogus ack"))
				if a := f.Expect("ACK", Has(ACK)); a.TCP.Ack != f.SndNxt {
					e.Errorf("answer acknowledges %d: the segment's text was taken; want %d (segment dropped)", a.TCP.Ack, f.SndNxt)
				}
				e.ExpectNoRead(c, "the data of a segment with an unacceptable ACK")
			},
		},
		Case{
			Name:  "tcp-seq-wrap",
			RFC:   "RFC 9293 §3.4 (sequence numbers are compared modulo 2^32)",
			Title: "data whose sequence numbers wrap past 2^32 is acknowledged across the wrap and delivered intact",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 0xffffff00)
				data := Pattern(1000, 32)
				f.SendData(data, 250)
				a := f.ExpectAck(f.SndNxt) // 0xffffff01 + 1000, modulo 2^32
				if a.TCP.Ack > 1000 {
					e.Errorf("ACK %d did not wrap", a.TCP.Ack)
				}
				if got := e.ReadAll(c, len(data)); !bytes.Equal(got, data) {
					e.Errorf("bytes differ across the wrap")
				}
			},
		},
		Case{
			Name:  "tcp-records-across-segments",
			RFC:   "RFC 9293 §2.2 (a byte stream: segment boundaries are not record boundaries)",
			Title: "length-prefixed records cut at odd points (a prefix split in two) are read back whole and in order",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				var stream []byte
				var want [][]byte
				for i, n := range []int{5, 300, 1, 0, 1200, 77} {
					p := Pattern(n, uint32(40+i))
					want = append(want, p)
					var err error
					if stream, err = tcp.AppendRecord(stream, p); err != nil {
						e.Fatalf("record: %v", err)
					}
				}
				// Cut after 1 byte (half a prefix), 4, 150, then 700-byte
				// pieces.
				for _, n := range []int{1, 4, 150} {
					f.SendData(stream[:n], n)
					stream = stream[n:]
				}
				f.SendData(stream, 700)
				f.ExpectAck(f.SndNxt)
				total := 0
				for _, p := range want {
					total += tcp.HeaderLen + len(p)
				}
				dec := tcp.NewDecoder(2000, 4096)
				dec.Feed(e.ReadAll(c, total))
				for i, w := range want {
					got, err := dec.Next()
					if err != nil || !bytes.Equal(got, w) {
						e.Errorf("record %d: %d bytes, %v; want %d bytes", i, len(got), err, len(w))
					}
				}
			},
		},
		Case{
			Name:  "tcp-no-flags-established",
			RFC:   "RFC 9293 §3.10.7.4 (fifth: if the ACK bit is off, drop the segment)",
			Title: "a data segment with no flags at all on a connection is dropped: not delivered",
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1000)
				f.SendRaw(f.SndNxt, 0, 0, []byte("no flags"))
				e.ExpectNoRead(c, "a segment without ACK")
				f.ExpectNothing("a segment without ACK is dropped")
			},
		},
		Case{
			Name:  "tcp-no-flags-listen",
			RFC:   "RFC 9293 §3.10.7.2 (LISTEN, fourth: other text or control: drop)",
			Title: "a segment with no flags to a listener gets no answer and opens nothing",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 1)
				f.SendRaw(1, 0, 0, []byte("no flags"))
				f.ExpectNothing("no answer to a flagless segment")
				if c, err := l.Accept(Quiet); err != ErrWouldBlock {
					e.Errorf("accept after a flagless segment: %v, %v", c, err)
				}
			},
		},
		Case{
			Name:  "tcp-syn-fin-listen",
			RFC:   "RFC 9293 §3.10.7.2 (LISTEN: a FIN there cannot be validated, drop the segment) / RFC 9293 §3.10.7.3 (FIN in SYN-RECEIVED)",
			Title: "a SYN+FIN to a listener is dropped: no answer, and no connection that delivers data or EOF to an application",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 1)
				f.Offered = PlainOpts
				f.SendRaw(1, 0, SYN|FIN, nil)
				if fr := e.TryExpect(Quiet, f.Mine); fr != nil {
					e.Errorf("answer to SYN+FIN: %v; a host drops it (no SYN-ACK for a segment that opens and closes at once)", fr)
				}
				if c, err := l.Accept(Quiet); err != ErrWouldBlock {
					e.Errorf("accept after SYN+FIN without a handshake: %v, %v", c, err)
				}
			},
		},
	)
}
