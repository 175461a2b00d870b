package netconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/stack"
	"github.com/dgramio/dgramio/internal/tcp"
	"github.com/dgramio/dgramio/stack/native"
)

// nativeSvc is a Service's native engine (package stack/native) and the
// poller that owns it. The engine has one owner: the poller goroutine is
// the only one that calls it. Application goroutines reach it through
//
//   - each connection's two byte rings (ring: one producer, one consumer,
//     atomic indices), received bytes from the poller to the reader and
//     bytes to send from the writer to the poller;
//   - work, a lock-free stack of the connections that have something for
//     the poller (bytes to send, room made in a full receive ring), which
//     a connection joins once until the poller takes it (nconn.flagged);
//   - reqs, a queue of functions under a mutex for the rare operations
//     (Listen, Dial, Close, CloseWrite, SetReadBuffer, Stats), which the
//     poller runs between two polls.
//
// The poller wakes an application goroutine only when it is parked (the
// connection's rdParked or wrParked), and is woken itself only when it
// sleeps (sleeping): a busy Service pays no wake-up per message.
//
// own says who holds the engine: the poller (ownPoller) from its start
// to its end except while it sleeps, when the engine is free (ownFree)
// and a Write may take it (ownWriter) to send its bytes itself
// (sendInline) instead of waking the poller. Whatever the poller owns
// (the engine, the slots, active, wakeAt) is touched only by the
// engine's holder.
type nativeSvc struct {
	s   *Service
	e   *native.Engine
	fio frameio.FrameIO
	// q is the queue's index in Service.nats; cpus pins its poller (to
	// cpus[0]); done is closed when the poller returns; release (nil:
	// none; the Service's own releases queue 0's) releases the queue's
	// FrameIO; srcPorts (nil: any port) gives the ports a dial from this
	// queue tries, those whose answers come back to it.
	q        int
	cpus     []int
	done     chan struct{}
	release  func() error
	srcPorts func(netip.AddrPort) []uint16
	wt       frameio.Waiter    // nil: the FrameIO cannot sleep (DPDK): naps
	irq      stack.Interrupter // nil: a Wait is ended by wakeCh's slices
	// alarm interrupts the FrameIO's Wait at the engine's next timer.
	alarm  *time.Timer
	nap    *time.Timer
	wakeCh chan struct{} // the nap of a FrameIO without Interrupter

	sleeping atomic.Bool
	own      atomic.Int32 // ownPoller, ownFree, ownWriter
	// wantEngine: the poller waits in acquire for a Write to free the
	// engine, which then signals handCh.
	wantEngine atomic.Bool
	handCh     chan struct{}
	// deferred: the poller, woken by a frame while a leading Read or an
	// inline Write held the engine, went back to sleep and left the round
	// that frame needs to the holder, which runs it when it frees the
	// engine (free).
	deferred atomic.Bool
	// poke: a holder asked for a round (wakeNow); it ends the poller's
	// spin (spinNetpoll), and each round of the poller clears it.
	poke atomic.Bool
	// spinning: the poller spins (spinNetpoll); a Read then parks on
	// its channel instead of leading, so that no goroutine waits in the
	// netpoller for the frame the spin will see. gate (the poller's)
	// says whether the CPUs have time to spare for a spin.
	spinning   atomic.Bool
	spinReader atomic.Pointer[nconn] // a Read that parked while the poller spun (parkedInSpin)
	gate       spinGate
	work       atomic.Pointer[nconn]
	reqFlag    atomic.Bool
	reqMu      sync.Mutex
	reqs       []func()
	spare      []func()
	stop       atomic.Bool
	held       atomic.Int64 // engine connections the Service holds
	nlns       atomic.Int64 // engine listeners open

	// The poller's own.
	ready   []*nconn // the connections TakeReadable named, this round
	active  []*nconn // bytes in tx the engine has no room for yet, a CloseWrite or Close to finish
	dialing []*nconn
	lns     []*nlistener
	slots   []*nconn // by native.Conn.Slot
	took    func(*native.Conn)
	sink    []byte // what a connection shut for reading receives
	// pf, when the FrameIO has a pollable fd (PollFD), is a duplicate of
	// it in the Go netpoller, where the poller sleeps (sleepNetpoll).
	pf  *os.File
	prc syscall.RawConn
	// closing: Service.Close began (set before it shuts the
	// connections): a connection closed from then on lingers in linger.
	closing atomic.Bool
	linger  []*native.Conn
	// wakeAt is when the sleeping poller's timer ends its sleep (zero:
	// none): a Write that sends inline and arms an earlier timer moves
	// it (rearm). readFn and first are sleepNetpoll's.
	wakeAt time.Time
	readFn func(uintptr) bool
	// rxReady reports frames in the FrameIO's RX ring (rxReadier); nil
	// when it cannot tell.
	rxReady func() bool
	first   bool

	// A Read that leads (native_lead.go): rf is a second duplicate of
	// the fd, on which the leader waits; leadFn and leadFirst are its
	// wait's (the leader's own).
	rf         *os.File
	rrc        syscall.RawConn
	leadFn     func(uintptr) bool
	leadFirst  bool
	leader     atomic.Pointer[nconn]
	leadRounds atomic.Uint64 // rounds run by leading readers
	// rxFrames counts the frames this queue's rounds polled (every
	// holder's): the spin gate's measure (spinGate.count).
	rxFrames atomic.Uint64
}

