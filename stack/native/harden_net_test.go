package native

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/arp"
)

// The neighbour cache, reassembly, ICMP and congestion state against a
// hostile link and a long life (docs/hardening-net.md).

// peerIP is the i-th address of 198.18.0.0/16 past addrA and addrB.
func peerIP(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 18, byte(1 + i/250), byte(1 + i%250)})
}

// Linux's neighbour garbage collection (gc_thresh3, forced GC of
// unreferenced entries): a cache filled by the requests of many senders,
// each making a fresh entry (RFC 826's merge rule), does not lock. A
// Dial to a new neighbour still asks for it, and learns the answer.
func TestARPFullCacheEvictsLinuxNeighGC(t *testing.T) {
	b := newBench(t, Options{PrefixLen: 16})
	for i := range 3 * DefaultARPEntries {
		mac := net.HardwareAddr{0x02, 0, 0, 0, byte(i >> 8), byte(i)}
		b.send(arp.AppendRequest(nil, mac, peerIP(i+10), addrA))
		b.recv()
	}
	if got := len(b.e.arp.buf); got > DefaultARPEntries {
		t.Fatalf("%d neighbours held, more than ARPEntries %d", got, DefaultARPEntries)
	}
	if got := counterOf(t, b.e, "arp_evicted"); got == 0 {
		t.Error("arp_evicted 0 after more senders than the cache holds")
	}
	c, err := b.e.Dial(netip.AddrPortFrom(addrB, 80), 0)
	if err != nil {
		t.Fatal(err)
	}
	b.e.Flush()
	asked := false
	for _, f := range b.recv() {
		m, err := arp.ParseARP(f)
		asked = asked || err == nil && m.Op == arp.OpRequest && m.TargetIP == addrB
	}
	if !asked || c.Err() != nil {
		t.Fatalf("Dial with the cache full: asked %v, err %v; want a request and no error", asked, c.Err())
	}
	b.send(arp.AppendReply(nil, b.pb.MAC(), addrB, b.pa.MAC(), addrA))
	syn := false
	for _, f := range b.recv() {
		syn = syn || binary.BigEndian.Uint16(f[12:]) == etherIPv4 && [6]byte(f[0:6]) == [6]byte(b.pb.MAC())
	}
	if !syn {
		t.Fatal("the answer was not learnt: no SYN to the neighbour")
	}
}

// Linux learns no neighbour from TCP (RFC 826's merge is ARP's own): a
// SYN neither makes an entry for its source nor rewrites one, whatever
// its frame's source MAC, and the SYN-ACK goes back to that frame's MAC.
func TestSYNDoesNotWriteARPCacheLinux(t *testing.T) {
	b := newBench(t, Options{})
	if _, err := b.e.Listen(80, 0); err != nil {
		t.Fatal(err)
	}
	owner := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0b}
	b.send(arp.AppendRequest(nil, owner, addrB, addrA)) // B's owner asks: an entry at its MAC
	b.recv()
	syn := func(src netip.Addr, port uint16) {
		f := b.datagram(protoTCP, 9, 0x4000, make([]byte, tcpLen))
		copy(f[ethLen+12:], src.AsSlice())
		f[ethLen+10], f[ethLen+11] = 0, 0
		binary.BigEndian.PutUint16(f[ethLen+10:], fold(csum(0, f[ethLen:ethLen+ipLen])))
		tc := f[ethLen+ipLen:]
		putTCP(tc, port, 80, 1000, 0, tcpLen, flagSYN, 65535)
		binary.BigEndian.PutUint16(tc[16:], fold(csum(pseudo(src.As4(), addrA.As4(), protoTCP, tcpLen), tc)))
		b.send(f) // from port B's MAC, which is not the owner's
	}
	syn(addrB, 5000)
	fs := b.recv()
	if len(fs) != 1 || [6]byte(fs[0][0:6]) != [6]byte(b.pb.MAC()) {
		t.Fatalf("%d frames; want the SYN-ACK to the SYN's frame source MAC", len(fs))
	}
	if en := b.e.arp.get(addrB.As4()); en == nil || en.mac != [6]byte(owner) {
		t.Fatalf("B's entry %+v after a SYN from another MAC, want the owner's %v", en, owner)
	}
	syn(peerIP(40), 5001)
	if en := b.e.arp.get(peerIP(40).As4()); en != nil {
		t.Fatalf("a SYN made a neighbour entry %+v", en)
	}
}

