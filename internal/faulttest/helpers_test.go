package faulttest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
	"github.com/dgramio/dgramio/metrics"
)

// Bounds. Calls that must not block (Queue, Flush, Rx) are allowed callLimit
// each: generous on a loaded machine, yet far from a hang. A call still in
// progress after hangLimit is a hang: the watchdog panics, so the test
// binary prints every goroutine's stack instead of waiting for go test's
// timeout.
const (
	callLimit = 5 * time.Second
	hangLimit = 60 * time.Second
)

// port is the server port of every test: each test has namespaces of its
// own, so they never collide.
const port = 5000

// forEachKind runs fn as a subtest of t for each of kinds, each on a pair
// of test hosts of its own (hosttest.New: the test is skipped without root,
// and the hosts are removed when the subtest ends).
func forEachKind(t *testing.T, kinds []string, fn func(t *testing.T, kind string, p *testhost.Pair)) {
	testutil.RequireRoot(t)
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) { fn(t, kind, hosttest.New(t, testhost.Options{})) })
	}
}

// isStream reports whether kind carries records over TCP.
func isStream(kind string) bool { return dgramio.Kind(kind).IsStream() }

// names returns the kinds' names, as the tests and the tools' flags take them.
func names(ks ...dgramio.Kind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}

// notWired reports whether err is dgramio.New's answer for a kind it does
// not reach in this build yet.
func notWired(kind string, err error) bool {
	var ue *dgramio.UnsupportedError
	return errors.As(err, &ue) && ue.Feature == "kind "+kind
}

// skipError is a skip decided on another goroutine (inside a namespace),
// to be applied by the test goroutine.
type skipError struct{ reason string }

func (e *skipError) Error() string { return "skip: " + e.reason }

// openHere opens cfg with dgramio.New on the calling goroutine, which must
// be the one that will poll the backend (kind uring binds its ring to the
// thread of New). A kind this build does not reach, or a feature the host
// lacks, is a *skipError.
func openHere(cfg dgramio.Config) (dgramio.Backend, error) {
	b, err := newBackend(cfg)
	switch {
	case err == nil:
		return b, nil
	case notWired(string(cfg.Kind), err):
		return nil, &skipError{fmt.Sprintf("kind %s is not reached through dgramio.New in this build yet: %v", cfg.Kind, err)}
	case errors.Is(err, dgramio.ErrNotSupported):
		return nil, &skipError{err.Error()}
	}
	return nil, fmt.Errorf("open %s: %w", cfg.Kind, err)
}

// warmClient opens, on p.A's thread (onThread), a client of kind that
// sends to p.B, and runs 64-byte messages at 2000 a second through it
// until 200 have come back (30 seconds at the most): the path works before
// the test does harm. The caller closes the client; on error warmClient
// has closed it, and tr (when not nil) says what came back.
func warmClient(t testing.TB, kind string, p *testhost.Pair) (cl dgramio.Backend, tr *traffic, err error) {
	cfg := clientConfig(kind, p.A, p.B)
	cfg.Events = isStream(kind) // the ends of its connection come to tr.errs
	cl, err = openHere(cfg)
	if err != nil {
		return nil, nil, err
	}
	tr = newTraffic(t, kind+" client", cl, 64, 2000, newMagic())
	if !tr.runUntil(func() bool { return tr.got >= 200 }, 30*time.Second) {
		cl.Close()
		return nil, tr, fmt.Errorf("no traffic: %v", tr)
	}
	return cl, tr, nil
}

// dialTCP connects a kernel TCP client in h's namespace to addr, within d
// (testhost.Host.DialContext).
func dialTCP(h *testhost.Host, addr netip.AddrPort, d time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return h.DialContext(ctx, "tcp4", addr.String())
}

