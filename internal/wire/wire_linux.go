//go:build linux

package wire

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/safchain/ethtool"

	"github.com/dgramio/dgramio/internal/benchnet"
	"github.com/dgramio/dgramio/internal/fdwait"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testutil"
)

// SeedEnv names the environment variable that sets the seed of every Wire
// made with Options.Seed == 0, to replay a run: WIRE_SEED=1234 go test ...
const SeedEnv = "WIRE_SEED"

// DefaultLimit is the number of frame buffers of each direction when
// Options.Limit is 0.
const DefaultLimit = 1024

// Options shapes a Wire. The impairment fields apply to both directions,
// unless Reverse sets the B→A direction apart. The zero value is a perfect
// wire: every frame forwarded unchanged, at once, in order.
type Options struct {
	// Loss, Dup, Reorder, Corrupt, Delay, Jitter and Rate: see Impairment.
	Loss, Dup, Reorder, Corrupt float64
	Delay, Jitter               time.Duration
	Rate                        uint64
	// Reverse, when not nil, is the impairment of the B→A direction; the
	// fields above then apply to A→B only.
	Reverse *Impairment
	// Seed makes the decisions replayable: for a given seed, the i-th frame
	// read in a direction gets the same decision in every run. (Which frame
	// is the i-th depends on the traffic: a TCP connection's timing varies
	// between runs, a paced UDP sequence with static neighbours does not.)
	// 0: the environment variable WIRE_SEED if set, else a random seed;
	// Wire.Seed says which, and NewT logs it.
	Seed uint64
	// Limit is the number of frame buffers of each direction: frames in
	// flight through the wire (delayed, rate-limited, held). When all are in
	// use the wire stops reading and the kernel socket in front of it
	// buffers, then drops (Counters.SocketDrops). 0: DefaultLimit.
	Limit int
	// MTU of the four veth ends. 0: the kernel's default (1500).
	MTU int
	// Queues is the number of TX and RX queues of the four veth ends (as
	// testhost.Options.Queues; each end has as many as its peer, so that
	// driver-mode XDP attaches on A and B). 0 means 1.
	Queues int
	// A and B are the addresses with prefix length of the two hosts. They
	// must lie in one subnet inside 198.18.0.0/15, so that ARP crosses the
	// wire as it crosses a cable. Zero: 198.18.n.1/24 and 198.18.n.2/24, n
	// chosen per Wire.
	A, B netip.Prefix
}

// Forward returns the impairment of the A→B direction.
func (o *Options) Forward() Impairment {
	return Impairment{Loss: o.Loss, Dup: o.Dup, Reorder: o.Reorder, Corrupt: o.Corrupt,
		Delay: o.Delay, Jitter: o.Jitter, Rate: o.Rate}
}

// Backward returns the impairment of the B→A direction.
func (o *Options) Backward() Impairment {
	if o.Reverse != nil {
		return *o.Reverse
	}
	return o.Forward()
}

// Wire is two hosts, A and B, each in its own network namespace, joined
// through a middle that forwards every Ethernet frame between them and
// impairs it as told:
//
//	A: veth ─── MA ═ forwarder ═ MB ─── veth :B
//
// It is built from two testhost pairs, (A, MA) and (MB, B): four anonymous
// namespaces, so nothing is ever in the root namespace. MA and MB have no
// address; a raw AF_PACKET socket on each (PACKET_IGNORE_OUTGOING, Linux
// 4.20) carries the frames, read and written in batches by one goroutine
// per direction that sleeps in ppoll(2) until a frame arrives or a delayed
// one is due. Offloads are off and IPv6 is disabled on all four ends, as
// testhost does for a pair.
//
// A and B are testhost hosts, so code written for a testhost.Pair works
// unchanged on a Wire. MA and MB are the middle ends (take one down for a
// link flap, read their counters); do not give them addresses.
type Wire struct {
	// A and B are the two hosts; B's address is in A's subnet and ARP
	// crosses the wire.
	A, B *testhost.Host
	// MA and MB are the middle's veth ends facing A and B.
	MA, MB *testhost.Host

	seed     uint64
	pairs    [2]*testhost.Pair
	sock     [2]*packetSock // on MA (ingress of A→B), on MB (ingress of B→A)
	dirs     [2]*forwarder
	waker    *fdwait.Waker
	wg       sync.WaitGroup
	epoch    time.Time
	closed   atomic.Bool
	closeMu  sync.Mutex
	closeErr error
}

var wires atomic.Uint32

// ChooseSeed returns seed if it is not 0, else the value of WIRE_SEED if
// set (an error if it does not parse), else a random non-zero seed.
func ChooseSeed(seed uint64) (uint64, error) {
	if seed != 0 {
		return seed, nil
	}
	if s := os.Getenv(SeedEnv); s != "" {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil || v == 0 {
			return 0, fmt.Errorf("wire: %s=%q: want a non-zero unsigned integer", SeedEnv, s)
		}
		return v, nil
	}
	for {
		if v := rand.Uint64(); v != 0 {
			return v, nil
		}
	}
}

