// Package udp is the kind "udp": a kernel UDP socket driven with
// sendmmsg(2) (Linux >= 3.0) and recvmmsg(2) (Linux >= 2.6.33), a batch of
// datagrams per system call. It is the baseline every other kind is measured
// against: it needs no privileges, no special hardware, and keeps every
// kernel facility (routing, firewall, tcpdump, counters) working.
//
// The socket is set up by package internal/sock exactly as kind uring sets up
// its own, so the two differ only in how they cross into the kernel.
//
// Root imports this package under an alias (it shares its name with the
// raw datagram package udp/).
//
// This package is one of dgramio's backends, reached through dgramio.New
// and dgramio.NewGroup; its exported names serve the module's other
// packages and are not a stable API of their own.
package udp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/fdwait"
	"github.com/dgramio/dgramio/internal/kindcfg"
	"github.com/dgramio/dgramio/internal/poison"
	"github.com/dgramio/dgramio/internal/sock"
)

// Backend is the udp kind. Create it with New; see dgramio.Backend for the
// method contracts and the threading rules.
//
// Memory: Queue copies each message once into one of Config.TxQueue
// preallocated slots of Config.MaxDatagram bytes; with several destinations
// the batch holds one entry per destination, all pointing at that one copy.
// Rx receives into Config.RxBatch preallocated buffers of MaxDatagram+1
// bytes, so a datagram longer than MaxDatagram is recognised (and dropped,
// never delivered cut). Nothing is allocated per message.
type Backend struct {
	cfg     dgramio.Config
	fd      int
	waker   *fdwait.Waker
	granted sock.Granted
	mode    string
	thread  cpu.Thread // what New did to pin its thread to Config.CPUs[0]
	life    sock.Life

	// Transmit: msgs[:nmsg] are queued; slot i of txBuf holds message i's
	// payload (slots[:nslot] are used).
	txBuf   []byte
	txIov   []unix.Iovec
	txMsgs  []unix.Mmsghdr
	txNames []sock.Name // per entry, for QueueTo
	dests   []sock.Name // Config.Dests, for fan-out
	destLen uint32      // msg_namelen of dests (one family)
	nmsg    int
	nslot   int

	// Receive.
	rxBuf   []byte
	rxIov   []unix.Iovec
	rxMsgs  []unix.Mmsghdr
	rxNames []sock.Name
	stride  int // MaxDatagram+1

	// Counters, written by the poll loop under guard (waitCalls by Wait,
	// outside it).
	st        dgramio.Stats
	waitCalls atomic.Uint64
	sendErrs  [3]uint64 // EAGAIN/ENOBUFS, ECONNREFUSED, other
	rxRefused uint64    // ICMP errors reported on receive
	noDest    uint64    // Queue on a server with no Dests
	badDest   uint64    // QueueTo an address not of the socket's family, or port 0
	unread    uint64    // datagrams left in the socket's receive queue at Close
	v6        bool      // the socket is AF_INET6

	// Connected reply sockets (nil without). With more than directMax
	// open, Rx reads the sockets epoll says are readable: ready[rhead:]
	// are their indices (0 the server socket, i+1 reply slot i); the
	// epoll instance is Wait's whenever there is a table. txTo[j] is message j's
	// socket (0 the server socket, i+1 slot i of generation txGen[j]);
	// mixed is set when a queued message goes to a reply socket.
	rep     *sock.Replies
	ep      int
	evs     []unix.EpollEvent
	ready   []int32
	rhead   int
	txTo    []int32
	txGen   []uint16
	txSend  []unix.Mmsghdr
	mixed   bool
	rxCalls uint64
	// With few reply sockets Rx reads them in turn, without epoll: polled
	// is the server socket (0) and the open slots (i+1), rebuilt when the
	// table changes (polledAt); next is where the next Rx starts.
	polled   []int32
	polledAt uint64
	next     int

	// The padding keeps the fields of the next object on the heap (another
	// queue's, written by another core) off this one's last cache line.
	_ [64]byte
}

var _ dgramio.Backend = (*Backend)(nil)

