//go:build dpdk

package dpdk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// TestTwoQueues opens a port with two queues on a veth end: net_af_packet
// with qpairs=2, whose two packet sockets a PACKET_FANOUT hash feeds (veth
// has no combined channels, so net_af_xdp is refused with two queues).
// Sixteen flows from B, polled as they come, must each arrive whole, in
// order, on one queue;
// both queues must carry some; each transmits on its own; and the device
// goes away only when both queues are closed.
func TestTwoQueues(t *testing.T) {
	p := twoQueuePair(t)
	qs := openTwoQueues(t, p.A, "")
	q0 := qs[0]

	// B sends while the queues are polled: net_af_packet's fanout rolls a
	// frame over to the other socket when its own ring is full
	// (PACKET_FANOUT_FLAG_ROLLOVER), which would move a flow.
	const flows, n = 16, 50
	sent := make(chan error, 1)
	go func() { sent <- sendFlows(p.B, netip.AddrPortFrom(p.A.Addr, portA), flows, n) }()
	perQueue := receiveFlows(t, qs, p.A.Addr, flows*n)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	for q, port := range qs {
		if perQueue[q] == 0 {
			t.Errorf("queue %d carried none of %d flows (a hash that put all on one queue has odds 2^-15)", q, flows)
		}
		if s := port.Stats(); s.RxFrames < uint64(perQueue[q]) {
			t.Errorf("queue %d: RxFrames %d, took %d of ours", q, s.RxFrames, perQueue[q])
		}
	}
	t.Logf("queue 0 took %d datagrams, queue 1 %d", perQueue[0], perQueue[1])

	transmitEach(t, qs, p.A, p.B)
	ds := q0.DeviceStats()
	if v, ok := (&dgramio.Stats{Layers: ds.Layers}).Counter("dpdk", "ipackets"); !ok || v < flows*n {
		t.Errorf("device ipackets %d (%v), want at least %d", v, ok, flows*n)
	}

	// Queue 0 closes first: queue 1 still works, the device stays.
	if err := qs[0].Close(); err != nil {
		t.Fatal(err)
	}
	if qs[0].TxFrame(make([]byte, 60)) {
		t.Error("closed queue 0 took a frame")
	}
	if !qs[1].TxFrame(make([]byte, 60)) {
		t.Error("queue 1 refused a frame after queue 0 closed")
	}
	qs[1].Kick()
	if err := qs[1].Close(); err != nil {
		t.Fatal(err)
	}
	if s := qs[1].Stats(); s.TxFrames != 2 {
		t.Errorf("queue 1 after close: TxFrames %d, want 2", s.TxFrames)
	}
	if ds := q0.DeviceStats(); len(ds.Layers) == 0 {
		t.Error("DeviceStats after close has no counters")
	}
}

// TestFanoutRollover: net_af_packet's fanout (PACKET_FANOUT_HASH with
// PACKET_FANOUT_FLAG_ROLLOVER) hands a frame whose queue's ring is full to
// another queue's socket, which takes a flow off its queue. Nobody polls
// two rings of 16 frames while B sends one flow of 40 datagrams: the hash
// puts them all on one ring, and once it is full the kernel hands them to
// the other ring, while that one has a quarter free. DeviceStats must
// count the frames that rolled over (tp_rollover), those
// no ring had room for (tp_rollover_failed), and the drops (tp_drops, in
// RxDropped); the frames both rings hold are the flow's, on both queues.
func TestFanoutRollover(t *testing.T) {
	p := twoQueuePair(t)
	qs := openTwoQueues(t, p.A, ",framecnt=16")
	before := qs[0].DeviceStats()
	counter := func(s frameio.Stats, name string) uint64 {
		v, ok := (&dgramio.Stats{Layers: s.Layers}).Counter("packet", name)
		if !ok {
			t.Fatalf("DeviceStats has no packet %s: %v", name, s.Layers)
		}
		return v
	}
	if v := counter(before, "tp_rollover"); v != 0 {
		t.Fatalf("tp_rollover %d before anything was sent", v)
	}
	if err := sendFlows(p.B, netip.AddrPortFrom(p.A.Addr, portA), 1, 40); err != nil {
		t.Fatal(err)
	}
	// Every frame reached the fanout before sendFlows returned; what
	// the rings took is there to count.
	s := qs[0].DeviceStats()
	roll, huge, failed, drops := counter(s, "tp_rollover"), counter(s, "tp_rollover_huge"), counter(s, "tp_rollover_failed"), counter(s, "tp_drops")
	t.Logf("tp_rollover %d, tp_rollover_huge %d, tp_rollover_failed %d, tp_drops %d, RxDropped %d", roll, huge, failed, drops, s.RxDropped)
	if roll == 0 || huge > roll {
		t.Errorf("tp_rollover %d, tp_rollover_huge %d: the one flow's frames went to the other queue once its ring was full", roll, huge)
	}
	if failed == 0 || drops == 0 || s.RxDropped < drops {
		t.Errorf("tp_rollover_failed %d, tp_drops %d, RxDropped %d: both rings were full for the last frames", failed, drops, s.RxDropped)
	}
	// What the rings hold is what the hash and the rollover put there.
	var got [2]int
	for q, port := range qs {
		port.RxFrames(64, func(f []byte) {
			if _, ok := parseUDP(f, port.MAC(), p.A.Addr, portA); ok {
				got[q]++
			}
		})
	}
	if got[0] == 0 || got[1] == 0 || got[0]+got[1] > 32 || uint64(got[0]+got[1])+drops < 40 {
		t.Errorf("queues held %d and %d of the flow's 40 datagrams (%d dropped): it should be on both, within two rings of 16", got[0], got[1], drops)
	}
}