// Who holds the engine (nativeSvc.own; ownReader: native_lead.go).
const (
	ownFree   = 0 // the poller sleeps: a Write may take the engine
	ownPoller = 1
	ownWriter = 2 // a Write sends inline (sendInline)
)

// rxRing and txRing are the sizes of each connection's rings, between the
// application and the engine's own buffers (Config.TCP.RecvBuf, SendBuf).
const (
	rxRing = 128 << 10
	txRing = 128 << 10
)

// engineOf resolves Config.TCP.Stack for a Service: native (the default,
// as dgramio.New's for tcp-xdp and tcp-dpdk) or netstack.
func engineOf(cfg *dgramio.Config) error {
	switch cfg.TCP.Stack {
	case "":
		cfg.TCP.Stack = dgramio.TCPStackNative
	case dgramio.TCPStackNative, dgramio.TCPStackNetstack:
	default:
		return &dgramio.ConfigError{Field: "TCP.Stack", Value: cfg.TCP.Stack, Reason: `use "native" (the default) or "netstack"`}
	}
	return nil
}

// startNative builds the native engine over fio and starts its poller (opts
// checked already); on error fio is released.
func startNative(cfg dgramio.Config, fio frameio.FrameIO, to Opened, opts Options, portOnly uint16) (*Service, error) {
	release := to.Close
	if release == nil {
		release = fio.Close
	}
	fail := func(err error) (*Service, error) {
		return nil, errors.Join(err, release())
	}
	tune, err := nativeTuning(cfg)
	if err != nil {
		return fail(err)
	}
	e, err := newEngine(cfg, tune, opts, fio, nil)
	if err != nil {
		return fail(err)
	}
	mode := to.Mode
	if mode == "" {
		mode = "native over " + fio.Stats().Mode
	}
	s := newNativeService(cfg, opts, tune, fio, mode, release, portOnly)
	if err := s.startQueue(0, cfg.CPUs, e, fio, nil, nil); err != nil {
		return fail(err)
	}
	return s, nil
}

// nativeTuning checks cfg's address and TCP tuning for the native engine.
func nativeTuning(cfg dgramio.Config) (tcp.Tuning, error) {
	if !cfg.LocalIP.IsValid() || cfg.LocalIP.IsUnspecified() {
		return tcp.Tuning{}, &dgramio.ConfigError{Field: "LocalIP", Value: cfg.LocalIP, Reason: "the userspace TCP needs our IPv4 or IPv6 address"}
	}
	tune := tcp.TuningFromConfig(cfg)
	return tune, tune.ValidateFor(dgramio.TCPStackNative)
}

// newEngine builds a native engine over fio; arp is the group of engines
// it shares ARP replies with (nil: none).
func newEngine(cfg dgramio.Config, tune tcp.Tuning, opts Options, fio frameio.FrameIO, arp *native.ARPShare) (*native.Engine, error) {
	e, err := native.New(fio, engineOptions(cfg, tune, opts, arp))
	if err != nil {
		return nil, fmt.Errorf("netconn: native engine: %w", err)
	}
	return e, nil
}

// engineOptions maps cfg, its Tuning (nativeTuning) and opts onto the
// native engine's options.
func engineOptions(cfg dgramio.Config, tune tcp.Tuning, opts Options, arp *native.ARPShare) native.Options {
	eo := native.Options{
		Addr:       cfg.LocalIP,
		PrefixLen:  opts.PrefixLen,
		AllOnLink:  opts.PrefixLen == 0,
		Neighbors:  stack.OptionsFromConfig(cfg).Neighbors,
		SendBuf:    tune.SendBuf,
		RecvBuf:    tune.RecvBuf,
		MinRTO:     tune.MinRTO,
		MaxRetries: tune.MaxRetries,
		DelayedACK: tune.DelayedACK,
		Nagle:      !tune.NoDelay,
		NoSACK:     !tune.SACK,
		Congestion: tcp.NativeCongestion(tune.Congestion),
		SYNBacklog: opts.Backlog,
		TimeWait:   opts.TimeWait,
		MaxConns:   tune.MaxConns,
		ARPShare:   arp,
	}
	v6Engine(&eo, cfg, opts)
	if eo.MinRTO > native.DefaultMaxRTO {
		eo.MaxRTO = eo.MinRTO
	}
	if eo.MaxConns == 0 {
		// The table also holds what the application closed and the
		// engine still closes (FIN-WAIT, LAST-ACK) and the handshakes:
		// room for as many again.
		eo.MaxConns = 2 * opts.MaxConns
	}
	return eo
}

