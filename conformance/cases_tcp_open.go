package conformance

import (
	"bytes"
	"net/netip"
	"time"
)

// dutPort is the port the DUT listens on in TCP cases; benchPort the
// port the bench plays a listener on when the DUT connects. They are the
// same: a tcp-xdp DUT's XDP program redirects to our stack the segments
// from or to one port only.
const (
	dutPort   = 7000
	benchPort = dutPort
)

// Listen opens a listener on the DUT (closed when the case ends).
func (e *Env) Listen(port uint16, o SockOpts) Listener {
	e.Helper()
	l, err := e.DUT.Listen(port, o)
	if err != nil {
		e.Fatalf("listen: %v", err)
	}
	e.Cleanup(func() { l.Close() })
	return l
}

// Accept takes the connection a handshake opened on l.
func (e *Env) Accept(l Listener) Conn {
	e.Helper()
	c, err := l.Accept(e.Answer())
	if err != nil {
		e.Fatalf("accept: %v", err)
	}
	e.Cleanup(func() { c.Close() })
	return c
}

// Established opens a connection from the bench to a DUT listener with
// opts and sockets options o: the handshake, then the DUT accepts. iss is
// the bench's initial sequence number.
func (e *Env) Established(opts SynOpts, o SockOpts, iss uint32) (*Flow, Conn) {
	e.Helper()
	l := e.Listen(dutPort, o)
	f := e.NewFlow(dutPort, iss)
	f.Connect(opts)
	return f, e.Accept(l)
}

// openSYN listens on dutPort and sends the listener a SYN offering opts,
// from a new flow whose initial sequence number is iss. It returns the
// listener, the flow and the DUT's SYN-ACK; the handshake's last ACK is the
// case's to send.
func (e *Env) openSYN(opts SynOpts, iss uint32) (Listener, *Flow, *Frame) {
	e.Helper()
	l := e.Listen(dutPort, SockOpts{})
	f := e.NewFlow(dutPort, iss)
	f.Offered = opts
	f.Send(SYN, nil)
	return l, f, f.ExpectSYNACK()
}

// dutConnects makes the DUT connect to the bench's benchPort with o (the
// connection is closed when the case ends) and expects its SYN. It returns
// the connection, and a flow for the SYN (not answered yet) whose initial
// sequence number is iss.
func (e *Env) dutConnects(o SockOpts, iss uint32) (Conn, *Flow, *Frame) {
	e.Helper()
	c, err := e.DUT.Connect(netip.AddrPortFrom(e.Info.BenchAddr, benchPort), o)
	if err != nil {
		e.Fatalf("connect: %v", err)
	}
	e.Cleanup(func() { c.Close() })
	f, syn := e.ExpectSYN(benchPort, iss)
	return c, f, syn
}

// alive checks that the connection carries data both ways: from the
// bench to the DUT's application, and back.
func (e *Env) alive(f *Flow, c Conn) {
	e.Helper()
	f.SendData([]byte("still"), 1000)
	f.ExpectAck(f.SndNxt)
	if got := e.ReadAll(c, 5); string(got) != "still" {
		e.Errorf("DUT read %q", got)
	}
	e.Write(c, []byte("alive"))
	if got := f.ReadData(5, true); string(got) != "alive" {
		e.Errorf("bench read %q", got)
	}
}

// Write makes the DUT write p whole (it must fit the send buffer).
func (e *Env) Write(c Conn, p []byte) {
	e.Helper()
	n, err := c.Write(p)
	if err != nil || n != len(p) {
		e.Fatalf("DUT write of %d bytes: %d, %v", len(p), n, err)
	}
}