// RFC 4861 §7.3.2–7.3.3 (Linux's neighbour states for ARP): an answer
// keeps a neighbour REACHABLE for ARPReachable; then it is STALE, still
// used, and the next Dial through it sends a unicast probe to its MAC,
// whose answer makes it REACHABLE again.
func TestARPStaleNeighbourReprobedRFC4861Sec7_3(t *testing.T) {
	o := Options{MaxConns: 8}
	w := newWorld(t, memio.Options{}, o, o)
	w.connect(7000)
	en := w.a.arp.get(addrB.As4())
	if en == nil || en.state != nudReachable {
		t.Fatalf("B's entry %+v after the handshake, want REACHABLE", en)
	}
	w.clk.Advance(DefaultARPReachable + time.Second)
	w.a.tick()
	c, err := w.a.Dial(netip.AddrPortFrom(addrB, 7000), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.a.Flush(); err != nil {
		t.Fatal(err)
	}
	var probe, syn bool
	w.pb.RxFrames(64, func(f []byte) {
		if m, err := arp.ParseARP(f); err == nil {
			probe = probe || m.Op == arp.OpRequest && m.TargetIP == addrB && m.EthDst == [6]byte(w.pb.MAC())
			return
		}
		syn = syn || binary.BigEndian.Uint16(f[12:]) == etherIPv4
	})
	if !probe || !syn {
		t.Fatalf("Dial through a STALE neighbour: unicast probe %v, SYN %v; want both", probe, syn)
	}
	if en.state != nudProbe {
		t.Fatalf("state %d after the probe, want PROBE", en.state)
	}
	w.pb.TxFrame(arp.AppendReply(nil, w.pb.MAC(), addrB, w.pa.MAC(), addrA))
	w.pb.Kick()
	w.a.Poll(64)
	if en.state != nudReachable || counterOf(t, w.a, "arp_probes") != 1 {
		t.Fatalf("state %d, arp_probes %d after the answer; want REACHABLE after one probe", en.state, counterOf(t, w.a, "arp_probes"))
	}
	c.Abort()
}

// A gateway failover (RFC 826's merge, RFC 5227 §3 announcements; Linux
// takes gratuitous ARP for neighbours it holds): a gratuitous ARP gives
// the neighbour a new MAC, and an established connection's next segment
// goes there; an unanswered retransmission re-probes the neighbour, and
// an answer from a new MAC moves the connection too.
func TestConnectionFollowsNeighbourMACLinux(t *testing.T) {
	o := Options{MaxConns: 8}
	w := newWorld(t, memio.Options{}, o, o)
	ca, _ := w.connect(7000)
	next := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x77}
	w.pb.TxFrame(arp.AppendRequest(nil, next, addrB, addrB)) // gratuitous
	w.pb.Kick()
	w.a.Poll(64)
	ca.Write([]byte("after the failover"))
	if err := w.a.Flush(); err != nil {
		t.Fatal(err)
	}
	var to [6]byte
	w.pb.RxFrames(64, func(f []byte) { to = [6]byte(f[0:6]) })
	if to != [6]byte(next) {
		t.Fatalf("segment to %x after a gratuitous ARP, want the new MAC %v", to, next)
	}
	if counterOf(t, w.a, "arp_gratuitous") != 1 || counterOf(t, w.a, "arp_mac_changed") != 1 {
		t.Error("the gratuitous ARP or the MAC change was not counted")
	}

	// The neighbour goes silent; after ARPReachable the retransmission
	// of the timeout probes it (a tail loss probe goes first, at the
	// RTO's time: RFC 8985 §7.2). A's timers only: B is not polled.
	w.clk.Advance(DefaultARPReachable + time.Second)
	probes := counterOf(t, w.a, "arp_probes")
	for i := 0; i < 20 && counterOf(t, w.a, "arp_probes") == probes; i++ {
		if at, ok := w.a.NextTimer(); ok && at.After(w.clk.Now()) {
			w.clk.Advance(at.Sub(w.clk.Now()))
		}
		w.a.Poll(64)
		if err := w.a.Flush(); err != nil {
			t.Fatal(err)
		}
		w.pb.RxFrames(64, func([]byte) {})
	}
	if counterOf(t, w.a, "arp_probes") == probes {
		t.Fatal("retransmissions after a timeout never probed the neighbour")
	}
	third := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x78}
	w.pb.TxFrame(arp.AppendReply(nil, third, addrB, w.pa.MAC(), addrA))
	w.pb.Kick()
	w.a.Poll(64)
	ca.sndNxt = ca.sndUna // what the next timeout does: send again now
	w.a.markDirty(ca)
	if err := w.a.Flush(); err != nil {
		t.Fatal(err)
	}
	to = [6]byte{}
	w.pb.RxFrames(64, func(f []byte) { to = [6]byte(f[0:6]) })
	if to != [6]byte(third) {
		t.Fatalf("segment to %x after the probe's answer, want %v", to, third)
	}
}

