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

// checkARP asserts the neighbour cache's invariants: bounded, the map and
// the entries agree, the count of requests in flight is right.
func checkARP(t *testing.T, e *Engine) {
	t.Helper()
	if len(e.arp.buf) > e.o.ARPEntries || len(e.arp.m) != len(e.arp.buf) {
		t.Fatalf("%d entries, %d mapped, bound %d", len(e.arp.buf), len(e.arp.m), e.o.ARPEntries)
	}
	asking := 0
	for i := range e.arp.buf {
		en := &e.arp.buf[i]
		if j, ok := e.arp.m[en.ip]; !ok || int(j) != i {
			t.Fatalf("entry %d (%v) mapped at %d %v", i, en.ip, j, ok)
		}
		if en.tries > 0 {
			asking++
			if en.state != nudIncomplete && en.state != nudProbe {
				t.Fatalf("entry %v asking in state %d", en.ip, en.state)
			}
		}
	}
	if asking != e.arp.asking {
		t.Fatalf("%d entries asking, count says %d", asking, e.arp.asking)
	}
}

// FuzzARPSequence feeds a sequence of ARP messages (requests, replies,
// gratuitous, to us or not, from a few addresses and MACs) and of Dials
// and time steps to an engine with a small cache: the cache stays
// bounded and consistent, and once the connections end and the requests
// run out nothing is left asking or waiting.
func FuzzARPSequence(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 512 {
			return
		}
		b := newBench(t, Options{PrefixLen: 16, ARPEntries: 8})
		var conns []*Conn
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i], ops[i+1]
			ip := netip.AddrFrom4([4]byte{198, 18, 0, 2 + arg%16})
			mac := net.HardwareAddr{0x02, 0, 0, 0, 0, arg >> 4}
			switch op % 6 {
			case 0:
				b.send(arp.AppendRequest(nil, mac, ip, addrA))
			case 1:
				b.send(arp.AppendReply(nil, mac, ip, b.pa.MAC(), addrA))
			case 2:
				b.send(arp.AppendRequest(nil, mac, ip, ip)) // gratuitous
			case 3:
				if c, err := b.e.Dial(netip.AddrPortFrom(ip, 80), 0); err == nil {
					conns = append(conns, c)
				}
				b.e.Flush()
			case 4:
				b.clk.Advance(time.Duration(arg) * 100 * time.Millisecond)
				b.e.Poll(1)
			case 5:
				if len(conns) > 0 {
					conns[int(arg)%len(conns)].Close()
				}
			}
			b.recv()
			checkARP(t, b.e)
		}
		// A connection that still sends (a SYN retransmitted) re-checks
		// its neighbour each time (RFC 4861 §7.3.3, as Linux does for ARP),
		// so the cache may keep asking while one lives: end them, then the
		// requests they started must run out and leave nothing waiting.
		for _, c := range conns {
			c.Abort()
		}
		for range 2 * (DefaultARPRetries + 2) {
			b.clk.Advance(DefaultARPTimeout)
			b.e.Poll(64)
			b.e.Flush()
			b.recv()
		}
		checkARP(t, b.e)
		if b.e.arp.asking != 0 || len(b.e.arpWait) != 0 {
			t.Fatalf("%d entries asking, %d connections waiting after every request ran out", b.e.arp.asking, len(b.e.arpWait))
		}
	})
}