// onThread runs fn on one OS thread inside h's namespace (testhost.Host.Do)
// and waits for it: a backend opened there with openHere is polled there,
// as kind uring requires, and closed there. fn must not call t.Fatal; a
// *skipError it returns skips the test (fails it in CI), another error
// fails it.
func onThread(t testing.TB, h *testhost.Host, fn func() error) {
	t.Helper()
	err := h.Do(fn)
	var se *skipError
	if errors.As(err, &se) {
		testutil.Skip(t, se.reason)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// ownAddrOffset moves the address of a userspace TCP kind away from the
// kernel's: tcp-xdp and tcp-dpdk refuse an address the kernel's interface
// holds (the kernel would reset their connections).
const ownAddrOffset = 100

// addrFor returns the address kind uses on h: the kernel's, or for the
// userspace TCP kinds another one of the same subnet that the kernel does
// not hold (netstack answers ARP for it).
func addrFor(kind string, h *testhost.Host) netip.Addr {
	if k := dgramio.Kind(kind); k != dgramio.KindTCPXDP && k != dgramio.KindTCPDPDK {
		return h.Addr
	}
	a := h.Addr.As4()
	a[3] += ownAddrOffset
	return netip.AddrFrom4(a)
}

// serverConfig is a server of kind on h.
func serverConfig(kind string, h *testhost.Host) dgramio.Config {
	return dgramio.Config{Kind: dgramio.Kind(kind), Role: dgramio.RoleServer, Iface: h.Iface, LocalIP: addrFor(kind, h), Port: port}
}

// clientConfig is a client of kind on h sending to a server of the same
// kind on srv.
func clientConfig(kind string, h, srv *testhost.Host) dgramio.Config {
	return dgramio.Config{Kind: dgramio.Kind(kind), Role: dgramio.RoleClient, Iface: h.Iface, LocalIP: addrFor(kind, h),
		Dests: []netip.AddrPort{netip.AddrPortFrom(addrFor(kind, srv), port)}, Port: port}
}

// Data-path operations, as calls names them.
const (
	opNone = iota
	opQueue
	opFlush
	opRx
	opWait
)

var opNames = [...]string{"", "Queue", "Flush", "Rx", "Wait"}

// calls times the data-path calls of one backend: the longest of each, and
// the one in progress, so that a watchdog tells a hang from a slow call.
type calls struct {
	name  string
	op    atomic.Int32
	since atomic.Int64 // start of the call in progress, UnixNano; 0 when none
	max   [len(opNames)]atomic.Int64
}

func (c *calls) begin(op int32) {
	c.since.Store(time.Now().UnixNano())
	c.op.Store(op)
}

func (c *calls) end() {
	op := c.op.Load()
	d := time.Now().UnixNano() - c.since.Load()
	c.since.Store(0)
	c.op.Store(opNone)
	for {
		m := c.max[op].Load()
		if d <= m || c.max[op].CompareAndSwap(m, d) {
			return
		}
	}
}

// longest returns the longest call of op so far.
func (c *calls) longest(op int) time.Duration { return time.Duration(c.max[op].Load()) }

// check fails t when a non-blocking call took longer than callLimit.
func (c *calls) check(t testing.TB) {
	t.Helper()
	for _, op := range []int{opQueue, opFlush, opRx} {
		if d := c.longest(op); d > callLimit {
			t.Errorf("%s: a %s call took %v (limit %v): it blocked", c.name, opNames[op], d, callLimit)
		}
	}
}

func (c *calls) String() string {
	return fmt.Sprintf("%s: longest Queue %v, Flush %v, Rx %v, Wait %v", c.name,
		c.longest(opQueue).Round(time.Microsecond), c.longest(opFlush).Round(time.Microsecond),
		c.longest(opRx).Round(time.Microsecond), c.longest(opWait).Round(time.Microsecond))
}

// watch starts a watchdog over cs until the test ends: a call in progress
// for longer than hangLimit panics with its name, so that the goroutine
// dump shows where it hangs.
func watch(t testing.TB, cs ...*calls) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for _, c := range cs {
				s := c.since.Load()
				if s != 0 && time.Since(time.Unix(0, s)) > hangLimit {
					panic(fmt.Sprintf("faulttest: %s: %s has not returned for %v: it hangs", c.name, opNames[c.op.Load()], hangLimit))
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// errLog keeps the errors a loop met, the first few in full and a count.
type errLog struct {
	mu    sync.Mutex
	n     int
	first []error
	peer  []*dgramio.PeerError
}

func (l *errLog) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	var pe *dgramio.PeerError
	if errors.As(err, &pe) {
		l.peer = append(l.peer, pe)
	}
	if len(l.first) < 5 {
		l.first = append(l.first, err)
	}
}

func (l *errLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

func (l *errLog) peers() []*dgramio.PeerError {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*dgramio.PeerError(nil), l.peer...)
}

func (l *errLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return "no errors"
	}
	s := make([]string, len(l.first))
	for i, e := range l.first {
		s[i] = e.Error()
	}
	return fmt.Sprintf("%d errors, first: %s", l.n, strings.Join(s, "; "))
}

// waitOrNap sleeps in b.Wait for at most d, or naps when the backend cannot
// sleep. It returns false once the backend is closed.
func waitOrNap(ctx context.Context, b dgramio.Backend, c *calls, d time.Duration, cannot *bool) bool {
	if !*cannot {
		wctx, cancel := context.WithTimeout(ctx, d)
		c.begin(opWait)
		err := b.Wait(wctx)
		c.end()
		cancel()
		switch {
		case err == nil, errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			return true
		case errors.Is(err, net.ErrClosed):
			return false
		case errors.Is(err, dgramio.ErrNotSupported):
			*cannot = true
		}
	}
	time.Sleep(min(d, 200*time.Microsecond))
	return true
}

// server is a server backend opened and polled on its own OS thread
// inside a namespace until stopped: what echo, sink and verifier share.
// Unlike load.Echo its loop goes on after errors (a link that went down
// makes a raw kind's Flush fail until it is up again), keeping them in
// errs, and times every call in c.
type server struct {
	b      dgramio.Backend
	c      calls
	errs   errLog
	cancel context.CancelFunc
	done   chan struct{}
	final  dgramio.Stats // the backend's counters when the loop stopped
	// paused stops the loop from reading (a receiver that stalls) until
	// it is cleared.
	paused atomic.Bool
}

// start opens a server of cfg on its own thread inside h's namespace and
// runs loop on that thread until stop (or the end of the test); the
// backend is closed there when loop returns. A kind that cannot open skips
// the test (fails it in CI) or fails it.
func (s *server) start(t testing.TB, h *testhost.Host, name string, cfg dgramio.Config, loop func(ctx context.Context)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	s.c.name = name
	ready := make(chan error, 1)
	go func() {
		defer close(s.done)
		h.Do(func() error {
			b, err := openHere(cfg)
			if err != nil {
				ready <- err
				return nil
			}
			s.b = b
			ready <- nil
			loop(ctx)
			s.final = b.Stats()
			return b.Close()
		})
	}()
	if err := <-ready; err != nil {
		<-s.done
		var se *skipError
		if errors.As(err, &se) {
			testutil.Skip(t, se.reason)
		}
		t.Fatal(err)
	}
	watch(t, &s.c)
	t.Cleanup(func() { s.stop(t) })
}

// stop ends the loop, closes the backend and waits for both (bounded: the
// watchdog catches a call that hangs); s.final holds the counters then. It
// is safe to call more than once.
func (s *server) stop(t testing.TB) {
	s.cancel()
	select {
	case <-s.done:
	case <-time.After(hangLimit + 10*time.Second):
		t.Errorf("%s did not stop", s.c.name)
	}
}

// stats returns the backend's counters: now, or as they were when the
// loop stopped.
func (s *server) stats() dgramio.Stats {
	select {
	case <-s.done:
		return s.final
	default:
		return s.b.Stats()
	}
}

// loop is the poll loop that echo, sink and verifier run until ctx ends
// or the backend is closed: Rx (not while paused), handle what came (it
// may be nothing), Flush, and after a round that got nothing sleep in
// Wait, or nap when the kind cannot sleep.
func (s *server) loop(ctx context.Context, handle func(pkts []dgramio.Packet)) {
	pkts := make([]dgramio.Packet, 64)
	cannotWait := false
	for ctx.Err() == nil {
		if s.paused.Load() {
			time.Sleep(time.Millisecond)
			continue
		}
		n, err := s.receive(pkts)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		handle(pkts[:n])
		s.flush() // a stream server also accepts and acknowledges here
		if n == 0 && !waitOrNap(ctx, s.b, &s.c, 2*time.Millisecond, &cannotWait) {
			return
		}
	}
}

// receive is a timed Rx; an error other than net.ErrClosed (the backend is
// closed: the loop ends) goes to errs.
func (s *server) receive(pkts []dgramio.Packet) (int, error) {
	s.c.begin(opRx)
	n, err := s.b.Rx(pkts)
	s.c.end()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		s.errs.add(err)
	}
	return n, err
}

// flush is a timed Flush (a stream server also accepts and acknowledges
// there); an error other than net.ErrClosed goes to errs.
func (s *server) flush() {
	s.c.begin(opFlush)
	err := s.b.Flush()
	s.c.end()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		s.errs.add(err)
	}
}

