package udp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/sock"
	"github.com/dgramio/dgramio/internal/sock/socktest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// twoCPUs returns two CPUs this process may use, or skips.
func twoCPUs(t *testing.T) []int {
	t.Helper()
	allowed, err := cpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		testutil.Skip(t, fmt.Sprintf("steering by CPU needs two CPUs; this process may use %v", allowed))
	}
	return allowed[:2]
}

// TestGroupSteersByCPU sends from a sender pinned to each CPU over
// loopback (which receives on the sending CPU) to a two-queue server, and
// checks that everything each sender sent arrives, in order, at the queue
// of its CPU and nowhere else, and that the queues' counters add up. It
// runs with the CPUs in both orders, so a flow hash that happened to put
// each flow on the right queue cannot pass both.
// Both families: the program reads the CPU, not the packet.
func TestGroupSteersByCPU(t *testing.T) {
	cpus := twoCPUs(t)
	socktest.ForFamilies(t, func(t *testing.T, fam socktest.Family) {
		t.Run("forward", func(t *testing.T) { steerTest(t, fam.Loopback, cpus) })
		t.Run("reversed", func(t *testing.T) { steerTest(t, fam.Loopback, []int{cpus[1], cpus[0]}) })
	})
}

func steerTest(t *testing.T, lo netip.Addr, cpus []int) {
	const perFlow = 300
	g := openSteerGroup(t, lo, cpus)
	defer g.Close()
	res := make([]steerQueue, 2)
	opened := make(chan dgramio.Backend, 2)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for q := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[q].receive(g, q, opened, stop)
		}()
	}
	halt := func() { close(stop); wg.Wait() }
	var local netip.AddrPort
	for range res {
		b := <-opened
		if b == nil {
			halt()
			t.Fatalf("open queue: %v %v", res[0].err, res[1].err)
		}
		local = b.(*Backend).LocalAddr()
	}
	if err := sendFlows(cpus, local, perFlow); err != nil {
		halt()
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); res[0].n.Load()+res[1].n.Load() < 2*perFlow && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	halt()
	checkSteered(t, res, cpus, perFlow)
}

// openSteerGroup opens the two-queue loopback server of steerTest, its
// queues' sockets steered to cpus; a port taken meanwhile is tried again
// with another.
func openSteerGroup(t *testing.T, lo netip.Addr, cpus []int) dgramio.QueueGroup {
	t.Helper()
	for try := 0; ; try++ {
		cfg := dgramio.Config{Kind: dgramio.KindUDP, Role: dgramio.RoleServer, LocalIP: lo,
			Port: socktest.FreePort(t, unix.SOCK_DGRAM), Queues: 2, CPUs: cpus, Poll: dgramio.PollYield}
		g, err := NewGroup(cfg)
		if errors.Is(err, unix.EADDRINUSE) && try < 5 {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := "reuseport by cpu"; g.Mode()[:len(want)] != want {
			g.Close()
			t.Fatalf("group mode %q", g.Mode())
		}
		return g
	}
}

// steerQueue is what one queue of steerTest received.
type steerQueue struct {
	seqs  map[uint32][]uint32 // flow → sequence numbers, in arrival order
	n     atomic.Int64        // datagrams received, for the main goroutine
	stats dgramio.Stats
	err   error
}

// receive opens queue q of g, sends it on opened (nil if it failed, with
// r.err set) and polls it, recording each datagram's flow and sequence
// number, until stop is closed and it finds nothing more; it then keeps
// the queue's stats and closes it.
func (r *steerQueue) receive(g dgramio.QueueGroup, q int, opened chan<- dgramio.Backend, stop <-chan struct{}) {
	r.seqs = map[uint32][]uint32{}
	b, err := g.OpenQueue(q)
	if err != nil {
		r.err = err
		opened <- nil
		return
	}
	opened <- b
	defer func() { r.stats = b.Stats(); b.Close() }()
	pkts := make([]dgramio.Packet, 32)
	for {
		n, err := b.Rx(pkts)
		if err != nil {
			r.err = err
			return
		}
		for _, p := range pkts[:n] {
			f, s := binary.BigEndian.Uint32(p.Data), binary.BigEndian.Uint32(p.Data[4:])
			r.seqs[f] = append(r.seqs[f], s)
		}
		r.n.Add(int64(n))
		if n == 0 {
			select {
			case <-stop:
				return
			default:
			}
			waitABit(b)
		}
	}
}

// sendFlows sends perFlow datagrams to local from one sender per CPU, at
// once: flow f is the sender on cpus[f].
func sendFlows(cpus []int, local netip.AddrPort, perFlow int) error {
	var wg sync.WaitGroup
	errs := make([]error, len(cpus))
	for f := range cpus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[f] = sendFlow(cpus[f], local, uint32(f), perFlow)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// checkSteered checks what steerTest's queues received: queue q has every
// datagram of flow q (sent from cpus[q]), in order, and none of the other
// flow, and the queues' counters add up to what was sent.
func checkSteered(t *testing.T, res []steerQueue, cpus []int, perFlow int) {
	t.Helper()
	var sum uint64
	for q := range res {
		r := &res[q]
		if r.err != nil {
			t.Fatalf("queue %d: %v", q, r.err)
		}
		sum += r.stats.RxDelivered
		for f, seqs := range r.seqs {
			if int(f) != q {
				t.Errorf("queue %d (cpu %d) received %d datagrams of the flow sent from cpu %d", q, cpus[q], len(seqs), cpus[f])
			}
		}
		seqs := r.seqs[uint32(q)]
		if len(seqs) != perFlow {
			t.Errorf("queue %d: %d of %d datagrams of its flow arrived; stats %+v", q, len(seqs), perFlow, r.stats)
		}
		for i, s := range seqs {
			if s != uint32(i) {
				t.Errorf("queue %d: datagram %d is sequence %d: out of order", q, i, s)
				break
			}
		}
		if r.stats.RxDelivered != uint64(len(r.seqs[0])+len(r.seqs[1])) {
			t.Errorf("queue %d: RxDelivered %d, but it handed out %d", q, r.stats.RxDelivered, len(r.seqs[0])+len(r.seqs[1]))
		}
	}
	if sum != uint64(len(res)*perFlow) {
		t.Errorf("queues delivered %d in all, sent %d", sum, len(res)*perFlow)
	}
}

// waitABit sleeps in Wait for at most a millisecond, as a yielding
// poller does.
func waitABit(b dgramio.Backend) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_ = b.Wait(ctx)
}

// sendFlow sends n datagrams (flow id, sequence number) to dst from a
// socket of its own, on a thread pinned to c.
func sendFlow(c int, dst netip.AddrPort, flow uint32, n int) error {
	if err := cpu.Pin(c); err != nil {
		return err
	}
	defer cpu.Unpin()
	family := unix.AF_INET
	if dst.Addr().Is6() {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, sock.Sockaddr(dst)); err != nil {
		return err
	}
	var p [8]byte
	binary.BigEndian.PutUint32(p[:], flow)
	for i := range n {
		binary.BigEndian.PutUint32(p[4:], uint32(i))
		for {
			_, err := unix.Write(fd, p[:])
			if err == unix.EAGAIN || err == unix.ENOBUFS {
				time.Sleep(time.Millisecond)
				continue
			}
			if err != nil {
				return fmt.Errorf("send from cpu %d: %w", c, err)
			}
			break
		}
		if i%32 == 31 {
			time.Sleep(200 * time.Microsecond) // leave the receivers time: 16 MiB buffers hold it anyway
		}
	}
	return nil
}
