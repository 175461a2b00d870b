package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	ktcp "github.com/dgramio/dgramio/internal/kernel/tcp"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/sock/socktest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
	"github.com/dgramio/dgramio/internal/wire"
	"github.com/dgramio/dgramio/stack/native"
	"golang.org/x/sys/unix"
)

// The tests of Config.Framing and Config.Events, and of dgramio.Conns, on
// every stream kind: kind tcp over loopback and over veth, tcp-xdp on
// both engines over memio and over veth (and through the lossy wire),
// each a server whose poll loop is the obvious one (it returns on the
// first error of Rx or Flush) serving clients that come and go.

// streamTarget opens a server of one stream kind with cfg's Framing and
// Events (its Kind, addresses and role are the target's) and the
// clients that reach it.
type streamTarget struct {
	name string
	open func(t *testing.T, cfg dgramio.Config) (dgramio.Backend, clientSide)
}

// clientSide makes the clients of a target's server.
type clientSide interface {
	// dial opens one connection to the server and waits until it is up.
	dial(t *testing.T) peerConn
	// until drives the clients (an engine's) until cond holds, for up to
	// 60 s, and fails the test with what otherwise.
	until(t *testing.T, what string, cond func() bool)
}

// peerConn is one client connection.
type peerConn interface {
	// write sends all of p.
	write(t *testing.T, p []byte)
	// read returns what arrived (nil, nil: nothing yet), or io.EOF
	// after the server's FIN, or the error that ended the connection.
	read() ([]byte, error)
	// fin closes in order (FIN), after reading everything; rst resets.
	fin()
	rst()
}

// streamTargets are the stream kinds and their wires; lossy adds
// tcp-xdp through the lossy wire.
func streamTargets(lossy bool) []streamTarget {
	ts := []streamTarget{
		{"tcp/loopback", openKernelLoopback},
		{"tcp/veth", openKernelVeth},
	}
	for _, stack := range []dgramio.TCPStack{dgramio.TCPStackNetstack, dgramio.TCPStackNative} {
		ts = append(ts,
			streamTarget{"tcp-xdp/" + string(stack) + "/memio", memioTarget(stack)},
			streamTarget{"tcp-xdp/" + string(stack) + "/veth", vethTarget(stack, false)})
		if lossy {
			ts = append(ts, streamTarget{"tcp-xdp/" + string(stack) + "/lossy-wire", vethTarget(stack, true)})
		}
	}
	return ts
}

func openKernelLoopback(t *testing.T, cfg dgramio.Config) (dgramio.Backend, clientSide) {
	cfg.Kind, cfg.LocalIP = dgramio.KindTCP, netip.MustParseAddr("127.0.0.1")
	b := socktest.Server(t, unix.SOCK_STREAM, cfg, ktcp.New)
	return b, &kernelClients{addr: b.(*ktcp.Backend).LocalAddr()}
}