// New opens a udp backend for cfg. It applies cfg.WithDefaults and
// validates cfg before any system call; cfg.Kind may be "udp" or empty.
// Errors are a *dgramio.ConfigError for a bad field, a *dgramio.PrivilegeError
// (a port below 1024), or the wrapped errno of the socket set-up.
//
// A client (Config.Role RoleClient) sends to Config.Dests (address and port):
// with one destination the socket is connected to it and receives only from
// it; with several it is not connected, Queue sends each message to every
// destination, and Rx takes datagrams from anyone. A server binds
// Config.LocalIP:Config.Port (all addresses when LocalIP is unset) and
// answers with QueueTo(payload, pkt.From); its Queue sends to Config.Dests
// if it has any. A server on one address gives the peers that keep
// sending connected reply sockets of their own (Config.ReplySockets,
// sock.Replies): Rx reads them too, QueueTo to such a peer goes out of
// its socket, and Close closes them.
//
// The socket belongs to the network namespace of the calling thread. With
// Config.CPUs set, New locks the calling goroutine to its thread and pins
// it to CPUs[0] (call New on the goroutine that will poll), unless the
// caller pinned it there already (see cpu.Claim); Close undoes what New
// did when called on that goroutine, and leaves the thread pinned
// otherwise.
func New(cfg dgramio.Config) (dgramio.Backend, error) {
	cfg, err := kindcfg.PrepareOne(cfg, dgramio.KindUDP)
	if err != nil {
		return nil, err
	}
	th, err := cpu.Claim(cfg.CPUs, false)
	if err != nil {
		return nil, err
	}
	fd, g, err := sock.OpenUDP(cfg)
	if err != nil {
		th.Release()
		return nil, err
	}
	return newBackend(cfg, fd, g, th)
}

// newBackend wraps the socket fd, which it owns from now on (it closes fd
// and releases th on error).
func newBackend(cfg dgramio.Config, fd int, g sock.Granted, th cpu.Thread) (*Backend, error) {
	w, err := fdwait.NewWaker()
	if err != nil {
		unix.Close(fd)
		th.Release()
		return nil, err
	}
	b := &Backend{cfg: cfg, fd: fd, waker: w, granted: g, thread: th, v6: cfg.IPv6(), ep: -1}
	b.mode = "sendmmsg/recvmmsg, " + g.Mode()
	if b.rep = sock.RepliesFor(cfg, fd, g.Local); b.rep != nil {
		if err := b.openEpoll(); err != nil {
			b.rep.Close()
			unix.Close(fd)
			w.Close()
			th.Release()
			return nil, err
		}
		b.mode += ", " + b.rep.Mode()
	}
	b.alloc()
	return b, nil
}

// openEpoll makes the epoll instance that says which of the server socket
// and its reply sockets are readable, with the server socket in it.
func (b *Backend) openEpoll() error {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll_create1: %w", err)
	}
	b.ep = ep
	if err := b.epollAdd(b.fd, 0); err != nil {
		unix.Close(ep)
		return err
	}
	n := len(b.rep.Slots) + 1
	b.evs = make([]unix.EpollEvent, n)
	b.ready = make([]int32, 0, 2*n)
	return nil
}

func (b *Backend) epollAdd(fd int, idx int32) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: idx}
	if err := unix.EpollCtl(b.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl add: %w", err)
	}
	return nil
}