// FuzzFragmentSequence feeds a sequence of IPv4 fragments (any offsets,
// lengths, more-fragments bits, a few IDs) to an engine with few slots:
// the slots stay consistent (sorted, disjoint fragments inside the
// datagram), a completed echo request is answered with the bytes sent,
// and after the timeout no slot is used.
func FuzzFragmentSequence(f *testing.F) {
	f.Add([]byte{0, 0, 10, 1, 0, 10, 20, 0})
	f.Add([]byte{1, 0, 50, 1, 1, 25, 50, 1, 1, 50, 10, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 1024 {
			return
		}
		b := newBench(t, Options{ReassemblyMemory: 2 * reasmBuf})
		body := make([]byte, 8*256)
		for i := range body {
			body[i] = byte(i * 7)
		}
		for i := 0; i+3 < len(ops); i += 4 {
			id, off, n, more := uint16(ops[i]%4), int(ops[i+1]), 8*(1+int(ops[i+2]%32)), ops[i+3]&1 != 0
			end := min(8*off+n, len(body))
			fl := uint16(off)
			if more {
				fl |= 0x2000
			}
			if 8*off >= end {
				continue
			}
			b.send(b.datagram(protoTCP, id, fl, body[8*off:end]))
			b.recv()
			used := 0
			for j := range b.e.reasm {
				r := &b.e.reasm[j]
				if !r.used {
					continue
				}
				used++
				for k := 0; k < r.n; k++ {
					fr := r.frags[k]
					if fr.start >= fr.end || k > 0 && r.frags[k-1].end > fr.start || r.total >= 0 && int(fr.end) > r.total {
						t.Fatalf("slot %d fragment %d %+v (total %d)", j, k, fr, r.total)
					}
				}
			}
			if used != b.e.reasmUsed || used > len(b.e.reasm) {
				t.Fatalf("%d slots used, count says %d, %d slots", used, b.e.reasmUsed, len(b.e.reasm))
			}
		}
		b.clk.Advance(DefaultReassemblyTimeout + time.Second)
		b.e.Poll(1)
		if b.e.reasmUsed != 0 {
			t.Fatalf("%d slots used after the timeout", b.e.reasmUsed)
		}
	})
}

// FuzzICMPOnLiveConnection feeds arbitrary ICMP messages, most of them
// "fragmentation needed" quoting the live connection's tuple with any
// sequence number and MTU, to its engine: no panic, the connection's
// invariants hold, its segment size never drops below minPMTU's, and it
// still carries data.
func FuzzICMPOnLiveConnection(f *testing.F) {
	f.Add(uint8(3), uint8(4), uint16(1000), uint32(0), []byte{})
	f.Add(uint8(3), uint8(4), uint16(0), uint32(1), []byte{1, 2, 3})
	f.Add(uint8(8), uint8(0), uint16(0), uint32(0), []byte("ping"))
	f.Fuzz(func(t *testing.T, typ, code uint8, mtu uint16, dseq uint32, rest []byte) {
		if len(rest) > 1000 {
			return
		}
		o := Options{MaxConns: 4, SendBuf: 16 << 10, RecvBuf: 16 << 10}
		w := newWorld(t, memio.Options{TxSlots: 64, RxSlots: 64}, o, o)
		ca, cb := w.connect(7000)
		ca.Write(make([]byte, 8000))
		if err := w.a.Flush(); err != nil {
			t.Fatal(err)
		}
		fr := fragNeededFrame(w, ca, ca.sndUna+dseq, mtu)
		m := fr[ethLen+ipLen:]
		m[0], m[1], m[2], m[3] = typ, code, 0, 0
		fr = append(fr, rest...)
		binary.BigEndian.PutUint16(fr[ethLen+2:], uint16(ipLen+len(m)+len(rest)))
		fr[ethLen+10], fr[ethLen+11] = 0, 0
		binary.BigEndian.PutUint16(fr[ethLen+10:], fold(csum(0, fr[ethLen:ethLen+ipLen])))
		m = fr[ethLen+ipLen:]
		binary.BigEndian.PutUint16(m[2:], fold(csum(0, m)))
		tooBigTaken(t, w, ca, cb, fr, minPMTU-ipLen-tcpLen, 8000)
	})
}

// tooBigTaken gives A's engine fr, an ICMP "fragmentation needed" or
// ICMPv6 Packet Too Big about connection ca, which has n bytes written:
// ca's invariants hold, its MSS stays at least floor (the family's
// minimum path MTU less the headers), and the n bytes still reach cb.
func tooBigTaken(t *testing.T, w *world, ca, cb *Conn, fr []byte, floor, n int) {
	t.Helper()
	w.a.tick()
	w.a.input(fr)
	checkConn(t, ca)
	if ca.peerMSS < floor {
		t.Fatalf("MSS %d below the floor %d", ca.peerMSS, floor)
	}
	got, buf := 0, make([]byte, 16<<10)
	w.until(10*time.Minute, "the data", func() bool {
		k, _ := cb.Read(buf)
		got += k
		checkConn(t, ca)
		return got == n
	})
}
