// Package tcp is the kind "tcp": the kernel's TCP carrying the same
// messages as the datagram kinds, each as one u16 length-prefixed record
// (package tcp/record). The connection set, staging, back-pressure and
// counting are the stream layer's (internal/stream), which the userspace
// TCP kinds share; this package is its transport over sockets and epoll. Sockets are tuned the same way on both ends (see
// sock.TuneTCP): TCP_NODELAY unless Config.Nagle, TCP_QUICKACK, SO_RCVBUF
// and SO_SNDBUF of Config.SockBuf, SO_BUSY_POLL, non-blocking. It needs no
// privileges.
//
// There is no loss on this path, only back-pressure: when a socket's send
// buffer is full (EAGAIN) the bytes wait in a per-connection staging buffer
// of Config.TxQueue records, and when a record does not fit there Queue
// returns ErrBackPressure and the caller keeps it. Bytes a Flush released that the
// socket refused go out with the next Rx or Flush that finds room (Wait
// wakes for that room), so the stream moves on without another Flush. A record is never cut: half a
// record would put the receiver out of step for the rest of the connection.
// With several receivers a record goes to all of them or to none, so that a
// retry never duplicates it.
//
// No goroutine runs on the data path: a server accepts new connections
// inside Rx and Flush, without blocking.
//
// The root package imports this package under an alias.
//
// This package is one of dgramio's backends, reached through dgramio.New
// and dgramio.NewGroup; its exported names serve the module's other
// packages and are not a stable API of their own.
package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/fdwait"
	"github.com/dgramio/dgramio/internal/kindcfg"
	"github.com/dgramio/dgramio/internal/record"
	"github.com/dgramio/dgramio/internal/sock"
	"github.com/dgramio/dgramio/internal/stream"
)

// acceptEvery bounds how often a server with connections tries accept4 in
// Rx and Flush when Wait has not seen the listener ready: a new client
// waits at most this long, and a busy loop pays one accept4 per interval.
const acceptEvery = time.Millisecond

// A client's Close lingers (stream.Layer.Linger) until every server has
// closed its direction after our FIN, for at most closeLinger, giving up
// on one that has sent nothing for closeIdle.
const (
	closeLinger = 2 * time.Second
	closeIdle   = 100 * time.Millisecond
)

// conn is one connection's socket: the stream.Conn of kernel TCP.
type conn struct {
	stream.Hook
	b      *Backend
	fd     int
	remote netip.AddrPort
	// out is true while the socket is registered for EPOLLOUT (released
	// bytes wait for room), so that Wait wakes when they can go; in while
	// it is registered for EPOLLIN (the layer reads it).
	out, in bool
	// shut: CloseWrite queued our FIN (which SIOCOUTQ then counts).
	shut bool
	// settled: Close shut both directions (settle); cut: a read after
	// that took bytes, which nobody will deliver (counted in RxClosed).
	settled, cut bool
	// sent follows the records written and not known acknowledged.
	sent stream.Sent
	// info is the connection's TCP_INFO as Stats last read it.
	info sock.TCPCounters
	// endAsked is when Ended last read TCP_INFO (it is asked at most
	// every endEvery while the connection is held and named).
	endAsked time.Time
}

// endEvery bounds how often Ended asks the kernel about a held
// connection, which Watch names at every Rx when it is the only one.
const endEvery = time.Millisecond

var (
	_ stream.Conn       = (*conn)(nil)
	_ stream.HalfCloser = (*conn)(nil)
	_ stream.Unacker    = (*conn)(nil)
)

// forgetEvery is how many record starts a connection's stream.Sent holds
// before Write asks the kernel (SIOCOUTQ, one ioctl) which of them the
// peer acknowledged: one system call per that many records at most.
const forgetEvery = 4096

// Backend is the tcp kind. Create it with New; see dgramio.Backend for the
// method contracts and the threading rules.
//
// Memory: each connection has a staging buffer of Config.TxQueue records
// of up to Config.MaxDatagram bytes and a receive buffer of
// Config.RxBatch such records (at least 64 KiB). Rx hands out records as
// slices of a connection's receive buffer, valid until the next Rx or
// Close. Nothing is allocated per message.
type Backend struct {
	cfg     dgramio.Config
	lfd     int // listener, -1 on a client
	epfd    int // listener and connections, for Wait
	waker   *fdwait.Waker
	granted sock.Granted
	mode    string
	local   netip.AddrPort
	thread  cpu.Thread // what New did to pin its thread to Config.CPUs[0]
	life    sock.Life

	s          *stream.Layer
	lastAccept time.Time
	listenHot  atomic.Bool // Wait saw the listener ready

	// byFD finds a connection by its socket for Watch; events is the
	// buffer of its epoll_wait.
	byFD   []*conn
	events [watchEvents]unix.EpollEvent

	syscalls   uint64 // on the poll loop; Wait's are in waitCalls
	waitCalls  atomic.Uint64
	closedInfo sock.TCPCounters // TCP_INFO of closed connections
	// infoNext is the connection the next Stats refreshes the TCP_INFO
	// of first; infoReads counts those reads (for tests).
	infoNext, infoReads int

	// The padding keeps the fields of the next object on the heap (another
	// queue's, written by another core) off this one's last cache line.
	_ [64]byte
}

