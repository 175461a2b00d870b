package netconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	ntcp "gvisor.dev/gvisor/pkg/tcpip/transport/tcp"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/stack"
	"github.com/dgramio/dgramio/internal/tcp"
)

// Opener opens the FrameIO a Service runs on, for a prepared Config
// (dgramio.Config.Prepare, as New does): OpenXDP (kind tcp-xdp), OpenDPDK
// (kind tcp-dpdk, build tag dpdk), or anything else that moves Ethernet
// frames. The Service owns what it opened from then on and releases it
// last (Opened.Close). On error the Opener leaves nothing open.
type Opener func(cfg dgramio.Config) (Opened, error)

// Opened is what an Opener opened.
type Opened struct {
	// FIO moves the Service's Ethernet frames.
	FIO frameio.FrameIO
	// Mode is what Stats.Mode calls it (e.g. "native over xdp driver
	// copy"); empty: the engine's name over the FrameIO's Stats.Mode.
	Mode string
	// Close releases FIO and whatever came with it (an XDP program); nil:
	// FIO.Close.
	Close func() error
}

// OpenXDP is the Opener of kind tcp-xdp: an AF_XDP socket on
// cfg.XDP.QueueID of cfg.Iface and the XDP program that hands it every
// frame to cfg.LocalIP (and ARP), which Opened.Close detaches. cfg.LocalIP
// must not be an address the kernel holds on the interface (the kernel
// would reset our connections): that is a *dgramio.ConfigError. Run it on a
// thread inside the interface's network namespace.
func OpenXDP(cfg dgramio.Config) (Opened, error) {
	fio, to, err := tcp.OpenXDP(cfg)
	if err != nil {
		return Opened{}, err
	}
	return Opened{FIO: fio, Mode: to.Mode, Close: to.Close}, nil
}

// PollMode says what a Service's poller does when a round finds no frame.
type PollMode int

const (
	// PollAdaptive (the default) keeps polling for Options.SpinFor after
	// the last frame, then sleeps until the next one: full speed under
	// load, no CPU when idle, and the cost of a wake-up only on the first
	// frame after a pause.
	PollAdaptive PollMode = iota
	// PollSpin never sleeps: the lowest latency, and one CPU at 100% for
	// as long as the Service lives, traffic or not. It suits a process
	// whose traffic goes through the Service, with a CPU of its own for
	// the poller: the Go scheduler looks at the kernel's sockets only when
	// a P runs out of work, so while the spinner keeps a P busy the
	// process's goroutines that wait on kernel sockets (an upstream
	// dialled through the kernel, a database client) are found late.
	// Where they matter, PollAdaptive measures that cost and sleeps.
	PollSpin
	// PollSleep sleeps as soon as a round finds nothing: no CPU when idle,
	// and every frame that finds the poller asleep pays the wake-up.
	PollSleep
)

// String returns "adaptive", "spin" or "sleep".
func (m PollMode) String() string {
	switch m {
	case PollSpin:
		return "spin"
	case PollSleep:
		return "sleep"
	case PollAdaptive:
		return "adaptive"
	}
	return fmt.Sprintf("PollMode(%d)", int(m))
}

// Set parses "adaptive", "spin" or "sleep" (flag.Value).
func (m *PollMode) Set(s string) error {
	for _, v := range []PollMode{PollAdaptive, PollSpin, PollSleep} {
		if v.String() == s {
			*m = v
			return nil
		}
	}
	return fmt.Errorf("unknown poll mode %q; use \"adaptive\", \"spin\" or \"sleep\"", s)
}

// UnmarshalText parses "adaptive", "spin" or "sleep".
func (m *PollMode) UnmarshalText(b []byte) error { return m.Set(string(b)) }

// Defaults of Options.
const (
	DefaultSpinFor  = 50 * time.Microsecond
	DefaultMaxConns = 1024
	DefaultBacklog  = 1024
	DefaultLinger   = 200 * time.Millisecond // the poll-loop backends' linger too
)