// WriteWhenConnected makes the DUT write p once its connect completed
// (the handshake's last ACK is processed asynchronously).
func (e *Env) WriteWhenConnected(c Conn, p []byte) {
	e.Helper()
	deadline := time.Now().Add(e.Answer())
	for {
		n, err := c.Write(p)
		if err == nil && n == len(p) {
			return
		}
		if err != ErrWouldBlock || time.Now().After(deadline) {
			e.Fatalf("DUT write of %d bytes on a new connection: %d, %v", len(p), n, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// ReadAll makes the DUT read until it has n bytes (or fails).
func (e *Env) ReadAll(c Conn, n int) []byte {
	e.Helper()
	buf := make([]byte, n)
	got := 0
	for got < n {
		k, err := c.Read(buf[got:], e.Answer())
		if err != nil {
			e.Fatalf("DUT read after %d of %d bytes: %v", got, n, err)
		}
		got += k
	}
	return buf
}

// ExpectNoRead asserts that the DUT's application has nothing to read
// (within Quiet).
func (e *Env) ExpectNoRead(c Conn, why string) {
	e.Helper()
	buf := make([]byte, 4096)
	if n, err := c.Read(buf, Quiet); err != ErrWouldBlock {
		e.Errorf("DUT read %d bytes (%v), want nothing: %s", n, err, why)
	}
}

// TCP connection establishment cases.
func init() {
	register(
		Case{
			Name:  "tcp-syn-closed-port-rst",
			RFC:   "RFC 9293 §3.10.7.1 (CLOSED: <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>)",
			Title: "a SYN to a port nobody listens on is answered by RST+ACK with sequence 0 acknowledging the SYN",
			Run: func(e *Env) {
				f := e.NewFlow(closedPort, 123456)
				f.Send(SYN, nil)
				r := f.ExpectRST()
				if !r.TCP.ACK || r.TCP.Seq != 0 || r.TCP.Ack != 123457 {
					e.Errorf("got %s seq %d ack %d, want R. seq 0 ack 123457", r.Flags(), r.TCP.Seq, r.TCP.Ack)
				}
				if len(r.Payload) != 0 {
					e.Errorf("RST carries %d bytes", len(r.Payload))
				}
				e.CounterRose(CounterTCPResetsSent, 1)
			},
		},
		Case{
			Name:  "tcp-ack-closed-port-rst",
			RFC:   "RFC 9293 §3.10.7.1 (CLOSED, ACK on: <SEQ=SEG.ACK><CTL=RST>)",
			Title: "an ACK to a port nobody listens on is answered by a RST whose sequence number is the segment's ACK",
			Run: func(e *Env) {
				f := e.NewFlow(closedPort, 5000)
				f.SendRaw(5000, 777777, ACK, []byte("stray"))
				r := f.ExpectRST()
				if r.TCP.ACK || r.TCP.Seq != 777777 {
					e.Errorf("got %s seq %d, want R seq 777777 without ACK", r.Flags(), r.TCP.Seq)
				}
			},
		},
		Case{
			Name:  "tcp-rst-closed-port-ignored",
			RFC:   "RFC 9293 §3.10.7.1 (CLOSED: an incoming RST is discarded)",
			Title: "a RST to a port nobody listens on gets no answer",
			Run: func(e *Env) {
				f := e.NewFlow(closedPort, 5000)
				f.SendRaw(5000, 0, RST, nil)
				f.SendRaw(5000, 9000, RST|ACK, nil)
				f.ExpectNothing("answer to a RST")
			},
		},
		Case{
			Name:  "tcp-handshake-passive",
			RFC:   "RFC 9293 §3.5 (three-way handshake), §3.10.7.2 (LISTEN)",
			Title: "SYN to a listener: SYN-ACK acknowledging ISS+1; after the ACK data flows both ways",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 0x10000000)
				sa := f.Connect(FullOpts)
				if sa.TCP.Window == 0 {
					e.Errorf("SYN-ACK advertises a zero window")
				}
				e.alive(f, e.Accept(l))
				e.CounterRose(CounterTCPPassiveOpens, 1)
			},
		},
		Case{
			Name:  "tcp-synack-mss",
			RFC:   "RFC 9293 §3.7.1 (MSS option: MTU minus the fixed IP and TCP headers) / RFC 6691",
			Title: "the SYN-ACK carries an MSS option of MTU-40 (1460 on a 1500-byte link)",
			Run: func(e *Env) {
				_, _, sa := e.openSYN(FullOpts, 1)
				if o := sa.Opts(); o.MSS != e.Info.MTU-40 {
					e.Errorf("SYN-ACK MSS %d, want %d", o.MSS, e.Info.MTU-40)
				}
			},
		},
		Case{
			Name:  "tcp-mss-small-mtu",
			RFC:   "RFC 9293 §3.7.1 / RFC 879 (MSS from the MTU; segments no larger than the MSS)",
			Title: "on a 576-byte MTU the SYN-ACK says MSS 536 and the DUT's segments carry at most 536 bytes",
			Setup: Setup{MTU: 576},
			Run: func(e *Env) {
				f, c := e.Established(PlainOpts, SockOpts{}, 1)
				if f.Peer.MSS != 536 {
					e.Errorf("SYN-ACK MSS %d, want 536", f.Peer.MSS)
				}
				e.writeWithin(f, c, 3000, 20, 536, "the MSS")
			},
		},
		Case{
			Name:  "tcp-peer-mss-respected",
			RFC:   "RFC 9293 §3.7.1 (MUST NOT send a segment larger than the peer's MSS)",
			Title: "the bench offers MSS 536 on a 1500-byte link: the DUT sends segments of at most 536 bytes",
			Run: func(e *Env) {
				f, c := e.Established(SynOpts{MSS: 536, WScale: -1}, SockOpts{}, 1)
				want := Pattern(3000, 21)
				e.Write(c, want)
				f.readData(len(want), true, func(fr *Frame) {
					if len(fr.Payload) > 536 {
						e.Errorf("segment of %d bytes, over the bench's MSS of 536", len(fr.Payload))
					}
				})
			},
		},
		Case{
			Name:  "tcp-synack-wscale",
			RFC:   "RFC 7323 §2.2 / §2.3 (Window Scale in SYN-ACK only when offered; shift at most 14)",
			Title: "a SYN offering window scale gets one back, with a shift of at most 14",
			Run: func(e *Env) {
				_, _, sa := e.openSYN(FullOpts, 1)
				o := sa.Opts()
				if o.WScale < 0 {
					e.Errorf("SYN-ACK has no window scale option")
				} else if o.WScale > 14 {
					e.Errorf("window scale shift %d, over 14", o.WScale)
				}
				e.Note("window scale %d", o.WScale)
			},
		},
		Case{
			Name:  "tcp-synack-sack-permitted",
			RFC:   "RFC 2018 §2 (SACK-Permitted in the SYN-ACK when offered in the SYN)",
			Title: "a SYN offering SACK gets SACK-permitted back",
			Run: func(e *Env) {
				if _, _, sa := e.openSYN(FullOpts, 1); !sa.Opts().SACKOK {
					e.Errorf("SYN-ACK has no SACK-permitted option")
				}
			},
		},
		Case{
			Name:  "tcp-synack-timestamps",
			RFC:   "RFC 7323 §3.2 (TSecr echoes the SYN's TSval) / §4.3",
			Title: "a SYN with timestamps gets a SYN-ACK whose TSecr echoes its TSval; later segments carry timestamps",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 1)
				f.Offered = FullOpts
				f.TSVal = 424242
				f.Send(SYN, nil)
				sa := f.ExpectSYNACK()
				o := sa.Opts()
				if !o.TS {
					e.Fatalf("SYN-ACK has no timestamps option")
				}
				if o.TSE != 424242 {
					e.Errorf("SYN-ACK TSecr %d, want the SYN's TSval 424242", o.TSE)
				}
				f.Send(ACK, nil)
				c := e.Accept(l)
				e.Write(c, []byte("ts"))
				d := f.Expect("data", IsData)
				if od := d.Opts(); !od.TS {
					e.Errorf("data segment without timestamps")
				} else if od.TSE != f.TSVal-1 {
					e.Errorf("data TSecr %d, want the bench's last TSval %d", od.TSE, f.TSVal-1)
				}
			},
		},
		Case{
			Name:  "tcp-synack-no-unoffered-options",
			RFC:   "RFC 7323 §2.2, §3.2 (no window scale or timestamps in the SYN-ACK unless the SYN had them)",
			Title: "a SYN with only MSS gets a SYN-ACK without window scale and timestamps",
			Run: func(e *Env) {
				_, _, sa := e.openSYN(PlainOpts, 1)
				o := sa.Opts()
				if o.WScale >= 0 {
					e.Errorf("SYN-ACK has window scale %d, not offered", o.WScale)
				}
				if o.TS {
					e.Errorf("SYN-ACK has timestamps, not offered")
				}
				e.Note("SACK-permitted in the SYN-ACK: %v", o.SACKOK)
			},
		},
		Case{
			Name:  "tcp-syncookie-keeps-options",
			RFC:   "RFC 4987 §3.6 (SYN cookies) / RFC 7323 §3.2 (every segment after the SYN-ACK echoes its TSval) / RFC 2018 §2, §4",
			Title: "a listener answering with SYN cookies still offers window scale, SACK and timestamps to a SYN with timestamps, and the connection then uses SACK and timestamps",
			Needs: []Cap{CapSYNCookies},
			Setup: Setup{SYNCookies: true},
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 1000)
				f.Offered = FullOpts
				f.Send(SYN, nil)
				sa := f.ExpectSYNACK()
				o := sa.Opts()
				if !o.TS || !o.SACKOK || o.WScale < 0 {
					e.Fatalf("cookie SYN-ACK options: %s; want window scale, SACK-permitted and timestamps back", optString(sa.TCP))
				}
				e.Note("cookie SYN-ACK options: %s", optString(sa.TCP))
				f.Send(ACK, nil)
				c := e.Accept(l)
				data := Pattern(400, 41)
				s := f.SndNxt
				f.SendRaw(s+200, f.RcvNxt, ACK|PSH, data[200:])
				a := f.Expect("ACK with SACK", Has(ACK))
				ao := a.Opts()
				if b := ao.SACK; len(b) < 1 || b[0] != (Block{s + 200, s + 400}) {
					e.Errorf("out-of-order segment on a cookie connection: SACK %v, want first block {%d %d}", b, s+200, s+400)
				}
				if !ao.TS {
					e.Errorf("ACK on a cookie connection without timestamps")
				}
				f.SendRaw(s, f.RcvNxt, ACK|PSH, data[:200])
				f.SndNxt = s + 400
				f.ExpectAck(s + 400)
				if got := e.ReadAll(c, 400); !bytes.Equal(got, data) {
					e.Errorf("DUT read bytes out of order")
				}
			},
		},
		Case{
			Name:  "tcp-handshake-active",
			RFC:   "RFC 9293 §3.5 (three-way handshake), §3.7.1 (MSS in the SYN)",
			Title: "the DUT connects: a SYN with an MSS option; after the SYN-ACK it acknowledges ISS+1 and sends data",
			Run: func(e *Env) {
				c, f, syn := e.dutConnects(SockOpts{}, 0x77777777)
				so := syn.Opts()
				if so.MSS != e.Info.MTU-40 {
					e.Errorf("SYN MSS %d, want %d", so.MSS, e.Info.MTU-40)
				}
				e.Note("SYN options: %s", optString(syn.TCP))
				f.Accept(syn, FullOpts)
				a := f.Expect("ACK of the SYN-ACK", Has(ACK))
				if a.TCP.Ack != 0x77777778 || a.TCP.Seq != f.IRS+1 {
					e.Errorf("ACK seq %d ack %d, want seq %d ack %d", a.TCP.Seq, a.TCP.Ack, f.IRS+1, uint32(0x77777778))
				}
				e.WriteWhenConnected(c, []byte("hello"))
				if got := f.ReadData(5, true); string(got) != "hello" {
					e.Errorf("bench got %q", got)
				}
				e.CounterRose(CounterTCPActiveOpens, 1)
			},
		},
		Case{
			Name:  "tcp-data-in-syn",
			RFC:   "RFC 9293 §3.10.7.2 (LISTEN: data in a SYN may be queued or dropped, never delivered twice)",
			Title: "data in a SYN is either acknowledged by the SYN-ACK and delivered, or not acknowledged and taken when resent",
			Run: func(e *Env) {
				l := e.Listen(dutPort, SockOpts{})
				f := e.NewFlow(dutPort, 1000)
				f.Offered = PlainOpts
				data := []byte("data riding on the SYN")
				f.SendRaw(1000, 0, SYN, data)
				sa := f.Expect("SYN-ACK", Has(SYN|ACK))
				f.takeSYN(sa)
				switch sa.TCP.Ack {
				case 1001 + uint32(len(data)):
					e.Note("the SYN's data was acknowledged with the SYN")
					f.SndNxt = sa.TCP.Ack
					f.Send(ACK, nil)
				case 1001:
					e.Note("the SYN's data was not acknowledged: resent after the handshake")
					f.SndNxt = 1001
					f.Send(ACK, nil)
					f.SendData(data, 1000)
					f.ExpectAck(f.SndNxt)
				default:
					e.Fatalf("SYN-ACK acknowledges %d: neither the SYN (1001) nor SYN and data (%d)", sa.TCP.Ack, 1001+len(data))
				}
				c := e.Accept(l)
				if got := e.ReadAll(c, len(data)); !bytes.Equal(got, data) {
					e.Errorf("DUT read %q", got)
				}
				e.ExpectNoRead(c, "the data came once")
			},
		},
	)
}