// echo reflects what a server backend receives back to its sender.
type echo struct {
	server
	rx      atomic.Uint64
	back    atomic.Uint64 // messages queued back
	dropped atomic.Uint64 // messages QueueTo refused even after a Flush
}

// startEcho starts an echo server of cfg on h (see server.start).
func startEcho(t testing.TB, h *testhost.Host, name string, cfg dgramio.Config) *echo {
	t.Helper()
	e := &echo{}
	e.start(t, h, name, cfg, e.run)
	return e
}

func (e *echo) run(ctx context.Context) {
	e.loop(ctx, func(pkts []dgramio.Packet) {
		e.rx.Add(uint64(len(pkts)))
		for _, p := range pkts {
			e.c.begin(opQueue)
			err := e.b.QueueTo(p.Data, p.From)
			e.c.end()
			if err != nil {
				e.flush()
				e.c.begin(opQueue)
				err = e.b.QueueTo(p.Data, p.From)
				e.c.end()
			}
			if err == nil {
				e.back.Add(1)
			} else {
				e.dropped.Add(1)
			}
		}
	})
}

// sink receives on a server backend and counts the test messages it gets;
// it can be told to stop reading.
type sink struct {
	server
	limit atomic.Uint64 // messages sent so far (tally.take's limit)

	mu   sync.Mutex
	y    tally
	last time.Time // when a message last came
}