var _ dgramio.Backend = (*Backend)(nil)

// New opens a tcp backend for cfg. It applies cfg.WithDefaults and
// validates cfg before any system call; cfg.Kind may be "tcp" or empty.
//
// A client connects to every one of Config.Dests (address and port), all at
// once, and fails unless every connection is up within
// Config.ConnectTimeout (errors wrap the errno: ECONNREFUSED, ETIMEDOUT).
// Queue then sends each record to all of them. A server listens on
// Config.LocalIP:Config.Port (all addresses when LocalIP is unset; with
// SO_REUSEADDR) and accepts clients inside Rx and Flush; its Queue sends to
// every connected client and QueueTo to one (the From of a received
// Packet). Errors are a *dgramio.ConfigError for a bad field, a
// *dgramio.PrivilegeError for a port below 1024, or the wrapped errno.
//
// The sockets belong to the network namespace of the calling thread. With
// Config.CPUs set, New locks the calling goroutine to its thread and pins
// it to CPUs[0] (call New on the goroutine that will poll), unless the
// caller pinned it there already (see cpu.Claim); Close undoes what New
// did when called on that goroutine, and leaves the thread pinned
// otherwise.
func New(cfg dgramio.Config) (dgramio.Backend, error) {
	return openQueue(cfg, -1, sock.Granted{}, "")
}

// openQueue opens a backend: a server on the listener lfd with what the
// kernel granted it (a queue of a group, which hands lfd over: it is
// closed on error), or one that listens or connects itself when lfd is
// -1. note ends Stats.Mode.
func openQueue(cfg dgramio.Config, lfd int, granted sock.Granted, note string) (dgramio.Backend, error) {
	cfg, err := kindcfg.PrepareOne(cfg, dgramio.KindTCP)
	if err != nil {
		if lfd >= 0 {
			unix.Close(lfd)
		}
		return nil, err
	}
	b := &Backend{cfg: cfg, lfd: lfd, epfd: -1}
	hl := record.HeaderLen
	if cfg.Framing == dgramio.FramingU32 {
		hl = record.HeaderLen32
	}
	b.s = stream.New((*transport)(b), stream.Options{
		MaxRecord:   cfg.MaxDatagram,
		RxBatch:     cfg.RxBatch,
		StagingSize: cfg.TxQueue * (hl + cfg.MaxDatagram),
		DecoderSize: max(cfg.RxBatch*(hl+cfg.MaxDatagram), 64<<10),
		Framing:     cfg.Framing,
		Events:      cfg.Events,
	})
	ok := false
	defer func() {
		if !ok {
			b.release()
		}
	}()
	if b.thread, err = cpu.Claim(cfg.CPUs, false); err != nil {
		return nil, err
	}
	if b.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	if b.waker, err = fdwait.NewWaker(); err != nil {
		return nil, err
	}
	switch {
	case lfd >= 0:
		b.granted, b.local = granted, granted.Local
		err = b.epollAdd(lfd, unix.EPOLLIN)
	case cfg.Role == dgramio.RoleServer:
		err = b.listen()
	default:
		err = b.connectAll()
	}
	if err != nil {
		return nil, err
	}
	b.mode = "send/recv records, "
	if cfg.Framing == dgramio.FramingRaw {
		b.mode = "send/recv raw bytes, " // no records to speak of
	}
	if cfg.Nagle {
		b.mode += "Nagle on, "
	} else {
		b.mode += "TCP_NODELAY, "
	}
	b.mode += b.granted.Mode()
	if note != "" {
		b.mode += ", " + note
	}
	ok = true
	return b, nil
}