// pollBudget bounds the frames one round hands to netstack before it kicks
// what netstack wrote.
const pollBudget = 256

// napPoll is how long the poller of a FrameIO that cannot sleep on its
// queue (DPDK) naps instead; the Go runtime rounds a sleep this short up to
// about a millisecond when nothing else wakes it.
const napPoll = 50 * time.Microsecond

// Options shape a Service beyond dgramio.Config. The zero value is the
// default everywhere.
type Options struct {
	// Open opens the FrameIO (New only; NewOverFrameIO takes one open).
	// nil: by Config.Kind, OpenXDP for tcp-xdp (or an empty Kind) and
	// OpenDPDK for tcp-dpdk.
	Open Opener
	// Poll is the poller's idle behaviour; SpinFor is how long PollAdaptive
	// polls after the last frame before it sleeps (default DefaultSpinFor).
	Poll    PollMode
	SpinFor time.Duration
	// MaxConns caps the connections open at once, accepted and dialled
	// together (default DefaultMaxConns). An Accept past it resets the
	// connection and returns a *ConnLimitError; so does a Dial, which
	// then sends nothing. Each connection holds at most Config.TCP.SendBuf
	// plus Config.TCP.RecvBuf bytes in netstack, so MaxConns times their
	// sum bounds the memory of connection buffers.
	MaxConns int
	// Backlog is each listener's queue of connections established and not
	// yet accepted (default DefaultBacklog); beyond it netstack drops SYNs.
	Backlog int
	// Linger bounds how long Close keeps the poller running so that the
	// FINs of the connections it closes are acknowledged before netstack
	// is shut down (which resets what is left). Default DefaultLinger.
	Linger time.Duration
	// TimeWait is how long a connection closed first by us stays in
	// TIME-WAIT (holding its port pair). 0: the engine's default, 60 s, as
	// Linux.
	TimeWait time.Duration
	// PrefixLen is Config.LocalIP's subnet length (0: every peer is on
	// the link, resolved by ARP, or neighbour discovery over IPv6).
	PrefixLen int
	// LocalIP6, with an IPv4 Config.LocalIP on the native engine, is the
	// Service's IPv6 address besides it: one engine then serves both
	// families (Listen takes connections to either address, Dial and
	// DialContext dial either family), and on tcp-xdp the XDP program
	// hands the engine the frames to either. Like LocalIP it must not be
	// an address the kernel holds on the interface. Its prefix is a /64
	// (with PrefixLen 0, every peer is on the link). Unset: the Service
	// has LocalIP's family only.
	LocalIP6 netip.Addr
}

// Service is the userspace TCP (the native engine, or gVisor netstack:
// Config.TCP.Stack) of Config.LocalIP (IPv4 or IPv6), and on the native
// engine also of Options.LocalIP6 (both families at once), over one
// FrameIO, driven by a poller goroutine of its
// own, with the net.Conn and net.Listener of package net on top: Listen
// and Dial (or DialContext, for an http.Transport) make them; any number
// of goroutines use them, as they would kernel sockets.
//
// The poller is the only goroutine that receives frames: it hands them to
// the engine and kicks what the engine wrote, once per round. Application
// goroutines never poll. On the native engine the poller is the engine's
// only caller, and Read and Write go through each connection's rings (see
// the package doc); on netstack a Read or Write that cannot go on blocks
// on a channel that netstack's readiness callbacks signal, and a Write
// pushes its segments itself (package stack's threading rules). With
// Config.CPUs, the poller is locked to its OS thread and pinned to
// CPUs[0].
//
// With Config.Queues > 1 (tcp-xdp, the native engine) the Service runs an
// engine and a poller per interface queue, pinned to CPUs[q]: a Listener
// accepts the connections of every queue, and dials take the queues in
// turn, each from a source port whose answers come back to it (see
// docs/netconn.md, "Several queues"). A connection's segments must all
// reach its queue: a NIC's RSS does that; on veth both ends must send a
// connection's frames from one CPU.
//
// All methods are safe for concurrent use.
type Service struct {
	cfg      dgramio.Config
	opts     Options
	tune     tcp.Tuning
	st       *stack.Stack // netstack; nil on the native engine
	nat      *nativeSvc   // the native engine (queue 0's); nil on netstack
	nats     []*nativeSvc // every queue's engine, nat first
	group    *tcp.XDPQueues
	nextQ    atomic.Uint32 // the queue of the next dial
	fio      frameio.FrameIO
	mode     string
	release  func() error
	portOnly uint16 // nonzero: the device gives netstack only this port's segments

	mu      sync.Mutex
	conns   map[*Conn]struct{}
	lns     map[*Listener]struct{}
	dialing int
	closed  bool
	auto    bool // Close when the last Listener and Conn are closed

	stop       atomic.Bool
	pollerDone chan struct{}
	closeOnce  sync.Once
	closeErr   error

	n counters
}

