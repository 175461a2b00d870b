package native

import (
	"bytes"
	"testing"
	"time"

	"github.com/dgramio/dgramio/frameio/memio"
)

// TestStageHoldsUntilRelease: bytes staged (Stage) take their room in the
// send buffer at once (Room) and leave only after Release, in the order
// they were staged, across the ring's end; Unstage drops them as if never
// staged; Write and CloseWrite release what was staged first, so the
// peer reads every byte before the FIN (RFC 9293 §3.10.4).
func TestStageHoldsUntilRelease(t *testing.T) {
	const sendBuf = 4096
	w := newWorld(t, memio.Options{}, Options{SendBuf: sendBuf}, Options{})
	ca, cb := w.connect(7000)
	out := func() uint64 { return counterOf(t, w.a, "tcp_segments_out") }

	// Fill and empty the ring a few times, so that records cross its end.
	var want, got []byte
	p := make([]byte, 64<<10)
	crossed := 0
	for round := range 12 {
		before := out()
		for k := range 3 { // three records, held together
			room := ca.Room()
			head := []byte{byte(round), byte(k)}
			body := bytes.Repeat([]byte{byte('a' + round)}, 700+round*40+k)
			if wrap(ca.sHead+ca.sLen+ca.sHeld, len(ca.sbuf))+len(head)+len(body) > len(ca.sbuf) {
				crossed++
			}
			staged := ca.sHeld
			if !ca.Stage(head, body) {
				t.Fatalf("round %d: Stage refused %d bytes with room %d", round, len(head)+len(body), room)
			}
			if ca.Room() != room-len(head)-len(body) || ca.sHeld != staged+len(head)+len(body) {
				t.Fatalf("round %d: room %d, staged %d after staging %d bytes into %d", round, ca.Room(), ca.sHeld, len(head)+len(body), room)
			}
			want = append(append(want, head...), body...)
		}
		for range 4 {
			w.step()
		}
		if out() != before || cb.Readable() {
			t.Fatalf("round %d: %d segments left before Release", round, out()-before)
		}
		ca.Release()
		w.until(time.Second, "the staged bytes", func() bool {
			n, _ := cb.Read(p)
			got = append(got, p[:n]...)
			return len(got) == len(want) && ca.Buffered() == 0
		})
	}
	if crossed == 0 {
		t.Fatal("no record crossed the ring's end")
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the bytes read differ from those staged")
	}

	// Stage refuses what exceeds Room, taking nothing.
	if ca.Stage(nil, make([]byte, ca.Room()+1)) || ca.sHeld != 0 {
		t.Fatalf("Stage took %d bytes beyond its room", ca.sHeld)
	}
	// Unstage: nothing of it ever leaves.
	ca.Stage([]byte("xx"), []byte("dropped"))
	ca.Unstage()
	if ca.sHeld != 0 || ca.Room() != sendBuf {
		t.Fatalf("after Unstage: staged %d, room %d", ca.sHeld, ca.Room())
	}
	// Write releases what was staged first; CloseWrite too, before its FIN.
	ca.Stage([]byte("1:"), []byte("staged"))
	ca.Write([]byte("|written|"))
	ca.Stage([]byte("2:"), []byte("last"))
	ca.CloseWrite()
	got = got[:0]
	w.until(time.Second, "FIN", func() bool {
		n, err := cb.Read(p)
		got = append(got, p[:n]...)
		return err != nil
	})
	if string(got) != "1:staged|written|2:last" {
		t.Fatalf("read %q before the FIN", got)
	}
	if ca.Room() != 0 || ca.Stage(nil, []byte("late")) {
		t.Fatal("Stage took bytes after CloseWrite")
	}
}