// The connections waiting for a neighbour are forgotten when they close:
// Dials closed while their ARP request was in flight leave nothing that
// later ARP events walk.
func TestARPWaitForgetsClosedDials(t *testing.T) {
	b := newBench(t, Options{})
	for range 100 {
		c, err := b.e.Dial(netip.MustParseAddrPort("198.18.0.9:80"), 0)
		if err != nil {
			t.Fatal(err)
		}
		b.e.Flush()
		c.Close()
	}
	if n := len(b.e.arpWait); n > 1 {
		t.Fatalf("%d connections listed as waiting for ARP after 100 closed Dials, want at most 1", n)
	}
	for range DefaultARPRetries + 1 {
		b.clk.Advance(DefaultARPTimeout)
		b.e.Poll(1)
	}
	if n := len(b.e.arpWait); n != 0 {
		t.Fatalf("%d waiting after the request failed", n)
	}
}

// frags cuts payload into fragments of size bytes (a multiple of 8) of
// datagram id.
func (b *bench) frags(proto uint8, id uint16, payload []byte, size int) [][]byte {
	var out [][]byte
	for off := 0; off < len(payload); off += size {
		end := min(off+size, len(payload))
		fl := uint16(off / 8)
		if end < len(payload) {
			fl |= 0x2000
		}
		out = append(out, b.datagram(proto, id, fl, payload[off:end]))
	}
	return out
}

// echoReplies counts the echo replies among the frames the engine sent.
func (b *bench) echoReplies() int {
	n := 0
	for _, f := range b.recv() {
		if len(f) > ethLen+ipLen && f[ethLen+9] == protoICMP && f[ethLen+ipLen] == icmpEchoReply {
			n++
		}
	}
	return n
}

