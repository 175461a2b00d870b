package faulttest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/udp"
)

// wireEnds are the addresses a crafted frame is built from: A's MAC and
// address (the sender), B's (the raw kind under test).
type wireEnds struct {
	srcMAC, dstMAC net.HardwareAddr
	src, dst       netip.AddrPort
}

// datagram is a well-formed frame from e.src to e.dst carrying payload.
func (e *wireEnds) datagram(payload []byte) []byte {
	return ether(e.dstMAC, e.srcMAC, 0x0800, ipv4(e.src.Addr(), e.dst.Addr(), 17, nil, udpSeg(e.src, e.dst, payload)))
}

// datagramTo is a well-formed frame from e.src to dst (at e.dstMAC)
// carrying goodPayload.
func (e *wireEnds) datagramTo(dst netip.AddrPort) []byte {
	return ether(e.dstMAC, e.srcMAC, 0x0800, ipv4(e.src.Addr(), dst.Addr(), 17, nil, udpSeg(e.src, dst, goodPayload)))
}

// ip returns the IPv4 packet inside a frame built by datagram (no tags).
func ip(f []byte) []byte { return f[14:] }

// badCase is one kind of broken frame.
type badCase struct {
	name  string
	frame func(e *wireEnds) []byte
	// prog is the xdp-prog counter the UDP XDP program counts the frame
	// in when it leaves it to the kernel ("pass_short"), or "" when it
	// redirects it to the socket.
	prog string
	// parse is udp.Parse's verdict on the frame (its counter name in
	// layer "udp"), or "ok" for a frame that must be delivered.
	parse string
	// payload is what a delivered frame carries.
	payload []byte
}

var goodPayload = []byte("good datagram, 32 bytes long....")

// edited is a frame built by datagram from goodPayload, then changed by
// edit.
func edited(edit func(f []byte)) func(e *wireEnds) []byte {
	return func(e *wireEnds) []byte {
		f := e.datagram(goodPayload)
		edit(f)
		return f
	}
}

// ipEdited is edited on the frame's IPv4 header, whose checksum is made
// right again afterwards: only the edited field is wrong.
func ipEdited(edit func(h []byte)) func(e *wireEnds) []byte {
	return edited(func(f []byte) {
		edit(ip(f))
		fixIPSum(ip(f))
	})
}