// counters are the Service's own, layer "netconn".
type counters struct {
	accepts, dials, dialFailures, limitRefused, closes atomic.Uint64
	frames, rounds, sleeps, naps, kickErrors           atomic.Uint64
	inlineSends                                        atomic.Uint64 // native: Writes that sent while the poller slept
	defers                                             atomic.Uint64 // native: frames the poller left to the engine's holder (deferRound)
	deferredRounds                                     atomic.Uint64 // native: rounds a holder ran for the poller
	spins, spinRounds, spinsSkipped                    atomic.Uint64 // native: windows of the poller's spin before a netpoller sleep, the frames they caught, windows skipped (CPUs without time to spare, or the spin did not pay)
	spinTrials, spinTrialsLost                         atomic.Uint64 // native: the spin gate's trials, and those after which the spin stayed off for the run (fewer frames a second than without it)
}

// New opens the FrameIO of cfg (Options.Open, or by cfg.Kind) and starts a
// Service on it: the engine of cfg.TCP.Stack (native when empty) with
// cfg.LocalIP (which must not be an address
// the kernel holds on the interface: see OpenXDP), the tuning of
// cfg.TCP and cfg.Nagle, and the poller (pinned to cfg.CPUs[0] if set).
// A tcp-xdp Service listens on and dials any port: its XDP program hands
// the engine every frame to cfg.LocalIP (with Options.Open, only cfg.Port,
// which is all such an opener is trusted to redirect). cfg.Role and cfg.Dests
// are not used (Dests with DstMAC become static neighbours). cfg.Queues > 1
// opens that many queues (tcp-xdp and the native engine only; see
// Service).
//
// Like OpenXDP, New must run on a thread inside the interface's
// network namespace (testhost.Host.Do in tests); the Service may be used
// from any goroutine afterwards. Close it to release everything; on error
// nothing is left open.
func New(cfg dgramio.Config, opts Options) (*Service, error) {
	if cfg.Kind == "" {
		cfg.Kind = dgramio.KindTCPXDP
	}
	cfg.Role = dgramio.RoleServer // a Service both listens and dials; Dests are not required
	if err := engineOf(&cfg); err != nil {
		return nil, err
	}
	open := opts.Open
	if open == nil {
		switch cfg.Kind {
		case dgramio.KindTCPXDP:
			open = OpenXDP
		case dgramio.KindTCPDPDK:
			open = OpenDPDK
		default:
			return nil, &dgramio.ConfigError{Field: "Kind", Value: cfg.Kind, Reason: "netconn runs the userspace TCP: use tcp-xdp or tcp-dpdk, or give Options.Open"}
		}
	}
	cfg, err := cfg.Prepare()
	if err != nil {
		return nil, err
	}
	if err := checkOptions(&opts); err != nil {
		return nil, err
	}
	if err := checkDual(cfg, opts); err != nil {
		return nil, err
	}
	if opts.Open == nil && opts.LocalIP6.IsValid() && cfg.Kind == dgramio.KindTCPXDP {
		open = func(cfg dgramio.Config) (Opened, error) { return openXDPDual(cfg, opts.LocalIP6) }
	}
	if cfg.Queues > 1 {
		if cfg.Kind != dgramio.KindTCPXDP || opts.Open != nil || cfg.TCP.Stack != dgramio.TCPStackNative {
			return nil, &dgramio.ConfigError{Field: "Queues", Value: cfg.Queues, Reason: "a Service runs several queues on kind tcp-xdp with the native engine and no Options.Open"}
		}
		return startNativeQueues(cfg, opts)
	}
	to, err := open(cfg)
	if err != nil {
		return nil, err
	}
	fio := to.FIO
	// OpenXDP's program hands the engine every frame to LocalIP; an
	// opener of the caller's is trusted with cfg.Port only.
	var portOnly uint16
	if cfg.Kind == dgramio.KindTCPXDP && opts.Open != nil {
		portOnly = cfg.Port
	}
	if cfg.TCP.Stack == dgramio.TCPStackNative {
		to.Mode = strings.Replace(to.Mode, "netstack", "native", 1)
		return startNative(cfg, fio, to, opts, portOnly)
	}
	return start(cfg, fio, to, opts, portOnly)
}

