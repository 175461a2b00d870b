package faulttest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testutil"
)

// udpSink counts the test messages a kernel UDP socket on a host receives.
type udpSink struct {
	conn *net.UDPConn
	mu   sync.Mutex
	y    tally
	last time.Time
	done chan struct{}
}

// startUDPSink binds a kernel UDP socket to h's address and port (with a
// 4 MiB receive buffer) and counts what arrives until the test ends.
func startUDPSink(t testing.TB, h *testhost.Host, magic uint64, size int) *udpSink {
	t.Helper()
	s := &udpSink{y: tally{magic: magic, size: size}, done: make(chan struct{})}
	var err error
	if s.conn, err = h.ListenUDP(port); err != nil {
		t.Fatal(err)
	}
	if err := s.conn.SetReadBuffer(4 << 20); err != nil {
		s.conn.Close()
		t.Fatal(err)
	}
	go func() {
		defer close(s.done)
		buf := make([]byte, 65536)
		for {
			n, err := s.conn.Read(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.y.take(buf[:n], ^uint64(0))
			s.last = time.Now()
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { s.conn.Close(); <-s.done })
	return s
}

// settle waits until n messages are in or none came for quiet.
func (s *udpSink) settle(n uint64, quiet time.Duration) tally {
	for {
		s.mu.Lock()
		y, last := s.y, s.last
		s.mu.Unlock()
		if y.got >= n || time.Since(last) > quiet {
			return y
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFaultFullTxRing shrinks the rings of a raw kind to a few dozen
// entries: a client queues 1024 messages per Flush (TxQueue and TxBatch
// 1024) into a TX ring of 32. Each Flush returns within callLimit, every
// queued message is either sent or counted as dropped, and what was sent
// reaches a kernel UDP socket on the peer or is counted by a kernel.
func TestFaultFullTxRing(t *testing.T) {
	forEachKind(t, ringKinds, fullTxRing)
}

// TestFaultEmptyFillRing shrinks the rings of a raw kind to a few dozen
// entries: a server that does not read while a kernel socket on the peer
// sends it 5000 messages. Its fill ring runs empty and the kernel drops
// what finds no buffer, counted (xsk rx_dropped, fill-ring-empty
// descriptors); Wait and Rx return at once; nothing else is lost; and once
// the server reads again, paced messages all arrive (the fill ring was
// replenished).
func TestFaultEmptyFillRing(t *testing.T) {
	forEachKind(t, ringKinds, emptyFillRing)
}

func fullTxRing(t *testing.T, kind string, p *testhost.Pair) {
	const size, rounds = 100, 20
	magic := newMagic()
	sink := startUDPSink(t, p.B, magic, size)
	kA0, kB0 := kernelCounters(t, p.A), kernelCounters(t, p.B)
	var tr *traffic
	var cs dgramio.Stats
	var y tally
	onThread(t, p.A, func() error {
		cfg := clientConfig(kind, p.A, p.B)
		smallRings(&cfg)
		cfg.TxQueue, cfg.TxBatch = 1024, 1024
		cl, err := openHere(cfg)
		if err != nil {
			return err
		}
		defer cl.Close()
		tr = newTraffic(t, kind+" client", cl, size, 1e9, magic)
		for r := 0; r < rounds; r++ {
			for i := 0; i < 1024; i++ {
				fillMsg(tr.buf, tr.magic, tr.next)
				tr.c.begin(opQueue)
				qerr := cl.Queue(tr.buf)
				tr.c.end()
				if qerr != nil {
					return fmt.Errorf("Queue refused message %d of round %d with TxQueue 1024: %v", i, r, qerr)
				}
				tr.next++
			}
			tr.c.begin(opFlush)
			err := cl.Flush()
			tr.c.end()
			if err != nil {
				return fmt.Errorf("Flush of round %d: %w", r, err)
			}
		}
		y = sink.settle(tr.next, 2*time.Second)
		cs = cl.Stats()
		return nil
	})
	kA := diff(kA0, kernelCounters(t, p.A), kernelLossKeys)
	kB := diff(kB0, kernelCounters(t, p.B), kernelLossKeys)
	t.Logf("client counters: %s", allCounters(cs))
	t.Logf("sink: got %d (dup %d, bad %d); %v", y.got, y.dup, y.bad, &tr.c)
	tr.c.check(t)
	if cs.TxQueued != tr.next || cs.TxSent+cs.TxDropped != cs.TxQueued {
		t.Errorf("queued %d = sent %d + dropped %d does not hold (%d accepted)", cs.TxQueued, cs.TxSent, cs.TxDropped, tr.next)
	}
	retried, _ := cs.Counter("raw", "tx_retried")
	full, _ := cs.Counter("frameio", "tx_ring_full")
	if retried == 0 && full == 0 {
		t.Errorf("the TX ring never filled (tx_retried %d, tx_ring_full %d): the test did not test a full ring", retried, full)
	}
	if y.dup != 0 || y.bad != 0 {
		t.Errorf("the sink got %d duplicates and %d damaged messages", y.dup, y.bad)
	}
	l := leg{name: "client→sink", sent: tr.next, received: y.got, from: cs, kfrom: kA, kto: kB}
	l.check(t)
}

func emptyFillRing(t *testing.T, kind string, p *testhost.Pair) {
	onThread(t, p.B, func() error {
		cfg := serverConfig(kind, p.B)
		smallRings(&cfg)
		srv, err := openHere(cfg)
		if err != nil {
			return err
		}
		defer srv.Close()
		const size, burst = 100, 5000
		r := &fillRun{t: t, srv: srv, y: tally{magic: 0xf111, size: size}, msg: make([]byte, size), pkts: make([]dgramio.Packet, 64)}
		r.rc.name = kind + " server"
		watch(t, &r.rc)
		if err := p.A.Do(func() error {
			var err error
			r.conn, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: cfg.LocalIP.AsSlice(), Port: port})
			return err
		}); err != nil {
			fatalf(t, "%v", err)
		}
		defer r.conn.Close()
		// One message first: the peer's kernel has resolved us, the path works.
		r.send(1)
		if !testutil.Eventually(10*time.Second, func() bool { r.read(); return r.y.got == 1 }) {
			fatalf(t, "the first message did not arrive")
		}
		kA0, kB0 := kernelCounters(t, p.A), kernelCounters(t, p.B)
		s0 := srv.Stats()

		// The server does not read: its rings fill up and the fill ring runs
		// empty.
		r.send(burst)
		time.Sleep(200 * time.Millisecond)
		r.waitAtOnce()
		r.readUntilQuiet(500 * time.Millisecond) // what the rings held
		afterBurst := r.y.got
		// Paced traffic, read as it comes: the fill ring was replenished.
		for i := 0; i < 100; i++ {
			r.send(1)
			testutil.Eventually(time.Second, func() bool { return r.read() > 0 })
		}
		testutil.Eventually(2*time.Second, func() bool { r.read(); return r.y.got == afterBurst+100 })
		ss := srv.Stats()
		kA := diff(kA0, kernelCounters(t, p.A), kernelLossKeys)
		kB := diff(kB0, kernelCounters(t, p.B), kernelLossKeys)
		t.Logf("server counters: %s", allCounters(ss))
		t.Logf("got %d of %d (%d after the burst of %d), dup %d, bad %d; %v", r.y.got, r.sent, afterBurst, burst, r.y.dup, r.y.bad, &r.rc)
		r.rc.check(t)
		if r.y.dup != 0 || r.y.bad != 0 {
			t.Errorf("%d duplicates and %d damaged messages", r.y.dup, r.y.bad)
		}
		if r.y.got != afterBurst+100 {
			t.Errorf("after the burst, %d of 100 paced messages arrived: the fill ring did not recover", r.y.got-afterBurst)
		}
		if afterBurst >= burst {
			t.Errorf("all %d messages of the burst arrived: the rings never filled", burst)
		}
		empty0, _ := s0.Counter("xsk", "rx_fill_ring_empty_descs")
		empty1, _ := ss.Counter("xsk", "rx_fill_ring_empty_descs")
		if dgramio.Kind(kind) == dgramio.KindXDP && empty1 == empty0 {
			t.Errorf("the fill ring never ran empty (rx_fill_ring_empty_descs %d)", empty1)
		}
		s0.TxDropped, ss.TxDropped = 0, 0
		l := leg{name: "kernel→server", sent: r.sent - 1, received: r.y.got - 1, to: subStats(ss, s0), kfrom: kA, kto: kB}
		l.check(t)
		return nil
	})
}

// fillRun is emptyFillRing's server, polled on its thread, and the kernel
// UDP socket in the other namespace that sends it numbered messages.
type fillRun struct {
	t    testing.TB
	srv  dgramio.Backend
	conn *net.UDPConn
	rc   calls
	y    tally // what the server received
	sent uint64
	msg  []byte
	pkts []dgramio.Packet
}

// send sends the next n messages from the kernel socket.
func (r *fillRun) send(n int) {
	for i := 0; i < n; i++ {
		fillMsg(r.msg, r.y.magic, r.sent)
		if _, err := r.conn.Write(r.msg); err != nil {
			fatalf(r.t, "kernel send: %v", err)
		}
		r.sent++
	}
}

// read takes what the server has until Rx returns nothing, and returns how
// many messages that was.
func (r *fillRun) read() int {
	total := 0
	for {
		r.rc.begin(opRx)
		n, err := r.srv.Rx(r.pkts)
		r.rc.end()
		if err != nil {
			fatalf(r.t, "Rx: %v", err)
		}
		for _, pk := range r.pkts[:n] {
			r.y.take(pk.Data, r.sent)
		}
		total += n
		if n == 0 {
			return total
		}
	}
}

// waitAtOnce checks that Wait returns at once while frames wait (or says
// the kind cannot sleep).
func (r *fillRun) waitAtOnce() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	r.rc.begin(opWait)
	err := r.srv.Wait(ctx)
	r.rc.end()
	if err != nil && !errors.Is(err, dgramio.ErrNotSupported) {
		fatalf(r.t, "Wait with frames waiting: %v", err)
	}
	if d := time.Since(start); d > callLimit {
		r.t.Errorf("Wait took %v with frames waiting", d)
	}
}

// readUntilQuiet reads until nothing has arrived for quiet.
func (r *fillRun) readUntilQuiet(quiet time.Duration) {
	for last := time.Now(); time.Since(last) < quiet; {
		if r.read() > 0 {
			last = time.Now()
		}
		time.Sleep(time.Millisecond)
	}
}

// subStats returns the loss counters of s minus those of before (the
// fields and layers splitLoss reads).
func subStats(s, before dgramio.Stats) dgramio.Stats {
	out := dgramio.Stats{
		TxDropped:     s.TxDropped - before.TxDropped,
		RxTruncated:   s.RxTruncated - before.RxTruncated,
		RxBadChecksum: s.RxBadChecksum - before.RxBadChecksum,
		RxMalformed:   s.RxMalformed - before.RxMalformed,
	}
	for _, c := range s.Layers {
		if v, ok := before.Counter(c.Layer, c.Name); ok && v <= c.Value {
			c.Value -= v
		}
		out.Layers = append(out.Layers, c)
	}
	return out
}