// validate checks the options and fills in defaults.
func (o *Options) validate() error {
	if err := o.Forward().Validate(); err != nil {
		return err
	}
	if err := o.Backward().Validate(); err != nil {
		return fmt.Errorf("Reverse: %w", err)
	}
	if o.Limit < 0 {
		return fmt.Errorf("wire: Limit=%d: want >= 0", o.Limit)
	}
	if o.Limit == 0 {
		o.Limit = DefaultLimit
	}
	if o.MTU < 0 || o.MTU > 65535-etherHdr-maxTags*vlanTagLen {
		return fmt.Errorf("wire: MTU=%d: want 68..65507 or 0 for the default", o.MTU)
	}
	if !o.A.IsValid() || !o.B.IsValid() {
		n := 1 + (uint32(os.Getpid())+wires.Add(1)*37)%254
		if !o.A.IsValid() {
			o.A = netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(n), 1}), 24)
		}
		if !o.B.IsValid() {
			o.B = netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(n), 2}), 24)
		}
	}
	for _, p := range []struct {
		name string
		p    netip.Prefix
	}{{"A", o.A}, {"B", o.B}} {
		if err := benchnet.CheckBenchAddr("wire.Options."+p.name, p.p.Addr()); err != nil {
			return err
		}
	}
	if o.A.Bits() != o.B.Bits() || o.A.Masked() != o.B.Masked() {
		return fmt.Errorf("wire: A=%s and B=%s are not in one subnet (ARP must cross the wire)", o.A, o.B)
	}
	if o.A.Addr() == o.B.Addr() {
		return fmt.Errorf("wire: A and B have the same address %s", o.A.Addr())
	}
	return nil
}

// middleAddr is a placeholder address for a middle end, different from
// host; testhost gives every end an address, New takes it off again.
func middleAddr(host netip.Addr) netip.Prefix {
	p := netip.MustParsePrefix("198.19.255.254/31")
	if p.Addr() == host {
		p = netip.MustParsePrefix("198.19.255.252/31")
	}
	return p
}

// New makes a Wire and starts its forwarder. On error nothing is left
// behind. It needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_NET_RAW); a
// missing privilege is a *dgramio.PrivilegeError, a kernel without
// PACKET_IGNORE_OUTGOING (Linux < 4.20) an error matching
// dgramio.ErrNotSupported.
func New(o Options) (*Wire, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	seed, err := ChooseSeed(o.Seed)
	if err != nil {
		return nil, err
	}
	w := &Wire{seed: seed, epoch: time.Now()}
	ok := false
	defer func() {
		if !ok {
			w.teardown()
		}
	}()
	if w.pairs[0], err = testhost.New(testhost.Options{A: o.A, B: middleAddr(o.A.Addr()), MTU: o.MTU, Queues: o.Queues}); err != nil {
		return nil, fmt.Errorf("wire: hosts A/MA: %w", err)
	}
	if w.pairs[1], err = testhost.New(testhost.Options{A: middleAddr(o.B.Addr()), B: o.B, MTU: o.MTU, Queues: o.Queues}); err != nil {
		return nil, fmt.Errorf("wire: hosts MB/B: %w", err)
	}
	w.A, w.MA = w.pairs[0].A, w.pairs[0].B
	w.MB, w.B = w.pairs[1].A, w.pairs[1].B
	for _, m := range []*testhost.Host{w.MA, w.MB} {
		if err := m.DelAddr(); err != nil {
			return nil, fmt.Errorf("wire: %w", err)
		}
		if err := m.Do(func() error { return noGRO(m.Iface) }); err != nil {
			return nil, fmt.Errorf("wire: %w", err)
		}
	}
	mtu := o.MTU
	if mtu == 0 {
		mtu = 1500
	}
	// Room for the Ethernet header, two VLAN tags (one of them put back
	// from the packet's metadata) and a little slack to see a frame too
	// large as truncated rather than as fitting.
	bufSize := (mtu + etherHdr + maxTags*vlanTagLen + 8 + 63) &^ 63
	for i, m := range []*testhost.Host{w.MA, w.MB} {
		if err := m.Do(func() error {
			var err error
			w.sock[i], err = openPacket(m.Index)
			return err
		}); err != nil {
			return nil, fmt.Errorf("wire: %s: %w", m.Iface, err)
		}
	}
	if w.waker, err = fdwait.NewWaker(); err != nil {
		return nil, fmt.Errorf("wire: %w", err)
	}
	ims := [2]Impairment{o.Forward(), o.Backward()}
	for d := range w.dirs {
		c := &counters{}
		dec := NewDecider(seed, Direction(d), ims[d])
		w.dirs[d] = newForwarder(Direction(d), w.sock[d], w.sock[1-d], w.waker.FD(),
			newPipe(dec, o.Limit, bufSize, c), c, w.epoch)
	}
	for _, f := range w.dirs {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			f.run()
		}()
	}
	ok = true
	return w, nil
}