// NewOverFrameIO starts a Service over fio, which it owns from this call on
// (on error it is closed): for tests over frameio/memio, and for FrameIOs
// New does not know. cfg needs LocalIP; cfg.Port is not used (any port may
// be listened on and dialled); the rest is as for New.
func NewOverFrameIO(cfg dgramio.Config, fio frameio.FrameIO, opts Options) (*Service, error) {
	if err := checkOptions(&opts); err != nil {
		return nil, errors.Join(err, fio.Close())
	}
	cfg.Role = dgramio.RoleServer
	if err := engineOf(&cfg); err != nil {
		return nil, errors.Join(err, fio.Close())
	}
	cfg = cfg.WithDefaults()
	if err := checkDual(cfg, opts); err != nil {
		return nil, errors.Join(err, fio.Close())
	}
	if cfg.TCP.Stack == dgramio.TCPStackNative {
		return startNative(cfg, fio, Opened{FIO: fio, Mode: "native over " + fio.Stats().Mode}, opts, 0)
	}
	return start(cfg, fio, Opened{FIO: fio, Mode: "netstack over " + fio.Stats().Mode}, opts, 0)
}

// start builds netstack over fio and starts the poller (opts checked
// already); on error fio is released.
func start(cfg dgramio.Config, fio frameio.FrameIO, to Opened, opts Options, portOnly uint16) (*Service, error) {
	release := to.Close
	if release == nil {
		release = fio.Close
	}
	fail := func(err error) (*Service, error) {
		return nil, errors.Join(err, release())
	}
	if !cfg.LocalIP.IsValid() {
		return fail(&dgramio.ConfigError{Field: "LocalIP", Value: cfg.LocalIP, Reason: "the userspace TCP needs our IPv4 or IPv6 address"})
	}
	tune := tcp.TuningFromConfig(cfg)
	if err := tune.Validate(); err != nil {
		return fail(err)
	}
	so := stack.OptionsFromConfig(cfg)
	so.PrefixLen = opts.PrefixLen
	st, err := stack.New(fio, so)
	if err != nil {
		return fail(err)
	}
	s := &Service{
		cfg: cfg, opts: opts, tune: tune, st: st, fio: fio, mode: to.Mode, release: release,
		portOnly: portOnly,
		conns:    make(map[*Conn]struct{}), lns: make(map[*Listener]struct{}),
		pollerDone: make(chan struct{}),
	}
	if err := s.configure(); err != nil {
		st.Close()
		return fail(err)
	}
	claimed := make(chan error, 1)
	go s.poll(claimed)
	if err := <-claimed; err != nil {
		<-s.pollerDone
		st.Close()
		return fail(err)
	}
	return s, nil
}

