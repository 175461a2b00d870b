package sock

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/kindcfg"
	"github.com/dgramio/dgramio/internal/queues"
)

// Classic BPF ancillary load of the CPU that runs the program
// (linux/filter.h: SKF_AD_OFF + SKF_AD_CPU).
const skfAdCPU = 0xfffff000 + 36 // SKF_AD_OFF (-0x1000) + SKF_AD_CPU, as a uint32

// NoQueue is what the steering program returns for a CPU that is no
// queue's: an index past the group, which makes the kernel fall back to
// its flow hash.
const NoQueue = 0xffffffff

// SteerProgram returns the classic BPF program that SteerByCPU attaches:
// it loads the number of the CPU that receives the packet and returns q
// when that is cpus[q] (the first such q), NoQueue otherwise. Two
// instructions per queue and two more; it allocates the slice it returns.
func SteerProgram(cpus []int) []unix.SockFilter {
	p := make([]unix.SockFilter, 0, 2*len(cpus)+2)
	p = append(p, unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: skfAdCPU})
	for q, c := range cpus {
		// jeq #c: fall into "ret #q"; else skip it.
		p = append(p,
			unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: uint32(c)},
			unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: uint32(q)},
		)
	}
	return append(p, unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: NoQueue})
}

// SteerByCPU attaches SteerProgram(cpus) to the SO_REUSEPORT group of fd
// (SO_ATTACH_REUSEPORT_CBPF, Linux >= 4.5; no privilege needed): a packet
// the kernel receives on CPU cpus[q] goes to the socket at index q of the
// group, which is the q-th socket that joined it (bound, for UDP; listening,
// for TCP). A CPU that is none of cpus falls back to the kernel's flow
// hash over the group. Attach it once every socket has joined.
//
// Why a program rather than SO_INCOMING_CPU on each socket: the program
// states the whole CPU → queue map at once, works the same on every kernel
// since 4.5 and needs no privilege (classic BPF, no CAP_BPF, no compiler),
// while SO_INCOMING_CPU only steers a reuseport group since the fix of
// Linux 6.2 ("soreuseport: Fix socket selection for SO_INCOMING_CPU") and
// otherwise merely raises a socket's score in a lookup that the group's
// hash decides.
func SteerByCPU(fd int, cpus []int) error {
	prog := SteerProgram(cpus)
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &fp); err != nil {
		if errors.Is(err, unix.ENOPROTOOPT) {
			return dgramio.NotSupported("SO_ATTACH_REUSEPORT_CBPF", "4.5", "steer with Config.CPUs empty (the kernel's flow hash)", err)
		}
		return fmt.Errorf("setsockopt SO_ATTACH_REUSEPORT_CBPF: %w", err)
	}
	return nil
}

// Steering describes how a reuseport group spreads what it receives, for
// Stats.Mode: "reuseport by cpu 0,1" or "reuseport by flow hash".
func Steering(cpus []int) string {
	if len(cpus) == 0 {
		return "reuseport by flow hash"
	}
	var b strings.Builder
	b.WriteString("reuseport by cpu ")
	for i, c := range cpus {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, c)
	}
	return b.String()
}

// OpenUDPGroup opens the n sockets of a udp or uring server with several
// queues: each as OpenUDP opens a server's (buffers, busy poll), with
// SO_REUSEPORT set before bind, bound in order so that socket i is index i
// of the group, then steered by cfg.CPUs (SteerByCPU) when set, by the
// kernel's flow hash otherwise. The caller owns the descriptors; on error
// none is left open.
func OpenUDPGroup(cfg dgramio.Config, n int) (fds []int, gs []Granted, err error) {
	return openGroup(cfg, n, openUDP)
}

// ListenTCPGroup opens the n listeners of a tcp server with several queues
// on cfg.LocalIP:cfg.Port: SO_REUSEADDR and SO_REUSEPORT, tuned as
// TuneTCP says, listening in order (listener i is index i of the group),
// then steered by cfg.CPUs (SteerByCPU) when set, by the kernel's flow
// hash otherwise. The caller owns the descriptors; on error none is left
// open.
func ListenTCPGroup(cfg dgramio.Config, n int) (fds []int, gs []Granted, err error) {
	return openGroup(cfg, n, ListenTCP)
}

