//go:build linux

package dgramio_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
	_ "github.com/dgramio/dgramio/kinds"
)

// TestWaitReturnsCtxErr: a Wait that returns because of its context
// returns an error that matches ctx.Err(), and ctx.Err() is not nil then,
// as net.Conn's deadlines and every context-aware call in the standard
// library behave. A Wait must never report context.DeadlineExceeded of its
// own while ctx.Err() is still nil (the context's timer fires a little
// after its deadline passes). Each kind: 40 deadlines of 2 ms and 10
// cancels from another goroutine, on an idle server (nothing arrives, so
// every Wait ends by its context; a nil return is a spurious wake-up,
// allowed, and retried).
func TestWaitReturnsCtxErr(t *testing.T) {
	loop := netip.MustParseAddr("127.0.0.1")
	kernel := func(kind dgramio.Kind, port uint16) func(t *testing.T) dgramio.Backend {
		return func(t *testing.T) dgramio.Backend {
			b, err := dgramio.New(dgramio.Config{Kind: kind, Role: dgramio.RoleServer, LocalIP: loop, Port: port})
			testutil.SkipIfNotSupported(t, err)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	raw := func(kind dgramio.Kind, stack string) func(t *testing.T) dgramio.Backend {
		return func(t *testing.T) dgramio.Backend {
			p := hosttest.New(t, testhost.Options{})
			local := p.A.Addr
			if kind == "tcp-xdp" { // an address the kernel does not hold
				a := local.As4()
				a[3] = 3
				local = netip.AddrFrom4(a)
			}
			cfg := dgramio.Config{Kind: kind, Role: dgramio.RoleServer, Iface: p.A.Iface, LocalIP: local, Port: 5000}
			cfg.TCP.Stack = dgramio.TCPStack(stack)
			var b dgramio.Backend
			err := p.A.Do(func() (err error) { b, err = dgramio.New(cfg); return err })
			testutil.SkipIfNotSupported(t, err)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	for _, tc := range []struct {
		name string
		open func(t *testing.T) dgramio.Backend
	}{
		{"udp", kernel("udp", 47311)},
		{"uring", kernel("uring", 47312)},
		{"tcp", kernel("tcp", 47313)},
		{"xdp", raw("xdp", "")},
		{"tcp-xdp/native", raw("tcp-xdp", "native")},
		{"tcp-xdp/netstack", raw("tcp-xdp", "netstack")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.open(t)
			defer b.Close()
			for i := range 50 {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
				if i >= 40 {
					ctx, cancel = context.WithCancel(context.Background())
					time.AfterFunc(time.Millisecond, cancel)
				}
				err := waitCtx(b, ctx)
				cerr := ctx.Err()
				cancel()
				if cerr == nil || !errors.Is(err, cerr) {
					t.Fatalf("call %d: Wait returned %v while ctx.Err() was %v; want ctx.Err(), not nil", i, err, cerr)
				}
			}
		})
	}
}

// waitCtx runs the poll loop's sleep: Wait, and Rx after a nil return
// (Rx may have something, or a step to take, as a listener to look at),
// until Wait returns an error, for at most 10 s.
func waitCtx(b dgramio.Backend, ctx context.Context) error {
	pkts := make([]dgramio.Packet, 16)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		if err := b.Wait(ctx); err != nil {
			return err
		}
		if _, err := b.Rx(pkts); err != nil {
			return err
		}
	}
	return errors.New("Wait kept returning nil on an idle backend")
}