func newNativeService(cfg dgramio.Config, opts Options, tune tcp.Tuning, fio frameio.FrameIO, mode string, release func() error, portOnly uint16) *Service {
	return &Service{
		cfg: cfg, opts: opts, tune: tune, fio: fio, mode: mode, release: release,
		portOnly: portOnly,
		conns:    make(map[*Conn]struct{}), lns: make(map[*Listener]struct{}),
		pollerDone: make(chan struct{}),
	}
}

// startQueue starts queue q's poller (pinned to cpus[0] if set) on e over
// fio; release (nil: none) releases the queue's FrameIO after the engine
// is closed, srcPorts (nil: any) gives the ports it dials from. On error
// the engine is closed; release is the caller's.
func (s *Service) startQueue(q int, cpus []int, e *native.Engine, fio frameio.FrameIO, release func() error, srcPorts func(netip.AddrPort) []uint16) error {
	n := &nativeSvc{s: s, e: e, fio: fio, q: q, cpus: cpus, done: make(chan struct{}),
		release: release, srcPorts: srcPorts, wakeCh: make(chan struct{}, 1), handCh: make(chan struct{}, 1)}
	n.wt, _ = fio.(frameio.Waiter)
	n.irq, _ = fio.(stack.Interrupter)
	n.took = n.readable
	n.gate.count, n.gate.trials, n.gate.lost = n.rxFrames.Load, &s.n.spinTrials, &s.n.spinTrialsLost
	n.readFn = func(uintptr) bool {
		// The first call asks to wait, unless a frame came since the
		// last round: the Read has just cleared the readiness the
		// netpoller held, so that frame would wake nobody until the next
		// one or the engine's timer (a peer waiting for our answer sends
		// none: the request stalled for its RTO). While a round is
		// deferred its holder polls the ring (it would only spin here).
		// The next call comes when the fd is readable.
		if n.first {
			n.first = false
			return n.rxReady != nil && !n.deferred.Load() && n.rxReady()
		}
		return true
	}
	n.own.Store(ownPoller)
	if err := n.openPollFD(); err != nil {
		e.Close()
		return err
	}
	claimed := make(chan error, 1)
	go n.poll(claimed)
	if err := <-claimed; err != nil {
		<-n.done
		e.Close()
		if n.pf != nil {
			n.pf.Close()
		}
		if n.rf != nil {
			n.rf.Close()
		}
		return err
	}
	if q == 0 {
		s.nat = n
	}
	s.nats = append(s.nats, n)
	return nil
}

