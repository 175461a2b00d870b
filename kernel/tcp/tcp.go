// Package tcp is the kind "tcp": the kernel's TCP carrying the same
// messages as the datagram kinds, each as one u16 length-prefixed record
// (package tcp at the module root holds the framing; the userspace TCP
// kinds use the same). Sockets are tuned the same way on both ends (see
// sock.TuneTCP): TCP_NODELAY unless Config.Nagle, TCP_QUICKACK, SO_RCVBUF
// and SO_SNDBUF of Config.SockBuf, SO_BUSY_POLL, non-blocking. It needs no
// privileges.
//
// There is no loss on this path, only back-pressure: when a socket's send
// buffer is full (EAGAIN) the bytes wait in a per-connection staging buffer
// of Config.TxQueue records, and when a record does not fit there Queue
// returns false and the caller keeps it. Bytes a Flush released that the
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
package tcp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/fdwait"
	"github.com/dgramio/dgramio/kernel/sock"
	rec "github.com/dgramio/dgramio/tcp/record"
)

// acceptEvery bounds how often a server with connections tries accept4 in
// Rx and Flush when Wait has not seen the listener ready: a new client
// waits at most this long, and a busy loop pays one accept4 per interval.
const acceptEvery = time.Millisecond

// conn is one connection.
type conn struct {
	fd     int
	remote netip.AddrPort
	stage  *rec.Staging
	dec    *rec.Decoder
	// released is how many bytes at the front of stage.Pending a Flush has
	// released and the socket has not taken yet (its send buffer was
	// full): every Rx and Flush writes them as the socket makes room.
	// Bytes staged after them wait for the next Flush.
	released int
	// out is true while the connection is registered for EPOLLOUT (it has
	// released bytes the socket refused), so that Wait wakes when they can
	// go.
	out bool
	// gone is set when the peer closed or reset; records already read are
	// still delivered, then the connection is removed.
	gone    bool
	goneErr *core.PeerError
	// sentPayload is the part of stage.TakenPayload already in TxBytes.
	sentPayload uint64
}

// Backend is the tcp kind. Create it with New; see core.Backend for the
// method contracts and the threading rules.
//
// Memory: each connection has a staging buffer of Config.TxQueue records
// of up to Config.MaxDatagram bytes and a receive buffer of
// Config.RxBatch such records (at least 64 KiB). Rx hands out records as
// slices of a connection's receive buffer, valid until the next Rx or
// Close. Nothing is allocated per message.
type Backend struct {
	cfg     core.Config
	lfd     int // listener, -1 on a client
	epfd    int // listener and connections, for Wait
	waker   *fdwait.Waker
	granted sock.Granted
	mode    string
	local   netip.AddrPort
	thread  cpu.Thread // what New did to pin its thread to Config.CPUs[0]
	life    sock.Life

	conns      []*conn
	byAddr     map[netip.AddrPort]*conn
	rr         int // connection Rx starts with, for fairness
	lastAccept time.Time
	listenHot  atomic.Bool // Wait saw the listener ready
	pending    []error     // *core.PeerError not yet returned

	st         core.Stats
	waitCalls  atomic.Uint64
	noConn     uint64
	closedInfo sock.TCPCounters // TCP_INFO of closed connections

	// The padding keeps the fields of the next object on the heap (another
	// queue's, written by another core) off this one's last cache line.
	_ [64]byte
}

var _ core.Backend = (*Backend)(nil)

// New opens a tcp backend for cfg. It applies cfg.WithDefaults and
// validates cfg before any system call; cfg.Kind may be "tcp" or empty.
//
// A client connects to every one of Config.Dests at Config.Port, all at
// once, and fails unless every connection is up within
// Config.ConnectTimeout (errors wrap the errno: ECONNREFUSED, ETIMEDOUT).
// Queue then sends each record to all of them. A server listens on
// Config.LocalIP:Config.Port (all addresses when LocalIP is unset; with
// SO_REUSEADDR) and accepts clients inside Rx and Flush; its Queue sends to
// every connected client and QueueTo to one (the From of a received
// Packet). Errors are a *core.ConfigError for a bad field, a
// *core.PrivilegeError for a port below 1024, or the wrapped errno.
//
// The sockets belong to the network namespace of the calling thread. With
// Config.CPUs set, New locks the calling goroutine to its thread and pins
// it to CPUs[0] (call New on the goroutine that will poll), unless the
// caller pinned it there already (see cpu.Claim); Close undoes what New
// did when called on that goroutine, and leaves the thread pinned
// otherwise.
func New(cfg core.Config) (core.Backend, error) {
	return openQueue(cfg, -1, sock.Granted{}, "")
}