// release closes whatever New or Close holds.
func (b *Backend) release() error {
	var errs []error
	b.s.Close()
	if b.lfd >= 0 {
		if err := unix.Close(b.lfd); err != nil {
			errs = append(errs, fmt.Errorf("close listener: %w", err))
		}
		b.lfd = -1
	}
	if b.epfd >= 0 {
		if err := unix.Close(b.epfd); err != nil {
			errs = append(errs, fmt.Errorf("close epoll: %w", err))
		}
		b.epfd = -1
	}
	if b.waker != nil {
		errs = append(errs, b.waker.Close())
		b.waker = nil
	}
	errs = append(errs, b.thread.Release())
	b.thread = cpu.Thread{}
	return errors.Join(errs...)
}

func (b *Backend) listen() error {
	fd, g, err := sock.ListenTCP(b.cfg, false)
	if err != nil {
		return err
	}
	b.lfd, b.granted, b.local = fd, g, g.Local
	return b.epollAdd(fd, unix.EPOLLIN)
}

func (b *Backend) epollAdd(fd int, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	if err := unix.EpollCtl(b.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl add: %w", err)
	}
	return nil
}

// connectAll connects to every destination at once and waits for all of
// them within ConnectTimeout.
func (b *Backend) connectAll() error {
	var atts []attempt
	defer func() {
		for _, a := range atts {
			if a.fd >= 0 {
				unix.Close(a.fd)
			}
		}
	}()
	for i, d := range b.cfg.Dests {
		a, err := b.dial(d, i == 0)
		if a.fd >= 0 {
			atts = append(atts, a)
		}
		if err != nil {
			return err
		}
	}
	if err := b.awaitConnected(atts); err != nil {
		return err
	}
	for i := range atts {
		if err := b.addConn(atts[i].fd, atts[i].dst); err != nil {
			return err
		}
		atts[i].fd = -1 // the backend owns it now
	}
	if b.s.Len() > 0 {
		var err error
		b.local, err = sock.LocalAddr(b.s.Conn(0).(*conn).fd)
		b.granted.Local = b.local
		return err
	}
	return nil
}

// attempt is one connect in progress: its socket (-1 once the backend
// owns it) and destination.
type attempt struct {
	fd  int
	dst netip.AddrPort
}

// dial makes a tuned non-blocking socket, binds it as Config says and
// starts its connect to dst; first keeps what the kernel granted it as
// the backend's. On error the attempt's fd, when not -1, is the caller's
// to close.
func (b *Backend) dial(dst netip.AddrPort, first bool) (attempt, error) {
	fd, err := sock.Socket(b.cfg, unix.SOCK_STREAM, unix.IPPROTO_TCP)
	if err != nil {
		return attempt{fd: -1}, err
	}
	a := attempt{fd, dst}
	g, err := sock.TuneTCP(fd, b.cfg)
	if err != nil {
		return a, err
	}
	if first {
		b.granted = g
	}
	if b.cfg.LocalIP.IsValid() || b.cfg.LocalPort != 0 {
		if b.cfg.LocalPort != 0 {
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
				return a, fmt.Errorf("setsockopt SO_REUSEADDR: %w", err)
			}
		}
		if err := sock.Bind(fd, sock.BindAddr(b.cfg, b.cfg.LocalPort)); err != nil {
			return a, err
		}
	}
	if err := unix.Connect(fd, sock.Sockaddr(dst)); err != nil && err != unix.EINPROGRESS {
		return a, fmt.Errorf("connect %s: %w", dst, err)
	}
	return a, nil
}