// badCases are the frames TestFaultMalformedFrames sends.
var badCases = []badCase{
	{name: "valid", prog: "", parse: "ok", payload: goodPayload,
		frame: func(e *wireEnds) []byte { return e.datagram(goodPayload) }},
	{name: "udp checksum none", prog: "", parse: "ok", payload: goodPayload,
		frame: edited(func(f []byte) { f[14+20+6], f[14+20+7] = 0, 0 })},
	{name: "short datagram padded to 60 bytes", prog: "", parse: "ok", payload: []byte("pad"),
		frame: func(e *wireEnds) []byte {
			f := e.datagram([]byte("pad"))
			return append(f, bytes.Repeat([]byte{0xee}, 60-len(f))...)
		}},
	{name: "ethernet header only", prog: "pass_short", parse: "short",
		frame: func(e *wireEnds) []byte { return e.datagram(goodPayload)[:14] }},
	{name: "truncated ipv4 header", prog: "pass_short", parse: "short",
		frame: func(e *wireEnds) []byte { return e.datagram(goodPayload)[:14+10] }},
	{name: "truncated udp header", prog: "pass_short", parse: "bad_total_len",
		frame: func(e *wireEnds) []byte { return e.datagram(goodPayload)[:14+20+4] }},
	{name: "ip options (ihl 6)", prog: "pass_ip_options", parse: "ip_options",
		frame: func(e *wireEnds) []byte {
			return ether(e.dstMAC, e.srcMAC, 0x0800, ipv4(e.src.Addr(), e.dst.Addr(), 17, []byte{1, 1, 1, 0}, udpSeg(e.src, e.dst, goodPayload)))
		}},
	{name: "ihl 4", prog: "pass_ip_options", parse: "bad_ihl",
		frame: ipEdited(func(h []byte) { h[0] = 0x44 })},
	{name: "ihl 15 beyond the frame", prog: "pass_ip_options", parse: "short",
		frame: func(e *wireEnds) []byte {
			f := e.datagram(nil)
			ip(f)[0] = 0x4f
			fixIPSum(ip(f))
			return f
		}},
	{name: "ip version 6 in an ipv4 frame", prog: "pass_ip_options", parse: "bad_version",
		frame: ipEdited(func(h []byte) { h[0] = 0x65 })},
	{name: "ip total length beyond the frame", prog: "", parse: "bad_total_len",
		frame: ipEdited(func(h []byte) { binary.BigEndian.PutUint16(h[2:], uint16(len(h)+100)) })},
	{name: "ip total length short of the frame", prog: "", parse: "bad_total_len",
		frame: ipEdited(func(h []byte) { binary.BigEndian.PutUint16(h[2:], uint16(len(h)-10)) })},
	{name: "ip total length below the headers", prog: "", parse: "bad_total_len",
		frame: ipEdited(func(h []byte) { binary.BigEndian.PutUint16(h[2:], 20) })},
	{name: "udp length beyond the packet", prog: "", parse: "bad_udp_len",
		frame: edited(func(f []byte) { binary.BigEndian.PutUint16(ip(f)[20+4:], uint16(8+len(goodPayload)+16)) })},
	{name: "udp length below its header", prog: "", parse: "bad_udp_len",
		frame: edited(func(f []byte) { binary.BigEndian.PutUint16(ip(f)[20+4:], 4) })},
	{name: "first fragment (MF)", prog: "pass_fragment", parse: "fragment",
		frame: ipEdited(func(h []byte) { binary.BigEndian.PutUint16(h[6:], 0x2000) })},
	{name: "later fragment (offset)", prog: "pass_fragment", parse: "fragment",
		frame: ipEdited(func(h []byte) { binary.BigEndian.PutUint16(h[6:], 100) })},
	{name: "802.1Q tag", prog: "pass_not_ipv4", parse: "vlan",
		frame: func(e *wireEnds) []byte {
			return ether(e.dstMAC, e.srcMAC, 0x0800, ip(e.datagram(goodPayload)), 0x8100, 7)
		}},
	{name: "802.1ad double tag", prog: "pass_not_ipv4", parse: "vlan",
		frame: func(e *wireEnds) []byte {
			return ether(e.dstMAC, e.srcMAC, 0x0800, ip(e.datagram(goodPayload)), 0x88a8, 5, 0x8100, 7)
		}},
	{name: "bad ip checksum", prog: "", parse: "bad_ip_checksum",
		frame: edited(func(f []byte) { ip(f)[10] ^= 0x5a })},
	{name: "bad udp checksum", prog: "", parse: "bad_udp_checksum",
		frame: edited(func(f []byte) { ip(f)[20+6] ^= 0x5a })},
	{name: "payload damaged after the checksum", prog: "", parse: "bad_udp_checksum",
		frame: edited(func(f []byte) { f[len(f)-1] ^= 0x01 })},
	{name: "other udp port", prog: "pass_other_port", parse: "other_port",
		frame: func(e *wireEnds) []byte {
			return e.datagramTo(netip.AddrPortFrom(e.dst.Addr(), e.dst.Port()+1))
		}},
	{name: "other ip address", prog: "", parse: "other_addr",
		frame: func(e *wireEnds) []byte {
			a := e.dst.Addr().As4()
			a[3] ^= 0x40
			return e.datagramTo(netip.AddrPortFrom(netip.AddrFrom4(a), e.dst.Port()))
		}},
	{name: "other mac", prog: "", parse: "other_mac",
		frame: edited(func(f []byte) { copy(f, []byte{0x02, 0x00, 0x5e, 0x10, 0x20, 0x30}) })},
	{name: "broadcast mac", prog: "", parse: "other_mac",
		frame: edited(func(f []byte) { copy(f, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) })},
	{name: "tcp syn+fin", prog: "pass_other_proto", parse: "other_proto",
		frame: func(e *wireEnds) []byte { return e.tcp(tcpSYN | tcpFIN) }},
	{name: "tcp syn+rst", prog: "pass_other_proto", parse: "other_proto",
		frame: func(e *wireEnds) []byte { return e.tcp(tcpSYN | tcpRST) }},
	{name: "tcp without flags", prog: "pass_other_proto", parse: "other_proto",
		frame: func(e *wireEnds) []byte { return e.tcp(0) }},
	{name: "tcp fin+psh+urg (xmas)", prog: "pass_other_proto", parse: "other_proto",
		frame: func(e *wireEnds) []byte { return e.tcp(tcpFIN | tcpPSH | tcpURG) }},
	{name: "tcp data without ack", prog: "pass_other_proto", parse: "other_proto",
		frame: func(e *wireEnds) []byte { return e.tcp(tcpPSH) }},
}