// openGroup opens n sockets with open(cfg, true) (SO_REUSEPORT), in order,
// and steers the group by cfg.CPUs when set; on error it closes what it
// opened and returns no descriptor.
func openGroup(cfg dgramio.Config, n int, open func(dgramio.Config, bool) (int, Granted, error)) (fds []int, gs []Granted, err error) {
	defer func() {
		if err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
			fds, gs = nil, nil
		}
	}()
	for i := 0; i < n; i++ {
		fd, g, err := open(cfg, true)
		if err != nil {
			return fds, gs, fmt.Errorf("queue %d: %w", i, err)
		}
		fds, gs = append(fds, fd), append(gs, g)
	}
	if len(cfg.CPUs) > 0 {
		err = SteerByCPU(fds[0], cfg.CPUs)
	}
	return fds, gs, err
}

// ListenTCP opens a non-blocking TCP listener of cfg's family (see Socket)
// on cfg.LocalIP:cfg.Port (all addresses of the family when LocalIP is
// unset) with SO_REUSEADDR, SO_REUSEPORT when
// reusePort, and the options of TuneTCP (set before listen, so accepted
// connections inherit them and the window scale covers the buffers). The
// caller owns the descriptor; g.Local is the address bound.
func ListenTCP(cfg dgramio.Config, reusePort bool) (fd int, g Granted, err error) {
	fd, err = Socket(cfg, unix.SOCK_STREAM, unix.IPPROTO_TCP)
	if err != nil {
		return -1, g, err
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
			fd = -1
		}
	}()
	if err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fd, g, fmt.Errorf("setsockopt SO_REUSEADDR: %w", err)
	}
	if reusePort {
		if err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			return fd, g, fmt.Errorf("setsockopt SO_REUSEPORT: %w", err)
		}
	}
	if g, err = TuneTCP(fd, cfg); err != nil {
		return fd, g, err
	}
	if err = Bind(fd, BindAddr(cfg, cfg.Port)); err != nil {
		return fd, g, err
	}
	if err = unix.Listen(fd, unix.SOMAXCONN); err != nil {
		return fd, g, fmt.Errorf("listen: %w", err)
	}
	g.Local, err = LocalAddr(fd)
	return fd, g, err
}

// QueuePort returns the local port of queue q of a client group whose
// Config.LocalPort is base: base+q, or 0 (an ephemeral port, which the
// kernel makes distinct per socket) when base is 0. A port past 65535 is
// a *dgramio.ConfigError.
func QueuePort(base uint16, q int) (uint16, error) {
	if base == 0 {
		return 0, nil
	}
	p := int(base) + q
	if p > 65535 {
		return 0, &dgramio.ConfigError{Field: "LocalPort", Value: base, Reason: fmt.Sprintf("queue %d would use port %d: LocalPort+queue must stay below 65536", q, p)}
	}
	return uint16(p), nil
}

// QueueOf returns the queue index that SteerProgram(cpus) picks for cpu,
// and false for a CPU it leaves to the flow hash.
func QueueOf(cpus []int, cpu int) (int, bool) {
	for q, c := range cpus {
		if c == cpu {
			return q, true
		}
	}
	return 0, false
}

// OpenQueueFunc opens one queue's backend of a kernel kind on the calling
// goroutine: cfg is the queue's (dgramio.Config.ForQueue, with its own
// LocalPort on a client); fd is the server socket the queue owns from
// then on (closed by the function on error) with what the kernel granted
// it, or -1 on a client, which opens its own; note ends the backend's
// Stats.Mode ("queue 1 of 2, reuseport by cpu 0,1").
type OpenQueueFunc func(cfg dgramio.Config, fd int, g Granted, note string) (dgramio.Backend, error)