// Linux since the FragmentSmack fixes (CVE-2018-5391), as RFC 5722 §4
// asks for IPv6: a fragment that overlaps another drops the whole
// datagram, counted; an exact duplicate (RFC 5722 erratum 3089) is
// dropped alone and the datagram completes.
func TestOverlappingFragmentsDropped_RFC5722Linux(t *testing.T) {
	b := newBench(t, Options{})
	req := echoRequest(7, randBytes(3, 1000))
	fs := b.frags(protoICMP, 1, req, 400)
	b.send(fs[0])
	// Bytes 200..600 again, the same bytes: consistent, still an overlap.
	over := b.datagram(protoICMP, 1, 0x2000|uint16(200/8), req[200:600])
	b.send(over)
	b.send(fs[1])
	b.send(fs[2])
	if n := b.echoReplies(); n != 0 {
		t.Fatalf("%d echo replies to a datagram with overlapping fragments, want 0", n)
	}
	if got := counterOf(t, b.e, "ip_reassembly_overlaps"); got != 1 {
		t.Fatalf("ip_reassembly_overlaps %d, want 1", got)
	}
	fs = b.frags(protoICMP, 2, req, 400)
	b.send(fs[0])
	b.send(fs[0])
	b.send(fs[1])
	b.send(fs[2])
	if n := b.echoReplies(); n != 1 {
		t.Fatalf("%d echo replies to a datagram with a duplicated fragment, want 1", n)
	}
	if got := counterOf(t, b.e, "ip_fragment_duplicates"); got != 1 {
		t.Errorf("ip_fragment_duplicates %d, want 1", got)
	}
}

// Linux's ipfrag_high_thresh: reassembly is bounded by memory and a new
// datagram evicts the oldest incomplete one, so first fragments that
// never complete (one every few seconds, from anyone) cannot block it;
// RFC 791 §3.2: an incomplete datagram is given up after the timeout.
func TestReassemblyEvictsOldestLinux(t *testing.T) {
	b := newBench(t, Options{})
	for id := range 200 {
		b.send(b.datagram(protoICMP, uint16(100+id), 0x2000, make([]byte, 8)))
	}
	if got := counterOf(t, b.e, "ip_reassembly_evicted"); got == 0 {
		t.Error("ip_reassembly_evicted 0 after more datagrams than slots")
	}
	req := echoRequest(7, randBytes(4, 1000))
	for _, f := range b.frags(protoICMP, 1, req, 400) {
		b.send(f)
	}
	if n := b.echoReplies(); n != 1 {
		t.Fatalf("%d echo replies with the slots full of stale first fragments, want 1", n)
	}
	b.clk.Advance(DefaultReassemblyTimeout + time.Second)
	b.e.Poll(1)
	if b.e.reasmUsed != 0 {
		t.Fatalf("%d slots still used after the timeout", b.e.reasmUsed)
	}
}

// Linux's icmp_msgs_per_sec and icmp_msgs_burst (RFC 1812 §4.3.2.8): a
// flood of datagrams the engine answers with unreachables gets ICMPBurst
// answers at once, then ICMPRateLimit a second; the rest are counted.
func TestICMPUnreachableRateLimitedLinux(t *testing.T) {
	b := newBench(t, Options{})
	unreach := func() int {
		n := 0
		for _, f := range b.recv() {
			if len(f) > ethLen+ipLen && f[ethLen+9] == protoICMP && f[ethLen+ipLen] == icmpUnreachable {
				n++
			}
		}
		return n
	}
	got := 0
	for range 200 {
		b.send(b.datagram(protoUDP, 5, 0, make([]byte, 16)))
		got += unreach()
	}
	if got != DefaultICMPBurst {
		t.Fatalf("%d unreachables for 200 datagrams at once, want the burst %d", got, DefaultICMPBurst)
	}
	if n := counterOf(t, b.e, "icmp_unreachable_limited"); n != 200-DefaultICMPBurst {
		t.Errorf("icmp_unreachable_limited %d, want %d", n, 200-DefaultICMPBurst)
	}
	b.clk.Advance(10 * time.Millisecond) // 10 more at 1000 a second
	got = 0
	for range 20 {
		b.send(b.datagram(protoUDP, 5, 0, make([]byte, 16)))
		got += unreach()
	}
	if got != 10 {
		t.Errorf("%d unreachables 10 ms later, want 10", got)
	}
}

