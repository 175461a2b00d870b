package dgramio

import (
	"context"
	"errors"
	"fmt"
	"github.com/dgramio/dgramio/internal/cpu"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Group is one kind opened with several queues (Config.Queues = N), one
// poller per queue, sharing nothing on the data path: each queue has its
// own socket, XSK or DPDK queue pair (and, on the userspace TCP kinds, its
// own TCP/IP engine), its own counters (no cache line written by two pollers),
// and its own TX queue. What the queues share is set up once by NewGroup
// and released by Close:
//
//	udp, uring, tcp   a server's SO_REUSEPORT group, one socket (listener)
//	                  per queue, steered by CPU: what the kernel receives
//	                  on CPU Config.CPUs[q] goes to queue q (a classic BPF
//	                  reuseport program); without CPUs, the kernel's flow
//	                  hash. A client has one socket per queue, each its own
//	                  flow (source port ephemeral, or LocalPort+q).
//	xdp, tcp-xdp      one XDP program and its XSKMAP, attached once; queue
//	                  q binds an XSK to interface queue XDP.QueueID+q and
//	                  registers it at that index, and the program redirects
//	                  each frame by its rx_queue_index. An xdp client's
//	                  queue q sends from port LocalPort+q.
//	dpdk, tcp-dpdk    one port configured with N RX/TX queue pairs, a
//	                  mempool each, and RSS where the device offers it
//	                  (build tag dpdk); net_af_xdp needs N combined
//	                  channels (veth has none: there, net_af_packet with
//	                  qpairs=N, fed by a PACKET_FANOUT hash that moves a
//	                  flow to another queue while its ring is full: give
//	                  framecnt room for every frame in flight; counted as
//	                  packet tp_rollover).
//	tcp-xdp, tcp-dpdk a TCP/IP engine per queue, all holding LocalIP; a
//	                  client queue connects from source ports whose
//	                  answers come back to it; the
//	                  engines pass each other ARP replies, which a NIC puts
//	                  on one queue.
//
// How flows reach a queue: a NIC's RSS hashes a flow to a receive queue,
// whose interrupt (or poller) runs on that queue's CPU, so a flow stays on
// one queue and in order. On a veth pair there is no hash: a frame arrives
// on the receive queue numbered like the transmit queue the sender used,
// which XPS (xps_cpus) picks by the sender's CPU, and the kernel processes
// it on the sender's CPU. So on veth a flow stays on one queue when the
// peer's pollers are pinned (Config.CPUs) and its XPS masks map CPU q to
// queue q (testhost does). Two more things decide it there: a kernel
// socket with a route cached (a connected UDP socket, a TCP connection)
// keeps the transmit queue of its first packet, and a packet that waited
// for ARP left from the CPU that handled the ARP reply: resolve the peers
// (or set static neighbours) before the flows start. And what leaves
// through an AF_XDP socket (copy mode) or a DPDK vdev leaves from the CPU
// of the thread that kicks it; a group's queues kick only from their own
// poller.
//
// Usage: NewGroup, then one goroutine per queue calls Open(q) and polls
// the Backend it returns with the usual single-goroutine contract; Stats
// and QueueStats from anywhere; Close each Backend, then the Group.
type Group struct {
	cfg Config
	qg  QueueGroup

	mu      sync.Mutex
	queues  []Backend // nil until Open(q)
	closed  bool
	opening sync.WaitGroup // Opens in progress; Close waits for them
}

// NewGroup validates cfg (defaults applied; Queues 0 means 1), checks that
// busy polling has a CPU per poller, and sets up what cfg.Kind's queues
// share (see Group), in the calling thread's network namespace. Errors
// are New's, and a *ConfigError naming Poll when busy polling would put
// more pollers than the process may use CPUs (Config.Poll "yield" runs
// them anyway), or naming CPUs for a CPU the process may not use.
func NewGroup(cfg Config) (*Group, error) {
	cfg, err := cfg.Prepare()
	if err != nil {
		return nil, err
	}
	if err := checkCPUs(cfg); err != nil {
		return nil, err
	}
	d, err := driver(cfg.Kind)
	if err != nil {
		return nil, err
	}
	if d.OpenGroup == nil {
		return nil, NotSupported("queue groups of kind "+string(cfg.Kind), "", "the kind registered no group constructor", nil)
	}
	qg, err := d.OpenGroup(cfg)
	if err != nil {
		return nil, err
	}
	return &Group{cfg: cfg, qg: qg, queues: make([]Backend, cfg.Queues)}, nil
}

// checkCPUs refuses busy pollers beyond the CPUs the process may run on,
// and CPUs outside that set.
func checkCPUs(cfg Config) error {
	allowed, err := cpu.Allowed()
	if errors.Is(err, errors.ErrUnsupported) {
		return NotSupported("CPU pinning (sched_setaffinity)", "", "it exists only on Linux", nil)
	}
	if err != nil {
		return err
	}
	for _, c := range cfg.CPUs {
		if !slices.Contains(allowed, c) {
			return &ConfigError{Field: "CPUs", Value: cfg.CPUs, Reason: fmt.Sprintf(
				"CPU %d is not one this process may run on; allowed CPUs are %s (see taskset/cpuset)", c, cpu.FormatList(allowed))}
		}
	}
	if cfg.Poll == PollBusy && cfg.Queues > len(allowed) {
		return &ConfigError{Field: "Poll", Value: cfg.Poll, Reason: fmt.Sprintf(
			"%d busy pollers need %d CPUs, and this process may run on %d (%s): two spinning pollers on one CPU take turns at the scheduler's pace (milliseconds per turn). "+
				`Use fewer queues, more CPUs, or Poll "yield" (pollers sleep in Wait when idle: correct, not a measure of the fast path)`,
			cfg.Queues, cfg.Queues, len(allowed), cpu.FormatList(allowed))}
	}
	return nil
}

// Config returns the group's Config, defaults applied.
func (g *Group) Config() Config { return g.cfg }

// Queues returns the number of queues.
func (g *Group) Queues() int { return g.cfg.Queues }

// Open opens queue q (0 <= q < Queues) on the calling goroutine, which
// becomes its poller: with Config.CPUs set it is locked to its OS thread
// and pinned to CPUs[q] (unless the caller pinned it there already), and
// the Backend's Close, called on it, undoes that. The Backend has the usual
// contract (one goroutine polls; Stats and Close from anywhere). Each
// queue is opened once; the Group keeps the Backend for Stats.
func (g *Group) Open(q int) (Backend, error) {
	g.mu.Lock()
	switch {
	case g.closed:
		g.mu.Unlock()
		return nil, fmt.Errorf("dgramio: group: open queue %d: %w", q, ErrClosed)
	case q < 0 || q >= len(g.queues):
		g.mu.Unlock()
		return nil, &ConfigError{Field: "Queues", Value: g.cfg.Queues, Reason: fmt.Sprintf("queue %d does not exist", q)}
	}
	g.opening.Add(1)
	g.mu.Unlock()
	defer g.opening.Done()
	b, err := g.qg.OpenQueue(q)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.queues[q] = b
	g.mu.Unlock()
	return b, nil
}

// QueueStats returns each queue's counters, index q for queue q (zero for a
// queue not opened). Each comes from that queue's Backend, whose counters
// only its poller writes.
func (g *Group) QueueStats() []Stats {
	g.mu.Lock()
	qs := slices.Clone(g.queues)
	g.mu.Unlock()
	out := make([]Stats, len(qs))
	for q, b := range qs {
		if b != nil {
			out[q] = b.Stats()
		}
	}
	return out
}

// Stats returns the sum of the queues' counters (SumStats: message
// counters and same-named layer counters added up, read now, not kept
// anywhere shared), plus the counters of the shared state (an XDP
// program's, counted once). Mode is queue 0's, then the number of queues,
// how flows are spread and the poll mode.
func (g *Group) Stats() Stats {
	s := SumStats(g.QueueStats())
	s.Kind = g.cfg.Kind
	s.Layers = g.qg.AppendCounters(s.Layers)
	s.Mode = g.mode()
	return s
}

// mode is Stats.Mode of the group: queue 0's mode without its own queue
// note (QueueGroup.BaseMode), then the group's.
func (g *Group) mode() string {
	first := g.qg.BaseMode()
	var b strings.Builder
	if first != "" {
		b.WriteString(first)
		b.WriteString("; ")
	}
	fmt.Fprintf(&b, "%d queues, %s, poll %s", g.cfg.Queues, g.qg.Mode(), g.cfg.Poll)
	return b.String()
}

// Close releases what the queues share (the XDP program, the sockets or
// queues never opened, the DPDK port). Close every queue's Backend first,
// on its poller (which undoes the poller's pinning); a Backend still open
// is closed here (Backend.Close is safe from any goroutine, and a second
// Close does nothing), from this goroutine, which leaves its poller's
// thread pinned. An Open in progress is waited for, and its queue closed
// too. Safe to call more than once.
func (g *Group) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	// An Open that began before Close finishes first: the queue it opens
	// is closed below, before the shared state it uses is released.
	g.opening.Wait()
	g.mu.Lock()
	qs := slices.Clone(g.queues)
	g.mu.Unlock()
	var errs []error
	for q, b := range qs {
		if b != nil {
			if err := b.Close(); err != nil {
				errs = append(errs, fmt.Errorf("dgramio: group: close queue %d: %w", q, err))
			}
		}
	}
	errs = append(errs, g.qg.Close())
	return errors.Join(errs...)
}

// idleSleep is how long Idle sleeps, at most, on a kind that cannot Wait.
const idleSleep = 50 * time.Microsecond

// Idle is what a poller does when Rx returned nothing, in the poll mode
// poll (Config.Poll): PollBusy returns nil at once (poll again); PollYield
// sleeps in b.Wait until something may be received or d has passed (a
// loop that must also send on time passes the time to its next send), or,
// on a kind that cannot sleep (DPDK), sleeps at most 50 µs so that other
// pollers sharing the CPU run. It returns nil, or net.ErrClosed after
// Close, or what Wait reports. PollYield allocates a little per call (a
// context with a deadline).
func Idle(b Backend, poll Poll, d time.Duration) error {
	if poll != PollYield {
		return nil
	}
	if d <= 0 {
		runtime.Gosched()
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	err := b.Wait(ctx)
	cancel()
	switch {
	case err == nil, errors.Is(err, context.DeadlineExceeded):
		return nil
	case errors.Is(err, ErrNotSupported):
		time.Sleep(min(d, idleSleep))
		return nil
	}
	return err
}