// openQueue opens a backend: a server on the listener lfd with what the
// kernel granted it (a queue of a group, which hands lfd over: it is
// closed on error), or one that listens or connects itself when lfd is
// -1. note ends Stats.Mode.
func openQueue(cfg core.Config, lfd int, granted sock.Granted, note string) (core.Backend, error) {
	cfg, err := sock.Prepare(cfg, core.KindTCP)
	if err != nil {
		if lfd >= 0 {
			unix.Close(lfd)
		}
		return nil, err
	}
	b := &Backend{cfg: cfg, lfd: lfd, epfd: -1, byAddr: make(map[netip.AddrPort]*conn)}
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
	case cfg.Role == core.RoleServer:
		err = b.listen()
	default:
		err = b.connectAll()
	}
	if err != nil {
		return nil, err
	}
	b.mode = "send/recv records, "
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
	for _, c := range b.conns {
		if err := unix.Close(c.fd); err != nil {
			errs = append(errs, fmt.Errorf("close connection %s: %w", c.remote, err))
		}
	}
	b.conns = nil
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
	type attempt struct {
		fd  int
		dst netip.AddrPort
	}
	var atts []attempt
	defer func() {
		for _, a := range atts {
			if a.fd >= 0 {
				unix.Close(a.fd)
			}
		}
	}()
	for i, d := range b.cfg.Dests {
		dst := netip.AddrPortFrom(d, b.cfg.Port)
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
		if err != nil {
			return fmt.Errorf("socket tcp: %w", err)
		}
		atts = append(atts, attempt{fd, dst})
		g, err := sock.TuneTCP(fd, b.cfg)
		if err != nil {
			return err
		}
		if i == 0 {
			b.granted = g
		}
		if b.cfg.LocalIP.IsValid() || b.cfg.LocalPort != 0 {
			if b.cfg.LocalPort != 0 {
				if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
					return fmt.Errorf("setsockopt SO_REUSEADDR: %w", err)
				}
			}
			if err := sock.Bind(fd, sock.BindAddr(b.cfg.LocalIP, b.cfg.LocalPort)); err != nil {
				return err
			}
		}
		if err := unix.Connect(fd, sock.Sockaddr(dst)); err != nil && err != unix.EINPROGRESS {
			return fmt.Errorf("connect %s: %w", dst, err)
		}
	}
	// Wait for every connect to finish.
	deadline := time.Now().Add(b.cfg.ConnectTimeout)
	waiting := make([]bool, len(atts))
	left := len(atts)
	for i := range waiting {
		waiting[i] = true
	}
	fds := make([]unix.PollFd, 0, len(atts))
	for left > 0 {
		fds = fds[:0]
		var which []int
		for i, a := range atts {
			if waiting[i] {
				fds = append(fds, unix.PollFd{Fd: int32(a.fd), Events: unix.POLLOUT})
				which = append(which, i)
			}
		}
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms <= 0 {
			for i, a := range atts {
				if waiting[i] {
					return fmt.Errorf("connect %s: no answer within %v: %w", a.dst, b.cfg.ConnectTimeout, unix.ETIMEDOUT)
				}
			}
		}
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll: %w", err)
		}
		if n == 0 {
			continue
		}
		for k, pfd := range fds {
			if pfd.Revents == 0 {
				continue
			}
			i := which[k]
			a := atts[i]
			soerr, err := unix.GetsockoptInt(a.fd, unix.SOL_SOCKET, unix.SO_ERROR)
			if err != nil {
				return fmt.Errorf("getsockopt SO_ERROR: %w", err)
			}
			if soerr != 0 {
				return fmt.Errorf("connect %s: %w", a.dst, unix.Errno(soerr))
			}
			waiting[i] = false
			left--
		}
	}
	for i := range atts {
		if err := b.addConn(atts[i].fd, atts[i].dst); err != nil {
			return err
		}
		atts[i].fd = -1 // the backend owns it now
	}
	if len(b.conns) > 0 {
		var err error
		b.local, err = sock.LocalAddr(b.conns[0].fd)
		b.granted.Local = b.local
		return err
	}
	return nil
}