// tcp is a TCP segment from e.src to e.dst with flags and a payload.
func (e *wireEnds) tcp(flags byte) []byte {
	return ether(e.dstMAC, e.srcMAC, 0x0800, ipv4(e.src.Addr(), e.dst.Addr(), 6, nil, tcpSeg(e.src, e.dst, flags, goodPayload)))
}

// TestFaultMalformedCasesParse checks the table of TestFaultMalformedFrames
// against udp.Parse, without privileges: each frame gets the verdict the
// table says, so the table can serve as the expectation on the wire.
func TestFaultMalformedCasesParse(t *testing.T) {
	e := &wireEnds{srcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xa}, dstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xb},
		src: netip.MustParseAddrPort("198.18.7.1:40000"), dst: netip.MustParseAddrPort("198.18.7.2:5000")}
	f := &udp.Filter{MAC: e.dstMAC, Addr: e.dst.Addr(), Port: e.dst.Port()}
	for _, c := range badCases {
		d, why := udp.Parse(c.frame(e), f)
		if why.String() != c.parse {
			t.Errorf("%s: udp.Parse says %s, the table %s", c.name, why, c.parse)
		}
		if why == udp.OK && !bytes.Equal(d.Payload, c.payload) {
			t.Errorf("%s: payload %q, want %q", c.name, d.Payload, c.payload)
		}
	}
}

// rawSender is an AF_PACKET socket that writes whole Ethernet frames on
// one interface.
type rawSender struct {
	fd      int
	ifindex int
}

// newRawSender opens an AF_PACKET socket in h's namespace (it receives
// nothing: protocol 0) that writes on h's veth end.
func newRawSender(t testing.TB, h *testhost.Host) *rawSender {
	t.Helper()
	s := &rawSender{fd: -1, ifindex: h.Index}
	if err := h.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("AF_PACKET socket: %w", err)
		}
		s.fd = fd
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(s.fd) })
	return s
}

func (s *rawSender) send(t testing.TB, frame []byte) {
	t.Helper()
	to := &unix.SockaddrLinklayer{Ifindex: s.ifindex, Halen: 6}
	copy(to.Addr[:], frame[:6])
	if err := unix.Sendto(s.fd, frame, 0, to); err != nil {
		t.Fatalf("send a %d-byte frame: %v", len(frame), err)
	}
}

// TestFaultMalformedFrames writes each frame of badCases three times with
// an AF_PACKET socket from A's namespace onto the veth of a datagram server
// of a raw kind on B, then a good marker datagram, and reads until the
// marker arrives. The good frames of the table are delivered intact; no
// broken one is delivered; and each is counted where the table says: on
// kind xdp, in the XDP program's counter of the reason it left the frame
// to the kernel (pass_short, pass_ip_options, pass_fragment, pass_not_ipv4,
// pass_other_proto, pass_other_port), or else, redirected to the socket,
// in udp.Parse's reason counter and the Stats field of its class
// (RxMalformed, RxBadChecksum, RxFiltered). Nothing panics, and a thousand
// good datagrams afterwards all arrive. The userspace TCP kinds get the
// frames of streamBadCases instead (see malformedStream).
func TestFaultMalformedFrames(t *testing.T) {
	var raw []string
	for _, kind := range testKinds {
		if dgramio.Kind(kind).IsRaw() {
			raw = append(raw, kind)
		}
	}
	forEachKind(t, raw, func(t *testing.T, kind string, p *testhost.Pair) {
		if isStream(kind) {
			malformedStream(t, kind, p)
		} else {
			malformedDatagram(t, kind, p)
		}
	})
}