func openKernelVeth(t *testing.T, cfg dgramio.Config) (dgramio.Backend, clientSide) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	cfg.Kind, cfg.Role, cfg.LocalIP, cfg.Port = dgramio.KindTCP, dgramio.RoleServer, p.A.Addr, 5000
	var b dgramio.Backend
	if err := p.A.Do(func() (err error) { b, err = ktcp.New(cfg); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, &kernelClients{h: p.B, addr: netip.AddrPortFrom(p.A.Addr, 5000)}
}

func memioTarget(stack dgramio.TCPStack) func(*testing.T, dgramio.Config) (dgramio.Backend, clientSide) {
	return func(t *testing.T, cfg dgramio.Config) (dgramio.Backend, clientSide) {
		pa, pb := memio.NewPair(memio.Options{TxSlots: 1024, RxSlots: 1024})
		t.Cleanup(func() { pa.Close(); pb.Close() })
		scfg := serverConfig()
		scfg.TCP.Stack, scfg.Framing, scfg.Events, scfg.MaxDatagram = stack, cfg.Framing, cfg.Events, cfg.MaxDatagram
		b, err := NewOverFrameIO(scfg.WithDefaults(), pa, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		e, err := native.New(pb, native.Options{Addr: cliIP, AllOnLink: true, MaxConns: 4096})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return b, &engineClients{e: e, addr: netip.AddrPortFrom(srvIP, testPort)}
	}
}

func vethTarget(stack dgramio.TCPStack, lossy bool) func(*testing.T, dgramio.Config) (dgramio.Backend, clientSide) {
	return func(t *testing.T, cfg dgramio.Config) (dgramio.Backend, clientSide) {
		testutil.RequireRoot(t)
		var a, bh *testhost.Host
		if lossy {
			w := wire.NewT(t, wire.Options{Loss: 0.01, Dup: 0.01, Reorder: 0.01, Corrupt: 0.01, Delay: 100 * time.Microsecond})
			a, bh = w.A, w.B
		} else {
			p := hosttest.New(t, testhost.Options{})
			a, bh = p.A, p.B
		}
		addr := netip.AddrPortFrom(peertest.Addr(a, 3), 5000)
		cfg.Role, cfg.LocalIP, cfg.Port = dgramio.RoleServer, addr.Addr(), addr.Port()
		cfg.TCP.Stack = stack
		b, err := openXDP(t, a, cfg)
		testutil.SkipIfNotSupported(t, err)
		return b, &kernelClients{h: bh, addr: addr}
	}
}

// kernelClients are kernel TCP sockets, in h's namespace (nil: this one).
type kernelClients struct {
	h    *testhost.Host
	addr netip.AddrPort
}

type kernelConn struct{ c *net.TCPConn }

func (k *kernelClients) dial(t *testing.T) peerConn {
	t.Helper()
	var c net.Conn
	var err error
	if k.h == nil {
		c, err = net.DialTimeout("tcp4", k.addr.String(), 20*time.Second)
	} else {
		c = peertest.Dial(t, k.h, k.addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &kernelConn{c.(*net.TCPConn)}
}

func (k *kernelClients) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(60 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (k *kernelConn) write(t *testing.T, p []byte) {
	t.Helper()
	k.c.SetWriteDeadline(time.Now().Add(60 * time.Second))
	if _, err := k.c.Write(p); err != nil {
		t.Fatal(err)
	}
}

func (k *kernelConn) read() ([]byte, error) {
	buf := make([]byte, 64<<10)
	k.c.SetReadDeadline(time.Now().Add(time.Millisecond))
	n, err := k.c.Read(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = nil
	}
	return buf[:n], err
}

func (k *kernelConn) fin() { k.c.Close() }

// rst resets the connection (SO_LINGER 0). It first sends the ACK the
// kernel may still be delaying for what was read (TCP_QUICKACK): a reset
// that overtook it would leave the server's last record unacknowledged,
// which the server rightly counts in TxDropped (RFC 9293 §3.10.7.4 takes
// a RST before its ACK field), and the test counts on every record being
// acknowledged.
func (k *kernelConn) rst() {
	if rc, err := k.c.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1) })
	}
	k.c.SetLinger(0)
	k.c.Close()
}

// engineClients are connections of a native engine on the other memio
// port; the test's goroutine drives it.
type engineClients struct {
	e    *native.Engine
	addr netip.AddrPort
}

type engineConn struct {
	s *engineClients
	c *native.Conn
}

func (s *engineClients) step() {
	s.e.Poll(1024)
	s.e.Flush()
}

func (s *engineClients) dial(t *testing.T) peerConn {
	t.Helper()
	c, err := s.e.Dial(s.addr, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.until(t, "the connection to be up", func() bool {
		if err := c.Err(); err != nil {
			t.Fatalf("dial: %v", err)
		}
		return c.State() == native.Established
	})
	return &engineConn{s: s, c: c}
}

func (s *engineClients) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(60 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		s.step()
		time.Sleep(20 * time.Microsecond)
	}
}

func (c *engineConn) write(t *testing.T, p []byte) {
	t.Helper()
	c.s.until(t, "room to write", func() bool {
		if err := c.c.Err(); err != nil {
			t.Fatalf("write: %v", err)
		}
		p = p[c.c.Write(p):]
		return len(p) == 0
	})
	c.s.step()
}

func (c *engineConn) read() ([]byte, error) {
	c.s.step()
	buf := make([]byte, 64<<10)
	n, err := c.c.Read(buf)
	return buf[:n], err
}

func (c *engineConn) fin() { c.c.Close(); c.s.step() }
func (c *engineConn) rst() { c.c.Abort(); c.s.step() }

// readN reads n bytes from c, driving cs.
func readN(t *testing.T, cs clientSide, c peerConn, n int) []byte {
	t.Helper()
	var got []byte
	cs.until(t, fmt.Sprintf("%d bytes back", n), func() bool {
		p, err := c.read()
		got = append(got, p...)
		if err != nil {
			t.Fatalf("read after %d of %d bytes: %v", len(got), n, err)
		}
		return len(got) >= n
	})
	return got
}

// loopServer runs a backend's poll loop on a goroutine of its own, the
// obvious loop: it returns on the first error of Rx, Flush or Wait. Every
// packet goes to handle (on the loop's goroutine); do runs functions
// there (Conns belongs to the poll loop); a refused answer (answer) waits,
// with its peer paused, until it fits.
type loopServer struct {
	b       dgramio.Backend
	c       dgramio.Conns
	handle  func(s *loopServer, p dgramio.Packet)
	dropped int // answers to connections that had ended
	do      chan func()
	done    chan error
	cancel  context.CancelFunc
	backlog map[netip.AddrPort][][]byte

	mu     sync.Mutex
	events map[dgramio.Event]int
	// life holds each connection's events in order, by peer, until its
	// EventEnded, when it is checked; bad is the first bad one.
	life map[netip.AddrPort][]dgramio.Event
	bad  string
}

func startLoop(t *testing.T, b dgramio.Backend, handle func(s *loopServer, p dgramio.Packet)) *loopServer {
	ctx, cancel := context.WithCancel(context.Background())
	s := &loopServer{b: b, c: b.(dgramio.Conns), handle: handle, do: make(chan func()), done: make(chan error, 1),
		cancel: cancel, backlog: map[netip.AddrPort][][]byte{},
		events: map[dgramio.Event]int{}, life: map[netip.AddrPort][]dgramio.Event{}}
	go func() { s.done <- s.run(ctx) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

func (s *loopServer) run(ctx context.Context) error {
	pkts := make([]dgramio.Packet, 64)
	for {
		select {
		case f := <-s.do:
			f()
		default:
		}
		if ctx.Err() != nil {
			return nil
		}
		s.retry()
		n, err := s.b.Rx(pkts)
		if err != nil {
			return fmt.Errorf("Rx: %w", err)
		}
		for _, p := range pkts[:n] {
			if p.Event != dgramio.EventData {
				s.note(p)
			}
			s.handle(s, p)
		}
		if err := s.b.Flush(); err != nil {
			return fmt.Errorf("Flush: %w", err)
		}
		if n == 0 && len(s.backlog) == 0 {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
			err := s.b.Wait(wctx)
			cancel()
			switch {
			case err == nil, errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
			case errors.Is(err, dgramio.ErrNotSupported):
				time.Sleep(20 * time.Microsecond)
			default:
				return fmt.Errorf("Wait: %w", err)
			}
		}
	}
}

// answer queues p to peer, or keeps it (and pauses the peer) behind the
// answers that wait.
func (s *loopServer) answer(p []byte, peer netip.AddrPort) {
	if q, ok := s.backlog[peer]; ok {
		s.backlog[peer] = append(q, append([]byte(nil), p...))
		return
	}
	switch s.b.QueueTo(p, peer) {
	case nil:
		return
	case dgramio.ErrBackPressure:
	default:
		s.dropped++ // the connection ended: nowhere to answer
		return
	}
	if s.c.Pause(peer) == nil {
		s.backlog[peer] = [][]byte{append([]byte(nil), p...)}
	}
}

// retry queues the answers that wait, flushing first, and resumes the
// peers whose answers all went.
func (s *loopServer) retry() {
	if len(s.backlog) == 0 {
		return
	}
	s.b.Flush()
	for peer, q := range s.backlog {
		for len(q) > 0 && s.b.QueueTo(q[0], peer) == nil {
			q = q[1:]
		}
		s.backlog[peer] = q
		if len(q) == 0 {
			s.c.Resume(peer)
			delete(s.backlog, peer)
		}
	}
}

// note counts p's event and checks each connection's events come in
// order: opened, then the peer's FIN or a reset (or neither), then
// ended.
func (s *loopServer) note(p dgramio.Packet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events[p.Event]++
	if p.Event == dgramio.EventStalled {
		return // a slow client's, anywhere in its life
	}
	l := append(s.life[p.From], p.Event)
	s.life[p.From] = l
	if p.Event == dgramio.EventReset && !errors.As(p.Err, new(*dgramio.PeerError)) && s.bad == "" {
		s.bad = fmt.Sprintf("%v: EventReset's Err %v is no *dgramio.PeerError", p.From, p.Err)
	}
	if p.Event != dgramio.EventEnded {
		return
	}
	delete(s.life, p.From)
	delete(s.backlog, p.From)
	switch fmt.Sprint(l) {
	case "[opened ended]", "[opened peer-fin ended]", "[opened reset ended]":
	default:
		if s.bad == "" {
			s.bad = fmt.Sprintf("%v: events %v", p.From, l)
		}
	}
}

func (s *loopServer) count(e dgramio.Event) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.events[e]
}

// run f on the poll loop's goroutine and waits for it.
func (s *loopServer) call(t *testing.T, f func()) {
	t.Helper()
	ok := make(chan struct{})
	select {
	case s.do <- func() { f(); close(ok) }:
		<-ok
	case err := <-s.done:
		s.done <- err
		t.Fatalf("the server's loop ended: %v", err)
	}
}

// stop ends the loop and fails the test if it returned an error or saw
// events out of order.
func (s *loopServer) stop(t *testing.T) {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	if err := <-s.done; err != nil {
		t.Errorf("the server's loop returned %v", err)
	}
	if s.bad != "" {
		t.Errorf("events out of order: %s", s.bad)
	}
}

// echoHandler answers every message with itself.
func echoHandler(s *loopServer, p dgramio.Packet) {
	if p.Event == dgramio.EventData {
		s.answer(p.Data, p.From)
	}
}

// TestConnectionEvents: a server whose loop returns on the first error it
// gets serves 1,000 clients that connect, send a record, read its echo,
// and leave, half by FIN and half by reset (SO_LINGER 0 on a kernel
// client, RFC 9293 §3.10.7: ABORT); it delivers each connection's
// opened, its peer's FIN or reset, and ended, exactly once and in that
// order, on every stream kind, and its Stats count the same.
func TestConnectionEvents(t *testing.T) {
	const clients, wave = 1000, 50
	for _, tg := range streamTargets(false) {
		t.Run(tg.name, func(t *testing.T) {
			b, cs := tg.open(t, dgramio.Config{Events: true})
			s := startLoop(t, b, echoHandler)
			for w := 0; w < clients; w += wave {
				conns := make([]peerConn, wave)
				for i := range conns {
					conns[i] = cs.dial(t)
				}
				for i, c := range conns {
					msg := fmt.Appendf(nil, "client %d", w+i)
					c.write(t, append([]byte{0, byte(len(msg))}, msg...))
				}
				for i, c := range conns {
					msg := fmt.Sprintf("client %d", w+i)
					if got := readN(t, cs, c, 2+len(msg)); string(got[2:]) != msg {
						t.Fatalf("echo %q, want %q", got[2:], msg)
					}
					if (w+i)%2 == 0 {
						c.fin()
					} else {
						c.rst()
					}
				}
			}
			cs.until(t, "every connection ended", func() bool { return s.count(dgramio.EventEnded) == clients })
			s.stop(t)
			want := map[dgramio.Event]int{dgramio.EventOpened: clients, dgramio.EventPeerFIN: clients / 2,
				dgramio.EventReset: clients / 2, dgramio.EventEnded: clients}
			if fmt.Sprint(s.events) != fmt.Sprint(want) {
				t.Errorf("events %v, want %v", s.events, want)
			}
			st := b.Stats()
			if st.Accepts != clients || st.PeerCloses != clients/2 || st.Resets != clients/2 || st.Conns != 0 ||
				st.RxDelivered != clients || st.TxSent != clients {
				t.Errorf("stats: accepts %d peer closes %d resets %d conns %d delivered %d sent %d",
					st.Accepts, st.PeerCloses, st.Resets, st.Conns, st.RxDelivered, st.TxSent)
			}
		})
	}
}

// TestRawFramingByteEcho: with Config.FramingRaw the server's Rx hands
// each connection's bytes as they came and QueueTo appends them to its
// stream: 1 MiB of random bytes, written in pieces of random size, come
// back byte-exact, on every stream kind and through the lossy wire. With
// Config.FramingU32 the same stream, cut into records of a u32 length
// prefix, comes back the same, each record delivered whole.
func TestRawFramingByteEcho(t *testing.T) {
	for _, framing := range []dgramio.Framing{dgramio.FramingRaw, dgramio.FramingU32} {
		for _, tg := range streamTargets(true) {
			t.Run(string(framing)+"/"+tg.name, func(t *testing.T) {
				b, cs := tg.open(t, dgramio.Config{Framing: framing, MaxDatagram: 4096})
				startLoop(t, b, echoHandler)
				c := cs.dial(t)
				rng := rand.New(rand.NewPCG(1, 2))
				var data []byte
				var records, payload int
				for len(data) < 1<<20 {
					n := rng.IntN(3000)
					if framing == dgramio.FramingU32 {
						data = append(data, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
						records++
						payload += n
					}
					for range n {
						data = append(data, byte(rng.Uint32()))
					}
				}
				if framing == dgramio.FramingRaw {
					payload = len(data)
				}
				var got []byte
				for off := 0; off < len(data); {
					k := min(1+rng.IntN(3000), len(data)-off)
					c.write(t, data[off:off+k])
					off += k
					p, err := c.read()
					if err != nil {
						t.Fatalf("read: %v", err)
					}
					got = append(got, p...)
				}
				got = append(got, readN(t, cs, c, len(data)-len(got))...)
				if string(got) != string(data) {
					t.Fatalf("%d bytes back, not those sent (first difference at %d)", len(got), firstDiff(got, data))
				}
				st := b.Stats()
				if st.RxBytes != uint64(payload) || st.TxBytes != uint64(payload) || st.Lost() != 0 ||
					(framing == dgramio.FramingU32 && (st.RxDelivered != uint64(records) || st.TxSent != uint64(records))) {
					t.Errorf("stats: RxBytes %d TxBytes %d RxDelivered %d TxSent %d lost %d, want %d, %d bytes, %d records (u32), 0",
						st.RxBytes, st.TxBytes, st.RxDelivered, st.TxSent, st.Lost(), payload, payload, records)
				}
			})
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// httpParser is the server side of an HTTP/1.1 exchange (RFC 9112 §2.1:
// a request line and header fields, each ending in CRLF, and an empty
// line) parsed from raw bytes as they arrive: what a Packet ends in the
// middle of is kept (a copy: Data is valid until the next Rx) and joined
// with the next. Each request is answered with its target as the body.
type httpParser struct {
	held map[netip.AddrPort][]byte
	bad  []string
}

func (h *httpParser) handle(s *loopServer, p dgramio.Packet) {
	switch p.Event {
	case dgramio.EventData:
	case dgramio.EventEnded:
		delete(h.held, p.From)
		return
	default:
		return
	}
	buf := p.Data
	if held := h.held[p.From]; len(held) > 0 {
		buf = append(held, p.Data...)
	}
	for {
		end := strings.Index(string(buf), "\r\n\r\n")
		if end < 0 {
			break
		}
		line, _, _ := strings.Cut(string(buf[:end]), "\r\n")
		method, rest, ok1 := strings.Cut(line, " ")
		target, version, ok2 := strings.Cut(rest, " ")
		if !ok1 || !ok2 || method != "GET" || version != "HTTP/1.1" {
			h.bad = append(h.bad, line)
		}
		s.answer(fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(target), target), p.From)
		buf = buf[end+4:]
	}
	h.held[p.From] = append(h.held[p.From][:0], buf...)
}

// TestRawFramingHTTPRequests: a parser of a protocol that is not u16
// records, HTTP/1.1 requests, driven from Rx with Config.FramingRaw: 300
// pipelined requests, written in pieces cut at random (mid-line, mid-CRLF),
// are each answered once, in order, on every stream kind.
func TestRawFramingHTTPRequests(t *testing.T) {
	const n = 300
	for _, tg := range streamTargets(false) {
		t.Run(tg.name, func(t *testing.T) {
			b, cs := tg.open(t, dgramio.Config{Framing: dgramio.FramingRaw, Events: true})
			h := &httpParser{held: map[netip.AddrPort][]byte{}}
			s := startLoop(t, b, h.handle)
			c := cs.dial(t)
			var reqs, want []byte
			for i := range n {
				target := fmt.Sprintf("/item/%d", i)
				reqs = fmt.Appendf(reqs, "GET %s HTTP/1.1\r\nHost: test\r\nX-N: %d\r\n\r\n", target, i)
				want = fmt.Appendf(want, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(target), target)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			for off := 0; off < len(reqs); {
				k := min(1+rng.IntN(40), len(reqs)-off)
				c.write(t, reqs[off:off+k])
				off += k
				if rng.IntN(8) == 0 {
					time.Sleep(100 * time.Microsecond) // a segment of its own
				}
			}
			if got := readN(t, cs, c, len(want)); string(got) != string(want) {
				t.Fatalf("answers differ from %d on", firstDiff(got, want))
			}
			s.call(t, func() {})
			if len(h.bad) != 0 {
				t.Fatalf("bad request lines %q", h.bad)
			}
		})
	}
}

// TestConns: dgramio.Conns on every stream kind. CloseConn sends what was
// queued, then our FIN (the client reads the answer, then EOF) and the
// connection ends; ResetConn resets it (the client reads ECONNRESET);
// Pause stops delivery from one peer while the other is served, and
// Resume delivers what waited; an address with no connection is
// ErrNoConn, and every method is net.ErrClosed after Close.
func TestConns(t *testing.T) {
	for _, tg := range streamTargets(false) {
		t.Run(tg.name, func(t *testing.T) {
			b, cs := tg.open(t, dgramio.Config{Events: true})
			var mu sync.Mutex
			got := map[netip.AddrPort][]string{}
			opened := []netip.AddrPort{}
			s := startLoop(t, b, func(s *loopServer, p dgramio.Packet) {
				mu.Lock()
				defer mu.Unlock()
				switch p.Event {
				case dgramio.EventOpened:
					opened = append(opened, p.From)
				case dgramio.EventData:
					got[p.From] = append(got[p.From], string(p.Data))
				}
			})
			peerOf := func(i int) netip.AddrPort {
				mu.Lock()
				defer mu.Unlock()
				return opened[i]
			}
			delivered := func(peer netip.AddrPort) int {
				mu.Lock()
				defer mu.Unlock()
				return len(got[peer])
			}
			record := func(s string) []byte { return append([]byte{0, byte(len(s))}, s...) }
			var conns []peerConn
			for i := range 3 {
				conns = append(conns, cs.dial(t))
				cs.until(t, "the server's EventOpened", func() bool { return s.count(dgramio.EventOpened) == i+1 })
			}
			closing, resetting, paused := peerOf(0), peerOf(1), peerOf(2)

			// CloseConn: the answer queued before it, then the FIN.
			var err error
			s.call(t, func() {
				b.QueueTo([]byte("bye"), closing)
				err = s.c.CloseConn(closing)
			})
			if err != nil {
				t.Fatalf("CloseConn: %v", err)
			}
			if r := readN(t, cs, conns[0], 5); string(r) != string(record("bye")) {
				t.Fatalf("read %q before the FIN", r)
			}
			cs.until(t, "the client's EOF", func() bool {
				p, err := conns[0].read()
				if len(p) > 0 || (err != nil && err != io.EOF) {
					t.Fatalf("after the answer: %q, %v; want EOF", p, err)
				}
				return err == io.EOF
			})
			conns[0].fin()
			// ResetConn: the client's read fails with a reset.
			s.call(t, func() { err = s.c.ResetConn(resetting) })
			if err != nil {
				t.Fatalf("ResetConn: %v", err)
			}
			var rerr error
			cs.until(t, "the client to see the reset", func() bool {
				_, rerr = conns[1].read()
				return rerr != nil
			})
			if !errors.Is(rerr, syscall.ECONNRESET) && !errors.Is(rerr, native.ErrReset) {
				t.Errorf("the reset client reads %v, want ECONNRESET", rerr)
			}
			cs.until(t, "both ended", func() bool { return s.count(dgramio.EventEnded) == 2 })
			if st := b.Stats(); st.Resets != 1 || st.Conns != 1 {
				t.Errorf("after CloseConn and ResetConn: resets %d conns %d, want 1 and 1", st.Resets, st.Conns)
			}
			s.call(t, func() {
				if err := b.QueueTo([]byte("late"), closing); err != dgramio.ErrNoRoute {
					t.Error("QueueTo took a record for a connection CloseConn closed")
				}
				if err := s.c.CloseConn(closing); !errors.Is(err, dgramio.ErrNoConn) {
					t.Errorf("CloseConn of an ended connection: %v, want ErrNoConn", err)
				}
			})

			// Pause: nothing of the peer is delivered until Resume.
			s.call(t, func() { err = s.c.Pause(paused) })
			if err != nil {
				t.Fatalf("Pause: %v", err)
			}
			conns[2].write(t, record("while paused"))
			time.Sleep(50 * time.Millisecond)
			cs.until(t, "a few rounds of the loop", func() bool { s.call(t, func() {}); return true })
			if n := delivered(paused); n != 0 {
				t.Fatalf("%d records delivered from a paused peer", n)
			}
			s.call(t, func() { err = s.c.Resume(paused) })
			if err != nil {
				t.Fatalf("Resume: %v", err)
			}
			cs.until(t, "the record after Resume", func() bool { return delivered(paused) == 1 })

			nobody := netip.MustParseAddrPort("198.18.99.99:1")
			s.call(t, func() {
				for name, f := range map[string]func(netip.AddrPort) error{"CloseConn": s.c.CloseConn,
					"ResetConn": s.c.ResetConn, "Pause": s.c.Pause, "Resume": s.c.Resume} {
					if err := f(nobody); !errors.Is(err, dgramio.ErrNoConn) {
						t.Errorf("%s of an address with no connection: %v, want ErrNoConn", name, err)
					}
				}
			})
			s.stop(t)
			b.Close()
			c := b.(dgramio.Conns)
			for name, f := range map[string]func(netip.AddrPort) error{"CloseConn": c.CloseConn,
				"ResetConn": c.ResetConn, "Pause": c.Pause, "Resume": c.Resume} {
				if err := f(paused); !errors.Is(err, net.ErrClosed) {
					t.Errorf("%s after Close: %v, want net.ErrClosed", name, err)
				}
			}
		})
	}
}