// startSink starts a sink of cfg on h (see server.start) that counts the
// messages of magic and size it receives (in order, for a stream).
func startSink(t testing.TB, h *testhost.Host, name string, cfg dgramio.Config, magic uint64, size int) *sink {
	t.Helper()
	k := &sink{y: tally{magic: magic, size: size, inOrder: cfg.Kind.IsStream(), from: ^uint64(0)}}
	k.limit.Store(^uint64(0))
	k.start(t, h, name, cfg, k.run)
	return k
}

func (k *sink) run(ctx context.Context) {
	k.loop(ctx, func(pkts []dgramio.Packet) {
		if len(pkts) == 0 {
			return
		}
		limit := k.limit.Load()
		k.mu.Lock()
		for _, p := range pkts {
			k.y.take(p.Data, limit)
		}
		k.last = time.Now()
		k.mu.Unlock()
	})
}

// count returns the tally so far and when the last message came.
func (k *sink) count() (tally, time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.y, k.last
}

// newMagic returns a magic number for the messages of one run.
func newMagic() uint64 { return uint64(time.Now().UnixNano()) | 1 }

// msgHeader is the start of every test message: a magic of the run and a
// sequence number; the rest of the message is a pattern of the sequence
// number, so a damaged or foreign message is recognised.
const msgHeader = 16