func malformedDatagram(t *testing.T, kind string, p *testhost.Pair) {
	onThread(t, p.B, func() error {
		srv, err := openHere(serverConfig(kind, p.B))
		if err != nil {
			return err
		}
		defer srv.Close()
		e := &wireEnds{srcMAC: p.A.MAC, dstMAC: p.B.MAC,
			src: netip.AddrPortFrom(p.A.Addr, 40000), dst: netip.AddrPortFrom(p.B.Addr, port)}
		raw := newRawSender(t, p.A)
		x := newMarkerRun(t, kind, srv, raw, e.src, false, func(m []byte) { raw.send(t, e.datagram(m)) })
		x.exchange() // the path works

		st := srv.Stats()
		_, hasProg := st.Counter("xdp-prog", "redirected")
		for _, c := range badCases {
			s0 := srv.Stats()
			f := c.frame(e)
			got := x.exchange(f, f, f)
			checkBadCase(t, c, hasProg, s0, srv.Stats(), got)
		}

		// The path still works: a thousand good datagrams, all delivered.
		var got [][]byte
		for i := 0; i < 1000; i += 50 {
			var good [][]byte
			for j := i; j < i+50; j++ {
				good = append(good, e.datagram([]byte(afterMsg(j))))
			}
			got = append(got, x.exchange(good...)...)
		}
		checkAfter(t, "good datagrams delivered after the broken ones", got, 1000)
		t.Logf("server counters: %s", allCounters(srv.Stats()))
		x.finish()
		return nil
	})
}

// copies is how many times the malformed tests write each bad frame.
const copies = 3

// checkBadCase checks what the server did with copies of c's frame between
// the counters s0 and s1: on a kind with an XDP program that leaves the
// frame to the kernel, the program's counter of c.prog grew by copies;
// otherwise udp.Parse's counter of c.parse and the Stats field of its class
// did. got is what the server delivered: c.payload copies times for a good
// frame, nothing for a broken one.
func checkBadCase(t testing.TB, c badCase, hasProg bool, s0, s1 dgramio.Stats, got [][]byte) {
	t.Helper()
	d := func(layer, name string) uint64 {
		a, _ := s0.Counter(layer, name)
		b, _ := s1.Counter(layer, name)
		return b - a
	}
	classes := map[string]uint64{
		"delivered": s1.RxDelivered - s0.RxDelivered - 1, // not the marker
		"malformed": s1.RxMalformed - s0.RxMalformed,
		"checksum":  s1.RxBadChecksum - s0.RxBadChecksum,
		"filtered":  s1.RxFiltered - s0.RxFiltered,
	}
	want := map[string]uint64{"delivered": 0, "malformed": 0, "checksum": 0, "filtered": 0}
	where := ""
	if hasProg && c.prog != "" {
		where = "xdp-prog." + c.prog
		if n := d("xdp-prog", c.prog); n != copies && !(c.prog == "pass_not_ipv4" && n > copies) {
			t.Errorf("%s: xdp-prog %s grew by %d, want %d", c.name, c.prog, n, copies)
		}
	} else {
		where = "udp." + c.parse
		if c.parse != "ok" {
			if n := d("udp", c.parse); n != copies {
				t.Errorf("%s: udp %s grew by %d, want %d", c.name, c.parse, n, copies)
			}
		}
		want[className(parseReason(c.parse).Class())] = copies
	}
	for k, v := range want {
		if classes[k] != v {
			t.Errorf("%s: %s grew by %d, want %d", c.name, k, classes[k], v)
		}
	}
	if c.parse == "ok" {
		if len(got) != copies {
			t.Errorf("%s: %d of %d delivered", c.name, len(got), copies)
		}
		for _, g := range got {
			if !bytes.Equal(g, c.payload) {
				t.Errorf("%s: delivered %q, want %q", c.name, g, c.payload)
			}
		}
	} else if len(got) != 0 {
		t.Errorf("%s: %d broken frames delivered: %q", c.name, len(got), got)
	}
	t.Logf("%-36s → %s", c.name, where)
}