// Linux drops a datagram whose source is our own address (a martian
// source): it is a spoof or a loop, never a peer.
func TestOwnSourceAddressDroppedLinux(t *testing.T) {
	b := newBench(t, Options{})
	f := b.datagram(protoICMP, 1, 0, echoRequest(1, []byte("x")))
	copy(f[ethLen+12:], addrA.AsSlice())
	f[ethLen+10], f[ethLen+11] = 0, 0
	binary.BigEndian.PutUint16(f[ethLen+10:], fold(csum(0, f[ethLen:ethLen+ipLen])))
	b.send(f)
	if fs := b.recv(); len(fs) != 0 {
		t.Fatalf("%d answers to a datagram from our own address", len(fs))
	}
	if got := counterOf(t, b.e, "ip_source_is_ours"); got != 1 {
		t.Errorf("ip_source_is_ours %d, want 1", got)
	}
}

// fragNeeded builds ICMP "fragmentation needed" (RFC 1191 §4) from B to
// A quoting a segment of c with sequence number seq, next-hop MTU mtu.
func fragNeededFrame(w *world, c *Conn, seq uint32, mtu uint16) []byte {
	q := make([]byte, ipLen+8)
	putIPv4(q, 1, protoTCP, w.a.addr, c.raddr, 1500)
	binary.BigEndian.PutUint16(q[ipLen:], c.lport)
	binary.BigEndian.PutUint16(q[ipLen+2:], c.rport)
	binary.BigEndian.PutUint32(q[ipLen+4:], seq)
	m := make([]byte, 8+len(q))
	m[0], m[1] = icmpUnreachable, icmpFragNeeded
	binary.BigEndian.PutUint16(m[6:], mtu)
	copy(m[8:], q)
	binary.BigEndian.PutUint16(m[2:], fold(csum(0, m)))
	f := make([]byte, ethLen+ipLen+len(m))
	putEth(f, w.a.mac, w.b.mac, etherIPv4)
	putIPv4(f[ethLen:], 2, protoICMP, w.b.addr, w.a.addr, ipLen+len(m))
	copy(f[ethLen+ipLen:], m)
	return f
}

// RFC 1191 §3–4: "fragmentation needed" lowers the connection's segment
// size to the next-hop MTU and what was in flight goes again at the new
// size; RFC 5927 §5.1: only when the quoted sequence number is of data
// in flight, which a blind attacker does not know; never below Linux's
// min_pmtu (552).
func TestFragNeededLowersMSS_RFC1191RFC5927(t *testing.T) {
	o := Options{MaxConns: 4}
	w := newWorld(t, memio.Options{}, o, o)
	ca, _ := w.connect(7000)
	ca.Write(make([]byte, 20000))
	if err := w.a.Flush(); err != nil {
		t.Fatal(err)
	}
	w.pb.RxFrames(64, func([]byte) {}) // lost beyond the router
	before := ca.peerMSS
	w.a.input(fragNeededFrame(w, ca, ca.sndMax+5000, 1000)) // not in flight: forged
	if ca.peerMSS != before || counterOf(t, w.a, "icmp_frag_needed_ignored") != 1 {
		t.Fatalf("a quote outside the flight changed the MSS to %d (ignored %d)", ca.peerMSS, counterOf(t, w.a, "icmp_frag_needed_ignored"))
	}
	w.a.input(fragNeededFrame(w, ca, ca.sndUna, 1000))
	if ca.peerMSS != 1000-40 || ca.sndNxt != ca.sndUna {
		t.Fatalf("MSS %d, SND.NXT-SND.UNA %d after fragmentation needed at MTU 1000; want 960 and a resend", ca.peerMSS, ca.sndNxt-ca.sndUna)
	}
	if err := w.a.Flush(); err != nil {
		t.Fatal(err)
	}
	sent := 0
	w.pb.RxFrames(64, func(f []byte) {
		sent++
		if n := int(binary.BigEndian.Uint16(f[ethLen+2:])); n > 1000 {
			t.Errorf("a %d-byte datagram after the path MTU dropped to 1000", n)
		}
	})
	if sent == 0 {
		t.Fatal("nothing was sent again")
	}
	w.a.input(fragNeededFrame(w, ca, ca.sndUna, 100))
	if ca.peerMSS != minPMTU-40 {
		t.Fatalf("MSS %d after an MTU of 100, want the floor %d", ca.peerMSS, minPMTU-40)
	}
	if counterOf(t, w.a, "tcp_pmtu_lowered") != 2 {
		t.Errorf("tcp_pmtu_lowered %d, want 2", counterOf(t, w.a, "tcp_pmtu_lowered"))
	}
	w.until(time.Minute, "the data to arrive", func() bool { return ca.sndUna == ca.sndMax })
}