// do runs f on the poller, between two polls, and waits for it; false
// when the poller has stopped (f did not run).
func (n *nativeSvc) do(f func()) bool {
	done := make(chan struct{})
	if !n.post(func() { f(); close(done) }) {
		return false
	}
	select {
	case <-done:
		return true
	case <-n.done:
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
}

// post queues f for the poller without waiting; false when it has
// stopped.
func (n *nativeSvc) post(f func()) bool {
	n.reqMu.Lock()
	if n.stop.Load() {
		n.reqMu.Unlock()
		return false
	}
	n.reqs = append(n.reqs, f)
	n.reqFlag.Store(true)
	n.reqMu.Unlock()
	n.wake()
	return true
}

// wake ends the poller's sleep, if it sleeps.
func (n *nativeSvc) wake() {
	if !n.sleeping.Load() {
		return
	}
	if n.pf != nil {
		n.pf.SetReadDeadline(longAgo)
		return
	}
	if n.irq != nil {
		n.irq.Interrupt()
	}
	select {
	case n.wakeCh <- struct{}{}:
	default:
	}
}

// runReqs runs the queued requests.
func (n *nativeSvc) runReqs() bool {
	if !n.reqFlag.Load() {
		return false
	}
	n.reqMu.Lock()
	reqs := n.reqs
	n.reqs = n.spare[:0]
	n.reqFlag.Store(false)
	n.reqMu.Unlock()
	for i, f := range reqs {
		f()
		reqs[i] = nil
	}
	n.spare = reqs[:0]
	return len(reqs) > 0
}

// poll is the poller: frames in, the connections' work, what became
// readable, accepts, dials, one flush, round after round, until Close
// stops it; idle, it spins or sleeps as Options.Poll says.
func (n *nativeSvc) poll(claimed chan<- error) {
	s := n.s
	defer close(n.done)
	th, err := cpu.Claim(n.cpus, false)
	claimed <- err
	if err != nil {
		return
	}
	defer th.Release()
	// Unpinned, a busy round yields so that the reader it woke runs (as
	// the netstack poller: see Service.poll), except where the poller
	// sleeps in the netpoller as soon as a round finds nothing: there
	// the next round's sleep frees the P, while a yield would queue the
	// poller behind the woken goroutine's whole turn (its handler, the
	// goroutines it starts) in the global run queue; a Write that finds
	// it asleep readies it on the writer's own P instead.
	yield := len(n.cpus) == 0 && (n.pf == nil || s.opts.Poll == PollSpin)
	netpoll := n.pf != nil && s.opts.Poll != PollSpin
	// The spin window yields between looks: an unpinned poller's (a
	// pinned one's yield would hand its locked thread over each time).
	spin := netpoll && s.opts.Poll == PollAdaptive && n.rxReady != nil && len(n.cpus) == 0
	idleYield := runtime.GOMAXPROCS(0) == 1
	batch := s.cfg.RxBatch
	e := n.e
	// lastBusy is the last round that moved frames or bytes; a round that
	// only ran requests (Stats, Listen...) does not keep the poller
	// spinning.
	var lastBusy time.Time
	for !n.stop.Load() {
		n.poke.Store(false)
		now := e.Tick()
		frames := 0
		for frames < pollBudget {
			k := e.PollAt(now, batch)
			frames += k
			if k < batch {
				break
			}
		}
		reqs := n.runReqs()
		did := n.step()
		if err := e.FlushAt(now); err != nil {
			s.n.kickErrors.Add(1)
		}
		s.n.rounds.Add(1)
		if frames > 0 || did {
			s.n.frames.Add(uint64(frames))
			n.rxFrames.Add(uint64(frames))
			lastBusy = time.Now()
			if yield {
				// A reader or writer this round woke sits in this P's
				// runnext: let it run now.
				runtime.Gosched()
			}
			if !netpoll || frames >= pollBudget || reqs {
				continue
			}
			// In the netpoller, adaptive: look at the RX ring for
			// SpinFor, yielding between looks (spinNetpoll), so that
			// the next request of a connection that is answered
			// within that window costs no wake-up; then sleep (sleep
			// looks for work queued and what the engine holds).
			if spin && n.spinNetpoll(lastBusy) {
				continue
			}
			n.sleep()
			continue
		}
		if reqs {
			continue // what they asked may have made work: look again
		}
		switch s.opts.Poll {
		case PollSleep:
			n.sleep()
			continue
		case PollAdaptive:
			// In the netpoller a sleep costs what a kernel socket's
			// does (the goroutine that makes a frame arrive runs the
			// poller when it blocks): spinning would only hold a P.
			if n.pf != nil || time.Since(lastBusy) >= s.opts.SpinFor {
				n.sleep()
				continue
			}
		}
		if idleYield {
			runtime.Gosched()
		}
	}
}

// step does one round's work besides polling and flushing; it reports
// whether there was any.
func (n *nativeSvc) step() bool {
	did := false
	if c := n.work.Swap(nil); c != nil {
		did = true
		for c != nil {
			next := c.next
			c.next = nil
			c.flagged.Store(false)
			n.service(c)
			c = next
		}
	}
	n.e.TakeReadable(n.took)
	if len(n.ready) > 0 {
		did = true
		for i, c := range n.ready {
			n.fill(c)
			n.ready[i] = nil
		}
		n.ready = n.ready[:0]
	}
	for _, l := range n.lns {
		if l.el.Pending() > 0 && n.accept(l) {
			did = true
		}
	}
	if len(n.active) > 0 {
		k := 0
		for _, c := range n.active {
			if n.push(c) {
				n.active[k] = c
				k++
			}
		}
		clear(n.active[k:])
		n.active = n.active[:k]
	}
	if len(n.dialing) > 0 {
		n.checkDials()
	}
	if len(n.linger) > 0 {
		n.checkLinger()
	}
	return did
}

// readable is TakeReadable's callback: it may not call the engine.
func (n *nativeSvc) readable(ec *native.Conn) {
	if i := ec.Slot(); i < len(n.slots) && n.slots[i] != nil {
		n.ready = append(n.ready, n.slots[i])
	}
}

// hold makes the nconn of ec, a connection the engine gave the Service.
func (n *nativeSvc) hold(ec *native.Conn) *nconn {
	c := newNconn(n, ec)
	i := ec.Slot()
	if i >= len(n.slots) {
		n.slots = append(n.slots, make([]*nconn, i+1-len(n.slots))...)
	}
	n.slots[i] = c
	n.held.Add(1)
	return c
}

// let forgets c's engine connection, which Close or Abort then releases.
func (n *nativeSvc) let(c *nconn) *native.Conn {
	ec := c.ec
	if ec == nil {
		return nil
	}
	c.ec = nil
	if i := ec.Slot(); n.slots[i] == c {
		n.slots[i] = nil
	}
	n.held.Add(-1)
	return ec
}

// service handles a connection that joined the work list: bytes to send,
// room in its receive ring, a close asked.
func (n *nativeSvc) service(c *nconn) {
	if c.ec == nil {
		return
	}
	n.fill(c)
	if n.push(c) && !c.inActive {
		c.inActive = true
		n.active = append(n.active, c)
	}
}

// fill moves what the engine received for c into its receive ring, and
// the end (FIN, error) once every byte before it is there; it wakes a
// parked reader.
func (n *nativeSvc) fill(c *nconn) {
	ec := c.ec
	if ec == nil || c.end.Load() != 0 {
		return
	}
	moved := false
	for {
		if c.rdShut.Load() {
			if n.sink == nil {
				n.sink = make([]byte, 16<<10)
			}
			k, err := ec.Read(n.sink)
			if k > 0 {
				continue
			}
			if err != nil {
				c.setEnd(err)
				moved = true
			}
			break
		}
		p := c.rx.writable()
		if len(p) == 0 {
			if ec.Readable() {
				c.rxFull.Store(true)
				// The reader may have made room since: look once more.
				if len(c.rx.writable()) > 0 && c.rxFull.CompareAndSwap(true, false) {
					continue
				}
			}
			break
		}
		k, err := ec.Read(p)
		if k > 0 {
			c.rx.produced(k)
			moved = true
			continue
		}
		if err != nil {
			c.setEnd(err)
			moved = true
		}
		break
	}
	if moved && c.rdParked.Load() {
		c.kickRead()
	}
}

// push moves c's bytes to send into the engine, as its send buffer takes
// them, finishes a CloseWrite or Close asked once they are all in, and
// wakes a parked writer. It reports whether c must stay active (bytes or
// a close left for a later round).
func (n *nativeSvc) push(c *nconn) bool {
	ec := c.ec
	if ec == nil {
		c.inActive = false
		return false
	}
	moved := false
	for {
		p := c.tx.readable()
		if len(p) == 0 {
			break
		}
		k := ec.Write(p)
		if k == 0 {
			break
		}
		c.tx.consumed(k)
		moved = true
	}
	left := c.tx.len() > 0
	if left && ec.Room() == 0 {
		if err := ec.Err(); err != nil || !sendable(ec.State()) {
			// Nothing will take them: the writer learns why.
			c.setWrEnd(err)
			c.tx.drop()
			left = false
			moved = true
		}
	}
	if moved && c.wrParked.Load() {
		signal(c.wrCh)
	}
	if !left {
		switch {
		case c.closeAsked.Load():
			n.finish(c)
			c.inActive = false
			return false
		case c.wrShutAsked.Load() && !c.wrShutDone:
			c.wrShutDone = true
			ec.CloseWrite()
		}
	}
	if !left {
		c.inActive = false
	}
	return left
}

// sendable reports whether an engine connection in state st still sends
// what it is given.
func sendable(st native.State) bool {
	switch st {
	case native.SynSent, native.SynReceived, native.Established, native.CloseWait:
		return true
	}
	return false
}

// finish closes c's engine connection, whose bytes to send are all in the
// engine: RST when received bytes were left unread (Linux; RFC 2525
// §2.17), FIN otherwise. During Service.Close the connection lingers
// until its FIN is acknowledged.
func (n *nativeSvc) finish(c *nconn) {
	unread := c.rx.len() > 0
	ec := n.let(c)
	if ec == nil {
		return
	}
	switch {
	case unread:
		ec.Abort()
	case n.closing.Load() && ec.Err() == nil && ec.State() != native.Closed:
		ec.CloseWrite()
		n.linger = append(n.linger, ec)
	default:
		ec.Close()
	}
	c.closedEngine()
}

// accept takes the connections l's engine listener completed into l's
// queue, as far as it has room.
func (n *nativeSvc) accept(l *nlistener) bool {
	took := false
	for l.queued.Load() < l.room {
		ec, ok := l.el.Accept()
		if !ok {
			break
		}
		c := n.hold(ec)
		n.fill(c)
		l.queued.Add(1)
		l.ch <- c
		took = true
	}
	return took
}

// checkDials ends the dials whose handshake is over.
func (n *nativeSvc) checkDials() {
	k := 0
	for _, c := range n.dialing {
		ec := c.ec
		if ec != nil {
			if st := ec.State(); st == native.SynSent || st == native.SynReceived {
				n.dialing[k] = c
				k++
				continue
			}
			if err := ec.Err(); err != nil && ec.State() == native.Closed {
				c.dialErr = nativeErrno(err)
			}
		}
		close(c.dialDone)
	}
	clear(n.dialing[k:])
	n.dialing = n.dialing[:k]
}

// checkLinger closes the lingering connections whose FIN is acknowledged.
func (n *nativeSvc) checkLinger() {
	k := 0
	for _, ec := range n.linger {
		if done(ec) {
			ec.Close()
			continue
		}
		n.linger[k] = ec
		k++
	}
	clear(n.linger[k:])
	n.linger = n.linger[:k]
}

// done reports whether ec's FIN and what it follows are acknowledged, or
// it ended.
func done(ec *native.Conn) bool {
	switch ec.State() {
	case native.FinWait2, native.TimeWait, native.Closed:
		return true
	}
	return ec.Err() != nil
}

// sleep sleeps until a frame, the engine's next timer, or an application
// request (wake); work already queued ends it at once.
func (n *nativeSvc) sleep() {
	s := n.s
	n.sleeping.Store(true)
	defer n.sleeping.Store(false)
	if n.work.Load() != nil || n.reqFlag.Load() || n.stop.Load() || !n.e.Idle() {
		return
	}
	s.n.sleeps.Add(1)
	next, armed := n.e.NextTimer()
	d := time.Duration(-1)
	if armed {
		if d = time.Until(next); d <= 0 {
			return
		}
	} else {
		next = time.Time{}
	}
	if n.pf != nil {
		n.wakeSpunReader()
		n.sleepNetpoll(next)
		return
	}
	if n.wt == nil || n.irq == nil {
		// No Wait, or none that a request can end: nap in slices.
		s.n.naps.Add(1)
		slice := napPoll
		if n.wt != nil {
			slice = stack.SleepSlice
		}
		if d < 0 || d > slice {
			d = slice
		}
		if n.wt != nil {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			n.wt.Wait(ctx)
			cancel()
			return
		}
		if n.nap == nil {
			n.nap = time.NewTimer(d)
		} else {
			n.nap.Reset(d)
		}
		select {
		case <-n.wakeCh:
			n.nap.Stop()
		case <-n.nap.C:
		}
		return
	}
	if d > 0 {
		n.setAlarm(d)
	}
	// The engine is free while Wait sleeps: a Write may send inline and
	// move the alarm earlier (rearm). Interrupt is sticky: a wake
	// between the release and the Wait ends the Wait at once.
	n.wakeAt = next
	n.own.Store(ownFree)
	err := n.wt.Wait(context.Background())
	n.acquire()
	if n.alarm != nil {
		n.alarm.Stop()
	}
	if errors.Is(err, net.ErrClosed) {
		time.Sleep(time.Millisecond) // the FrameIO was closed under us
	}
}

// shutdown is the native Service's Close after the listeners and
// connections were shut: it waits up to Linger for their FINs to be
// acknowledged, stops the poller, resets what is left (connections it
// holds and the engine's orphans) and closes the engine.
func (n *nativeSvc) shutdown() error {
	s := n.s
	n.do(func() {
		// Connections whose close waits for bytes to leave finish now
		// into the linger list.
		for _, c := range n.active {
			if c.closeAsked.Load() && c.ec != nil && c.tx.len() == 0 {
				n.finish(c)
			}
		}
	})
	deadline := time.Now().Add(s.opts.Linger)
	for time.Now().Before(deadline) {
		busy := true
		// Connections the application closed before (the engine's
		// orphans) still sending count as well.
		if !n.do(func() { busy = len(n.linger) > 0 || n.held.Load() > 0 || n.e.Orphans() > 0 }) || !busy {
			break
		}
		time.Sleep(time.Millisecond)
	}
	n.reqMu.Lock()
	n.stop.Store(true)
	n.reqMu.Unlock()
	n.sleeping.Store(true)
	n.wake()
	<-n.done
	// The poller is gone: the engine is ours.
	n.runReqs()
	for _, ec := range n.linger {
		if done(ec) {
			ec.Close()
		} else {
			ec.Abort()
		}
	}
	n.linger = nil
	for _, c := range n.slots {
		if c != nil {
			if ec := n.let(c); ec != nil {
				ec.Abort()
				c.closedEngine()
			}
		}
	}
	for _, c := range n.dialing {
		close(c.dialDone)
	}
	n.dialing = nil
	// Connections closed earlier that Linger did not see through: their
	// peers get a reset rather than a silence (the engine's Close sends
	// nothing).
	n.e.AbortOrphans()
	n.e.Flush()
	n.e.Close()
	if n.alarm != nil {
		n.alarm.Stop()
	}
	if n.pf != nil {
		n.pf.Close()
	}
	if n.rf != nil {
		n.rf.Close()
	}
	if n.release != nil {
		return n.release()
	}
	return nil
}

// appendCounters adds the engine's counters (on the poller while it
// runs).
func (n *nativeSvc) appendCounters(dst []dgramio.Counter) []dgramio.Counter {
	if n.do(func() { dst = n.e.AppendCounters(dst) }) {
		return dst
	}
	<-n.done
	return n.e.AppendCounters(dst)
}

// nativeErrno maps the engine's connection errors onto the errnos of
// Linux (and of netstack's Services), which opError wraps as the standard
// library does.
func nativeErrno(err error) error {
	for _, m := range [...]struct {
		err   error
		errno syscall.Errno
	}{
		{native.ErrReset, syscall.ECONNRESET},
		{native.ErrRefused, syscall.ECONNREFUSED},
		{native.ErrTimedOut, syscall.ETIMEDOUT},
		{native.ErrHostUnreachable, syscall.EHOSTUNREACH},
		{native.ErrAborted, syscall.ECONNABORTED},
		{native.ErrPortInUse, syscall.EADDRINUSE},
		{native.ErrTableFull, syscall.EADDRNOTAVAIL},
	} {
		if errors.Is(err, m.err) {
			return m.errno
		}
	}
	return err
}

// signal leaves a token in ch (capacity 1) unless one is there.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// PollFDer is implemented by a FrameIO whose frames' arrival makes a file
// descriptor readable (an AF_XDP socket, afxdp.XSK.PollFD: poll(2) says
// POLLIN while its RX ring holds frames); PollFD returns -1 when it has
// none. A native Service over one sleeps in the Go
// netpoller on a duplicate of it instead of in the FrameIO's Wait: the
// goroutine of an application that makes a frame arrive (a kernel client
// in the same process writing to the veth peer) then finds the poller
// ready when it blocks itself, and runs it on its own thread, where a
// poller blocked in poll(2) needs a thread of its own woken.
type PollFDer interface {
	PollFD() int
}

// rxReadier is a PollFDer that tells, from any goroutine, whether frames
// wait in its RX ring (afxdp.XSK.RxReady).
type rxReadier interface {
	RxReady() bool
}

// sleepHook, set by tests only, runs as the poller is about to wait in
// the netpoller, after its last round.
var sleepHook atomic.Pointer[func(*nativeSvc)]

// longAgo is a deadline that has passed: it ends a netpoller wait at once.
var longAgo = time.Unix(1, 0)

// openPollFD registers a duplicate of the FrameIO's fd, if it has one,
// with the Go netpoller.
func (n *nativeSvc) openPollFD() error {
	pfd, ok := n.fio.(PollFDer)
	if !ok || pfd.PollFD() < 0 {
		return nil
	}
	if r, ok := n.fio.(rxReadier); ok {
		n.rxReady = r.RxReady
	}
	fd, err := syscall.Dup(pfd.PollFD())
	if err != nil {
		return fmt.Errorf("netconn: dup the FrameIO's fd: %w", err)
	}
	// O_NONBLOCK is the open file's, shared with the FrameIO's fd: its
	// own calls (poll, sendto and recvfrom with MSG_DONTWAIT) do not
	// block either way.
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return fmt.Errorf("netconn: the FrameIO's fd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "frameio")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return fmt.Errorf("netconn: the FrameIO's fd in the netpoller: %w", err)
	}
	n.pf, n.prc = f, rc
	if err := n.openLeadFD(); err != nil {
		f.Close()
		n.pf, n.prc = nil, nil
		return fmt.Errorf("netconn: the FrameIO's fd in the netpoller: %w", err)
	}
	return nil
}

// sleepNetpoll waits in the Go netpoller until the fd is readable, the
// engine's next timer (next; zero: none) or a wake (a deadline in the
// past). The deadline is set before the last look at the work list, so
// that a wake that saw sleeping after that look is not overwritten. The
// engine is free from that look to the end of the wait (sendInline).
func (n *nativeSvc) sleepNetpoll(next time.Time) {
	n.pf.SetReadDeadline(next)
	n.wakeAt = next
	n.own.Store(ownFree)
	defer n.acquire()
	if n.work.Load() != nil || n.reqFlag.Load() || n.stop.Load() {
		return
	}
	if h := sleepHook.Load(); h != nil {
		(*h)(n)
	}
	for {
		n.first = true
		err := n.prc.Read(n.readFn)
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				// The fd failed (closed under us): nap instead of
				// spinning.
				time.Sleep(time.Millisecond)
			}
			return // the engine's timer or a wake: the poller's round
		}
		// A frame. While a Read or Write holds the engine, the round
		// is theirs (deferRound): sleep again instead of waiting for
		// the engine to run a round after theirs. The deadline stays:
		// a wake or a timer moved earlier since ends the next wait.
		if !n.deferRound() {
			return
		}
		n.s.n.defers.Add(1)
	}
}