// Group is the dgramio.QueueGroup of the kernel kinds (udp, uring, tcp). A
// server's queues share one port through SO_REUSEPORT: NewGroup opens every
// queue's socket (or listener) at once, in queue order, and steers the
// group by CPU (SteerByCPU with Config.CPUs) or, without CPUs, by the
// kernel's flow hash; OpenQueue hands socket q to queue q's backend. A
// client's queues share nothing: each opens its own socket to every
// destination, from its own source port (an ephemeral one, distinct per
// socket, or LocalPort+q), so that each queue is a flow of its own that the
// peer's RSS or reuseport hash can spread.
type Group struct {
	cfg   dgramio.Config
	kind  dgramio.Kind
	open  OpenQueueFunc
	steer string

	mu    sync.Mutex
	fds   []int // server: queue q's socket until taken, then -1
	gs    []Granted
	slots *queues.Slots
}

var _ dgramio.QueueGroup = (*Group)(nil)

// NewGroup takes a prepared cfg (dgramio.Config.Prepare; a *dgramio.ConfigError
// otherwise) for a group of cfg.Queues queues of the kernel kind kind, opens a server's
// sockets (OpenUDPGroup for the datagram kinds, ListenTCPGroup for tcp) in
// the calling thread's network namespace, and returns the group; open
// opens each queue. On error nothing is left open.
func NewGroup(cfg dgramio.Config, kind dgramio.Kind, open OpenQueueFunc) (*Group, error) {
	cfg, err := kindcfg.PrepareGroup(cfg, kind)
	if err != nil {
		return nil, err
	}
	g := &Group{cfg: cfg, kind: kind, open: open, slots: queues.NewSlots(cfg.Queues)}
	if cfg.Role != dgramio.RoleServer {
		g.steer = "one socket per queue"
		return g, nil
	}
	if kind == dgramio.KindTCP {
		g.fds, g.gs, err = ListenTCPGroup(cfg, cfg.Queues)
	} else {
		g.fds, g.gs, err = OpenUDPGroup(cfg, cfg.Queues)
	}
	if err != nil {
		return nil, err
	}
	g.steer = Steering(cfg.CPUs)
	return g, nil
}

// OpenQueue opens queue q on the calling goroutine. See dgramio.QueueGroup.
func (g *Group) OpenQueue(q int) (dgramio.Backend, error) {
	if err := g.slots.Take(string(g.kind), q); err != nil {
		return nil, err
	}
	g.mu.Lock()
	fd, gr := -1, Granted{}
	if g.fds != nil {
		fd, gr = g.fds[q], g.gs[q]
		g.fds[q] = -1
	}
	g.mu.Unlock()
	qc := kindcfg.ForQueue(g.cfg, q)
	if g.cfg.Role != dgramio.RoleServer {
		p, err := QueuePort(g.cfg.LocalPort, q)
		if err != nil {
			return nil, err
		}
		qc.LocalPort = p
	}
	if fd < 0 && g.fds != nil {
		return nil, fmt.Errorf("%s: queue %d: the group is closed", g.kind, q)
	}
	note := fmt.Sprintf("queue %d of %d, %s", q, g.cfg.Queues, g.steer)
	b, err := g.open(qc, fd, gr, note)
	if err != nil {
		return nil, err
	}
	g.slots.Opened(q, strings.TrimSuffix(b.Stats().Mode, ", "+note))
	return b, nil
}

// BaseMode is queue 0's Stats.Mode without its note. See dgramio.QueueGroup.
func (g *Group) BaseMode() string { return g.slots.BaseMode() }

// Mode says how the group spreads flows: "reuseport by cpu 0,1",
// "reuseport by flow hash", or "one socket per queue" on a client.
func (g *Group) Mode() string { return g.steer }

// AppendCounters returns dst: the queues share no counter.
func (g *Group) AppendCounters(dst []dgramio.Counter) []dgramio.Counter { return dst }

// Close closes the sockets of queues never opened. The queues' backends
// close their own.
func (g *Group) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var errs []error
	for q, fd := range g.fds {
		if fd >= 0 {
			if err := unix.Close(fd); err != nil {
				errs = append(errs, fmt.Errorf("close queue %d socket: %w", q, err))
			}
			g.fds[q] = -1
		}
	}
	return errors.Join(errs...)
}