// alloc builds the message arrays once. They live on the Go heap, whose
// objects do not move, and point at each other there; the kernel reads
// them only during sendmmsg/recvmmsg.
func (b *Backend) alloc() {
	c := &b.cfg
	// One entry per destination and message (a server without Dests
	// answers one at a time with QueueTo).
	entries := c.TxQueue * max(len(c.Dests), 1)
	b.txBuf = make([]byte, c.TxQueue*c.MaxDatagram)
	b.txIov = make([]unix.Iovec, entries)
	b.txMsgs = make([]unix.Mmsghdr, entries)
	b.txNames = make([]sock.Name, entries)
	if b.rep != nil {
		b.txTo = make([]int32, entries)
		b.txGen = make([]uint16, entries)
		b.txSend = make([]unix.Mmsghdr, entries)
	}
	for i := range b.txMsgs {
		b.txMsgs[i].Hdr.Iov = &b.txIov[i]
		b.txMsgs[i].Hdr.SetIovlen(1)
	}
	b.dests = make([]sock.Name, len(c.Dests))
	for i, d := range c.Dests {
		b.destLen = sock.PutRaw(&b.dests[i], d)
	}

	b.stride = c.MaxDatagram + 1
	b.rxBuf = make([]byte, c.RxBatch*b.stride)
	b.rxIov = make([]unix.Iovec, c.RxBatch)
	b.rxMsgs = make([]unix.Mmsghdr, c.RxBatch)
	b.rxNames = make([]sock.Name, c.RxBatch)
	for i := range b.rxMsgs {
		b.rxIov[i].Base = &b.rxBuf[i*b.stride]
		b.rxIov[i].SetLen(b.stride)
		b.rxMsgs[i].Hdr.Iov = &b.rxIov[i]
		b.rxMsgs[i].Hdr.SetIovlen(1)
		b.rxMsgs[i].Hdr.Name = sock.NamePtr(&b.rxNames[i])
	}
}

// LocalAddr is the address and port the socket is bound to (a server's
// port, a client's ephemeral port).
func (b *Backend) LocalAddr() netip.AddrPort { return b.granted.Local }

// Queue copies payload into a send slot for every destination in
// Config.Dests (the connected peer of a one-destination client). It returns
// nil, or queues nothing and returns dgramio.ErrBackPressure when the slots
// are full (TxBackpressure), dgramio.ErrTooLarge when the payload exceeds
// MaxDatagram (TxOversize), dgramio.ErrClosed after Close, or dgramio.ErrNoRoute
// when a server has no Dests to send to (counted as layer "udp" counter
// "queue_no_dest"; answer with QueueTo instead).
func (b *Backend) Queue(payload []byte) error {
	if !b.life.Enter() {
		return dgramio.ErrClosed
	}
	defer b.life.Exit()
	if len(b.dests) == 0 {
		b.noDest++
		return dgramio.ErrNoRoute
	}
	per := len(b.dests) // one when the socket is connected to it
	slot, err := b.take(payload, per)
	if err != nil {
		return err
	}
	for i := 0; i < per; i++ {
		m := &b.txMsgs[b.nmsg]
		b.txIov[b.nmsg].Base = &b.txBuf[slot]
		b.txIov[b.nmsg].SetLen(len(payload))
		if b.granted.Connected {
			m.Hdr.Name, m.Hdr.Namelen = nil, 0
		} else {
			m.Hdr.Name, m.Hdr.Namelen = sock.NamePtr(&b.dests[i]), b.destLen
		}
		b.nmsg++
	}
	b.st.TxQueued += uint64(per)
	return nil
}

// take checks room for one payload sent to per destinations and copies it
// into the next slot, returning the slot's offset in txBuf.
func (b *Backend) take(payload []byte, per int) (int, error) {
	if len(payload) > b.cfg.MaxDatagram {
		b.st.TxOversize += uint64(per)
		return 0, dgramio.ErrTooLarge
	}
	if b.nslot == b.cfg.TxQueue || b.nmsg+per > len(b.txMsgs) {
		b.st.TxBackpressure += uint64(per)
		return 0, dgramio.ErrBackPressure
	}
	off := b.nslot * b.cfg.MaxDatagram
	copy(b.txBuf[off:], payload)
	b.nslot++
	return off, nil
}

// QueueTo copies payload into a send slot addressed to to, the From of a
// received Packet (an IPv4-mapped address is taken as IPv4). It returns
// what Queue does, and dgramio.ErrNoRoute for a to that is not an address of
// the socket's family with a port (layer "udp" counter "queue_bad_dest").
func (b *Backend) QueueTo(payload []byte, to netip.AddrPort) error {
	if !b.life.Enter() {
		return dgramio.ErrClosed
	}
	defer b.life.Exit()
	to = dgramio.Unmap(to)
	if !sock.Sendable(to, b.v6) {
		b.badDest++
		return dgramio.ErrNoRoute
	}
	slot, err := b.take(payload, 1)
	if err != nil {
		return err
	}
	m := &b.txMsgs[b.nmsg]
	b.txIov[b.nmsg].Base = &b.txBuf[slot]
	b.txIov[b.nmsg].SetLen(len(payload))
	if b.granted.Connected && to == b.cfg.Dests[0] {
		m.Hdr.Name, m.Hdr.Namelen = nil, 0
	} else {
		m.Hdr.Name, m.Hdr.Namelen = sock.NamePtr(&b.txNames[b.nmsg]), sock.PutRaw(&b.txNames[b.nmsg], to)
	}
	if b.rep != nil {
		b.txTo[b.nmsg] = 0
		if i := b.rep.Lookup(to); i >= 0 {
			// Its connected socket: no name, no route lookup.
			b.txTo[b.nmsg], b.txGen[b.nmsg] = int32(i+1), b.rep.Slots[i].Gen
			m.Hdr.Name, m.Hdr.Namelen = nil, 0
			b.mixed = true
		}
	}
	b.nmsg++
	b.st.TxQueued++
	return nil
}

