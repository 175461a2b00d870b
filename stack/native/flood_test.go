package native

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// synFrame is a raw SYN from B's MAC, from src:sport to A:dport.
func synFrame(dst, srcMAC [6]byte, src [4]byte, sport, dport uint16, seq uint32) []byte {
	f := make([]byte, 60) // padded: 58 bytes of headers
	putEth(f, dst, srcMAC, etherIPv4)
	putIPv4(f[ethLen:], uint16(seq), protoTCP, src, addrA.As4(), ipLen+tcpLen+4)
	t := f[ethLen+ipLen : ethLen+ipLen+tcpLen+4]
	binary.BigEndian.PutUint16(t[0:], sport)
	binary.BigEndian.PutUint16(t[2:], dport)
	binary.BigEndian.PutUint32(t[4:], seq)
	t[12], t[13] = (tcpLen+4)/4<<4, flagSYN
	binary.BigEndian.PutUint16(t[14:], 65535)
	t[20], t[21], t[22], t[23] = optMSS, 4, 0x05, 0xb4
	binary.BigEndian.PutUint16(t[16:], fold(csum(pseudo(src, addrA.As4(), protoTCP, tcpLen+4), t)))
	return f
}

// RFC 4987 §3.6: a SYN flood at a listening port fills neither the SYN
// backlog beyond its bound nor the connection table: the listener answers
// with cookies, keeping no state, and an established session's records
// keep flowing at every step of the flood.
func TestSYNFloodRFC4987(t *testing.T) {
	o := Options{MaxConns: 64, SYNBacklog: 8}
	w := newWorld(t, memio.Options{TxSlots: 1024, RxSlots: 1024}, o, o)
	w.budget = 1024
	ca, cb := w.connect(7000) // A is the client, B the server under flood
	// Flood B (the server) through A's port: raw SYNs from random
	// sources of the subnet, never completed.
	r := rand.New(rand.NewPCG(memio.Seed(t), 7))
	flood := func(n int) {
		for range n {
			src := [4]byte{198, 18, 0, byte(10 + r.IntN(200))}
			f := synFrame([6]byte(w.pb.MAC()), [6]byte(w.pa.MAC()), src, uint16(1024+r.IntN(60000)), 7000, r.Uint32())
			copy(f[ethLen+16:ethLen+20], addrB.AsSlice()) // to B
			f[ethLen+10], f[ethLen+11] = 0, 0
			binary.BigEndian.PutUint16(f[ethLen+10:], fold(csum(0, f[ethLen:ethLen+ipLen])))
			tc := f[ethLen+ipLen : ethLen+ipLen+tcpLen+4]
			tc[16], tc[17] = 0, 0
			binary.BigEndian.PutUint16(tc[16:], fold(csum(pseudo(src, addrB.As4(), protoTCP, len(tc)), tc)))
			w.pa.TxFrame(f)
		}
		w.pa.Kick()
	}
	rec, buf := bytes.Repeat([]byte{0x5a}, 100), make([]byte, 256)
	for i := range 200 {
		flood(500)
		ca.Write(rec)
		got := 0
		w.until(10*time.Second, "echo under flood", func() bool {
			if n, _ := cb.Read(buf); n > 0 {
				cb.Write(buf[:n])
			}
			n, _ := ca.Read(buf)
			got += n
			return got >= len(rec)
		})
		if used := len(w.b.conns) - len(w.b.free); used > o.SYNBacklog+1 {
			t.Fatalf("round %d: %d connection slots in use, want at most the SYN backlog (%d) and the session", i, used, o.SYNBacklog)
		}
	}
	// SYNs that never complete the handshake cost a slot but no buffers:
	// only the session's slot (and the client's own) hold rings.
	withRings := 0
	for i := range w.b.conns {
		if w.b.conns[i].sbuf != nil {
			withRings++
		}
	}
	if withRings > 1 {
		t.Errorf("%d connection slots hold send and receive rings after the flood, want 1 (the session)", withRings)
	}
	if c := counterOf(t, w.b, "tcp_syncookies_sent"); c < 50000 {
		t.Errorf("%d cookies for 100000 SYNs", c)
	}
	t.Logf("B: cookies %d, passive opens %d, tx ring full %d", counterOf(t, w.b, "tcp_syncookies_sent"),
		counterOf(t, w.b, "tcp_passive_opens"), counterOf(t, w.b, "tx_ring_full"))
}

// Wait on the real clock returns when the next timer is due, without a
// frame: the engine sleeps for its timers, not past them.
func TestWaitWakesForTimer(t *testing.T) {
	pa, pb := memio.NewPair(memio.Options{})
	defer pa.Close()
	defer pb.Close()
	e, err := New(pa, Options{Addr: addrA, InitialRTO: 30 * time.Millisecond, MinRTO: 10 * time.Millisecond,
		Neighbors: map[netip.Addr]net.HardwareAddr{addrB: pb.MAC()}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, ok := e.NextTimer(); ok {
		t.Fatal("a timer armed on an idle engine")
	}
	if _, err := e.Dial(netip.AddrPortFrom(addrB, 7000), 0); err != nil {
		t.Fatal(err)
	}
	e.Flush() // the SYN leaves; its RTO is armed
	at, ok := e.NextTimer()
	if !ok || time.Until(at) > 30*time.Millisecond {
		t.Fatalf("next timer %v (%v)", at, ok)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second || time.Now().Before(at) {
		t.Fatalf("Wait returned after %v, the timer was due at %v", el, time.Until(at))
	}
}
