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
// if it has any.
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
	b := &Backend{cfg: cfg, fd: fd, waker: w, granted: g, thread: th, v6: cfg.IPv6()}
	b.mode = "sendmmsg/recvmmsg, " + g.Mode()
	b.alloc()
	return b, nil
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
	off := 0
	for off < b.nmsg {
		n := min(b.nmsg-off, b.cfg.TxBatch)
		sent, errno := sock.Sendmmsg(b.fd, b.txMsgs[off:off+n], 0)
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
			b.st.TxBytes += uint64(b.txMsgs[i].Len)
		}
		b.st.TxSent += uint64(sent)
		off += sent
	}
	b.nmsg, b.nslot = 0, 0
	return nil
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
	var got int
	for tries := 0; ; tries++ {
		r, errno := sock.Recvmmsg(b.fd, b.rxMsgs[:n], unix.MSG_DONTWAIT)
		b.st.Syscalls++
		switch errno {
		case 0:
			got = r
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
		break
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
		pkts[k] = dgramio.Packet{Data: b.rxBuf[off : off+l : off+l], From: sock.FromRaw(&b.rxNames[i])}
		bytes += uint64(l)
		k++
	}
	b.st.RxDelivered += uint64(k)
	b.st.RxBytes += bytes
	return k, nil
}

// Wait sleeps in poll(2) until the socket is readable, ctx is done
// (ctx.Err()), or the backend is closed (net.ErrClosed).
func (b *Backend) Wait(ctx context.Context) error {
	if !b.life.BeginWait() {
		return dgramio.ErrClosed
	}
	defer b.life.EndWait()
	return sock.Wait(ctx, b.fd, b.waker, &b.waitCalls)
}

// Stats returns the counters. Layers holds the kernel socket's own drop
// count (layer "socket", "drops", a loss: datagrams that arrived while the
// receive buffer was full), our counts of send errors by cause (already
// in TxDropped, so not marked as loss) and, after Close, the datagrams
// left unread on the socket (layer "udp", "rx_unread_at_close", a loss). Safe from any goroutine; after
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
		b.unread = sock.DrainUnread(b.fd, unreadLimit)
		final := b.snapshot()
		err := unix.Close(b.fd)
		if err != nil {
			err = fmt.Errorf("close socket: %w", err)
		}
		return final, errors.Join(err, b.waker.Close(), b.thread.Release())
	})
}
