// Package socktest holds the test helpers that the kernel backends (udp,
// tcp, uring) share: free loopback ports, re-running one test as an
// unprivileged user, a checked round trip between a client and an echoing
// server, the Close-during-Rx race, CPU pinning and a Wait-then-Rx loop
// (also for the userspace TCP kinds). It is imported by
// tests only.
package socktest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/testutil"
)

// Loopback is 127.0.0.1.
var Loopback = netip.MustParseAddr("127.0.0.1")

// Family is one address family the kernel kinds' traffic tests run over.
type Family struct {
	// Name is the subtest's name: "IPv4" or "IPv6".
	Name string
	// V6 is true for IPv6.
	V6 bool
	// Loopback is the family's loopback address: 127.0.0.1 or ::1.
	Loopback netip.Addr
	// MaxDatagram is a datagram kind's default MaxDatagram in the family:
	// the largest payload that fits a 1500-byte frame unfragmented.
	MaxDatagram int
}

// Pick returns v6 for an IPv6 family and v4 otherwise: a test host's
// Addr6 or Addr (testhost.Host), say.
func (f Family) Pick(v4, v6 netip.Addr) netip.Addr {
	if f.V6 {
		return v6
	}
	return v4
}

// Families are the families every kernel kind serves.
var Families = []Family{
	{Name: "IPv4", Loopback: Loopback, MaxDatagram: dgramio.DefaultMaxDatagram},
	{Name: "IPv6", V6: true, Loopback: netip.IPv6Loopback(), MaxDatagram: dgramio.DefaultMaxDatagram6},
}

// ForFamilies runs f as one subtest per family (Families). The IPv6 one
// is skipped, through testutil.Skip, on a host whose loopback has no ::1.
func ForFamilies(t *testing.T, f func(t *testing.T, fam Family)) {
	for _, fam := range Families {
		t.Run(fam.Name, func(t *testing.T) {
			if fam.V6 {
				fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
				if err == nil {
					err = unix.Bind(fd, &unix.SockaddrInet6{Addr: fam.Loopback.As16()})
					unix.Close(fd)
				}
				if err != nil {
					testutil.Skip(t, fmt.Sprintf("no IPv6 loopback (::1) here: %v", err))
				}
			}
			f(t, fam)
		})
	}
}

// FreePort returns a port on 127.0.0.1 that was free a moment ago for the
// socket type typ (unix.SOCK_DGRAM or unix.SOCK_STREAM). Another process
// may take it in between (binding it then fails with EADDRINUSE, which
// the servers of the udp and tcp tests retry with another port).
func FreePort(t testing.TB, typ int) uint16 {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatalf("getsockname: %v", err)
	}
	return uint16(sa.(*unix.SockaddrInet4).Port)
}

// NobodyEnv is set in the environment of a test re-run by AsNobody.
const NobodyEnv = "DGRAMIO_TEST_AS_NOBODY"