func checkOptions(o *Options) error {
	bad := func(field string, v any, why string) error {
		return &dgramio.ConfigError{Field: "netconn.Options." + field, Value: v, Reason: why}
	}
	switch o.Poll {
	case PollAdaptive, PollSpin, PollSleep:
	default:
		return bad("Poll", o.Poll, "use PollAdaptive, PollSpin or PollSleep")
	}
	if o.SpinFor < 0 || o.MaxConns < 0 || o.Backlog < 0 || o.Linger < 0 || o.TimeWait < 0 {
		return bad("SpinFor, MaxConns, Backlog, Linger, TimeWait", *o, "must not be negative")
	}
	if o.SpinFor == 0 {
		o.SpinFor = DefaultSpinFor
	}
	if o.MaxConns == 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.Backlog == 0 {
		o.Backlog = DefaultBacklog
	}
	if o.Linger == 0 {
		o.Linger = DefaultLinger
	}
	return nil
}

// checkPort refuses a port other than the one the device hands netstack
// (Config.Port of a tcp-xdp Service); op is "listen" or "dial".
func (s *Service) checkPort(port uint16, op string) error {
	if s.portOnly == 0 || port == s.portOnly {
		return nil
	}
	return &dgramio.ConfigError{Field: "Port", Value: port, Reason: fmt.Sprintf(
		"this %s Service's XDP program hands netstack only the segments of port %d (Config.Port): %s there, or open another Service",
		s.cfg.Kind, s.portOnly, op)}
}

// configure sets the stack-wide TCP options.
func (s *Service) configure() error {
	if err := s.tune.Apply(s.st.NS); err != nil {
		return err
	}
	if s.opts.TimeWait > 0 {
		tw := tcpip.TCPTimeWaitTimeoutOption(s.opts.TimeWait)
		if err := s.st.NS.SetTransportProtocolOption(ntcp.ProtocolNumber, &tw); err != nil {
			return fmt.Errorf("netconn: netstack option TIME-WAIT=%v: %w", s.opts.TimeWait, tcp.GoError(err))
		}
	}
	return nil
}

// poll is the poller: it delivers received frames to netstack and kicks
// what netstack wrote, round after round, until Close stops it.
func (s *Service) poll(claimed chan<- error) {
	defer close(s.pollerDone)
	th, err := cpu.Claim(s.cfg.CPUs, false)
	claimed <- err
	if err != nil {
		return
	}
	defer th.Release()
	// An unpinned poller yields after a round that delivered frames, so
	// that the netstack processor it made runnable on this P runs at once
	// (package stack has the numbers). A pinned one, locked to its
	// thread, must not: the Go runtime would hand its P to another thread
	// and back, two wake-ups per yield; the processor is stolen by
	// another P instead. Rounds that find nothing do not yield either: a
	// goroutine that yields in a loop sits in the global run queue, keeps
	// the other Ps stealing it back and forth, and starves the network
	// poller, so that kernel sockets in the same process (a database
	// client, a kernel-side peer in tests) wait milliseconds for their
	// readiness. The spinning poller holds its P instead and is preempted
	// by the runtime like any long-running goroutine; with GOMAXPROCS 1
	// (nothing else would run) it yields anyway.
	yield := len(s.cfg.CPUs) == 0
	idleYield := runtime.GOMAXPROCS(0) == 1
	ep := s.st.EP
	batch := s.cfg.RxBatch
	var idleSince time.Time
	for !s.stop.Load() {
		n := 0
		for n < pollBudget {
			k := ep.Poll(batch)
			n += k
			if k < batch {
				break
			}
		}
		if err := ep.Flush(); err != nil {
			s.n.kickErrors.Add(1)
		}
		s.n.rounds.Add(1)
		if n > 0 {
			s.n.frames.Add(uint64(n))
			idleSince = time.Time{}
			if yield {
				runtime.Gosched()
			}
			continue
		}
		switch s.opts.Poll {
		case PollSleep:
			s.sleep()
			continue
		case PollAdaptive:
			now := time.Now()
			if idleSince.IsZero() {
				idleSince = now
			} else if now.Sub(idleSince) >= s.opts.SpinFor {
				s.sleep()
				idleSince = time.Time{}
				continue
			}
		}
		if idleYield {
			runtime.Gosched()
		}
	}
}