func fillMsg(b []byte, magic, seq uint64) {
	binary.BigEndian.PutUint64(b, magic)
	binary.BigEndian.PutUint64(b[8:], seq)
	for i := msgHeader; i < len(b); i++ {
		b[i] = byte(seq*7 + uint64(i))
	}
}

// checkMsg returns the sequence number of b, or false when b is not an
// intact message of the run.
func checkMsg(b []byte, magic uint64, size int) (uint64, bool) {
	if len(b) != size || binary.BigEndian.Uint64(b) != magic {
		return 0, false
	}
	seq := binary.BigEndian.Uint64(b[8:])
	for i := msgHeader; i < len(b); i++ {
		if b[i] != byte(seq*7+uint64(i)) {
			return 0, false
		}
	}
	return seq, true
}

// tally counts the messages of one run that arrive: each intact one once,
// duplicates, and damaged or foreign ones.
type tally struct {
	magic uint64
	size  int
	seen  []uint64 // bit per sequence number
	got   uint64   // distinct intact messages
	dup   uint64   // intact messages seen before
	bad   uint64   // damaged, foreign, or (inOrder) out of order
	// inOrder: messages must come in sequence order (a stream).
	inOrder bool
	// from counts, in gotFrom, the messages at or after it.
	from, gotFrom uint64
}

// take counts message b; limit is the number of messages sent so far.
func (y *tally) take(b []byte, limit uint64) {
	seq, ok := checkMsg(b, y.magic, y.size)
	if !ok || seq >= limit || (y.inOrder && seq != y.got) {
		y.bad++
		return
	}
	w, bit := seq/64, uint64(1)<<(seq%64)
	for uint64(len(y.seen)) <= w {
		y.seen = append(y.seen, 0)
	}
	if y.seen[w]&bit != 0 {
		y.dup++
		return
	}
	y.seen[w] |= bit
	y.got++
	if seq >= y.from {
		y.gotFrom++
	}
}

// traffic drives a client backend from the goroutine that opened it
// (inside onThread): numbered messages out at a paced rate, their echoes
// in, each one checked and counted once.
type traffic struct {
	tally
	b     dgramio.Backend
	c     calls
	rate  float64 // messages per second
	start time.Time

	next       uint64 // sequence number of the next message (= messages accepted)
	limit      uint64 // stop queueing at this many messages; 0: no limit
	lastRx     time.Time
	refused    uint64 // Queue returned an error
	errs       errLog
	cannotWait bool
	pkts       []dgramio.Packet
	buf        []byte
}

// newTraffic drives b with messages of size bytes and magic at rate
// messages per second; its calls are watched until the test ends.
func newTraffic(t testing.TB, name string, b dgramio.Backend, size int, rate float64, magic uint64) *traffic {
	tr := &traffic{b: b, rate: rate, pkts: make([]dgramio.Packet, 64), buf: make([]byte, size),
		tally: tally{magic: magic, size: size, from: ^uint64(0)}}
	tr.c.name = name
	watch(t, &tr.c)
	return tr
}

// mark makes the messages sent from now on count in gotFrom.
func (tr *traffic) mark() { tr.from, tr.gotFrom = tr.next, 0 }

// send queues the messages due by now at the paced rate (at most 64 per
// call) and flushes them. Queue refusing one (back-pressure) ends the
// batch: the message is offered again next time.
func (tr *traffic) send() {
	if tr.start.IsZero() {
		tr.start = time.Now()
	}
	due := uint64(time.Since(tr.start).Seconds() * tr.rate)
	queued := 0
	for tr.next < due && queued < 64 && (tr.limit == 0 || tr.next < tr.limit) {
		fillMsg(tr.buf, tr.magic, tr.next)
		tr.c.begin(opQueue)
		qerr := tr.b.Queue(tr.buf)
		tr.c.end()
		if qerr != nil {
			tr.refused++
			break
		}
		tr.next++
		queued++
	}
	// Flush even with nothing new: a stream kind may have staged bytes.
	tr.c.begin(opFlush)
	err := tr.b.Flush()
	tr.c.end()
	if err != nil {
		tr.errs.add(err)
	}
}