// exchange runs n request/answer exchanges of size bytes between ca and
// cb.
func exchange(t *testing.T, w *world, ca, cb *Conn, n, size int) {
	t.Helper()
	buf := make([]byte, size)
	for range n {
		ca.Write(buf)
		got := 0
		w.until(10*time.Second, "request", func() bool {
			k, _ := cb.Read(buf)
			got += k
			return got == size
		})
		cb.Write(buf)
		got = 0
		w.until(10*time.Second, "answer", func() bool {
			k, _ := ca.Read(buf)
			got += k
			return got == size
		})
	}
}

// RFC 7661 §4.1, RFC 5681 §3.1 ("when cwnd is fully utilized"), Linux's
// tcp_is_cwnd_limited: cwnd grows only while the sender uses it. Small
// requests and answers never fill the initial window: it stays.
func TestCwndGrowsOnlyWhenUsedRFC7661(t *testing.T) {
	o := Options{MaxConns: 4}
	w := newWorld(t, memio.Options{}, o, o)
	ca, cb := w.connect(7000)
	iw := ca.cwnd
	exchange(t, w, ca, cb, 2000, 100)
	if ca.cwnd != iw || cb.cwnd != iw {
		t.Fatalf("cwnd %d and %d after 2000 exchanges of 100 bytes, want the initial %d", ca.cwnd, cb.cwnd, iw)
	}
}

// RFC 5681 §4.1 (restart after idle, as Linux's tcp_cwnd_restart does
// it): after an hour idle, a large write leaves in at most the initial
// window, not in a burst of the old cwnd.
func TestCwndRestartAfterIdleRFC5681Sec4_1(t *testing.T) {
	o := Options{MaxConns: 4}
	w := newWorld(t, memio.Options{}, o, o)
	ca, cb := w.connect(7000)
	for sent := 0; sent < 1<<20; {
		sent += ca.Write(make([]byte, 1<<20-sent))
		buf := make([]byte, 64<<10)
		w.until(time.Minute, "transfer", func() bool {
			for {
				if n, _ := cb.Read(buf); n == 0 {
					break
				}
			}
			return ca.sLen == 0
		})
	}
	big := ca.cwnd
	iw := initialWindow(ca.smss)
	if big <= 2*iw {
		t.Fatalf("cwnd %d after 1 MiB, not above the initial window %d: no test", big, iw)
	}
	w.clk.Advance(time.Hour)
	ca.Write(make([]byte, 1<<20))
	if err := w.a.Flush(); err != nil {
		t.Fatal(err)
	}
	segs := 0
	w.pb.RxFrames(1024, func([]byte) { segs++ })
	if segs > 10 {
		t.Fatalf("%d segments in one burst after an hour idle (cwnd was %d), want at most the initial window's 10", segs, big)
	}
	if got := counterOf(t, w.a, "tcp_cwnd_restarts"); got != 1 {
		t.Errorf("tcp_cwnd_restarts %d, want 1", got)
	}
	if ca.ssthresh < big/4*3 {
		t.Errorf("ssthresh %d, want at least 3/4 of the old cwnd %d", ca.ssthresh, big)
	}
}