// noGRO turns off receive coalescing (GRO, LRO) on a middle end if the
// kernel has it on, so that the wire reads the frames as they were sent,
// never a coalesced super-frame. It runs inside the end's namespace.
func noGRO(iface string) error {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return fmt.Errorf("ethtool socket: %w", err)
	}
	defer e.Close()
	st, err := e.FeaturesWithState(iface)
	if err != nil {
		return fmt.Errorf("ethtool get features %s: %w", iface, err)
	}
	change := map[string]bool{}
	for _, name := range []string{"rx-gro", "large-receive-offload", "rx-gro-hw", "rx-gro-list", "rx-udp-gro-forwarding"} {
		if s, ok := st[name]; ok && s.Active && s.Available {
			change[name] = false
		}
	}
	if len(change) == 0 {
		return nil
	}
	if err := e.Change(iface, change); err != nil {
		return fmt.Errorf("ethtool set features %s: %w", iface, err)
	}
	return nil
}

// NewT makes a Wire for a test: it skips the test (fails it when CI=true)
// unless it runs as root or when the host lacks a needed feature or
// privilege, and fails it on any other error. It logs the seed (and how to
// replay it); in t.Cleanup it logs the seed and both directions' counters
// again if the test failed, then closes the Wire.
func NewT(t testing.TB, o Options) *Wire {
	t.Helper()
	testutil.RequireRoot(t)
	w, err := New(o)
	testutil.SkipIfUnavailable(t, err)
	t.Logf("wire: seed %d (replay: %s=%d)", w.seed, SeedEnv, w.seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("wire: seed %d (replay: %s=%d)\n  A→B: %v\n  B→A: %v",
				w.seed, SeedEnv, w.seed, w.Stats(AtoB), w.Stats(BtoA))
		}
		if err := w.Close(); err != nil {
			t.Errorf("wire: close: %v", err)
		}
	})
	return w
}

// Pair returns A and B as a testhost.Pair, for code written for one. Do
// not Close it: Close the Wire.
func (w *Wire) Pair() *testhost.Pair { return &testhost.Pair{A: w.A, B: w.B} }

// Seed returns the seed of the decisions (see Options.Seed).
func (w *Wire) Seed() uint64 { return w.seed }

// Other returns the host at the other end of the wire from h (A or B).
func (w *Wire) Other(h *testhost.Host) *testhost.Host {
	if h == w.A {
		return w.B
	}
	return w.A
}

// Stats returns the counters of direction d now. After Close they are final.
func (w *Wire) Stats(d Direction) Counters {
	f := w.dirs[int(d)&1]
	if f == nil {
		return Counters{}
	}
	if !w.closed.Load() {
		w.closeMu.Lock()
		if !w.closed.Load() {
			f.in.readDrops(f.c)
		}
		w.closeMu.Unlock()
	}
	return f.c.snapshot()
}

// Trace lists the last 64 TCP segments that reached direction d, oldest
// first, each with what the wire did to it (forwarded, dropped, corrupted,
// duplicated): for the report of a stall.
func (w *Wire) Trace(d Direction) string {
	f := w.dirs[int(d)&1]
	if f == nil {
		return ""
	}
	return f.p.trace.String()
}

// SetImpairment changes the impairment of direction d: every frame that
// reaches the wire after SetImpairment returns gets the new one (a few
// frames before may too). The decisions keep drawing the same random words (see
// Decider.SetImpairment), so a run that changes impairments at the same
// frames replays the same way.
func (w *Wire) SetImpairment(d Direction, im Impairment) error {
	if err := im.Validate(); err != nil {
		return err
	}
	if w.closed.Load() {
		return fmt.Errorf("wire: %w", os.ErrClosed)
	}
	w.dirs[int(d)&1].want.Store(&im)
	return nil
}

// Close stops the forwarder and removes the four namespaces and their
// links. Frames still in the wire are lost (Counters.Queued keeps their
// number). It is safe to call more than once.
func (w *Wire) Close() error {
	w.closeMu.Lock()
	defer w.closeMu.Unlock()
	if w.closed.Swap(true) {
		return w.closeErr
	}
	w.closeErr = w.teardown()
	return w.closeErr
}

// teardown undoes New, whatever part of it was done.
func (w *Wire) teardown() error {
	var errs []error
	if w.waker != nil {
		w.waker.Wake()
		w.wg.Wait()
	}
	for _, f := range w.dirs {
		if f != nil {
			f.in.readDrops(f.c)
			f.p.publish()
		}
	}
	for i, s := range w.sock {
		if s != nil {
			if err := s.close(); err != nil {
				errs = append(errs, err)
			}
			w.sock[i] = nil
		}
	}
	if w.waker != nil {
		if err := w.waker.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close eventfd: %w", err))
		}
		w.waker = nil
	}
	for _, p := range w.pairs {
		if p != nil {
			if err := p.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