// recv takes everything Rx has now.
func (tr *traffic) recv() int {
	total := 0
	for round := 0; round < 32; round++ {
		tr.c.begin(opRx)
		n, err := tr.b.Rx(tr.pkts)
		tr.c.end()
		if err != nil {
			tr.errs.add(err)
		}
		for _, p := range tr.pkts[:n] {
			switch p.Event {
			case dgramio.EventData:
				tr.take(p.Data, tr.next)
			case dgramio.EventPeerFIN: // Config.Events: the end of a connection
				tr.errs.add(&dgramio.PeerError{Peer: p.From})
			case dgramio.EventReset:
				tr.errs.add(p.Err)
			}
		}
		total += n
		if n > 0 {
			tr.lastRx = time.Now()
		}
		if n < len(tr.pkts) || err != nil {
			break
		}
	}
	return total
}

// step sends what is due, takes what came back, and sleeps briefly in Wait
// when nothing came.
func (tr *traffic) step() {
	tr.send()
	if tr.recv() == 0 {
		waitOrNap(context.Background(), tr.b, &tr.c, time.Millisecond, &tr.cannotWait)
	}
}

// runUntil steps until cond holds or d has passed, and reports whether cond
// held.
func (tr *traffic) runUntil(cond func() bool, d time.Duration) bool {
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			return false
		}
		tr.step()
	}
	return true
}

// drain stops sending and receives until every message is back or nothing
// came for quiet (or max passed).
func (tr *traffic) drain(quiet, max time.Duration) {
	end := time.Now().Add(max)
	last := time.Now()
	for tr.got < tr.next && time.Now().Before(end) && time.Since(last) < quiet {
		tr.c.begin(opFlush)
		err := tr.b.Flush()
		tr.c.end()
		if err != nil {
			tr.errs.add(err)
		}
		if tr.recv() > 0 {
			last = time.Now()
		} else {
			waitOrNap(context.Background(), tr.b, &tr.c, 5*time.Millisecond, &tr.cannotWait)
		}
	}
}

func (tr *traffic) String() string {
	return fmt.Sprintf("sent %d, back %d (dup %d, bad %d), Queue refused %d times, %s",
		tr.next, tr.got, tr.dup, tr.bad, tr.refused, tr.errs.String())
}

// kernelCounters reads the counters of h outside the backends: its veth
// end's link statistics ("link.tx_dropped") and the kernel's SNMP counters
// of its namespace ("ip.out_discards", "udp.no_ports", "tcp.retrans_segs").
func kernelCounters(t testing.TB, h *testhost.Host) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	l, err := h.Link()
	if err != nil {
		t.Fatal(err)
	}
	if s := l.Attrs().Statistics; s != nil {
		m["link.tx_packets"], m["link.rx_packets"] = s.TxPackets, s.RxPackets
		m["link.tx_dropped"], m["link.rx_dropped"] = s.TxDropped, s.RxDropped
		m["link.tx_errors"], m["link.rx_errors"] = s.TxErrors, s.RxErrors
	}
	var snmp []byte
	if err := h.Do(func() error {
		var err error
		// thread-self: Do's thread is inside the namespace.
		snmp, err = os.ReadFile("/proc/thread-self/net/snmp")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(snmp), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		proto, names, ok1 := strings.Cut(lines[i], ":")
		_, vals, ok2 := strings.Cut(lines[i+1], ":")
		ns, vs := strings.Fields(names), strings.Fields(vals)
		if !ok1 || !ok2 || len(ns) != len(vs) {
			continue
		}
		for j := range ns {
			if v, err := strconv.ParseInt(vs[j], 10, 64); err == nil && v >= 0 {
				m[strings.ToLower(proto)+"."+metrics.Snake(ns[j])] = uint64(v)
			}
		}
	}
	return m
}

