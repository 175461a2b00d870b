package netconn

import (
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

// spinNetpoll is the adaptive poller's window before a netpoller sleep
// (PollAdaptive, where the poller sleeps in the Go netpoller): with the
// engine free (a Write sends inline, as while the poller sleeps), it
// looks at the RX ring (afxdp.XSK.RxReady: no system call), the work
// list, the requests and the wakes (poke), and yields between looks
// (runtime.Gosched), until Options.SpinFor has passed since the last
// activity: the poller's busy round (since), or an inline send or a
// holder's round seen during the window. While it spins, a Read parks on
// its channel instead of leading (lead), so that no goroutine waits in
// the netpoller for the frame the spin sees, and the poller's round
// readies the reader on the poller's own P.
//
// True: a frame came (the poller took the engine for its round) or
// something else needs a round; false: the window ended with nothing, or
// the CPUs have no time to spare (spinGate), and the poller, holding the
// engine, sleeps. A connection that answers within the window (one
// request in flight: the next comes one round trip after the answer) then
// costs no wake-up of a sleeping thread. The engine's timers wait at most
// the window: a holder's flush runs those due (native.Engine.FlushAt), and
// one that leaves the engine busy pokes the poller (wakeNow).
func (n *nativeSvc) spinNetpoll(since time.Time) bool {
	s := n.s
	if !n.gate.open(since) {
		s.n.spinsSkipped.Add(1)
		return false
	}
	s.n.spins.Add(1)
	seen := n.activity()
	n.spinning.Store(true)
	n.own.Store(ownFree)
	found := true
	for {
		if n.work.Load() != nil || n.reqFlag.Load() || n.stop.Load() || n.poke.Load() {
			break
		}
		// A frame while a Write (or a Read that led before the spin)
		// holds the engine is the holder's or the next look's.
		if n.own.Load() == ownFree && n.rxReady() && n.own.CompareAndSwap(ownFree, ownPoller) {
			n.spinning.Store(false)
			n.deferred.Store(false)
			s.n.spinRounds.Add(1)
			return true
		}
		now := time.Now()
		if a := n.activity(); a != seen {
			seen, since = a, now
		} else if now.Sub(since) >= s.opts.SpinFor {
			found = false
			break
		}
		runtime.Gosched()
	}
	n.spinning.Store(false)
	n.acquire()
	return found
}

// parkedInSpin notes a Read that parks on its channel instead of leading
// because the poller spins (lead): the poller wakes it before it sleeps
// (wakeSpunReader), and it leads then. The reader stores itself before it
// looks at spinning again, the poller clears spinning before it looks at
// spinReader: one of them sees the other.
func (n *nativeSvc) parkedInSpin(c *nconn) bool {
	n.spinReader.Store(c)
	return n.spinning.Load()
}

// wakeSpunReader wakes the Read that parked during a spin, if any, so
// that it leads while the poller sleeps.
func (n *nativeSvc) wakeSpunReader() {
	if c := n.spinReader.Swap(nil); c != nil {
		signal(c.rdCh)
	}
}

// activity counts what the engine's holders did outside the poller's
// rounds: inline sends, rounds of leading readers, deferred rounds.
func (n *nativeSvc) activity() uint64 {
	return n.s.n.inlineSends.Load() + n.leadRounds.Load() + n.s.n.deferredRounds.Load()
}

// spinGate says whether the poller may spin: only on a CPU that no one
// else wants, since the spin takes one whole, and only where the spin
// moves more than the sleep. It measures both with the spin off and on,
// in a cycle (gateProbe + gateTrial + the run, gateCycle in all):
//
//   - A probe (gateProbe) in which the poller does not spin, bracketed by
//     two reads of the CPUs' time (/proc/stat) and of the process's
//     (getrusage): the spin is a candidate if, during the probe, the CPUs
//     left idle or gave this process at least gateCPU of one CPU's time.
//     Where the other processes keep the CPUs busy (a load, or the
//     clients of a server on the same host), a spin would take its time
//     from them, and the poller sleeps at once for the rest of the cycle.
//     The probe sees the CPUs without the spin's own use of them, so an
//     allowed spin does not shut the gate itself. Unreadable, the gate
//     stays shut.
//   - A trial (gateTrial), only after a probe that found a CPU free, in
//     which the poller spins. The run (the rest of the cycle) spins only
//     if the trial's frames a second (this queue's, every round's) were
//     at least gatePay of the probe's. A client in the same process is
//     why: while the spinner yields (runtime.Gosched) it is runnable in
//     the global run queue, and the Go scheduler polls the network
//     without blocking only when its P finds nothing runnable, so the
//     kernel socket of a client goroutine on the poller's P is noticed by
//     a thread blocked in epoll on the other CPU, late; without the spin
//     the client and the server take turns on one P, and each readies the
//     other through that poll. Such a client moves fewer requests a second
//     with the spin; an out-of-process client moves more. Which one is
//     there, the frames tell; the gate cannot see the process's other
//     netpoller waiters (the runtime does not export them). A trial
//     lost skips the next trials (the spin stays off), one cycle's,
//     then twice as many after each trial lost in a row, up to
//     gateMaxSkip; a trial won ends the backoff. A loss during which
//     other processes (an out-of-process client among them), the
//     hypervisor or interrupts took gateOthers of a CPU may be theirs,
//     and one that lasted more than twice gateTrial (the queue went idle
//     meanwhile: the gate is asked after busy rounds only) measured the
//     pause: its run does not spin, but it leaves the backoff as it was,
//     and the next cycle tries again.
type spinGate struct {
	at    time.Time     // the start of the current period; zero: none yet
	phase int           // gateRunning, gateProbing, gateTrying
	ok    bool          // the spin is allowed in the current period
	run   time.Duration // the current run's length
	// The samples at the probe's or the trial's start: the CPUs' idle
	// and total time in clock ticks (USER_HZ, 100 a second on Linux; the
	// total at the trial's only), the process's CPU time, the queue's
	// frames; and the probe's frames a second.
	idle, total uint64
	own         time.Duration
	frames      uint64
	probeRate   float64
	// skip is how many cycles more go without a trial, backoff how many
	// the last lost trial set (doubled by each trial lost in a row).
	skip, backoff int
	buf           [256]byte
	// count is the queue's frames so far (every round's); nil: none
	// counted (the trial never loses).
	count func() uint64
	// trials and lost count the trials and those that shut the spin
	// for their run (nil: not counted).
	trials, lost *atomic.Uint64
	// read, set by tests, replaces reading /proc/stat; cpu replaces
	// getrusage.
	read func(b []byte) int
	cpu  func() time.Duration
}

// The gate's phases.
const (
	gateRunning = iota
	gateProbing
	gateTrying
)

const (
	gateProbe = 100 * time.Millisecond
	gateTrial = 50 * time.Millisecond
	gateCycle = 800 * time.Millisecond
	gateCPU   = 0.9
	gatePay   = 0.95
	// gateOthers: a trial lost while other processes took this much of
	// one CPU's time does not back off (othersRan).
	gateOthers = 0.75
	// gateMaxSkip bounds the cycles without a trial after trials lost in
	// a row: the spin is tried again within (gateMaxSkip+1)·gateCycle.
	gateMaxSkip = 7
	userHZ      = 100
)

// gateHook, set by tests only, replaces every Service's spinGate.
var gateHook atomic.Pointer[func() bool]

// open reports whether the poller may spin at now (the poller's).
func (g *spinGate) open(now time.Time) bool {
	if h := gateHook.Load(); h != nil {
		return (*h)()
	}
	switch {
	case g.phase == gateProbing && now.Sub(g.at) >= gateProbe:
		// The probe ends: is a CPU free? Then try the spin.
		idle, total, ok := g.sample()
		own := g.ownCPU()
		d := now.Sub(g.at)
		free := false
		if ok && idle >= g.idle {
			spare := float64(idle-g.idle)/userHZ + (own - g.own).Seconds()
			free = spare >= gateCPU*d.Seconds()
		}
		g.at = now
		if !free || g.skip > 0 {
			if free {
				g.skip--
			}
			g.phase, g.ok, g.run = gateRunning, false, gateCycle-gateProbe
			break
		}
		f := g.frameCount()
		g.probeRate = float64(f-g.frames) / d.Seconds()
		g.phase, g.frames, g.ok = gateTrying, f, true
		g.idle, g.total, g.own = idle, total, own
		if g.trials != nil {
			g.trials.Add(1)
		}
	case g.phase == gateTrying && now.Sub(g.at) >= gateTrial:
		// The trial ends: the run spins if the spin did not cost frames;
		// a loss backs off unless other processes took their share of
		// the CPUs meanwhile (it may be theirs) or the trial outlasted
		// its length.
		d := now.Sub(g.at)
		f := g.frameCount()
		rate := float64(f-g.frames) / d.Seconds()
		g.ok = rate >= gatePay*g.probeRate
		switch {
		case g.ok:
			g.backoff = 0
		case d > 2*gateTrial:
			// The queue went idle during the trial (the gate is asked
			// after busy rounds only): its rate says nothing.
		case !g.othersRan(d):
			g.backoff = min(max(2*g.backoff, 1), gateMaxSkip)
			g.skip = g.backoff
		}
		if !g.ok && g.lost != nil {
			g.lost.Add(1)
		}
		g.phase, g.at, g.run = gateRunning, now, gateCycle-gateProbe-gateTrial
	case g.phase == gateRunning && (g.at.IsZero() || now.Sub(g.at) >= g.run):
		// A probe begins (the first period is one).
		idle, _, ok := g.sample()
		g.phase, g.at, g.idle, g.own, g.frames, g.ok = gateProbing, now, idle, g.ownCPU(), g.frameCount(), false
		if !ok {
			g.phase, g.run = gateRunning, gateCycle // shut for a cycle, then try again
		}
	}
	return g.ok
}

// othersRan reports whether, in the trial of length d, the CPUs' time
// that was neither idle nor this process's (other processes', the
// hypervisor's steal, interrupts) came to gateOthers of one CPU's or more,
// or could not be read.
func (g *spinGate) othersRan(d time.Duration) bool {
	idle, total, ok := g.sample()
	if !ok || idle < g.idle || total-idle < g.total-g.idle {
		return true
	}
	busy := float64((total-idle)-(g.total-g.idle)) / userHZ
	return busy-(g.ownCPU()-g.own).Seconds() >= gateOthers*d.Seconds()
}

// frameCount is the queue's frames so far.
func (g *spinGate) frameCount() uint64 {
	if g.count == nil {
		return 0
	}
	return g.count()
}

// ownCPU is the process's CPU time, user and system.
func (g *spinGate) ownCPU() time.Duration {
	if g.cpu != nil {
		return g.cpu()
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sample reads the CPUs' cumulative idle and total time.
func (g *spinGate) sample() (idle, total uint64, ok bool) {
	var k int
	if g.read != nil {
		k = g.read(g.buf[:])
	} else {
		k = readProcStat(g.buf[:])
	}
	return parseCPUStat(g.buf[:max(k, 0)])
}

// readProcStat reads the start of /proc/stat into b (no allocation); 0 if
// it cannot.
func readProcStat(b []byte) int {
	fd, err := syscall.Open("/proc/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	k, err := syscall.Read(fd, b)
	syscall.Close(fd)
	if err != nil {
		return 0
	}
	return k
}

// parseCPUStat reads /proc/stat's first line, "cpu user nice system idle
// iowait irq softirq steal ...", in any unit: idle is idle and iowait,
// total the eight fields (guest time is counted in user already).
func parseCPUStat(b []byte) (idle, total uint64, ok bool) {
	const head = "cpu "
	if len(b) < len(head) || string(b[:len(head)]) != head {
		return 0, 0, false
	}
	b = b[len(head):]
	field := 0
	for field < 8 {
		for len(b) > 0 && b[0] == ' ' {
			b = b[1:]
		}
		if len(b) == 0 || b[0] < '0' || b[0] > '9' {
			break
		}
		var v uint64
		for len(b) > 0 && b[0] >= '0' && b[0] <= '9' {
			v = v*10 + uint64(b[0]-'0')
			b = b[1:]
		}
		total += v
		if field == 3 || field == 4 {
			idle += v
		}
		field++
	}
	// The line's end must have been read: a value cut by the buffer's
	// end would be short.
	if field < 4 || len(b) == 0 {
		return 0, 0, false
	}
	return idle, total, true
}