// Flush sends everything queued with sendmmsg, Config.TxBatch datagrams per
// call, retrying on EINTR. When the kernel refuses a datagram (sendmmsg
// reports the error of the first one it could not send: a full socket
// buffer, an ICMP port unreachable on a connected socket), that datagram is
// counted in TxDropped and Flush goes on with the next, rather than losing
// the whole batch. It returns an error only when the backend is closed
// (net.ErrClosed).
func (b *Backend) Flush() error {
	if !b.life.Enter() {
		return dgramio.ErrClosed
	}
	defer b.life.Exit()
	if b.mixed {
		b.flushMixed()
	} else {
		b.send(b.fd, b.txMsgs[:b.nmsg])
	}
	b.nmsg, b.nslot, b.mixed = 0, 0, false
	return nil
}

// send sends msgs on fd, TxBatch per sendmmsg, counting each refused
// datagram and going on with the next.
func (b *Backend) send(fd int, msgs []unix.Mmsghdr) {
	off := 0
	for off < len(msgs) {
		n := min(len(msgs)-off, b.cfg.TxBatch)
		sent, errno := sock.Sendmmsg(fd, msgs[off:off+n], 0)
		b.st.Syscalls++
		switch errno {
		case 0:
		case unix.EINTR:
			continue
		default:
			b.countSendErr(errno)
			b.st.TxDropped++
			off++
			continue
		}
		for i := off; i < off+sent; i++ {
			b.st.TxBytes += uint64(msgs[i].Len)
		}
		b.st.TxSent += uint64(sent)
		off += sent
	}
}

// flushMixed sends the queued messages of each socket together (the
// server socket's and each reply socket's, in queue order within each),
// one sendmmsg per socket and TxBatch. A message for a reply socket that
// Rx has closed since goes out of the server socket, with its address.
func (b *Backend) flushMixed() {
	for j := 0; j < b.nmsg; j++ {
		if t := b.txTo[j]; t > 0 {
			if s := &b.rep.Slots[t-1]; s.Fd < 0 || s.Closing || s.Gen != b.txGen[j] {
				b.txTo[j] = 0
				b.txMsgs[j].Hdr.Name, b.txMsgs[j].Hdr.Namelen = sock.NamePtr(&b.txNames[j]), b.nameLen()
			}
		}
	}
	for start := 0; start < b.nmsg; start++ {
		t := b.txTo[start]
		if t < 0 {
			continue
		}
		n := 0
		for j := start; j < b.nmsg; j++ {
			if b.txTo[j] == t {
				b.txSend[n] = b.txMsgs[j]
				b.txTo[j] = -1
				n++
			}
		}
		fd := b.fd
		if t > 0 {
			fd = b.rep.Slots[t-1].Fd
		}
		sent := b.st.TxSent
		b.send(fd, b.txSend[:n])
		if t > 0 {
			b.rep.Tx += b.st.TxSent - sent
		}
	}
}

// nameLen is the msg_namelen of the socket's family.
func (b *Backend) nameLen() uint32 {
	if b.v6 {
		return unix.SizeofSockaddrInet6
	}
	return unix.SizeofSockaddrInet4
}

func (b *Backend) countSendErr(e unix.Errno) {
	switch e {
	case unix.EAGAIN, unix.ENOBUFS:
		b.sendErrs[0]++
	case unix.ECONNREFUSED:
		b.sendErrs[1]++
	default:
		b.sendErrs[2]++
	}
}