// kernelLossKeys are the kernel counters that may count a datagram lost on
// the way: dropped by a device or a queue, refused for want of a route or a
// socket, dropped by a socket whose buffer was full.
var kernelLossKeys = []string{
	"link.tx_dropped", "link.rx_dropped",
	"ip.out_discards", "ip.out_no_routes", "ip.in_discards", "ip.in_hdr_errors", "ip.in_addr_errors", "ip.reasm_fails",
	"udp.in_errors", "udp.no_ports", "udp.sndbuf_errors",
}

// splitLoss returns the losses s counts on its sending side (TxDropped and
// the layers' loss counters named tx_…) and on its receiving side (the
// rest).
func splitLoss(s dgramio.Stats) (tx, rx uint64) {
	tx = s.TxDropped
	rx = s.RxTruncated + s.RxBadChecksum + s.RxMalformed
	for _, c := range s.Layers {
		if !c.Loss {
			continue
		}
		if strings.Contains(c.Name, "tx") {
			tx += c.Value
		} else {
			rx += c.Value
		}
	}
	return tx, rx
}

// leg is one direction of a conversation: messages that one backend sent
// and the other received, with the counters of both ends over the run.
type leg struct {
	name           string
	sent, received uint64
	from, to       dgramio.Stats
	kfrom, kto     map[string]uint64 // kernel counters' change (kernelLossKeys)
	extra          uint64            // losses counted by the application
}

// counted returns the losses the counters of l explain, counting each drop
// once although several layers may count it:
//
//   - a datagram the sending kernel drops shows up in its device's
//     tx_dropped, IP OutDiscards and UDP SndbufErrors at once, so the
//     largest of those counts;
//   - a send refused for want of a route is IP OutNoRoutes and, reported by
//     sendmmsg, the backend's TxDropped; a frame the device drops under an
//     AF_XDP socket is the device's tx_dropped and the socket's EBUSY count:
//     so the sender's side is the larger of the backend's count and the
//     kernel's;
//   - a datagram a full socket buffer drops is the backend's socket drops
//     and UDP InErrors at once;
//   - a veth counts in the receiving end's rx_dropped both what it could
//     not forward because that end was down (the sender's tx_dropped
//     already) and what the XDP program could not redirect into a full
//     socket (the XSK's rx_dropped already): only the rest of it is added.
func (l *leg) counted() uint64 {
	tx, _ := splitLoss(l.from)
	_, rx := splitLoss(l.to)
	kf, kt := l.kfrom, l.kto
	kernelTx := kf["ip.out_no_routes"] + max(kf["link.tx_dropped"], kf["ip.out_discards"], kf["udp.sndbuf_errors"])
	n := max(tx, kernelTx)
	n += max(rx, kt["udp.in_errors"])
	if mirrored := kf["link.tx_dropped"] + rx; kt["link.rx_dropped"] > mirrored {
		n += kt["link.rx_dropped"] - mirrored
	}
	n += kt["udp.no_ports"] + kt["ip.in_discards"] + kt["ip.in_hdr_errors"] + kt["ip.in_addr_errors"] + kt["ip.reasm_fails"]
	return n + l.extra
}

// check fails t when l lost more messages than its counters explain.
func (l *leg) check(t testing.TB) {
	t.Helper()
	if l.received > l.sent {
		t.Errorf("%s: %d received of %d sent", l.name, l.received, l.sent)
		return
	}
	lost, counted := l.sent-l.received, l.counted()
	t.Logf("%s: sent %d, received %d, lost %d, counted %d (sender %s; receiver %s; kernels %s | %s)",
		l.name, l.sent, l.received, lost, counted, lossBreakdown(l.from), lossBreakdown(l.to),
		formatCounters(l.kfrom), formatCounters(l.kto))
	if lost > counted {
		t.Errorf("%s: %d messages lost, %d counted: %d vanished without a counter", l.name, lost, counted, lost-counted)
	}
}

// diff returns after − before for keys (0 where a counter went back).
func diff(before, after map[string]uint64, keys []string) map[string]uint64 {
	out := map[string]uint64{}
	for _, k := range keys {
		if after[k] > before[k] {
			out[k] = after[k] - before[k]
		}
	}
	return out
}