// addConn takes a connected socket into the backend.
func (b *Backend) addConn(fd int, remote netip.AddrPort) error {
	if err := b.epollAdd(fd, unix.EPOLLIN|unix.EPOLLRDHUP); err != nil {
		return err
	}
	c := &conn{
		fd:     fd,
		remote: remote,
		stage:  rec.NewStaging(b.cfg.TxQueue * (rec.HeaderLen + b.cfg.MaxDatagram)),
		dec:    rec.NewDecoder(b.cfg.MaxDatagram, max(b.cfg.RxBatch*(rec.HeaderLen+b.cfg.MaxDatagram), 64<<10)),
	}
	b.conns = append(b.conns, c)
	b.byAddr[remote] = c
	return nil
}

// LocalAddr is the listener's address on a server, the first connection's
// local address on a client.
func (b *Backend) LocalAddr() netip.AddrPort { return b.local }

// maybeAccept accepts waiting clients on a server, at most every
// acceptEvery unless Wait saw the listener ready or there is no client.
func (b *Backend) maybeAccept() {
	if b.lfd < 0 {
		return
	}
	if len(b.conns) > 0 && !b.listenHot.Load() {
		now := time.Now()
		if now.Sub(b.lastAccept) < acceptEvery {
			return
		}
		b.lastAccept = now
	}
	b.listenHot.Store(false)
	for {
		nfd, sa, err := unix.Accept4(b.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		b.st.Syscalls++
		if err == unix.EINTR || err == unix.ECONNABORTED {
			continue
		}
		if err != nil {
			// EAGAIN: nobody waiting. EMFILE and the like: try later.
			return
		}
		in, ok := sa.(*unix.SockaddrInet4)
		if !ok {
			unix.Close(nfd)
			continue
		}
		remote := netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port))
		if _, err := sock.TuneTCP(nfd, b.cfg); err != nil {
			unix.Close(nfd)
			continue
		}
		if err := b.addConn(nfd, remote); err != nil {
			unix.Close(nfd)
			continue
		}
		b.st.Accepts++
	}
}

// Queue stages payload as one record for every open connection: every
// connected client on a server, every destination on a client. It returns false, and
// stages nothing anywhere, when any connection's staging buffer lacks room
// for the record (TxBackpressure, counted once per connection: Flush and
// try again), the payload exceeds MaxDatagram (TxOversize), there is no
// connection (layer "tcp" counter "queue_no_conn"), or the backend is
// closed.
func (b *Backend) Queue(payload []byte) bool {
	if !b.life.Enter() {
		return false
	}
	defer b.life.Exit()
	var n uint64
	fits := true
	for _, c := range b.conns {
		if !c.gone {
			n++
			fits = fits && c.stage.Fits(len(payload))
		}
	}
	switch {
	case n == 0:
		b.noConn++
		return false
	case len(payload) > b.cfg.MaxDatagram:
		b.st.TxOversize += n
		return false
	case !fits:
		b.st.TxBackpressure += n
		return false
	}
	for _, c := range b.conns {
		if !c.gone {
			_ = c.stage.Put(payload) // Fits said yes
		}
	}
	b.st.TxQueued += n
	return true
}

// QueueTo stages payload as one record for the connection whose remote
// address is to. It returns false as Queue does; a peer that is not (or no
// longer) connected counts as "queue_no_conn".
func (b *Backend) QueueTo(payload []byte, to netip.AddrPort) bool {
	if !b.life.Enter() {
		return false
	}
	defer b.life.Exit()
	c := b.byAddr[to]
	if c == nil || c.gone {
		b.noConn++
		return false
	}
	if len(payload) > b.cfg.MaxDatagram {
		b.st.TxOversize++
		return false
	}
	if err := c.stage.Put(payload); err != nil {
		b.st.TxBackpressure++
		return false
	}
	b.st.TxQueued++
	return true
}

// Flush releases each connection's staged records to the stream and
// writes them with one send(2) per connection. Bytes the socket does not
// take (its send buffer is full) stay staged, released: every later Rx and
// Flush writes them as the socket makes room (Wait wakes for that), so a
// caller whose Queue is refused need not Flush for them to go; nothing is
// dropped for that. A server also accepts new clients here.
//
// When a peer closed or reset its connection, the connection is removed,
// the records still staged for it are counted in TxDropped, and Flush (or
// Rx, whichever comes first) returns a *core.PeerError for it, once. What
// to do then: a server goes on serving its other clients (the error is for
// the log); a client has lost that destination for good and Queue refuses
// once it has none left: Close it and make a new one to reconnect. Flush
// returns net.ErrClosed after Close.
func (b *Backend) Flush() error {
	if !b.life.Enter() {
		return core.ErrClosed
	}
	defer b.life.Exit()
	b.maybeAccept()
	for _, c := range b.conns {
		if c.gone {
			continue
		}
		c.released = c.stage.Len()
		b.send(c)
	}
	b.reap()
	return b.popErr()
}