// Rx receives up to min(len(pkts), Config.RxBatch) datagrams with one
// recvmmsg and never blocks. pkts[i].Data points into the backend's receive
// buffers and is valid until the next Rx or Close; pkts[i].From is the
// sender. A datagram longer than MaxDatagram is counted in RxTruncated and
// not delivered, so Rx may return 0 even though it received something. An
// ICMP error queued on the socket (a connected client whose peer is not
// listening) is counted (layer "udp" counter "rx_icmp_refused") and not
// returned. The error is net.ErrClosed after Close, or a failed recvmmsg.
func (b *Backend) Rx(pkts []dgramio.Packet) (int, error) {
	if !b.life.Enter() {
		return 0, dgramio.ErrClosed
	}
	defer b.life.Exit()
	n := min(len(pkts), b.cfg.RxBatch)
	if n == 0 {
		return 0, nil
	}
	if poison.Debug {
		poison.Fill(b.rxBuf)
	}
	for i := 0; i < n; i++ {
		b.rxMsgs[i].Hdr.Namelen = sock.NameLen
		b.rxMsgs[i].Hdr.Flags = 0
	}
	var got, srvLo, srvHi int
	var err error
	if b.rep == nil || b.rep.InUse == 0 {
		got, err = b.recv(b.fd, b.rxMsgs[:n])
		srvHi = got
	} else if b.rep.InUse <= directMax {
		b.ready, b.rhead = b.ready[:0], 0 // epoll's list, stale now
		got, srvLo, srvHi, err = b.recvTurn(n)
	} else {
		got, srvLo, srvHi, err = b.recvReady(n)
	}
	if err != nil {
		return 0, err
	}
	k := 0
	var bytes uint64
	for i := 0; i < got; i++ {
		m := &b.rxMsgs[i]
		l := int(m.Len)
		if m.Hdr.Flags&unix.MSG_TRUNC != 0 || l > b.cfg.MaxDatagram {
			b.st.RxTruncated++
			continue
		}
		off := i * b.stride
		from := sock.FromRaw(&b.rxNames[i])
		pkts[k] = dgramio.Packet{Data: b.rxBuf[off : off+l : off+l], From: from}
		bytes += uint64(l)
		k++
		if i >= srvLo && i < srvHi && b.rep != nil && b.rep.Heard(from) {
			b.openReply(from)
		}
	}
	b.st.RxDelivered += uint64(k)
	b.st.RxBytes += bytes
	if b.rep != nil {
		b.rxCalls++
		if (b.rxCalls&63 == 0 || k == 0) && b.rep.Due() {
			// Sockets idle for long start closing: recvTurn and
			// recvReady read what they hold, then release them.
			b.rep.Sweep()
		}
	}
	return k, nil
}

// recv is one recvmmsg on fd into msgs, without blocking: how many
// arrived (0 when none), retrying EINTR, and the ICMP errors a socket
// reports once (counted) a bounded number of times.
func (b *Backend) recv(fd int, msgs []unix.Mmsghdr) (int, error) {
	for tries := 0; ; tries++ {
		r, errno := sock.Recvmmsg(fd, msgs, unix.MSG_DONTWAIT)
		b.st.Syscalls++
		switch errno {
		case 0:
			return r, nil
		case unix.EAGAIN:
			return 0, nil
		case unix.EINTR:
			continue
		case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH:
			// The kernel reports a queued ICMP error once, then receives
			// normally; try again, a bounded number of times.
			b.rxRefused++
			if tries < 4 {
				continue
			}
			return 0, nil
		default:
			return 0, fmt.Errorf("recvmmsg: %w", errno)
		}
	}
}

// directMax is the most reply sockets Rx reads in turn: an epoll_wait
// costs as much as a recvmmsg that finds nothing (more, on a virtual
// machine), and with one or two hot peers the turn finds their datagrams
// at once; beyond it Rx asks epoll which sockets have something.
const directMax = 4

