package load

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/udp"
)

// rxRecorder wraps the load generator's backend and records, for each Rx,
// how many messages had been queued before it.
type rxRecorder struct {
	dgramio.Backend
	queued     int // Queue calls so far
	sinceRx    int // Queue calls since the last Rx
	maxBetween int // the most Queue calls between two Rx calls
	read       int // messages Rx returned so far
	flood      int // read this many, and
	queuedAt   int // the Queue calls made before the flood was all read (-1: not yet)
}

func (r *rxRecorder) Queue(p []byte) error {
	r.queued++
	r.sinceRx++
	return r.Backend.Queue(p)
}

func (r *rxRecorder) Rx(pkts []dgramio.Packet) (int, error) {
	r.maxBetween = max(r.maxBetween, r.sinceRx)
	r.sinceRx = 0
	n, err := r.Backend.Rx(pkts)
	r.read += n
	if r.queuedAt < 0 && r.read >= r.flood {
		r.queuedAt = r.queued
	}
	return n, err
}

// memioPair returns a raw datagram client on port A and a server on port B
// of an in-memory wire whose directions hold memio.DefaultSlots frames each:
// what a receiver does not read in time is dropped there, as a NIC's RX
// ring drops it.
func memioPair(t *testing.T) (client, server *udp.Raw, a *memio.Port) {
	t.Helper()
	a, b := memio.NewPair(memio.Options{Seed: memio.Seed(t)})
	ipA, ipB := netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("198.18.0.2")
	var err error
	client, err = udp.NewRaw(dgramio.Config{Kind: dgramio.KindXDP, Iface: "memio", LocalIP: ipA, Dests: []netip.AddrPort{netip.AddrPortFrom(ipB, 5000)},
		Port: 5000, LocalPort: 40000, DstMAC: memio.DefaultMACB}, a, udp.RawOptions{})
	if err != nil {
		t.Fatal(err)
	}
	server, err = udp.NewRaw(dgramio.Config{Kind: dgramio.KindXDP, Iface: "memio", Role: dgramio.RoleServer, LocalIP: ipB, Port: 5000,
		DstMAC: memio.DefaultMACA}, b, udp.RawOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server, a
}

// TestLoadReadsWhileBehind: a load generator far behind its schedule (its
// start 50 ms in the past at 1M/s: 50,000 messages due at once) whose
// receive side is flooded (200 frames waiting, most of its RX ring) reads
// the flood within its first rounds instead of sending the whole backlog
// first, and says that it sent late. Counts only, no timing.
func TestLoadReadsWhileBehind(t *testing.T) {
	client, server, a := memioPair(t)
	const flood = 200
	foreign, err := NewMsg(DefaultSize, 1)
	if err != nil {
		t.Fatal(err)
	}
	to := netip.AddrPortFrom(netip.MustParseAddr("198.18.0.1"), 40000)
	for i := range flood {
		foreign.Stamp(uint64(i), 0)
		if server.QueueTo(foreign, to) != nil {
			t.Fatalf("flood message %d refused", i)
		}
	}
	if err := server.Flush(); err != nil {
		t.Fatal(err)
	}
	rec := &rxRecorder{Backend: client, flood: flood, queuedAt: -1}
	lr, err := Load(context.Background(), rec, LoadOptions{
		Rate: 1e6, Duration: 60 * time.Millisecond, Drain: -1, RunID: 2, Wait: true,
		Start: time.Now().Add(-50 * time.Millisecond),
	})
	if err != nil {
		t.Fatal(err)
	}
	const backlog = 50000 // due at the first round
	burst := SendBurst * DefaultBatch
	if rec.maxBetween > burst {
		t.Errorf("%d messages queued between two Rx calls, want at most %d (SendBurst batches)", rec.maxBetween, burst)
	}
	rounds := (flood + RxBurst*DefaultBatch - 1) / (RxBurst * DefaultBatch)
	if rec.queuedAt < 0 || rec.queuedAt > rounds*burst || rec.queuedAt > backlog/10 {
		t.Errorf("the flood of %d was read after %d messages were queued, want within %d rounds (at most %d queued) of a backlog of %d",
			flood, rec.queuedAt, rounds, rounds*burst, backlog)
	}
	if lr.Total.Foreign != flood {
		t.Errorf("foreign %d, want the %d flood messages, read", lr.Total.Foreign, flood)
	}
	if got := a.Stats().RxDropped; got != 0 {
		t.Errorf("the load generator's RX ring dropped %d frames: it did not read while it was behind", got)
	}
	if lr.Total.Late == 0 || lr.Late == 0 || lr.Late > lr.Offered {
		t.Errorf("late %d (window %d of %d offered): a sender 50 ms behind sends late and must say so", lr.Total.Late, lr.Late, lr.Offered)
	}
	if lr.Lag.P50Us <= 0 {
		t.Errorf("lag %+v: a sender behind its schedule has lag", lr.Lag)
	}
	if lr.Total.Sent+lr.Total.NotSent != lr.Total.Offered || lr.Total.Offered != 60000 {
		t.Errorf("offered %d sent %d not sent %d: every message of the schedule goes out, late or not", lr.Total.Offered, lr.Total.Sent, lr.Total.NotSent)
	}
}
