package faulttest

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// The SYN flood: how long, how fast, and what the session must keep.
const (
	floodTime = 3 * time.Second
	// floodRate is the flood's SYNs per second in make test: at the native
	// engine's SYN limit (dgramio.DefaultSYNRate per CPU, which its SYN
	// cookies stand behind), 25 times netstack's, gentle to the shared
	// test machine. FLOOD_RATE=0 floods as fast as one thread can send.
	floodRate = 50000
	// floodGap bounds the session's longest wait for an echo during the
	// flood (it sends a record every sessionEvery).
	floodGap     = 1500 * time.Millisecond
	sessionEvery = 10 * time.Millisecond
	sessionSize  = 100
	floodHeap    = 64 << 20
)

// TestFaultSYNFlood floods the stream echo of kernel tcp and of tcp-xdp on
// B with raw SYNs to its port, from an AF_PACKET socket in A's namespace:
// random source addresses inside 198.18.0.0/15, random ports and sequence
// numbers (floodRate per second for floodTime; FLOOD_TIME and FLOOD_RATE
// change both). Meanwhile one established kernel TCP session from A sends a
// 100-byte record every 10 ms and reads its echo. The session's records
// must keep coming back, each within floodGap of the last, none lost or
// out of order, and the heap (the echo and the flooder share the process)
// must not grow by more than floodHeap. On tcp-xdp the XDP program's SYN
// bucket (Config.XDP.SYNRate) drops what is beyond its rate (xdp-prog
// dropped_syn), which the test checks for a flood at more than twice the
// rate (netstack's default, DefaultNetstackSYNRate, in make test); the
// kernel and the native engine answer the rest with SYN cookies. RFC 4987
// §3 describes the attack and these defences. FLOOD_SYN_RATE and
// FLOOD_SYN_BURST set the program's limit (FLOOD_NO_LIMIT=1 turns it off)
// for measuring.
func TestFaultSYNFlood(t *testing.T) {
	testutil.RequireRoot(t)
	d, rate := floodTime, floodRate
	if s := os.Getenv("FLOOD_TIME"); s != "" {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("FLOOD_TIME: %v", err)
		}
		d = v
	}
	if s := os.Getenv("FLOOD_RATE"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("FLOOD_RATE: %v", err)
		}
		rate = v
	}
	for _, c := range []struct {
		name  string
		kind  dgramio.Kind
		stack dgramio.TCPStack
	}{
		{"tcp", dgramio.KindTCP, ""},
		{"tcp-xdp", dgramio.KindTCPXDP, dgramio.TCPStackNative},
		{"tcp-xdp+netstack", dgramio.KindTCPXDP, dgramio.TCPStackNetstack},
	} {
		t.Run(c.name, func(t *testing.T) { synFlood(t, string(c.kind), c.stack, d, rate) })
	}
}