// deferRound leaves the round a frame needs to the goroutine that holds
// the engine (a leading Read, an inline Write), which runs it when it
// frees the engine (free); false when the engine is free (the poller
// takes it and runs the round itself: a leader that has not run yet may
// wait behind other goroutines, and deferring to it cost requests a
// second on a loaded host). The poller stores deferred before it looks
// at own again, a holder frees own before it looks at deferred: one of
// them sees the other.
func (n *nativeSvc) deferRound() bool {
	if !n.holderRuns() {
		return false
	}
	n.deferred.Store(true)
	return n.holderRuns()
}

// holderRuns reports whether a Read or a Write holds the engine.
func (n *nativeSvc) holderRuns() bool {
	h := n.own.Load()
	return h == ownReader || h == ownWriter
}

// acquire takes the engine back after a sleep. A Write that sends inline
// holds it through its kick, which on veth delivers the answer and lets
// the peer's next frame wake the poller before the kick returns: the
// poller then parks (wantEngine, handCh) until the writer frees the
// engine, rather than spin through that system call.
func (n *nativeSvc) acquire() {
	for !n.own.CompareAndSwap(ownFree, ownPoller) {
		n.wantEngine.Store(true)
		if n.own.CompareAndSwap(ownFree, ownPoller) {
			break
		}
		<-n.handCh // a stale token only makes one more try
	}
	n.wantEngine.Store(false)
	// The round the poller runs now is any that was deferred.
	n.deferred.Store(false)
}

