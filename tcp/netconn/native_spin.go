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
// else wants, since the spin takes one whole. It measures that with the
// spin off: a probe period (gateProbe) in which the poller does not spin,
// bracketed by two reads of the CPUs' time (/proc/stat) and of the
// process's (getrusage), decides the next run (gateRun): the spin is
// allowed there if, during the probe, the CPUs left idle or gave this
// process at least gateCPU of one CPU's time. Where the other processes
// keep the CPUs busy (a load, or the clients of a server on the same
// host), a spin would take its time from them, and the poller sleeps at
// once as before; where a CPU idles between requests, it spins, and the
// vCPU the poller runs on does not halt between a request and the next.
// The probe sees the CPUs without the spin's own use of them, so an
// allowed spin does not shut the gate itself. Unreadable, the gate stays
// shut.
type spinGate struct {
	at      time.Time // the start of the current period; zero: none yet
	probing bool      // the current period is a probe
	ok      bool      // the spin is allowed in the current run
	// The probe's first samples: the CPUs' idle time in clock ticks
	// (USER_HZ, 100 a second on Linux), the process's CPU time.
	idle uint64
	own  time.Duration
	buf  [256]byte
	// read, set by tests, replaces reading /proc/stat; cpu replaces
	// getrusage.
	read func(b []byte) int
	cpu  func() time.Duration
}

const (
	gateProbe = 100 * time.Millisecond
	gateRun   = 700 * time.Millisecond
	gateCPU   = 0.9
	userHZ    = 100
)

// gateHook, set by tests only, replaces every Service's spinGate.
var gateHook atomic.Pointer[func() bool]

// open reports whether the poller may spin at now (the poller's).
func (g *spinGate) open(now time.Time) bool {
	if h := gateHook.Load(); h != nil {
		return (*h)()
	}
	switch {
	case g.probing && now.Sub(g.at) >= gateProbe:
		// The probe ends: decide the run.
		idle, _, ok := g.sample()
		own := g.ownCPU()
		if ok && idle >= g.idle {
			spare := float64(idle-g.idle)/userHZ + (own - g.own).Seconds()
			g.ok = spare >= gateCPU*now.Sub(g.at).Seconds()
		} else {
			g.ok = false
		}
		g.probing, g.at = false, now
	case !g.probing && (g.at.IsZero() || now.Sub(g.at) >= gateRun):
		// A probe begins (the first period is one).
		idle, _, ok := g.sample()
		g.probing, g.at, g.idle, g.own, g.ok = true, now, idle, g.ownCPU(), false
		if !ok {
			g.probing = false // shut for a run, then try again
		}
	}
	return g.ok && !g.probing
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