func synFlood(t *testing.T, kind string, stack dgramio.TCPStack, d time.Duration, rate int) {
	p := hosttest.New(t, testhost.Options{})
	scfg := serverConfig(kind, p.B)
	scfg.TCP.Stack = stack
	if os.Getenv("FLOOD_NO_LIMIT") == "1" {
		scfg.XDP.SYNRate = -1 // for measuring what the limit is worth
	}
	if v := envInt(t, "FLOOD_SYN_RATE"); v != 0 {
		scfg.XDP.SYNRate, scfg.XDP.SYNBurst = v, envInt(t, "FLOOD_SYN_BURST")
	}
	// The program's limit per CPU: the flood comes from one thread, and
	// the veth runs the program on the sender's CPU (mostly one).
	limit := scfg.XDP.SYNRate
	switch {
	case limit == 0 && stack == dgramio.TCPStackNative:
		limit = dgramio.DefaultSYNRate
	case limit == 0:
		limit = dgramio.DefaultNetstackSYNRate
	}
	e := startEcho(t, p.B, kind+" echo", scfg)
	srv := netip.AddrPortFrom(scfg.LocalIP, port)
	c, err := dialTCP(p.A, srv, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := newSession(c)
	go s.read()
	// Warm up: the session is established and echoing.
	for end := time.Now().Add(10 * time.Second); s.echoed() < 5; {
		if time.Now().After(end) {
			t.Fatalf("no echo before the flood: %v", s)
		}
		s.send()
		time.Sleep(sessionEvery)
	}
	heap0 := heapInUse()
	fl, err := newFlooder(p.A, p.B.MAC, srv)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.close()
	start := time.Now()
	done := make(chan struct{})
	go func() { defer close(done); fl.run(d, rate) }()
	sent0, echoed0 := s.sent, s.echoed()
	s.resetGap()
	for time.Since(start) < d {
		s.send()
		time.Sleep(sessionEvery)
	}
	<-done
	sent, echoed, gap := s.sent-sent0, s.echoed()-echoed0, s.worstGap()
	heap1 := heapInUse()
	// Everything sent comes back after the flood.
	for end := time.Now().Add(10 * time.Second); s.echoed() < s.sent && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	st := e.stats()
	t.Logf("%s: %d SYNs in %v (%.0f/s); session: %d of %d records echoed during the flood, worst gap %v; heap %+.1f MiB",
		t.Name(), fl.sent, d, float64(fl.sent)/d.Seconds(), echoed, sent, gap.Round(100*time.Microsecond),
		(float64(heap1)-float64(heap0))/(1<<20))
	if dgramio.Kind(kind) == dgramio.KindTCPXDP {
		t.Logf("echo: xdp-prog dropped_syn %d redirected %d; netstack tcp_listen_overflow_syn_drop %d; xsk rx_dropped %d",
			counterOf(st, "xdp-prog", "dropped_syn"), counterOf(st, "xdp-prog", "redirected"),
			counterOf(st, "netstack", "tcp_listen_overflow_syn_drop"), counterOf(st, "xsk", "rx_dropped"))
	}
	if err := s.failure(); err != nil {
		t.Fatalf("session: %v", err)
	}
	if s.echoed() != s.sent {
		t.Errorf("session: %d of %d records echoed 10 s after the flood", s.echoed(), s.sent)
	}
	if gap > floodGap {
		t.Errorf("session: an echo took %v during the flood (bound %v)", gap, floodGap)
	}
	if heap1 > heap0+floodHeap {
		t.Errorf("heap grew from %d to %d MiB during the flood", heap0>>20, heap1>>20)
	}
	offered := float64(rate)
	if rate == 0 {
		offered = float64(fl.sent) / d.Seconds()
	}
	if dgramio.Kind(kind) == dgramio.KindTCPXDP && limit > 0 && offered > 2*float64(limit) && counterOf(st, "xdp-prog", "dropped_syn") == 0 {
		t.Errorf("the XDP program (SYN limit %d/s per CPU) dropped no SYN of %d", limit, fl.sent)
	}
}

// envInt is the number in the environment variable name, 0 when unset.
func envInt(t *testing.T, name string) int {
	s := os.Getenv(name)
	if s == "" {
		return 0
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

func counterOf(s dgramio.Stats, layer, name string) uint64 {
	for _, c := range s.Layers {
		if c.Layer == layer && c.Name == name {
			return c.Value
		}
	}
	return 0
}

// session is one established stream: numbered records out, their echoes
// in (on a goroutine of their own), the longest wait between echoes.
type session struct {
	c    net.Conn
	sent uint64 // records written (the sending goroutine's)
	rec  [2 + sessionSize]byte

	mu      chanMutex
	got     uint64
	last    time.Time
	gap     time.Duration
	readErr error
}

// chanMutex is a mutex the reader and the test share.
type chanMutex chan struct{}

func (m chanMutex) lock()   { m <- struct{}{} }
func (m chanMutex) unlock() { <-m }

func newSession(c net.Conn) *session {
	s := &session{c: c, mu: make(chanMutex, 1), last: time.Now()}
	binary.BigEndian.PutUint16(s.rec[:], sessionSize)
	return s
}

// send writes the next record (its number in its first 8 bytes).
func (s *session) send() {
	binary.BigEndian.PutUint64(s.rec[2:], s.sent)
	s.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if _, err := s.c.Write(s.rec[:]); err != nil {
		s.fail(fmt.Errorf("write record %d: %w", s.sent, err))
		return
	}
	s.sent++
}

// read takes the echoes until the connection closes.
func (s *session) read() {
	var b [2 + sessionSize]byte
	for {
		if _, err := io.ReadFull(s.c, b[:]); err != nil {
			s.fail(fmt.Errorf("read: %w", err))
			return
		}
		s.mu.lock()
		n := binary.BigEndian.Uint64(b[2:])
		if binary.BigEndian.Uint16(b[:]) != sessionSize || n != s.got {
			s.mu.unlock()
			s.fail(fmt.Errorf("echo %d: record %d of %d bytes", s.got, n, binary.BigEndian.Uint16(b[:])))
			return
		}
		now := time.Now()
		s.gap = max(s.gap, now.Sub(s.last))
		s.got, s.last = s.got+1, now
		s.mu.unlock()
	}
}

func (s *session) fail(err error) {
	s.mu.lock()
	if s.readErr == nil {
		s.readErr = err
	}
	s.mu.unlock()
}

func (s *session) failure() error {
	s.mu.lock()
	defer s.mu.unlock()
	return s.readErr
}

func (s *session) echoed() uint64 {
	s.mu.lock()
	defer s.mu.unlock()
	return s.got
}

func (s *session) resetGap() {
	s.mu.lock()
	s.gap, s.last = 0, time.Now()
	s.mu.unlock()
}

// worstGap is the longest wait between echoes since resetGap, counting
// the wait for the next one still due.
func (s *session) worstGap() time.Duration {
	s.mu.lock()
	defer s.mu.unlock()
	return max(s.gap, time.Since(s.last)-sessionEvery)
}

func (s *session) String() string {
	return fmt.Sprintf("sent %d, echoed %d, error %v", s.sent, s.echoed(), s.failure())
}

// flooder sends raw SYNs from an AF_PACKET socket made in h's namespace.
type flooder struct {
	fd    int
	addr  unix.SockaddrLinklayer
	frame []byte
	rng   *rand.Rand
	sent  uint64
}

func newFlooder(h *testhost.Host, dstMAC net.HardwareAddr, to netip.AddrPort) (*flooder, error) {
	f := &flooder{frame: make([]byte, 14+20+20), rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 17))}
	var ifindex int
	err := h.Do(func() error {
		l, err := h.Link()
		if err != nil {
			return err
		}
		ifindex = l.Attrs().Index
		f.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("flooder socket: %w", err)
	}
	f.addr = unix.SockaddrLinklayer{Ifindex: ifindex, Halen: 6}
	copy(f.addr.Addr[:], dstMAC)
	b := f.frame
	copy(b[0:6], dstMAC)
	copy(b[6:12], h.MAC)
	b[12], b[13] = 0x08, 0x00
	ip := b[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(ip[2:], 40)
	dst := to.Addr().As4()
	copy(ip[16:20], dst[:])
	tcp := b[34:54]
	binary.BigEndian.PutUint16(tcp[2:], to.Port())
	tcp[12], tcp[13] = 5<<4, 0x02 // SYN
	binary.BigEndian.PutUint16(tcp[14:], 64240)
	return f, nil
}

// next rewrites the frame: a random source inside 198.18.0.0/15, port and
// sequence number, and its checksums.
func (f *flooder) next() {
	b := f.frame
	ip, tcp := b[14:34], b[34:54]
	r := f.rng.Uint64()
	src := [4]byte{198, 18 | byte(r>>16)&1, byte(r >> 8), byte(r)}
	if src[3] == 0 || src[3] == 255 {
		src[3] = 1
	}
	copy(ip[12:16], src[:])
	binary.BigEndian.PutUint16(ip[4:], uint16(r>>20))
	binary.BigEndian.PutUint16(tcp[0:], 1024+uint16(r>>32)%60000)
	binary.BigEndian.PutUint32(tcp[4:], uint32(r>>24))
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ^sum16(ip, 0))
	tcp[16], tcp[17] = 0, 0
	pseudo := sum16(ip[12:20], 6+20)
	binary.BigEndian.PutUint16(tcp[16:], ^sum16(tcp, uint32(pseudo)))
}

// sum16 is the ones' complement sum of b plus init, folded.
func sum16(b []byte, init uint32) uint16 {
	s := init
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// run floods for d at rate SYNs per second (0: as fast as it can), in
// batches paced by a millisecond sleep.
func (f *flooder) run(d time.Duration, rate int) {
	start := time.Now()
	for time.Since(start) < d {
		due := uint64(1 << 62)
		if rate > 0 {
			due = uint64(time.Since(start).Seconds() * float64(rate))
		}
		for i := 0; i < 256 && f.sent < due; i++ {
			f.next()
			if err := unix.Sendto(f.fd, f.frame, 0, &f.addr); err != nil {
				break // ENOBUFS: the veth is full; the flood goes on
			}
			f.sent++
		}
		if rate > 0 {
			time.Sleep(time.Millisecond)
		} else {
			runtime.Gosched()
		}
	}
}

func (f *flooder) close() { unix.Close(f.fd) }
