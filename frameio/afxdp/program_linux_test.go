package afxdp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/afxdp/xdpprog"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// attachShared attaches a shared program inside h's namespace; it is
// closed at cleanup (after the sockets, which register their cleanups
// later and so run first).
func attachShared(t *testing.T, h *testhost.Host, o ProgramOptions) *Program {
	t.Helper()
	var p *Program
	err := h.Do(func() error {
		var err error
		p, err = AttachProgram(o)
		return err
	})
	testutil.SkipIfNotSupported(t, err)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close program: %v", err)
		}
	})
	return p
}

// TestSharedProgramTwoQueues attaches one program for two queues of a
// two-queue veth, registers an XSK per queue, and sends from B on a thread
// pinned to each CPU: XPS sends CPU q's datagrams on B's TX queue q, veth
// delivers them on A's RX queue q, and the program redirects them to the
// socket of queue q. Each socket must get its sender's datagrams only.
func TestSharedProgramTwoQueues(t *testing.T) {
	allowed, err := cpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		testutil.Skip(t, fmt.Sprintf("needs two CPUs, this process may use %v", allowed))
	}
	cpus := allowed[:2]
	p := hosttest.New(t, testhost.Options{Queues: 2, XPSCPUs: cpus})
	prog := attachShared(t, p.A, ProgramOptions{Iface: p.A.Iface, Port: xskPort, Ports: 2, Queues: 2})
	if prog.Mode() != "driver" {
		t.Errorf("shared program mode %q, want driver", prog.Mode())
	}
	xs := []*XSK{
		openXSK(t, p.A, Options{Iface: p.A.Iface, QueueID: 0, Shared: prog}),
		openXSK(t, p.A, Options{Iface: p.A.Iface, QueueID: 1, Shared: prog}),
	}
	for q, x := range xs {
		if x.Mode() != "driver copy" || x.Queue() != q || x.Shared() != prog {
			t.Errorf("queue %d: mode %q queue %d shared %v", q, x.Mode(), x.Queue(), x.Shared() == prog)
		}
		for _, c := range x.Stats().Layers {
			if c.Layer == "xdp-prog" {
				t.Fatalf("queue %d reports the shared program's counters: %+v", q, c)
			}
		}
	}
	// A third socket on a queue outside the map, or another interface, is
	// refused before any system call.
	var ce *dgramio.ConfigError
	if _, err := tryOpen(p.A, Options{Iface: p.A.Iface, QueueID: 2, Shared: prog}); !errors.As(err, &ce) || ce.Field != "QueueID" {
		t.Errorf("queue 2 into a 2-queue map: %v, want a ConfigError on QueueID", err)
	}

	// Queue q's flow goes to port xskPort+q from a sender on cpus[q]. B
	// knows A's MAC beforehand: a datagram that waits for ARP leaves from
	// the CPU that processes the ARP reply, and a connected socket keeps
	// the TX queue of its first datagram (sk_tx_queue_mapping).
	if err := p.B.AddNeigh(p.A.Addr, p.A.MAC); err != nil {
		t.Fatal(err)
	}
	const n = 200
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for q := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[q] = sendPinned(p.B, cpus[q], netip.AddrPortFrom(p.A.Addr, uint16(xskPort+q)), n)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for q, x := range xs {
		next := uint32(0)
		got := receive(t, x, n, 20*time.Second, func(r rxFrame) {
			if int(r.udp.DstPort) != xskPort+q {
				t.Errorf("queue %d got a datagram for port %d", q, r.udp.DstPort)
				return
			}
			seq, err := checkPayload(r.payload, 64)
			if err != nil {
				t.Error(err)
			}
			if seq != next {
				t.Errorf("queue %d: sequence %d, want %d", q, seq, next)
			}
			next = seq + 1
		})
		if got != n {
			t.Errorf("queue %d received %d of %d; program counters %v", q, got, n, mustCounters(t, prog))
		}
	}
	c := mustCounters(t, prog)
	if c[xdpprog.Redirected] < 2*n {
		t.Errorf("program redirected %d, want at least %d", c[xdpprog.Redirected], 2*n)
	}
}

// sendPinned sends n datagrams of payload(seq, 64) from h to `to` on a
// thread pinned to cpu, a millisecond's pause every 16.
func sendPinned(h *testhost.Host, cpuID int, to netip.AddrPort, n int) error {
	return h.Do(func() error {
		if err := cpu.Pin(cpuID); err != nil {
			return err
		}
		c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(to))
		if err != nil {
			return err
		}
		defer c.Close()
		for i := range n {
			if _, err := c.Write(payload(uint32(i), 64)); err != nil {
				return err
			}
			if i%16 == 15 {
				time.Sleep(time.Millisecond)
			}
		}
		return nil
	})
}

func mustCounters(t *testing.T, p *Program) xdpprog.Counts {
	t.Helper()
	c, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return c
}