// send writes c's released bytes, as many as the socket takes, and keeps
// c registered for EPOLLOUT while some are left. It makes no system call
// when nothing is released.
func (b *Backend) send(c *conn) {
	if c.gone || c.released == 0 {
		return
	}
	for c.released > 0 {
		p := c.stage.Pending()[:c.released]
		n, errno := sock.Send(c.fd, p, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
		b.st.Syscalls++
		switch errno {
		case 0:
			c.released -= n
			b.st.TxSent += uint64(c.stage.Consume(n))
			taken := c.stage.TakenPayload()
			b.st.TxBytes += taken - c.sentPayload
			c.sentPayload = taken
			if n < len(p) {
				b.wantOut(c, true) // the socket buffer is full
				return
			}
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			b.wantOut(c, true)
			return
		default:
			c.released = 0
			b.lose(c, errno)
			return
		}
	}
	b.wantOut(c, false)
}

// wantOut registers or unregisters c for EPOLLOUT, so that Wait also wakes
// when back-pressured bytes can go.
func (b *Backend) wantOut(c *conn, on bool) {
	if c.out == on {
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(c.fd)}
	if on {
		ev.Events |= unix.EPOLLOUT
	}
	b.st.Syscalls++
	if unix.EpollCtl(b.epfd, unix.EPOLL_CTL_MOD, c.fd, &ev) == nil {
		c.out = on
	}
}

// lose marks c gone with the errno of a failed send or recv (0: the peer
// closed in order).
func (b *Backend) lose(c *conn, errno unix.Errno) {
	if c.gone {
		return
	}
	c.gone = true
	pe := &core.PeerError{Peer: c.remote}
	switch errno {
	case 0:
		b.st.PeerCloses++
	case unix.EPIPE:
		b.st.PeerCloses++
		pe.Err = errno
	default:
		// ECONNRESET, ETIMEDOUT (retransmissions gave up), EHOSTUNREACH...
		b.st.Resets++
		pe.Reset = true
		pe.Err = errno
	}
	c.goneErr = pe
}

// reap removes the connections that are gone and have nothing left to
// deliver, queueing their PeerErrors.
func (b *Backend) reap() {
	k := 0
	for _, c := range b.conns {
		if !c.gone || c.dec.Complete() {
			b.conns[k] = c
			k++
			continue
		}
		if c.dec.Buffered() > 0 {
			b.st.RxMalformed++ // a record cut off by the close
		}
		b.st.TxDropped += uint64(c.stage.Records())
		if ti, err := sock.ReadTCPInfo(c.fd); err == nil {
			b.closedInfo.Add(ti)
		}
		unix.Close(c.fd) // also leaves the epoll set
		delete(b.byAddr, c.remote)
		b.pending = append(b.pending, c.goneErr)
	}
	for i := k; i < len(b.conns); i++ {
		b.conns[i] = nil
	}
	b.conns = b.conns[:k]
}

func (b *Backend) popErr() error {
	if len(b.pending) == 0 {
		return nil
	}
	err := b.pending[0]
	copy(b.pending, b.pending[1:])
	b.pending[len(b.pending)-1] = nil
	b.pending = b.pending[:len(b.pending)-1]
	return err
}

// Rx returns up to min(len(pkts), Config.RxBatch) records received on any
// connection, reading each connection at most once (one recv(2)) per call,
// and never blocks. pkts[i].Data points into the connection's receive
// buffer and is valid until the next Rx or Close; pkts[i].From is the
// connection's remote address. A record longer than MaxDatagram is
// skipped and counted in RxTruncated. A server also accepts new clients
// here. Like Flush, Rx first writes the bytes earlier Flushes released
// that the socket refused (one send(2) per connection that has such
// bytes, none otherwise); records queued after the last Flush wait for
// the next one.
//
// A peer that closed or reset its connection is reported once by a
// *core.PeerError from Rx or Flush (see Flush for what to do), after the
// records it sent before are delivered. Rx returns net.ErrClosed after
// Close.
func (b *Backend) Rx(pkts []core.Packet) (int, error) {
	if !b.life.Enter() {
		return 0, core.ErrClosed
	}
	defer b.life.Exit()
	b.maybeAccept()
	want := min(len(pkts), b.cfg.RxBatch)
	k := 0
	nc := len(b.conns)
	for _, c := range b.conns {
		b.send(c) // what earlier Flushes released, if the socket has room
		c.dec.Compact()
		if core.Debug {
			core.Poison(c.dec.Tail())
		}
	}
	for i := 0; i < nc && k < want; i++ {
		c := b.conns[(b.rr+i)%nc]
		k = b.rxConn(c, pkts, k, want)
	}
	if nc > 0 {
		b.rr = (b.rr + 1) % nc
	}
	b.st.RxDelivered += uint64(k)
	b.reap()
	if k > 0 {
		return k, nil
	}
	return 0, b.popErr()
}

// rxConn delivers c's records into pkts[k:want], reading the socket once
// when its buffered records run out, and returns the new k.
func (b *Backend) rxConn(c *conn, pkts []core.Packet, k, want int) int {
	read := false
	for k < want {
		r, err := c.dec.Next()
		if err == rec.ErrOversize {
			b.st.RxTruncated++
			continue
		}
		if r != nil {
			pkts[k] = core.Packet{Data: r, From: c.remote}
			b.st.RxBytes += uint64(len(r))
			k++
			continue
		}
		if read || c.gone {
			break
		}
		tail := c.dec.Tail()
		if len(tail) == 0 {
			break // full of records handed out in this call
		}
		n, errno := sock.Recv(c.fd, tail, unix.MSG_DONTWAIT)
		b.st.Syscalls++
		read = true
		switch {
		case errno == unix.EINTR:
			read = false
		case errno == unix.EAGAIN:
		case errno != 0:
			b.lose(c, errno)
		case n == 0:
			b.lose(c, 0)
		default:
			c.dec.Commit(n)
		}
	}
	return k
}

// Wait sleeps until a connection has data or room for bytes a Flush
// released (the next Rx writes them), a client connects to a server, ctx
// is done (ctx.Err()), or the backend is closed (net.ErrClosed). It polls one epoll descriptor that
// holds the listener and every connection.
func (b *Backend) Wait(ctx context.Context) error {
	if !b.life.BeginWait() {
		return core.ErrClosed
	}
	defer b.life.EndWait()
	var calls uint64
	err := fdwait.Wait(ctx, b.epfd, b.waker, &calls)
	b.waitCalls.Add(calls)
	if errors.Is(err, fdwait.ErrWoken) {
		return core.ErrClosed
	}
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
// None is a loss: TCP retransmits. Safe from any goroutine; after Close it
// returns the counters as they were at Close.
func (b *Backend) Stats() core.Stats { return b.life.Stats(b.snapshot) }

func (b *Backend) snapshot() core.Stats {
	s := b.st
	s.Kind, s.Mode = core.KindTCP, b.mode
	s.Syscalls += b.waitCalls.Load()
	s.SockRcvBuf, s.SockSndBuf = b.granted.RcvBuf, b.granted.SndBuf
	s.Conns = uint64(len(b.conns))
	ti := b.closedInfo
	ti.RTTMaxUs = 0
	for _, c := range b.conns {
		if t, err := sock.ReadTCPInfo(c.fd); err == nil {
			ti.Add(t)
		}
	}
	s.Layers = append(ti.Counters(), core.Counter{Layer: "tcp", Name: "queue_no_conn", Value: b.noConn})
	return s
}

// Close closes every connection and the listener. A Rx, Flush or Wait
// running in another goroutine returns net.ErrClosed; Close waits for it
// to leave first. Records still staged are counted in TxDropped (Flush
// until nothing is staged before Close to deliver them), except one whose
// head the stream already took: that one counts as sent, and the receiver
// counts the cut record. On the goroutine
// New pinned, it unpins. Safe to call more than once.
func (b *Backend) Close() error {
	return b.life.Close(b.waker.Wake, func() (core.Stats, error) {
		for _, c := range b.conns {
			n := uint64(c.stage.Records())
			if c.stage.Started() {
				// Its head is in the stream: the receiver sees a cut
				// record and counts it (RxMalformed). Counting it here
				// too would count one message twice.
				n--
				b.st.TxSent++
			}
			b.st.TxDropped += n
			c.stage.Reset()
		}
		final := b.snapshot()
		return final, b.release()
	})
}
