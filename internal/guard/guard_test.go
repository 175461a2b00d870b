package guard

import (
	"sync"
	"testing"
	"time"
)

func TestGuardShutWaitsForTheCallInProgress(t *testing.T) {
	var g Guard
	if !g.Enter() {
		t.Fatal("Enter on an open guard failed")
	}
	released := make(chan struct{})
	shut := make(chan bool)
	go func() { shut <- g.Shut(nil) }()
	// Shut must not return while the call is in progress.
	select {
	case <-shut:
		t.Fatal("Shut returned while a data-path call was in progress")
	case <-time.After(20 * time.Millisecond):
	}
	close(released)
	g.Exit()
	select {
	case ok := <-shut:
		if !ok {
			t.Fatal("first Shut returned false")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shut did not return after Exit")
	}
	if g.Enter() || g.BeginWait() {
		t.Fatal("Enter or BeginWait succeeded after Shut")
	}
	if g.Shut(nil) {
		t.Fatal("second Shut returned true")
	}
}

func TestGuardShutWakesWaiters(t *testing.T) {
	var g Guard
	wake := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if !g.BeginWait() {
			return
		}
		<-wake
		g.EndWait()
	}()
	if !g.Shut(func() { close(wake) }) {
		t.Fatal("Shut of an open guard returned false")
	}
	// Shut returned, so no wait is in progress any more.
	if g.BeginWait() {
		t.Fatal("BeginWait succeeded after Shut")
	}
	wg.Wait()
}