// awaitConnected waits in poll(2) until every connect of atts has
// finished, within ConnectTimeout; the first that failed, or one still
// waiting at the deadline (ETIMEDOUT), is the error.
func (b *Backend) awaitConnected(atts []attempt) error {
	deadline := time.Now().Add(b.cfg.ConnectTimeout)
	waiting := slices.Clone(atts)
	fds := make([]unix.PollFd, 0, len(atts))
	for len(waiting) > 0 {
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms <= 0 {
			return fmt.Errorf("connect %s: no answer within %v: %w", waiting[0].dst, b.cfg.ConnectTimeout, unix.ETIMEDOUT)
		}
		fds = fds[:0]
		for _, a := range waiting {
			fds = append(fds, unix.PollFd{Fd: int32(a.fd), Events: unix.POLLOUT})
		}
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR || n == 0 {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		left := waiting[:0]
		for k, pfd := range fds {
			if pfd.Revents == 0 {
				left = append(left, waiting[k])
				continue
			}
			soerr, err := unix.GetsockoptInt(waiting[k].fd, unix.SOL_SOCKET, unix.SO_ERROR)
			if err != nil {
				return fmt.Errorf("getsockopt SO_ERROR: %w", err)
			}
			if soerr != 0 {
				return fmt.Errorf("connect %s: %w", waiting[k].dst, unix.Errno(soerr))
			}
		}
		waiting = left
	}
	return nil
}

// addConn takes a connected socket into the backend.
func (b *Backend) addConn(fd int, remote netip.AddrPort) error {
	c, err := b.newConn(fd, remote)
	if err != nil {
		return err
	}
	b.s.Add(c, remote)
	return nil
}

func (b *Backend) newConn(fd int, remote netip.AddrPort) (*conn, error) {
	if err := b.epollAdd(fd, unix.EPOLLIN|unix.EPOLLRDHUP); err != nil {
		return nil, err
	}
	c := &conn{b: b, fd: fd, remote: remote, in: true}
	c.sent.SetFraming(b.cfg.Framing)
	if fd >= len(b.byFD) {
		b.byFD = append(b.byFD, make([]*conn, fd+1-len(b.byFD))...)
	}
	b.byFD[fd] = c
	return c, nil
}

// LocalAddr is the listener's address on a server, the first connection's
// local address on a client.
func (b *Backend) LocalAddr() netip.AddrPort { return b.local }

// transport is the Backend as the stream layer's Transport.
type transport Backend

var _ stream.Transport = (*transport)(nil)

// Poll implements stream.Transport: the kernel moves the streams itself;
// what it did shows in epoll, which Watch reads, so Poll cannot tell.
func (t *transport) Poll() bool { return true }

// Push implements stream.Transport: send(2) already handed the bytes over.
func (t *transport) Push() error { return nil }

// watchEvents bounds the events one Watch takes from epoll; the rest wait
// for the next (epoll reports a socket that is still readable again, and
// rotates those it reported to the back).
const watchEvents = 256

// Watch implements stream.Transport. With one connection it names it
// every call (one recv(2) costs what asking epoll does); with more, it
// names those epoll reports readable, closed or failed, with one
// epoll_wait(2) that does not sleep, and notes a listener ready for
// Accept.
func (t *transport) Watch(mark func(stream.Conn)) {
	b := (*Backend)(t)
	if b.s.Len() == 1 {
		// Named while not read too: a held connection's end is
		// asked of it (conn.Ended), which epoll would report.
		mark(b.s.Conn(0).(*conn))
		return
	}
	if b.s.Len() == 0 {
		return
	}
	n, err := unix.EpollWait(b.epfd, b.events[:], 0)
	b.syscalls++
	if err != nil {
		return // EINTR: the next call asks again
	}
	for _, ev := range b.events[:n] {
		fd := int(ev.Fd)
		if fd == b.lfd {
			b.listenHot.Store(true)
			continue
		}
		if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) == 0 {
			continue // room to write: the layer writes released bytes anyway
		}
		if fd < len(b.byFD) && b.byFD[fd] != nil {
			mark(b.byFD[fd])
		}
	}
}