// recvTurn fills rxMsgs[:n] from the first socket, in turn from where
// the last call left off, that has something: the server socket and each
// reply socket. A socket that had something is read first again (a hot
// peer's socket, in the common case), except every 8th call, so that
// none waits long; the sockets that had nothing pass the turn on. An Rx
// that finds nothing costs a recvmmsg per socket. It returns what
// recvReady does.
func (b *Backend) recvTurn(n int) (got, srvLo, srvHi int, err error) {
	if v := b.rep.Opened + b.rep.Closed; v != b.polledAt || len(b.polled) == 0 {
		b.polledAt = v
		b.polled = append(b.polled[:0], 0)
		for i := range b.rep.Slots {
			if b.rep.Slots[i].Fd >= 0 {
				b.polled = append(b.polled, int32(i+1))
			}
		}
		b.next = 0
	}
	for range b.polled {
		if b.next >= len(b.polled) {
			b.next = 0
		}
		idx := b.polled[b.next]
		fd := b.fd
		if idx > 0 {
			if fd = b.rep.Slots[idx-1].Fd; fd < 0 {
				b.next++ // released during this call
				continue
			}
		}
		r, err := b.recv(fd, b.rxMsgs[:n])
		if err != nil {
			return 0, 0, 0, err
		}
		if r == 0 || b.rxCalls&7 == 7 {
			b.next++
		}
		if idx > 0 {
			b.rep.Got(int(idx-1), r)
			if r < n && b.rep.Slots[idx-1].Closing {
				b.unread += b.rep.Release(int(idx - 1))
			}
		}
		if r > 0 {
			if idx == 0 {
				return r, 0, r, nil
			}
			return r, 0, 0, nil
		}
	}
	return 0, 0, 0, nil
}

// recvReady fills rxMsgs[:n] from the sockets that are readable: those
// left in ready by the last call (a socket that filled what was asked may
// hold more), else those epoll_wait names, without waiting. It returns
// how many arrived, of which rxMsgs[srvLo:srvHi] came from the server
// socket (read at most once a call). A closing reply socket found empty
// is released.
func (b *Backend) recvReady(n int) (got, srvLo, srvHi int, err error) {
	if b.rhead == len(b.ready) {
		b.ready, b.rhead = b.ready[:0], 0
		var e int
		for {
			e, err = unix.EpollWait(b.ep, b.evs, 0)
			b.st.Syscalls++
			if err != unix.EINTR {
				break
			}
		}
		if err != nil {
			return 0, 0, 0, fmt.Errorf("epoll_wait: %w", err)
		}
		for _, ev := range b.evs[:e] {
			if ev.Fd == 0 {
				b.ready = append(b.ready, 0)
			}
		}
		for _, ev := range b.evs[:e] {
			if ev.Fd != 0 {
				b.ready = append(b.ready, ev.Fd)
			}
		}
		// A closing socket is read (and released) whether or not it
		// has something: epoll would never name an empty one.
		for i := range b.rep.Slots {
			if b.rep.Slots[i].Closing {
				b.ready = append(b.ready, int32(i+1))
			}
		}
	}
	for b.rhead < len(b.ready) && got < n {
		idx := b.ready[b.rhead]
		fd := b.fd
		if idx > 0 {
			fd = b.rep.Slots[idx-1].Fd
		}
		r := 0
		if fd >= 0 {
			if r, err = b.recv(fd, b.rxMsgs[got:n]); err != nil {
				return got, srvLo, srvHi, err
			}
		}
		if idx == 0 {
			srvLo, srvHi = got, got+r
		} else if fd >= 0 {
			b.rep.Got(int(idx-1), r)
		}
		if got += r; got == n {
			break // it may hold more: read it first next time
		}
		b.rhead++
		if idx > 0 && fd >= 0 && b.rep.Slots[idx-1].Closing {
			b.unread += b.rep.Release(int(idx - 1))
		}
	}
	return got, srvLo, srvHi, nil
}

// openReply gives peer a connected reply socket, read through the epoll
// instance from now on.
func (b *Backend) openReply(peer netip.AddrPort) {
	i := b.rep.Open(peer)
	if i < 0 {
		return
	}
	if err := b.epollAdd(b.rep.Slots[i].Fd, int32(i+1)); err != nil {
		b.unread += b.rep.Release(i)
		b.rep.OpenFailed++
	}
}