// AsNobody runs the calling test again as user and group 65534 (nobody) in
// a copy of the test binary, and reports whether the caller should stop
// (true: the child ran and its result is this test's result). It returns
// false, for the caller to go on with the test body, inside that child and
// when the test does not run as root (then the body already runs without
// privileges).
func AsNobody(t *testing.T) bool {
	t.Helper()
	if os.Getenv(NobodyEnv) == "1" {
		if os.Geteuid() != 65534 {
			t.Fatalf("%s=1 but euid is %d", NobodyEnv, os.Geteuid())
		}
		return false
	}
	if os.Geteuid() != 0 {
		t.Logf("running as uid %d already: testing without privileges here", os.Geteuid())
		return false
	}
	bin := testutil.BinaryForNobody(t, "test.bin")
	cmd := exec.Command(bin, "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = append(os.Environ(), NobodyEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: 65534, Gid: 65534, NoSetGroups: false, Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	out, err := cmd.CombinedOutput()
	t.Logf("as uid 65534:\n%s", out)
	if err != nil {
		t.Fatalf("the test failed as uid 65534: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the test did not pass as uid 65534 (skipped?)")
	}
	return true
}

// Payload fills p with message seq's content: the sequence number, then
// bytes derived from it, so that a message cut, mixed with another or
// corrupted is recognised by Check. len(p) must be at least 4.
func Payload(p []byte, seq uint32) {
	binary.BigEndian.PutUint32(p, seq)
	for i := 4; i < len(p); i++ {
		p[i] = byte(seq*31) + byte(i)
	}
}

// Check returns the sequence number of a payload made by Payload, or an
// error if its content is not what Payload wrote.
func Check(p []byte) (uint32, error) {
	if len(p) < 4 {
		return 0, fmt.Errorf("message of %d bytes, shorter than a sequence number", len(p))
	}
	seq := binary.BigEndian.Uint32(p)
	for i := 4; i < len(p); i++ {
		if p[i] != byte(seq*31)+byte(i) {
			return seq, fmt.Errorf("message %d (%d bytes): byte %d is %#x, want %#x", seq, len(p), i, p[i], byte(seq*31)+byte(i))
		}
	}
	return seq, nil
}

// Echo runs a server's poll loop until ctx is done: everything received
// is sent back to its sender with QueueTo, and when nothing came it sleeps
// in Wait. A message QueueTo refuses is retried after a Flush, for up to
// 5 s. It returns nil when ctx ends, or the first error of Rx, Flush or
// Wait other than a *dgramio.PeerError (which it skips: a server goes on with
// its other clients). The loop allocates nothing, so a test may measure
// its client's allocations while Echo serves it.
func Echo(ctx context.Context, srv dgramio.Backend) error {
	pkts := make([]dgramio.Packet, 64)
	var pe *dgramio.PeerError // out of the loop: errors.As makes it escape
	for ctx.Err() == nil {
		n, err := srv.Rx(pkts)
		if err != nil && !errors.As(err, &pe) {
			return err
		}
		for i := 0; i < n; i++ {
			if pkts[i].Event != dgramio.EventData {
				continue // a connection's event (Config.Events)
			}
			// A peer that stops reading (or went away) makes QueueTo refuse
			// for good: give up on that message after a while.
			var giveUp time.Time
			for srv.QueueTo(pkts[i].Data, pkts[i].From) != nil {
				if err := srv.Flush(); err != nil && !errors.As(err, &pe) {
					return err
				}
				if ctx.Err() != nil {
					return nil
				}
				if giveUp.IsZero() {
					giveUp = time.Now().Add(5 * time.Second)
				} else if time.Now().After(giveUp) {
					break
				}
				time.Sleep(50 * time.Microsecond)
			}
		}
		if err := srv.Flush(); err != nil && !errors.As(err, &pe) {
			return err
		}
		if n == 0 {
			// ctx itself bounds the sleep: no timer, nothing allocated.
			if err := srv.Wait(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, dgramio.ErrNotSupported) {
				return err
			}
		}
	}
	return nil
}

// RoundTrip sends n messages from cli, each of size(i) bytes (at least 4),
// to srv, which echoes them (RoundTrip runs Echo on it, on a goroutine of
// its own), and checks them as Exchange does. It fails the test otherwise,
// with both sides' Stats.
func RoundTrip(t testing.TB, cli, srv dgramio.Backend, n, window int, size func(i int) int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var echoErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		echoErr = Echo(ctx, srv)
	}()
	defer func() {
		cancel()
		wg.Wait()
		if echoErr != nil {
			t.Errorf("echo server: %v", echoErr)
		}
	}()
	if err := Exchange(cli, n, window, size); err != nil {
		t.Fatalf("round trip: %v\nclient %+v\nserver %+v", err, cli.Stats(), srv.Stats())
	}
}

