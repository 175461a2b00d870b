package wire

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

func tagged(tpids ...uint16) []byte {
	f := ipv4Frame(9, 20)
	for i := len(tpids) - 1; i >= 0; i-- {
		g := make([]byte, len(f)+4)
		n := copy(g, f)
		n = insertVLAN(g, n, tpids[i], uint16(100+i))
		f = g[:n]
	}
	return f
}

func TestIPv4Span(t *testing.T) {
	short := ipv4Frame(1, 10)
	binary.BigEndian.PutUint16(short[16:], 25) // total length 25 of 30 bytes
	lying := ipv4Frame(1, 10)
	binary.BigEndian.PutUint16(lying[16:], 900) // more than the frame holds
	padded := append(ipv4Frame(1, 4), make([]byte, 20)...)
	for _, c := range []struct {
		name  string
		f     []byte
		off   int
		n     int
		found bool
	}{
		{"plain", ipv4Frame(1, 10), 14, 30, true},
		{"padding is not covered", padded, 14, 24, true},
		{"total length shorter", short, 14, 25, true},
		{"total length lies", lying, 14, 30, true},
		{"802.1Q", tagged(etherVLAN), 18, 40, true},
		{"QinQ", tagged(etherQinQ, etherVLAN), 22, 40, true},
		{"three tags", tagged(etherVLAN, etherVLAN, etherVLAN), 0, 0, false},
		{"ARP", arpFrame(), 0, 0, false},
		{"header only", ipv4Frame(1, 0)[:14], 0, 0, false},
		{"one byte", ipv4Frame(1, 0)[:15], 14, 1, true},
		{"runt", []byte{1, 2, 3}, 0, 0, false},
		{"empty", nil, 0, 0, false},
	} {
		off, n, ok := ipv4Span(c.f)
		if off != c.off || n != c.n || ok != c.found {
			t.Errorf("%s: %d, %d, %v; want %d, %d, %v", c.name, off, n, ok, c.off, c.n, c.found)
		}
	}
}

func TestInsertVLAN(t *testing.T) {
	f := ipv4Frame(3, 8)
	buf := make([]byte, len(f)+4)
	n := insertVLAN(buf, copy(buf, f), etherVLAN, 0x2123)
	want := append(append(bytes.Clone(f[:12]), 0x81, 0x00, 0x21, 0x23), f[12:]...)
	if !bytes.Equal(buf[:n], want) {
		t.Fatalf("% x\nwant % x", buf[:n], want)
	}
}

// FuzzCorrupt: corrupt never panics, changes exactly one byte inside the
// IPv4 packet when it reports a change, and nothing otherwise.
func FuzzCorrupt(f *testing.F) {
	f.Add(ipv4Frame(1, 30), uint32(0), byte(1))
	f.Add(ipv4Frame(1, 30), uint32(1<<31+7), byte(0xff))
	f.Add(tagged(etherQinQ, etherVLAN), uint32(12345), byte(0x80))
	f.Add(arpFrame(), uint32(3), byte(4))
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 8, 0}, uint32(0), byte(9))
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x81, 0, 0, 1, 8, 0, 0x45}, uint32(5), byte(2))
	f.Fuzz(func(t *testing.T, frame []byte, at uint32, mask byte) {
		orig := bytes.Clone(frame)
		off, n, ok := ipv4Span(frame)
		if ok && (off < etherHdr || n < 1 || off+n > len(frame)) {
			t.Fatalf("span %d+%d of a %d-byte frame", off, n, len(frame))
		}
		changed := corrupt(frame, at, mask)
		var diff []int
		for i := range frame {
			if frame[i] != orig[i] {
				diff = append(diff, i)
			}
		}
		if !changed {
			if len(diff) != 0 {
				t.Fatalf("reported no change, bytes %v changed", diff)
			}
			if ok && mask != 0 {
				t.Fatal("an IPv4 frame was not corrupted")
			}
			return
		}
		if len(diff) != 1 || diff[0] < off || diff[0] >= off+n || frame[diff[0]]^orig[diff[0]] != mask {
			t.Fatalf("bytes %v changed, want one in [%d, %d) XOR %#x", diff, off, off+n, mask)
		}
	})
}

// FuzzPipe feeds frames and impairments made of fuzz input through a pipe
// on a fake clock: it never panics, every frame is accounted for, frames
// leave in release order and never before they arrived, and each frame out
// is a frame in with at most one byte changed.
func FuzzPipe(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 4, 60, 1, 2, 3})
	f.Add([]byte{25, 25, 25, 25, 10, 5, 3, 8, 80, 80, 80, 10, 200, 1, 1})
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255, 14, 15, 16})
	f.Add(append([]byte{40, 60, 90, 120, 2, 2, 0, 2}, ipv4Frame(5, 40)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 8 || len(data) > 4096 { // the checks below are quadratic
			return
		}
		p := func(b byte) float64 { return float64(b) / 255 }
		im := Impairment{Loss: p(data[0]), Dup: p(data[1]), Reorder: p(data[2]), Corrupt: p(data[3]),
			Delay: time.Duration(data[4]) * 10 * time.Microsecond, Jitter: time.Duration(data[5]) * 10 * time.Microsecond}
		if data[6] != 0 {
			im.Rate = uint64(data[6]) * 1_000_000
		}
		limit := 1 + int(data[7]%8)
		c := &counters{}
		pp := newPipe(NewDecider(uint64(data[7]), AtoB, im), limit, 256, c)
		var ins [][]byte
		var now, lastAt int64
		out := make([]*slot, 0, 3)
		drain := func(now int64) {
			pp.expire(now)
			for {
				due := pp.due(now, out[:0])
				if len(due) == 0 {
					return
				}
				for _, s := range due {
					if s.at > now || s.at < lastAt || s.at < s.arr {
						t.Fatalf("frame released at %d, now %d, previous %d, arrived %d", s.at, now, lastAt, s.arr)
					}
					lastAt = s.at
					match := false
					for _, in := range ins {
						if len(in) == s.n && diffCount(in, s.buf[:s.n]) <= 1 {
							match = true
							break
						}
					}
					if !match {
						t.Fatalf("frame out % x matches no frame in", s.buf[:s.n])
					}
				}
				pp.pop(len(due), true)
			}
		}
		rest := data[8:]
		for len(rest) > 0 {
			n := min(int(rest[0]), len(rest)-1, 256)
			frame := rest[1 : 1+n]
			rest = rest[1+n:]
			now += int64(n) * 1000
			if s := pp.take(); s != nil {
				s.n = copy(s.buf, frame)
				ins = append(ins, bytes.Clone(frame))
				if n < etherHdr {
					pp.discard(s)
				} else {
					pp.push(s, now)
				}
			}
			drain(now)
			pp.publish()
			if cs := c.snapshot(); !cs.Balanced() || pp.freeCount()+pp.queued() != limit {
				t.Fatalf("%v, %d free of %d", cs, pp.freeCount(), limit)
			}
		}
		if next, ok := pp.next(); ok {
			drain(next + int64(time.Second))
		}
		pp.publish()
		if cs := c.snapshot(); cs.Queued != 0 || !cs.Balanced() {
			t.Fatalf("after draining: %v", cs)
		}
	})
}

func diffCount(a, b []byte) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}