// sleep waits for a frame (Endpoint.Sleep); Close interrupts it. A FrameIO
// that cannot wait (DPDK) gets a nap instead.
func (s *Service) sleep() {
	s.n.sleeps.Add(1)
	err := s.st.EP.Sleep(context.Background())
	if errors.Is(err, dgramio.ErrNotSupported) {
		s.n.naps.Add(1)
		time.Sleep(napPoll)
	} else if errors.Is(err, net.ErrClosed) {
		// The FrameIO was closed under us; nothing will arrive again.
		// Keep the loop (Close stops it) without spinning on the error.
		time.Sleep(time.Millisecond)
	}
}

// Close closes every Listener and Conn of the Service (their blocked calls
// return net.ErrClosed; connections send FIN), keeps the poller running for
// up to Options.Linger while the FINs are acknowledged, then stops the
// poller, shuts netstack down (what is still open is reset) and closes the
// FrameIO (detaching the XDP program). Safe to call more than once; later
// calls return the first one's error.
func (s *Service) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.shutdown() })
	return s.closeErr
}

// resetWait bounds how long Close waits, after Linger, for netstack's
// endpoints to take the aborts that send their RSTs.
const resetWait = 100 * time.Millisecond

func (s *Service) shutdown() error {
	s.mu.Lock()
	s.closed = true
	lns := make([]*Listener, 0, len(s.lns))
	for l := range s.lns {
		lns = append(lns, l)
	}
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	// Before the connections are shut: the poller may finish one's
	// close as soon as it is asked, and must make it linger.
	for _, n := range s.nats {
		n.closing.Store(true)
	}
	for _, l := range lns {
		l.shut()
	}
	for _, c := range conns {
		c.shut()
	}
	if s.nat != nil {
		return s.nativeShutdown()
	}
	for deadline := time.Now().Add(s.opts.Linger); time.Now().Before(deadline) && !s.allClosed(); {
		time.Sleep(time.Millisecond)
	}
	if !s.allClosed() {
		// What Linger did not see through is reset while the poller
		// still runs, so that the RSTs leave: netstack's own Close resets
		// too, but after the poller, when nothing would send them.
		for _, te := range s.st.NS.RegisteredEndpoints() {
			te.Abort()
		}
		for deadline := time.Now().Add(resetWait); time.Now().Before(deadline) && !s.allClosed(); {
			time.Sleep(time.Millisecond)
		}
	}
	s.stop.Store(true)
	s.st.EP.Interrupt()
	<-s.pollerDone
	s.st.EP.Flush() // what the last aborts wrote after the poller's last round
	s.st.Close()
	return s.release()
}

// allClosed reports whether no netstack endpoint still waits for the peer
// to acknowledge our FIN or to finish a handshake.
func (s *Service) allClosed() bool {
	for _, te := range s.st.NS.RegisteredEndpoints() {
		ep, ok := te.(interface{ State() uint32 })
		if !ok {
			continue
		}
		switch ntcp.EndpointState(ep.State()) {
		case ntcp.StateFinWait2, ntcp.StateTimeWait, ntcp.StateClose, ntcp.StateError,
			ntcp.StateListen, ntcp.StateInitial, ntcp.StateBound:
		default:
			return false
		}
	}
	return true
}

// removeConn forgets c; an automatic Service closes with its last Conn
// and Listener.
func (s *Service) removeConn(c *Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	last := s.lastLocked()
	s.mu.Unlock()
	s.n.closes.Add(1)
	if last {
		s.Close()
	}
}