// Exchange sends n messages from cli, each of size(i) bytes (at least 4)
// made by Payload, to a server that echoes them, with at most window of
// them in flight, and checks that every one comes back once with its
// content intact, within a generous deadline (60 s). It drives only cli,
// on the calling goroutine; the server runs elsewhere (Echo on a goroutine
// of its own, or a backend bound to its thread running its own loop). It
// returns what went wrong.
func Exchange(cli dgramio.Backend, n, window int, size func(i int) int) error {
	seen := make([]bool, n)
	got, next := 0, 0
	buf := make([]byte, 65535)
	pkts := make([]dgramio.Packet, 64)
	deadline := time.Now().Add(60 * time.Second)
	for got < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d messages came back before the deadline", got, n)
		}
		for next < n && next-got < window {
			p := buf[:size(next)]
			Payload(p, uint32(next))
			if cli.Queue(p) != nil {
				break
			}
			next++
		}
		if err := cli.Flush(); err != nil {
			return fmt.Errorf("client Flush: %w", err)
		}
		k, err := cli.Rx(pkts)
		if err != nil {
			return fmt.Errorf("client Rx: %w", err)
		}
		for i := 0; i < k; i++ {
			seq, err := Check(pkts[i].Data)
			if err != nil {
				return err
			}
			if int(seq) >= n || seen[seq] {
				return fmt.Errorf("message %d came back twice or was never sent", seq)
			}
			if len(pkts[i].Data) != size(int(seq)) {
				return fmt.Errorf("message %d came back with %d bytes, sent %d", seq, len(pkts[i].Data), size(int(seq)))
			}
			seen[seq] = true
			got++
		}
		if k == 0 {
			wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			err := cli.Wait(wctx)
			wcancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, dgramio.ErrNotSupported) {
				return fmt.Errorf("client Wait: %w", err)
			}
		}
	}
	return nil
}

// CloseDuringRx opens a backend with open, runs Rx in a loop on one
// goroutine (and Wait when Rx finds nothing), closes the backend from
// another after a short, varying delay, and checks that the loop ends with
// an error matching net.ErrClosed, never a crash or a hang. It repeats that
// rounds times.
func CloseDuringRx(t testing.TB, rounds int, open func() dgramio.Backend) {
	t.Helper()
	for r := 0; r < rounds; r++ {
		b := open()
		done := make(chan error, 1)
		go func() {
			pkts := make([]dgramio.Packet, 32)
			for i := 0; ; i++ {
				n, err := b.Rx(pkts)
				if err != nil {
					done <- err
					return
				}
				_ = b.Flush()
				if n == 0 && i%4 == 3 {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err := b.Wait(ctx)
					cancel()
					if err != nil {
						done <- err
						return
					}
				}
			}
		}()
		time.Sleep(time.Duration(r%7) * 100 * time.Microsecond)
		if err := b.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", r, err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, net.ErrClosed) {
				t.Fatalf("round %d: the poll loop ended with %v, want net.ErrClosed", r, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: the poll loop did not end after Close", r)
		}
		if err := b.Queue([]byte("x")); err != dgramio.ErrClosed || !errors.Is(err, net.ErrClosed) {
			t.Fatalf("round %d: Queue after Close: %v, want dgramio.ErrClosed (net.ErrClosed)", r, err)
		}
		if _, err := b.Rx(make([]dgramio.Packet, 1)); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("round %d: Rx after Close: %v", r, err)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("round %d: second Close: %v", r, err)
		}
		_ = b.Stats()
	}
}

// Pinning checks how a backend's New and Close treat the polling thread
// with Config.CPUs: New pins it to CPUs[0] and Close (on that goroutine)
// restores the affinity it had; on a thread the caller pinned to that CPU
// itself, the pin is still there after Close. open opens a backend with
// Config.CPUs set to cpus (on a fresh port each time); it runs on a
// goroutine of its own, as do Close and the checks.
func Pinning(t testing.TB, open func(cpus []int) (dgramio.Backend, error)) {
	t.Helper()
	allowed, err := cpu.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	c := allowed[len(allowed)-1]
	openClose := func() error {
		b, err := open([]int{c})
		if err != nil {
			return err
		}
		cur, err := cpu.Current()
		if err != nil || !slices.Equal(cur, []int{c}) {
			b.Close()
			return fmt.Errorf("after New with CPUs [%d]: running on %v (%v)", c, cur, err)
		}
		return b.Close()
	}
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			if err := openClose(); err != nil {
				return err
			}
			if cur, err := cpu.Current(); err != nil || !slices.Equal(cur, allowed) {
				return fmt.Errorf("after Close: running on %v, want %v (%v)", cur, allowed, err)
			}
			// Pinned by the caller: New and Close leave the pin alone.
			if err := cpu.Pin(c); err != nil {
				return err
			}
			defer cpu.Unpin()
			if err := openClose(); err != nil {
				return err
			}
			if cur, err := cpu.Current(); err != nil || !slices.Equal(cur, []int{c}) {
				return fmt.Errorf("the caller's pin is lost after Close: running on %v (%v)", cur, err)
			}
			return nil
		}()
	}()
	testutil.SkipIfNotSupported(t, <-done)
}

