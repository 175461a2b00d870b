package sock

import (
	"errors"
	"net"
	"testing"

	"github.com/dgramio/dgramio"
)

// TestLife: Stats reads the live counters while open and the frozen ones
// after Close, which runs its shutdown once and wakes what waits.
func TestLife(t *testing.T) {
	var l Life
	live := dgramio.Stats{TxSent: 1, Layers: []dgramio.Counter{{Layer: "x", Name: "y", Value: 1}}}
	snapshot := func() dgramio.Stats { return live }
	if s := l.Stats(snapshot); s.TxSent != 1 {
		t.Fatalf("Stats while open: %+v", s)
	}
	if !l.BeginWait() {
		t.Fatal("BeginWait refused while open")
	}
	woken := make(chan struct{})
	shutdowns := 0
	done := make(chan error)
	go func() {
		done <- l.Close(func() { close(woken) }, func() (dgramio.Stats, error) {
			shutdowns++
			live.TxSent = 2
			return live, net.ErrClosed
		})
	}()
	<-woken // Close woke the waiter, and waits for it to leave
	l.EndWait()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Close returned %v, want shutdown's error", err)
	}
	if err := l.Close(nil, func() (dgramio.Stats, error) { shutdowns++; return dgramio.Stats{}, nil }); err != nil || shutdowns != 1 {
		t.Fatalf("second Close: %v; shutdown ran %d times, want 1", err, shutdowns)
	}
	if l.Enter() || l.BeginWait() {
		t.Fatal("the guard lets a call in after Close")
	}
	s := l.Stats(func() dgramio.Stats { t.Fatal("snapshot called after Close"); return dgramio.Stats{} })
	if s.TxSent != 2 {
		t.Fatalf("Stats after Close: TxSent %d, want the frozen 2", s.TxSent)
	}
	s.Layers[0].Value = 99
	if again := l.Stats(snapshot); again.Layers[0].Value != 1 {
		t.Fatal("Stats after Close shares its Layers with the caller")
	}
}