// free frees the engine, held as who (ownWriter, ownReader), and runs
// the rounds the poller deferred meanwhile (runDeferred).
func (n *nativeSvc) free(who int32) {
	n.own.Store(ownFree)
	n.runDeferred(who)
}

// runDeferred runs the round the poller deferred (deferRound), if any,
// taking the engine as who, or hands the engine to a poller that waits
// for it (whose round covers it). If another goroutine holds the engine,
// deferred stays set for it: a Read or Write runs it when it frees the
// engine, the poller's round covers it.
func (n *nativeSvc) runDeferred(who int32) {
	for {
		if n.wantEngine.Load() {
			signal(n.handCh)
			return
		}
		if !n.deferred.Load() || !n.deferred.CompareAndSwap(true, false) {
			return
		}
		if !n.own.CompareAndSwap(ownFree, who) {
			n.deferred.Store(true)
			if n.own.Load() != ownFree {
				return
			}
			continue // freed since, maybe before it saw deferred
		}
		n.round()
		n.s.n.deferredRounds.Add(1)
		n.own.Store(ownFree)
	}
}

// round is the poller's round run outside the poller by the engine's
// holder (a leading Read's round, a deferred round): frames in, the work list,
// what became readable, accepts, one flush, and the poller's wake-up
// moved to what the engine needs next (rearm). The requests stay the
// poller's: a request wakes it, and it does not defer a wake.
func (n *nativeSvc) round() {
	// A round that polls after a deferral covers it.
	n.deferred.Store(false)
	e := n.e
	now := e.Tick()
	batch := n.s.cfg.RxBatch
	frames := 0
	for frames < pollBudget {
		k := e.PollAt(now, batch)
		frames += k
		if k < batch {
			break
		}
	}
	n.step()
	if err := e.FlushAt(now); err != nil {
		n.s.n.kickErrors.Add(1)
	}
	n.s.n.frames.Add(uint64(frames))
	n.rxFrames.Add(uint64(frames))
	n.rearm()
}

