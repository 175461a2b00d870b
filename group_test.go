package dgramio_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
	_ "github.com/dgramio/dgramio/kinds"
)

func TestNewRefusesQueues(t *testing.T) {
	_, err := dgramio.New(dgramio.Config{Kind: "udp", Dests: []netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 9)}, Port: 9, Queues: 2})
	var ce *dgramio.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Queues" || !strings.Contains(err.Error(), "NewGroup") {
		t.Fatalf("New with Queues 2: %v; want a ConfigError on Queues naming NewGroup", err)
	}
}

// TestGroupRefusesBusyPollersBeyondCPUs asks for one busy poller more
// than the process has CPUs: refused with a ConfigError that says why
// and what to do, before anything is opened; yielding pollers are fine.
func TestGroupRefusesBusyPollersBeyondCPUs(t *testing.T) {
	allowed, err := cpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	cfg := dgramio.Config{Kind: "udp", Role: dgramio.RoleServer, LocalIP: netip.MustParseAddr("127.0.0.1"),
		Port: 9, Queues: len(allowed) + 1}
	_, err = dgramio.NewGroup(cfg)
	var ce *dgramio.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Poll" {
		t.Fatalf("%d busy pollers on %d CPUs: %v; want a ConfigError on Poll", cfg.Queues, len(allowed), err)
	}
	for _, want := range []string{fmt.Sprint(len(allowed) + 1), cpu.FormatList(allowed), `"yield"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	cfg.Poll = dgramio.PollYield
	cfg.Port = 0 // no socket is opened: Validate refuses it first
	if _, err := dgramio.NewGroup(cfg); !errors.As(err, &ce) || ce.Field != "Port" {
		t.Fatalf("yield with port 0: %v; want only the Port error", err)
	}
	cfg.Port, cfg.CPUs = 9, make([]int, cfg.Queues)
	for i := range cfg.CPUs {
		cfg.CPUs[i] = 4096 + i
	}
	if _, err := dgramio.NewGroup(cfg); !errors.As(err, &ce) || ce.Field != "CPUs" {
		t.Fatalf("CPUs outside the allowed set: %v; want a ConfigError on CPUs", err)
	}
}

// twoCPUs returns two CPUs the process may use, or skips.
func twoCPUs(t testing.TB) []int {
	t.Helper()
	allowed, err := cpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		testutil.Skip(t, fmt.Sprintf("two queues on two CPUs: this process may use %v", allowed))
	}
	return allowed[:2]
}

// flowMsg is a test message: the sending queue, a sequence number,
// padding.
const flowMsg = 64

func putFlowMsg(b []byte, flow, seq uint32) {
	binary.BigEndian.PutUint32(b, flow)
	binary.BigEndian.PutUint32(b[4:], seq)
	for i := 8; i < len(b); i++ {
		b[i] = byte(flow*31 + seq + uint32(i))
	}
}

func flowMsgOf(b []byte) (flow, seq uint32, err error) {
	if len(b) != flowMsg {
		return 0, 0, fmt.Errorf("message of %d bytes, want %d", len(b), flowMsg)
	}
	flow, seq = binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
	for i := 8; i < len(b); i++ {
		if b[i] != byte(flow*31+seq+uint32(i)) {
			return flow, seq, fmt.Errorf("flow %d seq %d: byte %d damaged", flow, seq, i)
		}
	}
	return flow, seq, nil
}

// serverQueue is what one server queue saw: per sender (From), the
// messages in arrival order.
type serverQueue struct {
	from  map[netip.AddrPort][]uint32 // sequence numbers by sender
	flows map[netip.AddrPort]uint32   // sender → flow id in its messages
	n     atomic.Int64
	err   error
}

// runFlows runs an exchange between two groups: the client group on cli
// sends n messages from each of its queues (flow q from queue q's poller),
// the server group on srv echoes each one back from the queue that
// received it. It checks that every flow's messages arrive, each flow at
// one server queue only and in order, that each server queue carries
// some, that every echo comes back, and that the per-queue counters add up
// to the group's.
func runFlows(t testing.TB, srvHost, cliHost *testhost.Host, srvCfg, cliCfg dgramio.Config, n int) {
	t.Helper()
	queues, flows := max(srvCfg.Queues, 1), max(cliCfg.Queues, 1)
	var srv, cli *dgramio.Group
	if err := srvHost.Do(func() (err error) { srv, err = dgramio.NewGroup(srvCfg); return err }); err != nil {
		testutil.SkipIfNotSupported(t, err)
		t.Fatalf("server group: %v", err)
	}
	defer srv.Close()

	res := make([]*serverQueue, queues)
	stop := make(chan struct{})
	var swg sync.WaitGroup
	ready := make(chan error, queues)
	for q := range queues {
		res[q] = &serverQueue{from: map[netip.AddrPort][]uint32{}, flows: map[netip.AddrPort]uint32{}}
		swg.Go(func() {
			res[q].err = srvHost.Do(func() error {
				b, err := srv.Open(q)
				ready <- err
				if err != nil {
					return err
				}
				defer b.Close()
				return res[q].serve(b, q, srvCfg.Poll, stop)
			})
		})
	}
	for range queues {
		if err := <-ready; err != nil {
			close(stop)
			swg.Wait()
			testutil.SkipIfNotSupported(t, err)
			t.Fatalf("open server queue: %v", err)
		}
	}

	if err := cliHost.Do(func() (err error) { cli, err = dgramio.NewGroup(cliCfg); return err }); err != nil {
		close(stop)
		swg.Wait()
		testutil.SkipIfNotSupported(t, err)
		t.Fatalf("client group: %v", err)
	}
	defer cli.Close()
	cliErr := make([]error, flows)
	var cwg sync.WaitGroup
	for q := range flows {
		cwg.Go(func() {
			cliErr[q] = cliHost.Do(func() error {
				b, err := cli.Open(q)
				if err != nil {
					return err
				}
				defer b.Close()
				return sendFlow(b, q, n, cliCfg.Poll)
			})
		})
	}
	cwg.Wait()
	cliStats, cliQueues := cli.Stats(), cli.QueueStats()
	close(stop)
	swg.Wait()
	for q, err := range cliErr {
		if err != nil {
			t.Errorf("client queue %d: %v", q, err)
		}
	}
	for q, r := range res {
		if r.err != nil {
			t.Errorf("server queue %d: %v", q, r.err)
		}
	}
	if t.Failed() {
		t.Logf("server stats %+v, queues %+v", srv.Stats(), srv.QueueStats())
		logKernelDrops(t, "server", srvHost)
		logKernelDrops(t, "client", cliHost)
		return
	}
	checkFlowsArrived(t, res, flows, n)
	srvStats, srvQueues := srv.Stats(), srv.QueueStats()
	checkQueuesAddUp(t, "server", srvStats, srvQueues, uint64(flows*n))
	checkQueuesAddUp(t, "client", cliStats, cliQueues, uint64(flows*n))
	if _, bench := t.(*testing.B); bench {
		return
	}
	checkNothingLost(t, srvStats)
	checkNothingLost(t, cliStats)
	for who, s := range map[string]dgramio.Stats{"server": srvStats, "client": cliStats} {
		// net_af_packet's fanout moved frames off their flow's queue.
		if v, ok := s.Counter("packet", "tp_rollover"); ok && v != 0 {
			t.Errorf("%s: %d frames rolled over to another queue's ring (packet tp_rollover)", who, v)
		}
	}
}

// serve is server queue q's poll loop on b until stop is closed: it
// records each message's flow and sequence number by sender and echoes it
// back to its sender, idling by poll when nothing arrives.
func (r *serverQueue) serve(b dgramio.Backend, q int, poll dgramio.Poll, stop <-chan struct{}) error {
	pkts := make([]dgramio.Packet, 32)
	var pe *dgramio.PeerError
	for {
		k, err := b.Rx(pkts)
		if errors.As(err, &pe) && !pe.Reset {
			continue // a stream client that finished and closed
		}
		if err != nil {
			return fmt.Errorf("server queue %d: Rx: %w", q, err)
		}
		for _, p := range pkts[:k] {
			flow, seq, err := flowMsgOf(p.Data)
			if err != nil {
				return fmt.Errorf("server queue %d: %w", q, err)
			}
			r.from[p.From] = append(r.from[p.From], seq)
			r.flows[p.From] = flow
			for b.QueueTo(p.Data, p.From) != nil {
				if err := b.Flush(); err != nil && !errors.As(err, &pe) {
					return err
				}
			}
		}
		if k > 0 {
			r.n.Add(int64(k))
			err := b.Flush()
			if errors.As(err, &pe) && !pe.Reset {
				err = nil // a stream client that finished and closed
			}
			if err != nil {
				return fmt.Errorf("server queue %d: Flush: %w", q, err)
			}
			continue
		}
		select {
		case <-stop:
			return nil
		default:
		}
		if err := dgramio.Idle(b, poll, time.Millisecond); err != nil {
			return fmt.Errorf("server queue %d: Idle: %w", q, err)
		}
	}
}

// sendFlow is client queue q's poll loop on b: it sends flow q's n
// messages, 32 in flight at the most, and checks that their echoes come
// back in order within 30 seconds, idling by poll when nothing arrives.
func sendFlow(b dgramio.Backend, q, n int, poll dgramio.Poll) error {
	msg := make([]byte, flowMsg)
	pkts := make([]dgramio.Packet, 32)
	sent, echoes := 0, 0
	deadline := time.Now().Add(30 * time.Second)
	for echoes < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("client queue %d: %d of %d sent, %d echoes after 30 s; stats %+v", q, sent, n, echoes, b.Stats())
		}
		for sent < n && sent-echoes < 32 {
			putFlowMsg(msg, uint32(q), uint32(sent))
			if b.Queue(msg) != nil {
				break
			}
			sent++
		}
		if err := b.Flush(); err != nil {
			return fmt.Errorf("client queue %d: Flush: %w", q, err)
		}
		k, err := b.Rx(pkts)
		if err != nil {
			return fmt.Errorf("client queue %d: Rx: %w", q, err)
		}
		for _, p := range pkts[:k] {
			flow, seq, err := flowMsgOf(p.Data)
			if err != nil {
				return fmt.Errorf("client queue %d: echo: %w", q, err)
			}
			if flow != uint32(q) || seq != uint32(echoes) {
				return fmt.Errorf("client queue %d: echo of flow %d seq %d, want flow %d seq %d", q, flow, seq, q, echoes)
			}
			echoes++
		}
		if k == 0 {
			if err := dgramio.Idle(b, poll, time.Millisecond); err != nil {
				return fmt.Errorf("client queue %d: Idle: %w", q, err)
			}
		}
	}
	return nil
}

// checkFlowsArrived checks that each of the flows arrived whole (n
// messages), in order, at one server queue, and that every server queue
// carried some.
func checkFlowsArrived(t testing.TB, res []*serverQueue, flows, n int) {
	t.Helper()
	where := map[netip.AddrPort]int{}
	for q, r := range res {
		if len(r.from) == 0 {
			t.Errorf("server queue %d carried nothing", q)
		}
		for from, seqs := range r.from {
			if other, seen := where[from]; seen {
				t.Errorf("flow from %s arrived at server queues %d and %d", from, other, q)
			}
			where[from] = q
			for i, s := range seqs {
				if s != uint32(i) {
					t.Errorf("flow from %s at server queue %d: message %d is sequence %d", from, q, i, s)
					break
				}
			}
			if len(seqs) != n {
				t.Errorf("flow from %s: %d of %d messages at server queue %d", from, len(seqs), n, q)
			}
			if _, bench := t.(*testing.B); !bench {
				t.Logf("flow %d (from %s) → server queue %d: %d messages", r.flows[from], from, q, len(seqs))
			}
		}
	}
	if len(where) != flows {
		t.Errorf("%d flows arrived, want %d (one per client queue)", len(where), flows)
	}
}

// checkQueuesAddUp checks one side of the exchange: every queue received
// and sent, the queues' counters add up to the group's total, which counts
// want messages each way, and the group's Mode is queue 0's less its
// queue note, with the number of queues and the poll mode.
func checkQueuesAddUp(t testing.TB, side string, total dgramio.Stats, queues []dgramio.Stats, want uint64) {
	t.Helper()
	var rx, tx uint64
	for q, s := range queues {
		if s.RxDelivered == 0 || s.TxSent == 0 {
			t.Errorf("%s queue %d: RxDelivered %d TxSent %d, want both above zero", side, q, s.RxDelivered, s.TxSent)
		}
		rx += s.RxDelivered
		tx += s.TxSent
	}
	if rx != total.RxDelivered || tx != total.TxSent {
		t.Errorf("%s: queues add up to rx %d tx %d, the group says rx %d tx %d", side, rx, tx, total.RxDelivered, total.TxSent)
	}
	if total.RxDelivered != want || total.TxSent != want {
		t.Errorf("%s: rx %d tx %d, want %d and %d", side, total.RxDelivered, total.TxSent, want, want)
	}
	if w := fmt.Sprintf("%d queues", len(queues)); !strings.Contains(total.Mode, w) || !strings.Contains(total.Mode, "poll yield") {
		t.Errorf("%s mode %q does not say %s, poll yield", side, total.Mode, w)
	}
	// The group's mode begins with what queue 0 runs, without the note
	// that places that queue in the group.
	if q0 := queues[0].Mode; !strings.Contains(q0, "queue 0 of") || strings.Contains(total.Mode, "queue 0 of") ||
		!strings.HasPrefix(q0, strings.SplitN(total.Mode, "; ", 2)[0]+", queue 0 of") {
		t.Errorf("%s: group mode %q does not begin with queue 0's %q less its queue note", side, total.Mode, q0)
	}
	t.Logf("%s: %s", side, total.Mode)
}

// checkNothingLost checks that a group's counters report no loss: no
// reset connection on a stream kind, nothing counted lost on a datagram
// kind.
func checkNothingLost(t testing.TB, s dgramio.Stats) {
	t.Helper()
	if s.Kind.IsStream() {
		// A stream loses nothing it does not report as a reset; a frame
		// that finds its queue closed (the peer's last ACK) is not a
		// message.
		if s.Resets != 0 {
			t.Errorf("%s: %d connections reset", s.Kind, s.Resets)
		}
		return
	}
	if lost := s.Lost(); lost != 0 {
		var which []string
		for _, c := range s.Layers {
			if c.Loss && c.Value != 0 {
				which = append(which, fmt.Sprintf("%s/%s=%d", c.Layer, c.Name, c.Value))
			}
		}
		t.Errorf("%s: %d messages counted lost: tx dropped %d, rx dropped %d, %v", s.Kind, lost, s.TxDropped, s.RxDropped(), which)
	}
}

// groupPair makes a two-queue veth pair whose XPS masks send CPU q's
// frames on TX queue q, and whose ends know each other's MAC: a datagram
// that waits for ARP leaves from the CPU that handles the ARP reply, and a
// connected socket keeps the TX queue of its first datagram.
func groupPair(t testing.TB, cpus []int) *testhost.Pair { return groupPairFamily(t, cpus, false) }

// groupPairFamily is groupPair, with IPv6 on both ends when v6.
func groupPairFamily(t testing.TB, cpus []int, v6 bool) *testhost.Pair {
	t.Helper()
	p := hosttest.New(t, testhost.Options{Queues: 2, XPSCPUs: cpus, IPv6: v6})
	if err := p.A.AddNeigh(p.B.Addr, p.B.MAC); err != nil {
		t.Fatal(err)
	}
	if err := p.B.AddNeigh(p.A.Addr, p.A.MAC); err != nil {
		t.Fatal(err)
	}
	if v6 {
		// As for IPv4: a datagram that waits for neighbour discovery
		// leaves from the CPU that takes the advertisement, on another
		// TX queue than its socket's.
		if err := p.A.AddNeigh(p.B.Addr6, p.B.MAC); err != nil {
			t.Fatal(err)
		}
		if err := p.B.AddNeigh(p.A.Addr6, p.A.MAC); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// groupConfigs are a server of kind srv on p.A and a client of kind cli on
// p.B that sends to it, port 7000, each with a queue per CPU of cpus,
// pinned there, and yielding pollers.
func groupConfigs(p *testhost.Pair, cpus []int, srv, cli dgramio.Kind) (dgramio.Config, dgramio.Config) {
	s := dgramio.Config{Kind: srv, Role: dgramio.RoleServer, Iface: p.A.Iface, LocalIP: p.A.Addr, Port: 7000,
		Queues: len(cpus), CPUs: cpus, Poll: dgramio.PollYield}
	c := dgramio.Config{Kind: cli, Iface: p.B.Iface, LocalIP: p.B.Addr, Dests: []netip.AddrPort{netip.AddrPortFrom(p.A.Addr, 7000)}, Port: 7000,
		Queues: len(cpus), CPUs: cpus, Poll: dgramio.PollYield}
	return s, c
}

// TestGroupFlows runs runFlows between two groups of two queues on a
// groupPair, for each pairing of kinds below.
func TestGroupFlows(t *testing.T) {
	for _, c := range []struct {
		name     string
		srv, cli dgramio.Kind
		// adjust changes what groupConfigs made (nil: nothing).
		adjust func(t *testing.T, p *testhost.Pair, srv, cli *dgramio.Config)
		// v6 runs the flows over IPv6 (the pair's Addr6).
		v6 bool
	}{
		// An xdp server (one XSK per queue, one program) answers a kernel
		// udp client (a socket per queue).
		{"xdp", "xdp", "udp", smallDatagrams, false},
		// An xdp client (ports 7100 and 7101) talks to a kernel udp server
		// with two reuseport sockets.
		{"xdp-client", "udp", "xdp", func(t *testing.T, p *testhost.Pair, srv, cli *dgramio.Config) {
			smallDatagrams(t, p, srv, cli)
			cli.LocalPort = 7100
		}, false},
		// Kernel udp on both ends, two reuseport sockets steered by CPU on
		// the server.
		{"udp", "udp", "udp", nil, false},
		// Kind uring on both ends, a ring per queue.
		{"uring", "uring", "uring", nil, false},
		// Kind tcp on both ends: two reuseport listeners steered by CPU, one
		// connection per client queue.
		{"tcp", "tcp", "tcp", nil, false},
		// The kernel kinds over IPv6: the same groups, the same steering.
		{"udp-ipv6", "udp", "udp", nil, true},
		{"uring-ipv6", "uring", "uring", nil, true},
		{"tcp-ipv6", "tcp", "tcp", nil, true},
		// The raw datagram kind over IPv6: the program steers IPv6 UDP to
		// our port by rx_queue_index, the kernel resolves by NDP.
		{"xdp-ipv6", "xdp", "udp", smallDatagrams, true},
		{"xdp-client-ipv6", "udp", "xdp", func(t *testing.T, p *testhost.Pair, srv, cli *dgramio.Config) {
			smallDatagrams(t, p, srv, cli)
			cli.LocalPort = 7100
		}, true},
		// A tcp-xdp server on netstack over IPv6 (a netstack per queue,
		// the program's IPv6 host address) serves a kernel tcp client.
		{"tcp-xdp-netstack-ipv6", "tcp-xdp", "tcp", func(t *testing.T, p *testhost.Pair, srv, cli *dgramio.Config) {
			a := p.A.Addr6.As16()
			a[15] = 3
			addr := netip.AddrFrom16(a)
			if err := p.B.AddNeigh(addr, p.A.MAC); err != nil {
				t.Fatal(err)
			}
			srv.TCP.Stack = dgramio.TCPStackNetstack
			srv.LocalIP, cli.Dests = addr, []netip.AddrPort{netip.AddrPortFrom(addr, cli.Port)}
		}, true},
		// A tcp-xdp server, a netstack per queue, serves a kernel tcp client
		// (a connection per queue).
		{"tcp-xdp", "tcp-xdp", "tcp", func(t *testing.T, p *testhost.Pair, srv, cli *dgramio.Config) {
			addr := otherAddr(p.A, 3)
			if err := p.B.AddNeigh(addr, p.A.MAC); err != nil {
				t.Fatal(err)
			}
			srv.LocalIP, cli.Dests = addr, []netip.AddrPort{netip.AddrPortFrom(addr, cli.Port)}
		}, false},
		// A tcp-xdp client (a netstack per queue, source ports from each
		// queue's share) talks to a kernel tcp server with two reuseport
		// listeners.
		{"tcp-xdp-client", "tcp", "tcp-xdp", func(t *testing.T, p *testhost.Pair, srv, cli *dgramio.Config) {
			addr := otherAddr(p.B, 4)
			if err := p.A.AddNeigh(addr, p.B.MAC); err != nil {
				t.Fatal(err)
			}
			cli.LocalIP, cli.ConnectTimeout = addr, 20*time.Second
		}, false},
		// A tcp-xdp server over IPv6, a native engine per queue (IPv6 is
		// the native engine's), serves a kernel tcp client.
		{"tcp-xdp-ipv6", "tcp-xdp", "tcp", func(t *testing.T, p *testhost.Pair, srv, cli *dgramio.Config) {
			a := p.A.Addr6.As16()
			a[15] = 3
			addr := netip.AddrFrom16(a)
			if err := p.B.AddNeigh(addr, p.A.MAC); err != nil {
				t.Fatal(err)
			}
			srv.LocalIP, cli.Dests = addr, []netip.AddrPort{netip.AddrPortFrom(addr, cli.Port)}
		}, true},
		// A tcp-xdp client over IPv6, a native engine per queue, talks to
		// a kernel tcp server with two reuseport listeners: each queue
		// dials from a port of its share, and the queues share the
		// neighbour advertisements that answer their solicitations (RFC
		// 4861 §7.2.5), which reach whichever queue the server's CPU
		// sends them on.
		{"tcp-xdp-client-ipv6", "tcp", "tcp-xdp", func(t *testing.T, p *testhost.Pair, srv, cli *dgramio.Config) {
			a := p.B.Addr6.As16()
			a[15] = 4
			addr := netip.AddrFrom16(a)
			if err := p.A.AddNeigh(addr, p.B.MAC); err != nil {
				t.Fatal(err)
			}
			cli.LocalIP, cli.ConnectTimeout = addr, 20*time.Second
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cpus := twoCPUs(t)
			p := groupPairFamily(t, cpus, c.v6)
			srv, cli := groupConfigs(p, cpus, c.srv, c.cli)
			if c.v6 {
				srv.LocalIP, cli.LocalIP = p.A.Addr6, p.B.Addr6
				cli.Dests = []netip.AddrPort{netip.AddrPortFrom(p.A.Addr6, cli.Port)}
			}
			if c.adjust != nil {
				c.adjust(t, p, &srv, &cli)
			}
			runFlows(t, p.A, p.B, srv, cli, 500)
		})
	}
}

// smallDatagrams sets both ends' MaxDatagram to 1024, for the xdp kinds.
func smallDatagrams(_ *testing.T, _ *testhost.Pair, srv, cli *dgramio.Config) {
	srv.MaxDatagram, cli.MaxDatagram = 1024, 1024
}

// otherAddr is an address of h's subnet that h's kernel does not hold
// (tcp-xdp refuses one the kernel has).
func otherAddr(h *testhost.Host, last byte) netip.Addr {
	a := h.Addr.As4()
	a[3] = last
	return netip.AddrFrom4(a)
}

// BenchmarkGroupEcho measures the round trips per second of N client
// queues against N server queues, in yielding mode (pollers sleep in Wait
// when idle), each client queue keeping 32 messages in flight: the scaling
// of the group from N = 1 to N = 2 on this host. Every message is checked
// as in the tests (that costs some time of its own). On a shared host with
// two CPUs the numbers are noisy; they show the shape, not the fast path.
func BenchmarkGroupEcho(b *testing.B) {
	cpus := twoCPUs(b)
	for _, kind := range []dgramio.Kind{dgramio.KindUDP, dgramio.KindXDP} {
		for _, n := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/queues=%d", kind, n), func(b *testing.B) {
				p := groupPair(b, cpus)
				srv, cli := groupConfigs(p, cpus[:n], kind, "udp")
				srv.MaxDatagram, cli.MaxDatagram = 1024, 1024
				per := max(b.N/n, 1)
				b.ResetTimer()
				start := time.Now()
				runFlows(b, p.A, p.B, srv, cli, per)
				el := time.Since(start)
				b.ReportMetric(float64(per*n)/el.Seconds(), "msg/s")
			})
		}
	}
}

// logKernelDrops logs the kernel's nonzero error and drop counters of
// h's namespace (/proc/net/snmp, snmp6: UDP buffer and port errors, IP
// discards, neighbour and route failures), for a flow that lost
// datagrams between the tools.
func logKernelDrops(t testing.TB, who string, h *testhost.Host) {
	t.Helper()
	var out []string
	err := h.Do(func() error {
		for _, f := range []string{"/proc/thread-self/net/snmp", "/proc/thread-self/net/snmp6"} {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			lines := strings.Split(string(b), "\n")
			for i := 0; i < len(lines); i++ {
				f := strings.Fields(lines[i])
				if len(f) == 2 { // snmp6: name value
					if f[1] != "0" && dropCounter(f[0]) {
						out = append(out, f[0]+"="+f[1])
					}
					continue
				}
				if i+1 < len(lines) && len(f) > 1 && strings.HasSuffix(f[0], ":") { // snmp: names, then values
					v := strings.Fields(lines[i+1])
					for k := 1; k < len(f) && k < len(v); k++ {
						if v[k] != "0" && dropCounter(f[k]) {
							out = append(out, f[0]+f[k]+"="+v[k])
						}
					}
					i++
				}
			}
		}
		return nil
	})
	t.Logf("%s kernel counters: %v (%v)", who, out, err)
}

// dropCounter tells the SNMP counters that count something lost.
func dropCounter(name string) bool {
	for _, s := range []string{"Err", "Discard", "NoPorts", "NoRoute", "Fail", "Drop", "Unknown"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}