// removeListener forgets l, as removeConn.
func (s *Service) removeListener(l *Listener) {
	s.mu.Lock()
	delete(s.lns, l)
	last := s.lastLocked()
	s.mu.Unlock()
	if last {
		s.Close()
	}
}

// lastLocked: an automatic Service that has nothing left. Caller holds mu.
func (s *Service) lastLocked() bool {
	return s.auto && !s.closed && len(s.conns) == 0 && len(s.lns) == 0 && s.dialing == 0
}

// isClosed reports whether Close has begun.
func (s *Service) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Addr returns the Service's address (Config.LocalIP, IPv4 or IPv6).
func (s *Service) Addr() net.IP { return net.IP(s.cfg.LocalIP.AsSlice()) }

// Conns returns the number of connections open (accepted or dialled, not
// yet closed by the application).
func (s *Service) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Endpoints returns the number of TCP endpoints netstack still holds:
// listeners, open connections, and connections closed by the application
// whose FIN handshake or TIME-WAIT is not over. It returns to the number of
// open listeners once every connection is fully closed, which tests use to
// show that nothing leaked. On the native engine it counts the listeners
// and the connections the Service holds (open, or closed by the
// application with written bytes still to hand to the engine, or
// lingering in Close); the engine finishes a close (FIN-WAIT, TIME-WAIT)
// on its own.
func (s *Service) Endpoints() int {
	if s.nat != nil {
		k := int64(0)
		for _, n := range s.nats {
			k += n.held.Load() + n.nlns.Load()
		}
		return int(k)
	}
	return len(s.st.NS.RegisteredEndpoints())
}

// Stats returns the Service's counters: Conns (open now), Accepts, and the
// layers of netstack ("netstack"), the link endpoint ("link"), the
// FrameIO's own, and the Service's ("netconn": accepts, dials,
// dial_failures, conn_limit_refused, closes, endpoints, poll_rounds,
// poll_frames, sleeps, naps, kick_errors, inline_sends: Writes that sent
// their bytes themselves while the native poller slept). Safe from any
// goroutine; it allocates.
func (s *Service) Stats() dgramio.Stats {
	fs := s.fioStats()
	out := dgramio.Stats{
		Kind: s.cfg.Kind, Mode: s.mode,
		Conns: uint64(s.Conns()), Accepts: s.n.accepts.Load(),
		Syscalls:   fs.Syscalls,
		SockSndBuf: s.tune.SendBuf, SockRcvBuf: s.tune.RecvBuf,
	}
	if s.nat != nil {
		out.Layers = s.nativeCounters(out.Layers)
	} else {
		out.Layers = s.st.AppendCounters(out.Layers)
	}
	for _, c := range []struct {
		name string
		v    uint64
	}{
		{"accepts", s.n.accepts.Load()},
		{"dials", s.n.dials.Load()},
		{"dial_failures", s.n.dialFailures.Load()},
		{"conn_limit_refused", s.n.limitRefused.Load()},
		{"closes", s.n.closes.Load()},
		{"endpoints", uint64(s.Endpoints())},
		{"poll_rounds", s.n.rounds.Load()},
		{"poll_frames", s.n.frames.Load()},
		{"sleeps", s.n.sleeps.Load()},
		{"naps", s.n.naps.Load()},
		{"kick_errors", s.n.kickErrors.Load()},
		{"inline_sends", s.n.inlineSends.Load()},
		{"poller_defers", s.n.defers.Load()},
		{"deferred_rounds", s.n.deferredRounds.Load()},
		{"spins", s.n.spins.Load()},
		{"spin_rounds", s.n.spinRounds.Load()},
		{"spins_skipped", s.n.spinsSkipped.Load()},
		{"spin_trials", s.n.spinTrials.Load()},
		{"spin_trials_lost", s.n.spinTrialsLost.Load()},
	} {
		out.Layers = append(out.Layers, dgramio.Counter{Layer: "netconn", Name: c.name, Value: c.v, Gauge: c.name == "endpoints"})
	}
	out.Layers = append(out.Layers, fs.Layers...)
	return out
}
