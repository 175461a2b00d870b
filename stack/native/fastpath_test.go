package native

import (
	"bytes"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// wire is every frame a world's wire carried, in order, with its
// direction.
type wire struct {
	dirs   []memio.Dir
	frames [][]byte
}

func (r *wire) tap(dir memio.Dir, f []byte) {
	r.dirs = append(r.dirs, dir)
	r.frames = append(r.frames, bytes.Clone(f))
}

// recordRun runs scenario between two engines with options o over a
// wire impaired by imp (seeded), with header prediction on or off, and
// returns what the wire carried and how many segments prediction took.
func recordRun(t *testing.T, fast bool, imp memio.Impairment, o Options, scenario func(w *world, ca, cb *Conn)) (*wire, uint64) {
	t.Helper()
	saved := noFastPath
	noFastPath = !fast
	defer func() { noFastPath = saved }()
	r := &wire{}
	o.ISNSecret = [16]byte{1, 2, 3}
	w := newWorld(t, memio.Options{AtoB: imp, BtoA: imp, Seed: 7, Tap: r.tap}, o, o)
	ca, cb := w.connect(7000)
	scenario(w, ca, cb)
	return r, counterOf(t, w.a, "tcp_predicted") + counterOf(t, w.b, "tcp_predicted")
}

// Header prediction (fastInput) is an optimization only: for every
// scenario, the engines put the same frames on the wire, byte for byte
// and in the same order, with it and without it (the general path of
// RFC 9293 §3.10.7.4, RFC 5681 and RFC 7323), while it takes a good share of the
// segments. The wire is impaired, so recovery, reassembly, PAWS and
// duplicate data run among the predicted segments.
func TestHeaderPredictionChangesNothingRFC9293Sec3_10_7_4(t *testing.T) {
	imp := memio.Impairment{Loss: 0.01, Duplicate: 0.01, Reorder: 0.05, Corrupt: 0.001}
	bulk := func(w *world, ca, cb *Conn) {
		ab := newPipe(ca, cb, randBytes(1, 1<<20))
		ba := newPipe(cb, ca, randBytes(2, 1<<20))
		w.until(30*time.Minute, "transfer", func() bool {
			ab.pump(w.t)
			ba.pump(w.t)
			return ab.done() && ba.done()
		})
		if !bytes.Equal(ab.got.Bytes(), ab.data) || !bytes.Equal(ba.got.Bytes(), ba.data) {
			w.t.Fatal("data differs")
		}
	}
	// A reader that lets its buffer fill and reads it half a second
	// later: the window closes, the persist timer probes it, the read
	// opens it.
	slowReader := func(w *world, ca, cb *Conn) {
		data, got, buf := randBytes(3, 64<<10), []byte{}, make([]byte, 64<<10)
		sent := 0
		var full time.Time
		w.until(30*time.Minute, "transfer", func() bool {
			sent += ca.Write(data[sent:])
			switch {
			case cb.rLen < cb.rcvCap && len(got)+cb.rLen < len(data):
			case full.IsZero() && len(got)+cb.rLen < len(data):
				full = w.clk.Now()
			case len(got)+cb.rLen == len(data) || w.clk.Now().Sub(full) >= 500*time.Millisecond:
				n, _ := cb.Read(buf)
				got = append(got, buf[:n]...)
				full = time.Time{}
			}
			return len(got) == len(data)
		})
		if !bytes.Equal(got, data) {
			w.t.Fatal("data differs")
		}
		if counterOf(w.t, w.a, "tcp_persist_probes") == 0 {
			w.t.Error("the window never closed: no persist probe")
		}
	}
	requests := func(w *world, ca, cb *Conn) {
		buf := make([]byte, 256)
		for i := range 300 {
			req := randBytes(uint64(i), 100)
			for sent := 0; sent < len(req); {
				sent += ca.Write(req[sent:])
				w.step()
			}
			var got []byte
			w.until(time.Minute, "request", func() bool {
				n, _ := cb.Read(buf)
				got = append(got, buf[:n]...)
				return len(got) == len(req)
			})
			cb.Write(got)
			got = got[:0]
			w.until(time.Minute, "answer", func() bool {
				n, _ := ca.Read(buf)
				got = append(got, buf[:n]...)
				return len(got) == len(req)
			})
			w.clk.Advance(time.Duration(i%7) * time.Millisecond) // a delayed ACK fires between some
			w.step()
		}
		ca.Close()
		cb.Close()
		w.until(5*time.Minute, "close", func() bool { return len(w.a.table) == 0 && len(w.b.table) == 0 })
	}
	for _, tc := range []struct {
		name     string
		imp      memio.Impairment
		o        Options
		scenario func(w *world, ca, cb *Conn)
	}{
		{"bulk", memio.Impairment{}, Options{}, bulk},
		{"bulk/impaired", imp, Options{}, bulk},
		{"bulk/impaired/newreno", imp, Options{NoSACK: true}, bulk},
		{"bulk/impaired/no-timestamps", imp, Options{NoTimestamps: true}, bulk},
		{"bulk/small-buffers", imp, Options{SendBuf: 8 << 10, RecvBuf: 4 << 10}, bulk},
		{"slow-reader", memio.Impairment{}, Options{RecvBuf: 4 << 10}, slowReader},
		{"slow-reader/impaired", imp, Options{RecvBuf: 4 << 10}, slowReader},
		{"bulk/delayed-ack", imp, Options{DelayedACK: 5 * time.Millisecond}, bulk},
		{"requests", memio.Impairment{}, Options{}, requests},
		{"requests/delayed-ack", memio.Impairment{}, Options{DelayedACK: 5 * time.Millisecond}, requests},
		{"requests/impaired/delayed-ack", imp, Options{DelayedACK: 5 * time.Millisecond}, requests},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slow, none := recordRun(t, false, tc.imp, tc.o, tc.scenario)
			fast, taken := recordRun(t, true, tc.imp, tc.o, tc.scenario)
			if none != 0 {
				t.Fatalf("tcp_predicted %d with prediction off", none)
			}
			// An eighth: on the impaired wire, once reordering was seen,
			// a loss waits RACK's reordering window (at least reoMin) with
			// out-of-order data held, where the general path runs.
			if taken < uint64(len(fast.frames))/8 {
				t.Errorf("prediction took %d segments of %d frames: the scenario does not exercise it", taken, len(fast.frames))
			}
			for i := range min(len(slow.frames), len(fast.frames)) {
				if slow.dirs[i] != fast.dirs[i] || !bytes.Equal(slow.frames[i], fast.frames[i]) {
					t.Fatalf("frame %d of %d differs:\nwithout prediction %v % x\nwith prediction    %v % x",
						i, len(slow.frames), slow.dirs[i], slow.frames[i], fast.dirs[i], fast.frames[i])
				}
			}
			if len(slow.frames) != len(fast.frames) {
				t.Fatalf("%d frames without prediction, %d with", len(slow.frames), len(fast.frames))
			}
			t.Logf("%d frames, %d segments predicted", len(fast.frames), taken)
		})
	}
}