// twoQueuePair is a test host pair with two queues a side, B knowing A's
// MAC, and A without its address: the kernel under net_af_packet sees
// every frame, and without the address it drops them instead of
// answering ICMP port unreachable.
func twoQueuePair(t *testing.T) *testhost.Pair {
	t.Helper()
	needEAL(t)
	p := hosttest.New(t, testhost.Options{Queues: 2})
	if err := p.B.AddNeigh(p.A.Addr, p.A.MAC); err != nil {
		t.Fatal(err)
	}
	if err := p.A.DelAddr(); err != nil {
		t.Fatal(err)
	}
	return p
}

// openTwoQueues checks that net_af_xdp refuses two queues on h's veth end
// (suggesting net_af_packet's qpairs) and opens net_af_packet with
// qpairs=2 and the devargs extra (",key=value..."); the queues are closed
// at cleanup.
func openTwoQueues(t *testing.T, h *testhost.Host, extra string) []*Port {
	t.Helper()
	var q0 *Port
	err := h.Do(func() error {
		_, err := Open(Options{Iface: h.Iface, Queues: 2})
		if !errors.Is(err, dgramio.ErrNotSupported) || !strings.Contains(err.Error(), "qpairs=2") {
			return fmt.Errorf("net_af_xdp with two queues on veth: %v, want ErrNotSupported suggesting qpairs", err)
		}
		q0, err = Open(Options{VDev: fmt.Sprintf("net_af_packet_q%d,iface=%s,qpairs=2%s", vethSeq.Add(1), h.Iface, extra), Queues: 2})
		return err
	})
	if errors.Is(err, dgramio.ErrNotSupported) {
		testutil.Skip(t, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	qs := []*Port{q0, q0.Queue(1)}
	t.Cleanup(func() {
		for _, q := range qs {
			q.Close()
		}
	})
	if qs[1] == nil || q0.Queue(2) != nil || q0.Queues() != 2 || qs[1].QueueIndex() != 1 || q0.Queue(0) != q0 {
		t.Fatalf("Queue(1) %v, Queue(2) %v, Queues %d", qs[1], q0.Queue(2), q0.Queues())
	}
	return qs
}

// sendFlows sends n datagrams on each of flows UDP sockets of h to `to`,
// a round every millisecond; each carries its flow and sequence number.
func sendFlows(h *testhost.Host, to netip.AddrPort, flows, n int) error {
	return h.Do(func() error {
		var cs []*net.UDPConn
		defer func() {
			for _, c := range cs {
				c.Close()
			}
		}()
		for range flows {
			c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(to))
			if err != nil {
				return err
			}
			cs = append(cs, c)
		}
		var b [8]byte
		for i := range n {
			for f, c := range cs {
				binary.BigEndian.PutUint32(b[:], uint32(f))
				binary.BigEndian.PutUint32(b[4:], uint32(i))
				if _, err := c.Write(b[:]); err != nil {
					return err
				}
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	})
}

// receiveFlows polls qs until want datagrams of sendFlows to addr:portA
// arrived (20 s at most), checking that each flow stays on one queue and
// in order, and returns how many each queue took.
func receiveFlows(t *testing.T, qs []*Port, addr netip.Addr, want int) []int {
	t.Helper()
	where := map[uint32]int{}
	next := map[uint32]uint32{}
	total := 0
	perQueue := make([]int, len(qs))
	deadline := time.Now().Add(20 * time.Second)
	for total < want && time.Now().Before(deadline) {
		k := 0
		for q, port := range qs {
			k += port.RxFrames(32, func(f []byte) {
				payload, ok := parseUDP(f, port.MAC(), addr, portA)
				if !ok {
					return // ARP, or the kernel's own frames
				}
				flow, seq := binary.BigEndian.Uint32(payload), binary.BigEndian.Uint32(payload[4:])
				if w, seen := where[flow]; seen && w != q {
					t.Errorf("flow %d on queues %d and %d", flow, w, q)
				}
				where[flow] = q
				if seq != next[flow] {
					t.Errorf("flow %d on queue %d: sequence %d, want %d", flow, q, seq, next[flow])
				}
				next[flow] = seq + 1
				perQueue[q]++
				total++
			})
		}
		if k == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	if total != want {
		t.Errorf("received %d of %d", total, want)
	}
	return perQueue
}

// transmitEach sends one datagram from each queue (source port portA+q)
// and checks that b receives both and that each queue counted its own.
func transmitEach(t *testing.T, qs []*Port, a, b *testhost.Host) {
	t.Helper()
	c := listenUDPOn(t, b, portB)
	for q, port := range qs {
		tmpl := newUDPFrame(port.MAC(), b.MAC, netip.AddrPortFrom(a.Addr, uint16(portA+q)), netip.AddrPortFrom(b.Addr, portB))
		buf := make([]byte, 128)
		if !port.TxFrame(buf[:tmpl.build(buf, []byte{byte(q)})]) {
			t.Fatalf("queue %d: TxFrame refused", q)
		}
		if err := port.Kick(); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[byte]bool{}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for len(seen) < len(qs) {
		var buf [16]byte
		k, from, err := c.ReadFromUDPAddrPort(buf[:])
		if err != nil {
			t.Fatalf("B received %v: %v", seen, err)
		}
		if k != 1 || int(from.Port()) != portA+int(buf[0]) {
			t.Fatalf("B got %d bytes from %v", k, from)
		}
		seen[buf[0]] = true
	}
	for q, port := range qs {
		if s := port.Stats(); s.TxFrames != 1 {
			t.Errorf("queue %d: TxFrames %d, want 1", q, s.TxFrames)
		}
	}
}

func listenUDPOn(t *testing.T, h *testhost.Host, port uint16) *net.UDPConn {
	t.Helper()
	c, err := h.ListenUDP(port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