// Collect calls b.Rx on the calling goroutine until done reports true,
// handing each packet received to each (its Data is valid only during the
// call), and sleeps in Wait for up to a millisecond when Rx finds nothing.
// done is asked before every Rx, so it may drive a peer (flush a sender)
// too. Collect fails the test on an Rx error, and when done still says
// false after 20 s, with b's Stats.
func Collect(t testing.TB, b dgramio.Backend, done func() bool, each func(p dgramio.Packet)) {
	t.Helper()
	pkts := make([]dgramio.Packet, 64)
	deadline := time.Now().Add(20 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for packets after 20 s; stats %+v", b.Stats())
		}
		n, err := b.Rx(pkts)
		if err != nil {
			t.Fatalf("Rx: %v", err)
		}
		for _, p := range pkts[:n] {
			each(p)
		}
		if n == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			err := b.Wait(ctx)
			cancel()
			if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, dgramio.ErrNotSupported) {
				t.Fatalf("Wait: %v", err)
			}
		}
	}
}

// Server opens a server with open(cfg), cfg being base with Role
// RoleServer and no Dests, and closes it when the test ends. When
// base.Port is 0 it picks one with FreePort (socket type typ) and tries
// another, a few times, when that one was taken in between (EADDRINUSE).
// It fails the test when the server cannot be opened.
func Server(t testing.TB, typ int, base dgramio.Config, open func(dgramio.Config) (dgramio.Backend, error)) dgramio.Backend {
	t.Helper()
	cfg := base
	cfg.Role, cfg.Dests = dgramio.RoleServer, nil
	for try := 0; ; try++ {
		if base.Port == 0 {
			cfg.Port = FreePort(t, typ)
		}
		s, err := open(cfg)
		if errors.Is(err, unix.EADDRINUSE) && base.Port == 0 && try < 5 {
			continue
		}
		if err != nil {
			t.Fatalf("open server %v:%d: %v", cfg.LocalIP, cfg.Port, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

// BadConfig is one field of a Config made wrong: Edit makes it so, Field
// names it as the *dgramio.ConfigError must. (An alias of a struct literal
// type, so that tables of cases need not name the fields.)
type BadConfig = struct {
	Field string
	Edit  func(c *dgramio.Config)
}

// RefusesBadConfigs checks that open refuses ok with each of bad applied,
// with a *dgramio.ConfigError naming that field (closing a backend it opened
// anyway).
func RefusesBadConfigs(t *testing.T, ok dgramio.Config, bad []BadConfig, open func(dgramio.Config) (dgramio.Backend, error)) {
	t.Helper()
	for _, tc := range bad {
		c := ok
		tc.Edit(&c)
		b, err := open(c)
		if err == nil {
			b.Close()
			t.Errorf("%s: New accepted a bad config", tc.Field)
			continue
		}
		var ce *dgramio.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.Field {
			t.Errorf("%s: got %v, want a ConfigError for %s", tc.Field, err, tc.Field)
		}
	}
}

// WaitOneByOne receives n records from b one per Rx, calling Wait before
// each Rx (at most 5 s each) and between after it (nil: nothing), and
// returns them: a Wait that sleeps while records an earlier Rx decoded
// are waiting fails t.
func WaitOneByOne(t testing.TB, b dgramio.Backend, n int, between func()) []string {
	t.Helper()
	pkts := make([]dgramio.Packet, 1) // an Rx returns one record
	var got []string
	for len(got) < n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := b.Wait(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Wait after records %q: %v", got, err)
		}
		k, err := b.Rx(pkts)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkts[:k] {
			got = append(got, string(p.Data))
		}
		if between != nil {
			between()
		}
	}
	return got
}