// RFC 5681 §3.1 (after eq. 4) and Linux's tcp_enter_loss: a repeated
// timeout of the same segment holds ssthresh. CUBIC took 0.7 of a cwnd
// already cut to one segment, and ssthresh collapsed to two.
func TestRepeatedRTOHoldsSsthreshRFC5681Sec3_1(t *testing.T) {
	for _, cc := range []Congestion{CUBIC, NewReno} {
		o := Options{MaxConns: 4, Congestion: cc}
		w := newWorld(t, memio.Options{}, o, o)
		ca, _ := w.connect(7000)
		mss := uint32(ca.smss)
		ca.cwnd = 40 * mss
		ca.Write(make([]byte, 40*int(mss)))
		if err := w.a.Flush(); err != nil {
			t.Fatal(err)
		}
		w.pb.RxFrames(1024, func([]byte) {})
		ca.onRTO()
		first := ca.ssthresh
		ca.onRTO()
		ca.onRTO()
		if ca.ssthresh != first {
			t.Errorf("%s: ssthresh %d segments after the first timeout, %d after two more; want it held",
				cc, first/mss, ca.ssthresh/mss)
		}
	}
}

// RFC 6675 §2: with SACK, a duplicate ACK counts toward DupThresh only
// when it carries new SACK information. Duplicates of the wire and ACKs
// with a D-SACK alone start no recovery.
func TestSACKDupAckNeedsNewSACKRFC6675Sec2(t *testing.T) {
	w, ca, cb := lossWorld(t)
	una, mss := inFlight(t, w, cb, 8)
	ackB(w, ca, cb, una) // a window update
	blk := sackBlock{una + mss, una + 2*mss}
	ackB(w, ca, cb, una, blk)
	for range 5 {
		ackB(w, ca, cb, una, blk)                             // the wire's duplicates
		ackB(w, ca, cb, una, sackBlock{una - 10, una}, blk)   // a D-SACK, nothing new
		ackB(w, ca, cb, una)                                  // no SACK at all
		ackB(w, ca, cb, una, sackBlock{una + mss, una + mss}) // an empty block
	}
	if cb.dupacks != 1 || cb.inRecovery {
		t.Fatalf("dupacks %d, in recovery %v after one ACK with new SACK information and 20 without; want 1, false",
			cb.dupacks, cb.inRecovery)
	}
	ackB(w, ca, cb, una, blk, sackBlock{una + 3*mss, una + 4*mss})
	ackB(w, ca, cb, una, blk, sackBlock{una + 3*mss, una + 4*mss}, sackBlock{una + 5*mss, una + 6*mss})
	if !cb.inRecovery {
		t.Fatalf("three ACKs with new SACK information did not start recovery (dupacks %d)", cb.dupacks)
	}
}

// The SACK scoreboard holds maxBlocks blocks: a peer reporting more
// holes has the rest counted, not dropped silently.
func TestSACKScoreboardOverflowCounted(t *testing.T) {
	w, ca, cb := lossWorld(t)
	// Enough in flight for maxBlocks+6 blocks of 20 bytes, 40 apart.
	una, mss := inFlight(t, w, cb, 2+40*(maxBlocks+6)/cb.segData())
	blk := func(j uint32) sackBlock { return sackBlock{una + mss + 40*j, una + mss + 40*j + 20} }
	for j := uint32(0); j < maxBlocks+6; j += 3 {
		ackB(w, ca, cb, una, blk(j), blk(j+1), blk(j+2))
	}
	if cb.nsacked != len(cb.sacked) {
		t.Fatalf("%d blocks held, want the scoreboard full (%d)", cb.nsacked, len(cb.sacked))
	}
	if got := counterOf(t, w.b, "tcp_sack_scoreboard_full"); got == 0 {
		t.Error("tcp_sack_scoreboard_full 0 with more blocks than the scoreboard holds")
	}
}