// lossBreakdown lists the loss counters of s that are not zero.
func lossBreakdown(s dgramio.Stats) string {
	var parts []string
	add := func(name string, v uint64) {
		if v != 0 {
			parts = append(parts, name+"="+strconv.FormatUint(v, 10))
		}
	}
	add("tx_dropped", s.TxDropped)
	add("rx_truncated", s.RxTruncated)
	add("rx_bad_checksum", s.RxBadChecksum)
	add("rx_malformed", s.RxMalformed)
	for _, c := range s.Layers {
		if c.Loss {
			add(c.Layer+"."+c.Name, c.Value)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

func formatCounters(m map[string]uint64) string {
	ks := make([]string, 0, len(m))
	for k, v := range m {
		if v != 0 {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = k + "=" + strconv.FormatUint(m[k], 10)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// heapInUse returns the heap in use after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// xdpAttached reports whether an XDP program is attached to h's veth end.
func xdpAttached(t testing.TB, h *testhost.Host) (bool, uint32) {
	t.Helper()
	l, err := h.Link()
	if err != nil {
		t.Fatal(err)
	}
	x := l.Attrs().Xdp
	if x == nil {
		return false, 0
	}
	return x.Attached || x.ProgId != 0, x.ProgId
}

// allCounters returns every nonzero counter of s, for logs.
func allCounters(s dgramio.Stats) string {
	m := map[string]uint64{
		"tx_queued": s.TxQueued, "tx_backpressure": s.TxBackpressure, "tx_oversize": s.TxOversize,
		"tx_sent": s.TxSent, "tx_dropped": s.TxDropped, "rx_delivered": s.RxDelivered,
		"rx_truncated": s.RxTruncated, "rx_bad_checksum": s.RxBadChecksum, "rx_malformed": s.RxMalformed,
		"rx_filtered": s.RxFiltered, "resets": s.Resets, "peer_closes": s.PeerCloses, "accepts": s.Accepts,
	}
	for _, c := range s.Layers {
		if strings.HasPrefix(c.Name, "rtt") || strings.HasSuffix(c.Name, "_bytes") || strings.HasPrefix(c.Name, "srtt") {
			continue
		}
		m[c.Layer+"."+c.Name] += c.Value
	}
	return formatCounters(m)
}

// fatalf fails the test from inside onThread's fn and ends fn: the deferred
// calls of fn run (closing what it opened), and Do reports the Goexit as an
// error, which onThread turns into t.Fatal in the test goroutine.
func fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Errorf(format, args...)
	runtime.Goexit()
}

// arpDiscards returns the kernel's count of packets dropped because they
// waited for a neighbour (ARP) resolution that did not come in time or
// overflowed the queue of an unresolved neighbour (unresolved_discards of
// /proc/net/stat/arp_cache, summed over CPUs). The neighbour table and its
// statistics are the whole kernel's, not one namespace's: other namespaces
// (other tests) count there too.
func arpDiscards(t testing.TB) uint64 {
	t.Helper()
	// The file exists only in the initial network namespace, and
	// /proc/net is /proc/self/net: the main thread's namespace, which a
	// testhost Do that happened to run there has left elsewhere for good.
	// Read it through this thread, which no Do has moved.
	runtime.LockOSThread()
	b, err := os.ReadFile("/proc/thread-self/net/stat/arp_cache")
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	col := -1
	for i, name := range strings.Fields(lines[0]) {
		if name == "unresolved_discards" {
			col = i
		}
	}
	if col < 0 {
		t.Fatalf("no unresolved_discards in /proc/net/stat/arp_cache")
	}
	var n uint64
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if col < len(f) {
			v, err := strconv.ParseUint(f[col], 16, 64)
			if err != nil {
				t.Fatalf("/proc/net/stat/arp_cache: %v", err)
			}
			n += v
		}
	}
	return n
}

// newBackend opens a backend; it is dgramio.New, as in the tools' child
// processes.
var newBackend = dgramio.New