// Accept implements stream.Transport: it accepts waiting clients on a
// server, at most every acceptEvery unless Wait saw the listener ready or
// there is no client.
func (t *transport) Accept(add func(stream.Conn, netip.AddrPort)) {
	b := (*Backend)(t)
	if b.lfd < 0 {
		return
	}
	if b.s.Len() > 0 && !b.listenHot.Load() {
		now := time.Now()
		if now.Sub(b.lastAccept) < acceptEvery {
			return
		}
		b.lastAccept = now
	}
	b.listenHot.Store(false)
	for {
		nfd, sa, err := unix.Accept4(b.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		b.syscalls++
		if err == unix.EINTR || err == unix.ECONNABORTED {
			continue
		}
		if err != nil {
			// EAGAIN: nobody waiting. EMFILE and the like: try later.
			return
		}
		remote, ok := sock.AddrPortOf(sa)
		if !ok {
			unix.Close(nfd)
			continue
		}
		if _, err := sock.TuneTCP(nfd, b.cfg); err != nil {
			unix.Close(nfd)
			continue
		}
		c, err := b.newConn(nfd, remote)
		if err != nil {
			unix.Close(nfd)
			continue
		}
		add(c, remote)
	}
}

// Queue stages payload as one record for every open connection: every
// connected client on a server, every destination on a client. It returns
// nil, or stages nothing anywhere and returns dgramio.ErrNoRoute when there
// is no connection (layer "tcp" counter "queue_no_conn"), dgramio.ErrTooLarge
// when the payload exceeds MaxDatagram (TxOversize, one per connection),
// dgramio.ErrBackPressure when any connection's staging buffer lacks room for
// the record (TxBackpressure, one per connection: Flush and try again), or
// dgramio.ErrClosed after Close.
func (b *Backend) Queue(payload []byte) error {
	if !b.life.Enter() {
		return dgramio.ErrClosed
	}
	defer b.life.Exit()
	return b.s.Queue(payload)
}

// QueueTo stages payload as one record for the connection whose remote
// address is to (an IPv4-mapped address is taken as IPv4). It returns
// what Queue does; a peer that is not (or no longer) connected, an
// address of the other family among them, is dgramio.ErrNoRoute and counts
// as "queue_no_conn".
func (b *Backend) QueueTo(payload []byte, to netip.AddrPort) error {
	if !b.life.Enter() {
		return dgramio.ErrClosed
	}
	defer b.life.Exit()
	return b.s.QueueTo(payload, dgramio.Unmap(to))
}

// Hold stops (on) or resumes delivery from the connection of peer, as
// stream.Layer.Hold: while held, Rx reads and delivers nothing of it, so
// its socket's receive buffer fills and TCP's window stops the peer. A
// server that cannot queue an answer (QueueTo refused) holds the peer
// until the answer fits. It returns false when peer has no connection or
// the backend is closed.
func (b *Backend) Hold(peer netip.AddrPort, on bool) bool {
	if !b.life.Enter() {
		return false
	}
	defer b.life.Exit()
	return b.s.Hold(peer, on)
}

// CloseConn implements dgramio.Conns: the connection to peer closes in
// order (stream.Layer.CloseConn): what was queued goes out at the next
// Flush, then our FIN; nothing more of it is delivered.
func (b *Backend) CloseConn(peer netip.AddrPort) error {
	if !b.life.Enter() {
		return dgramio.ErrClosed
	}
	defer b.life.Exit()
	return stream.ConnErr(b.s.CloseConn(peer))
}

// ResetConn implements dgramio.Conns: the connection to peer is reset (RST)
// at the next Rx or Flush (stream.Layer.ResetConn).
func (b *Backend) ResetConn(peer netip.AddrPort) error {
	if !b.life.Enter() {
		return dgramio.ErrClosed
	}
	defer b.life.Exit()
	return stream.ConnErr(b.s.ResetConn(peer))
}

// Pause implements dgramio.Conns: Hold(peer, true).
func (b *Backend) Pause(peer netip.AddrPort) error {
	if !b.life.Enter() {
		return dgramio.ErrClosed
	}
	defer b.life.Exit()
	return stream.ConnErr(b.s.Hold(peer, true))
}

// Resume implements dgramio.Conns: Hold(peer, false).
func (b *Backend) Resume(peer netip.AddrPort) error {
	if !b.life.Enter() {
		return dgramio.ErrClosed
	}
	defer b.life.Exit()
	return stream.ConnErr(b.s.Hold(peer, false))
}

// Flush releases each connection's staged records to the stream and
// writes them with one send(2) per connection. Bytes the socket does not
// take (its send buffer is full) stay staged, released: every later Rx and
// Flush writes them as the socket makes room (Wait wakes for that), so a
// caller whose Queue is refused need not Flush for them to go; nothing is
// dropped for that. A server also accepts new clients here.
//
// A peer that closed its direction (FIN) or reset is no error of Flush or
// Rx: it is counted (Stats.PeerCloses, Resets) and, with Config.Events,
// delivered by Rx as an event of that connection (dgramio.Event; see package
// stream for when). After a FIN the connection stays writable: answers
// queued until the Flush after the Rx that delivers EventPeerFIN are
// sent, then the backend closes its side. After a reset the connection is
// removed and the records still staged for it are counted in TxDropped.
// A client that lost a destination has lost it for good, and Queue
// refuses once it has none left: Close it and make a new one to
// reconnect. Flush returns net.ErrClosed after Close, and otherwise only
// what broke the backend itself.
func (b *Backend) Flush() error {
	if !b.life.Enter() {
		return dgramio.ErrClosed
	}
	defer b.life.Exit()
	return b.s.Flush()
}

// Write implements stream.Conn with send(2), registering the socket for
// EPOLLOUT while bytes are left.
func (c *conn) Write(p []byte) (int, error) {
	for {
		n, errno := sock.Send(c.fd, p, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
		c.b.syscalls++
		switch errno {
		case 0:
			c.sent.Wrote(p[:n])
			if c.sent.Tracked() >= forgetEvery {
				if u, err := c.outq(); err == nil {
					c.sent.Forget(u)
				}
			}
			c.b.setEvents(c, c.in, n < len(p)) // a short write: the buffer is full
			return n, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			c.b.setEvents(c, c.in, true)
			return 0, nil
		default:
			return 0, lost(errno)
		}
	}
}

// Read implements stream.Conn with recv(2).
func (c *conn) Read(p []byte) (int, error) {
	for {
		n, errno := sock.Recv(c.fd, p, unix.MSG_DONTWAIT)
		c.b.syscalls++
		switch {
		case errno == unix.EINTR:
			continue
		case errno == unix.EAGAIN:
			return 0, nil
		case errno != 0:
			return 0, lost(errno)
		case n == 0:
			return 0, io.EOF
		}
		c.cut = c.cut || c.settled
		return n, nil
	}
}

// lost is the PeerError of a failed send or recv.
func lost(errno unix.Errno) error {
	if errno == unix.EPIPE {
		return &dgramio.PeerError{Err: errno} // our side or both are shut
	}
	// ECONNRESET, ETIMEDOUT (retransmissions gave up), EHOSTUNREACH...
	return &dgramio.PeerError{Reset: true, Err: errno}
}

// Readable implements stream.Conn: epoll knows, the layer tries recv once.
func (c *conn) Readable() bool { return true }

// Writable implements stream.Conn, as Readable.
func (c *conn) Writable() bool { return true }

// SetReading implements stream.Conn: the socket leaves (or rejoins)
// EPOLLIN, so that Wait does not wake for a stream nobody reads.
func (c *conn) SetReading(on bool) { c.b.setEvents(c, on, c.out) }

// Close implements stream.Conn: close(2), after keeping its TCP_INFO.
// A connection the backend's Close read bytes from after shutting it
// down (the peer was still sending: the layer counted what it read in
// RxClosed) is reset instead (SO_LINGER 0), as RFC 1122 §4.2.2.13 has it
// for data pending at CLOSE and as Linux does for unread data: a plain
// close(2) of the emptied socket could leave a peer facing a zero
// window with nothing to tell it that its data is lost, until the
// orphan's FIN-WAIT-2 timeout.
func (c *conn) Close() {
	if c.cut {
		_ = unix.SetsockoptLinger(c.fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	}
	if ti, err := sock.ReadTCPInfo(c.fd); err == nil {
		c.b.closedInfo.Add(ti)
	}
	if c.b.byFD[c.fd] == c {
		c.b.byFD[c.fd] = nil
	}
	unix.Close(c.fd) // also leaves the epoll set
}

// CloseWrite implements stream.HalfCloser: shutdown(2) SHUT_WR, a FIN
// after what was written; the socket stays readable.
func (c *conn) CloseWrite() error {
	c.b.syscalls++
	err := unix.Shutdown(c.fd, unix.SHUT_WR)
	c.shut = c.shut || err == nil
	return err
}

// outq returns how many of the bytes written the peer has not
// acknowledged: SIOCOUTQ (write_seq - snd_una, also after a reset), less
// our FIN, which follows them and is unacknowledged while any is.
func (c *conn) outq() (uint64, error) {
	c.b.syscalls++
	n, err := unix.IoctlGetInt(c.fd, unix.SIOCOUTQ)
	if err != nil {
		return 0, fmt.Errorf("ioctl SIOCOUTQ: %w", err)
	}
	if c.shut && n > 0 {
		n--
	}
	return uint64(n), nil
}

// Appended implements stream.Appender: in raw framing, where the next
// QueueTo's bytes start in the stream.
func (c *conn) Appended(n int) { c.sent.Appended(n) }

// UnackedRecords implements stream.Unacker: the records written whose
// first byte the peer has not acknowledged (SIOCOUTQ), and whether the
// connection ended (TCP_INFO's state is TCP_CLOSE: a reset, or it failed).
// When the kernel cannot tell, none, ended.
func (c *conn) UnackedRecords() (int, bool) {
	u, err := c.outq()
	if err != nil {
		return 0, true
	}
	if u == 0 {
		return c.sent.Unacked(0), false
	}
	return c.sent.Unacked(u), c.ended()
}

// Ended implements stream.Ender: a connection in TCP_CLOSE while we hold
// it open was reset (or failed); the cause waits in SO_ERROR for the next
// read, so this says reset without taking it.
func (c *conn) Ended() error {
	now := time.Now()
	if now.Sub(c.endAsked) < endEvery {
		return nil // Watch names it again
	}
	c.endAsked = now
	c.b.syscalls++
	ti, err := unix.GetsockoptTCPInfo(c.fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil || ti.State != tcpClose {
		return nil
	}
	return &dgramio.PeerError{Reset: true, Err: unix.ECONNRESET}
}

// ended reports whether the connection is over (TCP_CLOSE), or its state
// cannot be read.
func (c *conn) ended() bool {
	c.b.syscalls++
	ti, err := unix.GetsockoptTCPInfo(c.fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	return err != nil || ti.State == tcpClose
}

// Abort implements stream.Conn: a reset if the connection is still up
// (SO_LINGER 0), then Close.
func (c *conn) Abort() {
	_ = unix.SetsockoptLinger(c.fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	c.Close()
}

// setEvents registers c for EPOLLIN (in) and EPOLLOUT (out) as asked,
// with one epoll_ctl when that changes anything.
func (b *Backend) setEvents(c *conn, in, out bool) {
	if c.in == in && c.out == out {
		return
	}
	var ev unix.EpollEvent
	ev.Fd = int32(c.fd)
	if in {
		ev.Events |= unix.EPOLLIN | unix.EPOLLRDHUP
	}
	if out {
		ev.Events |= unix.EPOLLOUT
	}
	b.syscalls++
	if unix.EpollCtl(b.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev) == nil {
		c.in, c.out = in, out
	}
}

// Rx returns up to min(len(pkts), Config.RxBatch) records received on any
// connection, reading each connection at most once (one recv(2)) per call,
// and never blocks. It reads only the connections that may have
// something: with more than one, those a non-sleeping epoll_wait(2)
// reports readable, so that an Rx among many idle connections costs one
// system call. pkts[i].Data points into the connection's receive
// buffer and is valid until the next Rx or Close; pkts[i].From is the
// connection's remote address. A record longer than MaxDatagram is
// skipped and counted in RxTruncated. A server also accepts new clients
// here. Like Flush, Rx first writes the bytes earlier Flushes released
// that the socket refused (one send(2) per connection that has such
// bytes, none otherwise); records queued after the last Flush wait for
// the next one.
//
// With Config.FramingRaw, Data is the bytes of one recv(2) (at most
// MaxDatagram a Packet). With Config.Events, each connection's life comes
// as Packets with Event set (see Flush), after the records its peer sent
// before. Rx returns net.ErrClosed after Close; a connection's end is no
// error.
func (b *Backend) Rx(pkts []dgramio.Packet) (int, error) {
	if !b.life.Enter() {
		return 0, dgramio.ErrClosed
	}
	defer b.life.Exit()
	return b.s.Rx(pkts)
}

// Wait sleeps until a connection has data or room for bytes a Flush
// released (the next Rx writes them), a client connects to a server, ctx
// is done (ctx.Err()), or the backend is closed (net.ErrClosed). It
// returns at once while records wait that an earlier Rx decoded and did
// not return (more than its batch), or an event waits to be reported.
// It polls one epoll descriptor that holds the listener and every
// connection.
func (b *Backend) Wait(ctx context.Context) error {
	if !b.life.Enter() {
		return dgramio.ErrClosed
	}
	pending := b.s.Pending()
	b.life.Exit()
	if pending {
		return nil // records an Rx stopped at its batch, or an error
	}
	if !b.life.BeginWait() {
		return dgramio.ErrClosed
	}
	defer b.life.EndWait()
	err := sock.Wait(ctx, b.epfd, b.waker, &b.waitCalls)
	if err == nil && b.lfd >= 0 {
		// Let the next Rx try accept at once: the wake-up may be a client.
		b.listenHot.Store(true)
	}
	return err
}

// Stats returns the counters. Conns is the number of open connections;
// Layers holds TCP_INFO of every connection, open or closed, summed (layer
// "tcp": retransmitted segments and bytes, segments out and in, RTO
// expiries, the largest smoothed RTT of the open ones), and "queue_no_conn".
// Stats holds the poll loop up while it reads: it reads the TCP_INFO of 64
// open connections per call, in turn, and counts the others as they last
// read, so with more than 64 the sums trail by up to Len/64 calls (they
// never go back; a closed connection counts as it ended);
// none of these is a loss: TCP retransmits. Layer "stream" "rx_closed" is
// one: records that arrived and were never delivered because their
// connection failed or the backend closed (see Close). Safe from any goroutine; after Close it
// returns the counters as they were at Close.
func (b *Backend) Stats() dgramio.Stats { return b.life.Stats(b.snapshot) }

func (b *Backend) snapshot() dgramio.Stats {
	s := dgramio.Stats{Kind: dgramio.KindTCP, Mode: b.mode}
	b.s.Fill(&s)
	s.Syscalls = b.syscalls + b.waitCalls.Load()
	s.SockRcvBuf, s.SockSndBuf = b.granted.RcvBuf, b.granted.SndBuf
	ti := b.closedInfo
	ti.RTTMaxUs = 0
	n := b.s.Len()
	for k := range min(n, statsRefresh) {
		c := b.s.Conn((b.infoNext + k) % n).(*conn)
		b.infoReads++
		if t, err := sock.ReadTCPInfo(c.fd); err == nil {
			c.info = t
		}
	}
	if n > 0 {
		b.infoNext = (b.infoNext + statsRefresh) % n
	}
	for i := range n {
		ti.Add(b.s.Conn(i).(*conn).info)
	}
	s.Layers = append(s.Layers, ti.Counters()...)
	s.Layers = append(s.Layers, dgramio.Counter{Layer: "tcp", Name: "queue_no_conn", Value: b.s.Counters().NoConn})
	return s
}

// Close closes every connection and the listener. A Rx, Flush or Wait
// running in another goroutine returns net.ErrClosed; Close waits for it
// to leave first. Records still staged are counted in TxDropped (Flush
// until nothing is staged before Close to deliver them), except one whose
// head the stream already took: that one counts as sent, and the receiver
// counts the cut record. A client then sends a FIN on every connection
// and reads until the server closes too (at most 2 s, and no longer than
// 100 ms after the server's last byte), so that the answers still on the
// way are read rather than reset away; a server reads what has arrived
// and shuts both directions down (a client still sending then gets a
// reset). Either then waits up to 100 ms for what it wrote to be
// acknowledged; the records whose first byte the peer still has not
// acknowledged (SIOCOUTQ) move from TxSent to TxDropped and their
// connection is reset, as is one whose peer was still sending when Close
// read it for the last time (RFC 1122 §4.2.2.13: data pending at CLOSE),
// so that the peer learns its data is lost. Every record received and
// never delivered counts in the loss counter "stream" "rx_closed". On the
// goroutine New pinned, it unpins. Safe to call more than once.
func (b *Backend) Close() error {
	return b.life.Close(b.waker.Wake, func() (dgramio.Stats, error) {
		b.s.Abandon()
		if b.lfd < 0 { // a client; a server's peers decide when they end
			b.s.Linger(closeIdle, closeLinger, b.waitReadable)
		} else {
			// Read what has come while the window still opens for the
			// peer (after SHUT_RD the kernel announces no window).
			b.s.ReadOut()
		}
		b.settle()
		err := b.release()
		return b.snapshot(), err
	})
}

// settle, for Close, ends both directions of every connection
// (shutdown(2) SHUT_RDWR: our FIN after what was written; from then on
// the kernel answers new data with a reset instead of acknowledging what
// nobody will read, and announces no more window) and waits up to
// closeIdle for what was written to be acknowledged or the connection to
// end, so that the stream layer's Close reads all that was acknowledged
// and counts exactly the records the peer never acknowledged.
func (b *Backend) settle() {
	for i := 0; i < b.s.Len(); i++ {
		c := b.s.Conn(i).(*conn)
		b.syscalls++
		if unix.Shutdown(c.fd, unix.SHUT_RDWR) == nil {
			c.shut = true
		}
		c.settled = true
	}
	for deadline := time.Now().Add(closeIdle); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if b.acknowledged() {
			return
		}
	}
}

// acknowledged reports whether every connection has ended or has nothing
// written that the peer has not acknowledged.
func (b *Backend) acknowledged() bool {
	for i := 0; i < b.s.Len(); i++ {
		c := b.s.Conn(i).(*conn)
		if n, ended := c.UnackedRecords(); n > 0 && !ended {
			return false
		}
	}
	return true
}

// statsRefresh bounds the connections whose TCP_INFO one Stats reads
// (one getsockopt each, about a microsecond, while the poll loop waits);
// the others count as their last reading, so that the sums of a larger
// set trail by up to Len/statsRefresh calls and never go back.
const statsRefresh = 64

// tcpClose is the kernel's TCP_CLOSE state (tcp_info.tcpi_state): the
// connection ended (a reset, or both FINs acknowledged and TIME-WAIT left
// to the kernel).
const tcpClose = 7

// waitReadable sleeps in poll(2) until one of conns is readable or d has
// passed (Close's linger; it allocates).
func (b *Backend) waitReadable(conns []stream.Conn, d time.Duration) {
	fds := make([]unix.PollFd, 0, len(conns))
	for _, c := range conns {
		fds = append(fds, unix.PollFd{Fd: int32(c.(*conn).fd), Events: unix.POLLIN})
	}
	ms := max(int(d/time.Millisecond), 1)
	b.syscalls++
	_, _ = unix.Poll(fds, ms)
}
