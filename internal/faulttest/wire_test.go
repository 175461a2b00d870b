package faulttest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testutil"
	"github.com/dgramio/dgramio/internal/wire"
)

// Lossy wire: how much goes through each stream kind, and what the wire
// does to every frame in both directions.
const (
	wireBytes     = 16 << 20
	soakBytes     = 256 << 20
	wireMaxRecord = 8192
	// wireStall fails the run when no byte arrives for that long.
	wireStall = 2 * time.Minute
)

var wireImpairment = wire.Options{
	Loss:    0.01,
	Dup:     0.005,
	Reorder: 0.01,
	Corrupt: 0.005,
	Delay:   200 * time.Microsecond,
	Jitter:  100 * time.Microsecond,
}

// records generates the record stream of a run: sizes from 1 to
// wireMaxRecord bytes and contents drawn from a generator seeded with the
// wire's seed, so the receiver regenerates what it must get and a failure
// replays with WIRE_SEED.
type records struct {
	rng *rand.Rand
	buf []byte
}

func newRecords(seed uint64) *records {
	return &records{rng: rand.New(rand.NewPCG(seed, 0x5eed)), buf: make([]byte, wireMaxRecord)}
}

// next returns the next record; it is valid until the next call.
func (r *records) next() []byte {
	n := 1 + r.rng.IntN(wireMaxRecord)
	b := r.buf[:n]
	for i := 0; i < n; i += 8 {
		v := r.rng.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// verifier is a stream server on its own thread that checks every record
// it receives against the expected stream, byte for byte and in order.
type verifier struct {
	server
	want *records

	records, bytes atomic.Uint64
	last           atomic.Int64 // UnixNano of the last record
	mu             sync.Mutex
	mismatch       string // the first difference, if any
}

// startVerifier starts a verifier of cfg on h (see server.start) that
// expects the records of seed.
func startVerifier(t testing.TB, h *testhost.Host, cfg dgramio.Config, seed uint64) *verifier {
	t.Helper()
	v := &verifier{want: newRecords(seed)}
	v.last.Store(time.Now().UnixNano())
	v.start(t, h, string(cfg.Kind)+" receiver", cfg, v.run)
	return v
}

func (v *verifier) run(ctx context.Context) {
	v.loop(ctx, func(pkts []dgramio.Packet) {
		for _, p := range pkts {
			want := v.want.next()
			i := v.records.Load()
			if !bytes.Equal(p.Data, want) {
				v.mu.Lock()
				if v.mismatch == "" {
					v.mismatch = fmt.Sprintf("record %d (after %d bytes): %d bytes, want %d; first difference at byte %d",
						i, v.bytes.Load(), len(p.Data), len(want), firstDiff(p.Data, want))
				}
				v.mu.Unlock()
			}
			v.records.Add(1)
			v.bytes.Add(uint64(len(p.Data)))
		}
		if len(pkts) > 0 {
			v.last.Store(time.Now().UnixNano())
		}
	})
}

func (v *verifier) firstMismatch() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.mismatch
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestFaultLossyWire sends 16 MiB of records (SOAK=1, as make soak sets
// it: 256 MiB) through each stream kind over the seeded lossy wire of
// package internal/wire: 1% loss, 0.5% duplication, 1% reordering, 0.5%
// corrupted frames (one byte flipped inside the IPv4 packet), 200 µs ± 100 µs
// delay, both directions. The receiver regenerates the stream from the
// wire's seed and checks every record, byte for byte and in order; the
// sender and the receiver report no error; the wire's counters show that
// it did drop, reorder and corrupt frames. The seed is logged: a failure
// replays with WIRE_SEED=<seed>.
func TestFaultLossyWire(t *testing.T) {
	testutil.RequireRoot(t)
	total := uint64(wireBytes)
	if os.Getenv("SOAK") == "1" {
		total = soakBytes
	}
	for _, kind := range testKinds {
		if !isStream(kind) {
			continue
		}
		t.Run(kind, func(t *testing.T) { lossyWire(t, kind, total) })
	}
}

func lossyWire(t *testing.T, kind string, total uint64) {
	w := wire.NewT(t, wireImpairment)
	seed := w.Seed()
	scfg := serverConfig(kind, w.B)
	scfg.MaxDatagram = wireMaxRecord
	v := startVerifier(t, w.B, scfg, seed)
	var cs dgramio.Stats
	snd := &recordSender{gen: newRecords(seed)}
	snd.c.name = kind + " sender"
	watch(t, &snd.c)
	start := time.Now()
	var runErr error
	onThread(t, w.A, func() error {
		ccfg := clientConfig(kind, w.A, w.B)
		ccfg.MaxDatagram = wireMaxRecord
		ccfg.TCP.SendStall = wireStall // a lossy wire stalls, it does not stop reading
		cl, err := openHere(ccfg)
		if err != nil {
			return err
		}
		defer cl.Close()
		snd.cl = cl
		for snd.sent < total || v.bytes.Load() < snd.sent {
			if runErr = v.check(snd.sent); runErr != nil {
				break
			}
			snd.round(total)
		}
		cs = cl.Stats()
		v.stop(t) // before the sender closes: the receiver would see it go
		return nil
	})
	elapsed := time.Since(start)
	v.stop(t)
	ab, ba := w.Stats(wire.AtoB), w.Stats(wire.BtoA)
	t.Logf("%d MiB in %d records in %v (%.1f MiB/s), seed %d", snd.sent>>20, snd.records, elapsed.Round(time.Millisecond),
		float64(snd.sent)/(1<<20)/elapsed.Seconds(), seed)
	t.Logf("wire A→B: %v", ab)
	t.Logf("wire B→A: %v", ba)
	t.Logf("sender: %s; %s", allCounters(cs), snd.errs.String())
	t.Logf("receiver: %s; %s", allCounters(v.final), v.errs.String())
	t.Logf("%v; %v", &snd.c, &v.c)
	snd.c.check(t)
	v.c.check(t)
	if runErr != nil {
		t.Fatalf("%v (replay: WIRE_SEED=%d)", runErr, seed)
	}
	if m := v.firstMismatch(); m != "" {
		t.Fatalf("the stream differs: %s (replay: WIRE_SEED=%d)", m, seed)
	}
	if got := v.bytes.Load(); got != snd.sent || v.records.Load() != snd.records {
		t.Errorf("received %d bytes in %d records, sent %d in %d", got, v.records.Load(), snd.sent, snd.records)
	}
	if n := len(snd.errs.peers()) + len(v.errs.peers()); n != 0 || snd.errs.count()+v.errs.count() != 0 {
		t.Errorf("errors: sender %v; receiver %v", snd.errs.String(), v.errs.String())
	}
	if cs.TxDropped != 0 || cs.TxSent != snd.records || v.final.RxDelivered != snd.records {
		t.Errorf("counters: sender sent %d, dropped %d; receiver delivered %d; want %d records",
			cs.TxSent, cs.TxDropped, v.final.RxDelivered, snd.records)
	}
	if ab.Dropped == 0 || ab.Corrupted == 0 || ab.Reordered == 0 || ab.Duplicated == 0 {
		t.Errorf("the wire did not impair the stream (A→B %v): the test tested nothing", ab)
	}
}

// check reports what is wrong with the stream so far, sent bytes of it
// having been queued: no record for wireStall, or a record that differs.
func (v *verifier) check(sent uint64) error {
	if time.Since(time.Unix(0, v.last.Load())) > wireStall {
		return fmt.Errorf("no record arrived for %v (%d of %d bytes in)", wireStall, v.bytes.Load(), sent)
	}
	if m := v.firstMismatch(); m != "" {
		return fmt.Errorf("the stream differs: %s", m)
	}
	return nil
}

// recordSender queues the records of gen on a stream backend, on its
// thread, and counts what the backend accepted.
type recordSender struct {
	cl            dgramio.Backend
	gen           *records
	pending       []byte // a record the backend refused, queued again next
	sent, records uint64 // bytes and records accepted
	c             calls
	errs          errLog
	cannotWait    bool
}

// round queues records until the backend refuses one or total bytes are
// accepted, and flushes. When it cannot queue more it lets the stack run
// (ACKs open the window): Wait, then an Rx, as nothing is to be read on
// the sending side.
func (s *recordSender) round(total uint64) {
	refused := false
	for s.sent < total {
		if s.pending == nil {
			s.pending = s.gen.next()
		}
		s.c.begin(opQueue)
		qerr := s.cl.Queue(s.pending)
		s.c.end()
		if qerr != nil {
			refused = true
			break
		}
		s.sent += uint64(len(s.pending))
		s.records++
		s.pending = nil
	}
	s.c.begin(opFlush)
	if err := s.cl.Flush(); err != nil {
		s.errs.add(err)
	}
	s.c.end()
	if refused || s.sent >= total {
		waitOrNap(context.Background(), s.cl, &s.c, time.Millisecond, &s.cannotWait)
		s.c.begin(opRx)
		_, err := s.cl.Rx(make([]dgramio.Packet, 1))
		s.c.end()
		if err != nil {
			s.errs.add(err)
		}
	}
}
