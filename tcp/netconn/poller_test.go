package netconn

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/peertest"
)

// noWait hides memio's Wait: a FrameIO that cannot sleep on its queue, as
// DPDK's vdevs.
type noWait struct{ frameio.FrameIO }

// echoOnce dials B from A, has B's listener echo one message, and checks
// it comes back.
func echoOnce(t *testing.T, a, b *Service) {
	t.Helper()
	ln, err := b.Listen(testPort)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peertest.ServeEcho(ln)
	c := dialB(t, a)
	defer c.Close() // now: the caller may listen on the port again
	c.SetDeadline(time.Now().Add(20 * time.Second))
	for i := 0; i < 50; i++ {
		msg := fmt.Sprintf("message %d", i)
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
			t.Fatalf("%q %v", got, err)
		}
		time.Sleep(time.Millisecond) // let the pollers go idle between messages
	}
}

// TestNoWaiterNaps: over a FrameIO that cannot sleep (DPDK), an idle
// poller naps instead, and the exchange still works.
func TestNoWaiterNaps(t *testing.T) {
	pa, pb := memio.NewPair(memio.Options{})
	cfg := dgramio.Config{ConnectTimeout: 20 * time.Second}
	cfg.LocalIP = ipA
	a, err := NewOverFrameIO(cfg, noWait{pa}, Options{Poll: PollSleep})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	cfg.LocalIP = ipB
	b, err := NewOverFrameIO(cfg, noWait{pb}, Options{Poll: PollSleep})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	echoOnce(t, a, b)
	st := a.Stats()
	if naps, _ := st.Counter("netconn", "naps"); naps == 0 {
		t.Errorf("an idle poller over a FrameIO without Wait took no nap")
	}
}

// TestPinnedPoller: with Config.CPUs the poller runs pinned (and
// spinning, here); the exchange works and Close returns.
func TestPinnedPoller(t *testing.T) {
	pa, pb := memio.NewPair(memio.Options{})
	cfg := dgramio.Config{ConnectTimeout: 20 * time.Second, LocalIP: ipA, CPUs: []int{lastCPU()}}
	a, err := NewOverFrameIO(cfg, pa, Options{Poll: PollSpin})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewOverFrameIO(dgramio.Config{LocalIP: ipB}, pb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	echoOnce(t, a, b)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestIdleSleeps: an adaptive poller with nothing to do sleeps (it does
// not spin at 100%): its rounds stop growing while no frame arrives.
func TestIdleSleeps(t *testing.T) {
	p := newPair(t, memio.Options{}, Options{})
	echoOnce(t, p.A, p.B)
	rounds := func() uint64 {
		st := p.A.Stats()
		v, _ := st.Counter("netconn", "poll_rounds")
		return v
	}
	time.Sleep(50 * time.Millisecond)
	before := rounds()
	time.Sleep(200 * time.Millisecond)
	// Asleep, a poller makes no round; allow a few for stray frames.
	if d := rounds() - before; d > 100 {
		t.Errorf("an idle adaptive poller made %d rounds in 200ms: spinning?", d)
	}
	st := p.A.Stats()
	if v, _ := st.Counter("netconn", "sleeps"); v == 0 {
		t.Errorf("no sleep counted")
	}
}

// TestOptions: bad Options and a missing address are *dgramio.ConfigErrors,
// and the FrameIO is closed when the Service cannot start.
func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		cfg dgramio.Config
		o   Options
	}{
		{dgramio.Config{LocalIP: ipA}, Options{Poll: PollMode(9)}},
		{dgramio.Config{LocalIP: ipA}, Options{MaxConns: -1}},
		{dgramio.Config{}, Options{}},
		{dgramio.Config{LocalIP: ipA, TCP: dgramio.TCPTuning{Congestion: "vegas"}}, Options{}},
	} {
		pa, pb := memio.NewPair(memio.Options{})
		_, err := NewOverFrameIO(tc.cfg, pa, tc.o)
		var ce *dgramio.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%+v %+v: %v, want *dgramio.ConfigError", tc.cfg, tc.o, err)
		}
		if pa.TxFrame(make([]byte, 60)) {
			t.Errorf("the FrameIO is still open after a failed start")
		}
		pb.Close()
	}
	if _, err := New(dgramio.Config{Kind: dgramio.KindUDP, LocalIP: ipA, Port: 1}, Options{}); err == nil {
		t.Errorf("New for kind udp: no error")
	}
}