// The persist timer backs off exponentially up to MaxRTO (RFC 1122
// §4.2.2.17) without overflowing: rto<<shift past 63 bits made a deadline
// in the past, a timer that fired at every poll.
func TestPersistBackoffNoOverflow(t *testing.T) {
	o := Options{MaxConns: 4, MaxRTO: 10 * time.Minute}
	w := newWorld(t, memio.Options{}, o, o)
	ca, _ := w.connect(7000)
	ca.rto = int64(10 * time.Second) // 10 s << 30 is past 2^63
	for _, shift := range []int{0, 3, 6, 30, 40, 63, 64} {
		ca.persistShift, ca.tPersist = shift, 0
		ca.armPersist()
		want := w.a.now + min(int64(10*time.Second)<<min(shift, 6), int64(10*time.Minute))
		if ca.tPersist != want {
			t.Errorf("shift %d: persist in %v, want %v", shift, time.Duration(ca.tPersist-w.a.now), time.Duration(want-w.a.now))
		}
	}
}

// BenchmarkARPNewSender is the cost of an ARP request from a sender the
// full neighbour cache does not hold: an eviction over a bounded scan of
// the clock hand, whatever the cache's size (it was a walk of the whole
// table).
func BenchmarkARPNewSender(b *testing.B) {
	clk := memio.NewFakeClock(time.Unix(1_000_000, 0))
	pa, pb := memio.NewPair(memio.Options{Clock: clk, TxSlots: 4096})
	defer pa.Close()
	defer pb.Close()
	e, err := New(pa, Options{Addr: addrA, PrefixLen: 16, Clock: clk})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	const n = 1 << 14
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = arp.AppendRequest(nil, net.HardwareAddr{2, 0, 0, 0, byte(i >> 8), byte(i)}, peerIP(i), addrA)
	}
	for _, f := range frames[:n/2] { // fill the cache
		e.input(f)
		pb.RxFrames(64, func([]byte) {})
	}
	b.ResetTimer()
	for i := range b.N {
		e.input(frames[i%n])
		if i%64 == 63 {
			b.StopTimer()
			pb.RxFrames(64, func([]byte) {})
			b.StartTimer()
		}
	}
}

// Linux rounds the advertised window up to the window scale
// (__tcp_select_window's ALIGN), where rounding down left up to
// 2^Rcv.Wind.Shift-1 free bytes unannounced (and a buffer with less than
// that free announced a zero window); the receiver takes every byte it
// announced (RFC 9293 §3.8.6.2.2: the window is an offer it keeps).
func TestWindowRoundedUpLinux(t *testing.T) {
	o := Options{MaxConns: 4}
	w := newWorld(t, memio.Options{}, o, o)
	ca, cb := w.connect(7000)
	shift := cb.rcvWS
	if shift == 0 {
		t.Fatal("no window scale: no test")
	}
	ca.Write(make([]byte, 1001)) // unread by B: its free space is not a multiple of 2^shift
	w.until(time.Second, "1001 bytes", func() bool { return cb.rLen == 1001 && ca.sndUna == ca.sndMax })
	free := uint32(cb.rcvCap - cb.rLen)
	want := (free + 1<<shift - 1) >> shift << shift
	if got := cb.rcvAdv - cb.rcvNxt; got != want {
		t.Fatalf("window announced %d with %d bytes free (scale %d), want %d rounded up", got, free, shift, want)
	}
	rtx := counterOf(t, w.a, "tcp_retransmits")
	for sent := 0; sent < int(want); {
		sent += ca.Write(make([]byte, int(want)-sent))
		w.until(time.Minute, "the window's bytes", func() bool { return ca.sLen == 0 || ca.sndWnd == 0 })
	}
	w.until(time.Minute, "all acknowledged", func() bool { return ca.sLen == 0 })
	if cb.rLen != 1001+int(want) || counterOf(t, w.a, "tcp_retransmits") != rtx {
		t.Fatalf("B holds %d bytes, want %d; %d retransmissions", cb.rLen, 1001+int(want), counterOf(t, w.a, "tcp_retransmits")-rtx)
	}
}