// setAlarm makes the alarm interrupt the FrameIO's Wait in d (the
// engine's holder).
func (n *nativeSvc) setAlarm(d time.Duration) {
	if n.alarm == nil {
		n.alarm = time.AfterFunc(d, n.irq.Interrupt)
	} else {
		n.alarm.Reset(d)
	}
}

// sendInline sends what c's writer queued from the writer's goroutine
// while the poller sleeps: it takes the free engine, does the poller's
// service of c (received bytes into rx, tx into the engine), flushes
// (the kick) and frees the engine again, with the poller's wake-up moved
// earlier if the send armed an earlier timer (rearm). False when the
// engine is not free (the poller runs, or another Write sends): the
// caller hands c to the poller.
func (n *nativeSvc) sendInline(c *nconn) bool {
	if !n.own.CompareAndSwap(ownFree, ownWriter) {
		return false
	}
	e := n.e
	n.service(c)
	if err := e.FlushAt(e.Tick()); err != nil {
		n.s.n.kickErrors.Add(1)
	}
	n.s.n.inlineSends.Add(1)
	n.rearm()
	n.free(ownWriter)
	return true
}

// rearm, after an inline send, wakes the sleeping poller for what the
// send left it (segments the engine could not send yet, a connection
// made readable by a timer the flush ran), or moves its wake-up to the
// engine's next timer if that is earlier (a retransmission timer the
// send armed).
func (n *nativeSvc) rearm() {
	e := n.e
	if !e.Idle() {
		n.wakeNow()
		return
	}
	next, armed := e.NextTimer()
	if !armed || !n.wakeAt.IsZero() && !next.Before(n.wakeAt) {
		return
	}
	n.wakeAt = next
	d := time.Until(next)
	if d <= 0 {
		n.wakeNow()
		return
	}
	if n.pf == nil {
		n.setAlarm(d)
		return
	}
	n.pf.SetReadDeadline(next)
	// A wake (a deadline in the past) this may have overwritten stored
	// its cause before: look for it, as the poller does before it
	// sleeps.
	if n.work.Load() != nil || n.reqFlag.Load() || n.stop.Load() {
		n.wakeNow()
	}
}

// wakeNow ends the poller's sleep, or the next one it begins before it
// looks for work again, or its spin (poke).
func (n *nativeSvc) wakeNow() {
	n.poke.Store(true)
	if n.pf != nil {
		n.pf.SetReadDeadline(longAgo)
		return
	}
	n.irq.Interrupt()
}