// markerRun writes crafted frames onto a server's wire, then a marker by a
// path that works, and collects what the server delivered before the
// marker: what got through of the crafted frames. It runs on the server's
// thread (onThread), and times every Rx and Flush for the watchdog.
type markerRun struct {
	t    testing.TB
	srv  dgramio.Backend
	raw  *rawSender
	from netip.AddrPort // the sender every delivery must name
	// flush makes every round call Flush too: a stream server answers
	// the handshake and acknowledges only when driven.
	flush bool
	// send sends marker m by the working path.
	send func(m []byte)
	n    int // markers sent
	pkts []dgramio.Packet
	rc   calls
	errs errLog
}

func newMarkerRun(t testing.TB, kind string, srv dgramio.Backend, raw *rawSender, from netip.AddrPort, flush bool, send func(m []byte)) *markerRun {
	x := &markerRun{t: t, srv: srv, raw: raw, from: from, flush: flush, send: send, pkts: make([]dgramio.Packet, 64)}
	x.rc.name = kind + " server"
	watch(t, &x.rc)
	return x
}

// exchange writes frames, sends the next marker and returns copies of what
// the server delivered before it. It fails the test (fatalf) when the
// marker does not arrive within 20 seconds.
func (x *markerRun) exchange(frames ...[]byte) [][]byte {
	for _, f := range frames {
		x.raw.send(x.t, f)
	}
	x.n++
	m := []byte(fmt.Sprintf("marker %d", x.n))
	x.send(m)
	var got [][]byte
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); {
		n := x.poll()
		for _, pk := range x.pkts[:n] {
			if bytes.Equal(pk.Data, m) {
				return got
			}
			if pk.From != x.from {
				x.t.Errorf("a message from %v, want %v", pk.From, x.from)
			}
			got = append(got, bytes.Clone(pk.Data))
		}
		if n == 0 {
			time.Sleep(200 * time.Microsecond)
		}
	}
	fatalf(x.t, "marker %d did not arrive; server errors: %v", x.n, x.errs.String())
	return nil
}

// poll is one round of the server's loop: Rx, then Flush when x.flush.
func (x *markerRun) poll() int {
	x.rc.begin(opRx)
	n, err := x.srv.Rx(x.pkts)
	x.rc.end()
	if err != nil {
		x.errs.add(err)
	}
	if x.flush {
		x.rc.begin(opFlush)
		if err := x.srv.Flush(); err != nil {
			x.errs.add(err)
		}
		x.rc.end()
	}
	return n
}

// finish checks that no call took too long and that the server reported
// no error.
func (x *markerRun) finish() {
	x.t.Logf("%v", &x.rc)
	x.rc.check(x.t)
	if x.errs.count() != 0 {
		x.t.Errorf("the server reported errors: %v", x.errs.String())
	}
}

// afterMsg is message i of what the malformed tests send once the broken
// frames are through.
func afterMsg(i int) string { return fmt.Sprintf("after %04d", i) }

// checkAfter checks that got holds the n messages afterMsg(0) to
// afterMsg(n-1), in order; what names them in the error.
func checkAfter(t testing.TB, what string, got [][]byte, n int) {
	t.Helper()
	if len(got) != n {
		t.Errorf("%d of %d %s", len(got), n, what)
	}
	for i := range got {
		if want := afterMsg(i); string(got[i]) != want {
			t.Errorf("message %d of the %s is %q, want %q", i, what, got[i], want)
			break
		}
	}
}

// parseReason returns the udp.Reason named name.
func parseReason(name string) udp.Reason {
	for r := udp.OK; r < 64; r++ {
		if r.String() == name {
			return r
		}
	}
	panic("no udp.Reason " + name)
}

func className(c udp.Class) string {
	return [...]string{"delivered", "filtered", "malformed", "checksum"}[c]
}