// Wait sleeps in poll(2) until the socket is readable, ctx is done
// (ctx.Err()), or the backend is closed (net.ErrClosed).
func (b *Backend) Wait(ctx context.Context) error {
	if !b.life.BeginWait() {
		return dgramio.ErrClosed
	}
	defer b.life.EndWait()
	if b.rep != nil {
		// The epoll instance is readable when any of its sockets is.
		if b.rep.InUse > directMax && b.rhead < len(b.ready) {
			return nil
		}
		// It returns when the sweep of idle reply sockets is due, too.
		return sock.WaitAtMost(ctx, b.ep, b.waker, &b.waitCalls, b.rep.UntilSweep())
	}
	return sock.Wait(ctx, b.fd, b.waker, &b.waitCalls)
}

// Stats returns the counters. Layers holds the kernel socket's own drop
// count (layer "socket", "drops", a loss: datagrams that arrived while the
// receive buffer was full), our counts of send errors by cause (already
// in TxDropped, so not marked as loss), after Close the datagrams left
// unread on the socket and its reply sockets (layer "udp",
// "rx_unread_at_close", a loss), and the reply sockets' counters (see
// sock.Replies.Counters). Safe from any goroutine; after
// Close it returns the counters as they were at Close.
func (b *Backend) Stats() dgramio.Stats { return b.life.Stats(b.snapshot) }

// snapshot copies the counters; the caller holds the guard or has shut it.
func (b *Backend) snapshot() dgramio.Stats {
	s := b.st
	s.Kind, s.Mode = dgramio.KindUDP, b.mode
	s.Syscalls += b.waitCalls.Load()
	s.SockRcvBuf, s.SockSndBuf = b.granted.RcvBuf, b.granted.SndBuf
	drops, err := sock.Drops(b.fd)
	if err == nil {
		s.Layers = append(s.Layers, dgramio.Counter{Layer: "socket", Name: "drops", Value: drops, Loss: true})
	}
	s.Layers = append(s.Layers,
		dgramio.Counter{Layer: "udp", Name: "send_buffer_full", Value: b.sendErrs[0]},
		dgramio.Counter{Layer: "udp", Name: "send_refused", Value: b.sendErrs[1]},
		dgramio.Counter{Layer: "udp", Name: "send_other_errors", Value: b.sendErrs[2]},
		dgramio.Counter{Layer: "udp", Name: "rx_icmp_refused", Value: b.rxRefused},
		dgramio.Counter{Layer: "udp", Name: "queue_no_dest", Value: b.noDest},
		dgramio.Counter{Layer: "udp", Name: "queue_bad_dest", Value: b.badDest},
		dgramio.Counter{Layer: "udp", Name: "rx_unread_at_close", Value: b.unread, Loss: true},
	)
	s.Layers = b.rep.Counters(s.Layers, "udp")
	return s
}

// unreadLimit bounds the datagrams Close reads from the socket to count
// them (rx_unread_at_close), so that a peer still sending cannot hold
// Close: far more than a 64 MiB receive buffer holds.
const unreadLimit = 1 << 20

// Close closes the socket. A Rx, Flush or Wait running in another
// goroutine returns net.ErrClosed; Close waits for it to leave before
// closing the socket. Messages still queued are counted in TxDropped;
// datagrams the kernel had queued on the socket that Rx never took are
// read and counted in layer "udp" counter "rx_unread_at_close" (a loss). On
// the goroutine New pinned, it unpins. Safe to call more than once.
func (b *Backend) Close() error {
	return b.life.Close(b.waker.Wake, func() (dgramio.Stats, error) {
		b.st.TxDropped += uint64(b.nmsg)
		b.nmsg, b.nslot = 0, 0
		b.unread += sock.DrainUnread(b.fd, unreadLimit)
		if b.rep != nil {
			for i := range b.rep.Slots {
				b.unread += b.rep.Release(i)
			}
			b.rep.Close()
			unix.Close(b.ep)
		}
		final := b.snapshot()
		err := unix.Close(b.fd)
		if err != nil {
			err = fmt.Errorf("close socket: %w", err)
		}
		return final, errors.Join(err, b.waker.Close(), b.thread.Release())
	})
}
