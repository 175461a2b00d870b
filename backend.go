package dgramio

import (
	"context"
	"net/netip"
)

// Unmap returns ap with an IPv4-mapped IPv6 address (::ffff:a.b.c.d,
// what netip.AddrFromSlice makes of a 16-byte net.IP) taken as the IPv4
// address it maps, and any other ap as it is. Config.WithDefaults does
// this to LocalIP and Dests, and every kind's QueueTo to its address.
func Unmap(ap netip.AddrPort) netip.AddrPort {
	if ap.Addr().Is4In6() {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return ap
}

// Unicast reports whether ap can be a peer that QueueTo sends to: a
// valid address, neither unspecified (0.0.0.0, ::), nor multicast, nor
// IPv6 link-local (whose zone no kind keeps), with a port other than 0.
// A sender's address, the From that QueueTo answers, is always one;
// every kind's QueueTo refuses the others with ErrNoRoute, counted, as it
// refuses an address of the other family. Call it after Unmap.
func Unicast(ap netip.AddrPort) bool {
	a := ap.Addr()
	return a.IsValid() && ap.Port() != 0 && !a.IsUnspecified() && !a.IsMulticast() &&
		!(a.Is6() && a.IsLinkLocalUnicast()) && a.Zone() == ""
}

// Packet is one received message.
type Packet struct {
	// Data is the payload. It points into the backend's receive buffers and
	// is valid only until the next call to Rx (or Close); copy what you keep.
	Data []byte
	// From is the sender: the peer's address and port for datagram kinds,
	// the connection's remote address for stream kinds, of the Config's
	// family (IPv4 or IPv6, never IPv4-mapped). Pass it to QueueTo to
	// answer. An event (Event not EventData) names the connection it
	// happened to.
	From netip.AddrPort
	// Event is EventData (the zero value) for a message, or what happened
	// to the connection From on a stream kind with Config.Events; Data is
	// then empty.
	Event Event
	// Err is the cause of an EventReset (a *PeerError); nil otherwise.
	Err error
}

// Backend is one packet path. Every kind implements it with the same
// semantics, so the application, batch sizes and socket options are the same
// whichever kind the Config names. The Backend of a stream kind (tcp,
// tcp-xdp, tcp-dpdk) is also a Conns (b.(Conns)): the poll loop closes,
// resets, pauses and resumes one connection through it; Config.Framing
// and Config.Events say how its streams come to Rx.
//
// Threading: Queue, QueueTo, Flush, Rx and Wait form the poll loop and must
// be called by one goroutine at a time (not concurrently with each other).
// Stats and Close may be called from any goroutine at any time. After Close,
// Queue and QueueTo return ErrClosed, and Flush, Rx and Wait return an error
// matching net.ErrClosed; a Close that races with Rx or Wait makes them
// return net.ErrClosed, never crash.
type Backend interface {
	// Queue copies payload into a send slot for every destination (Config.Dests
	// on a client; every connected peer on a stream server). The caller may
	// reuse payload at once. It returns nil, or one of these and queues
	// nothing, for any destination: ErrBackPressure (the slots are full:
	// Flush and queue it again; the caller keeps the message), ErrTooLarge
	// (larger than Config.MaxDatagram), ErrNoRoute (no destination or no
	// open connection) or ErrClosed. Each is a plain value: no allocation.
	// Nothing leaves before Flush.
	Queue(payload []byte) error
	// QueueTo is Queue for one receiver: the From of a received Packet. An
	// IPv4-mapped IPv6 address is taken as IPv4 (see Unmap). It returns
	// ErrNoRoute also for a peer with no connection or an address the kind
	// cannot send to (another family than the Config's, or not Unicast),
	// counted in Stats; no address makes it panic. On a stream kind Queue
	// writes to every connection (a server's broadcast); QueueTo writes to
	// one.
	QueueTo(payload []byte, to netip.AddrPort) error
	// Flush sends everything queued, in batches of Config.TxBatch. A datagram
	// the kernel or ring refuses is counted in Stats.TxDropped and Flush goes
	// on; the error reports what stops the path itself (the device, a
	// closed backend), never one connection's end (see Rx).
	Flush() error
	// Rx fills pkts with up to len(pkts) received messages and returns how
	// many. It never blocks. pkts[i].Data is valid until the next Rx. The
	// error is net.ErrClosed after Close, or what broke the backend itself:
	// a loop may return on any error. On the stream kinds a connection's
	// life (opened, the peer's FIN, a reset, ended) comes as Packets with
	// Event set when Config.Events asks for it, and is counted in Stats
	// (Accepts, PeerCloses, Resets, Conns) either way; one connection is
	// closed, reset, paused or resumed through Conns.
	Rx(pkts []Packet) (int, error)
	// Wait sleeps until Rx may return something, ctx is done, or the backend
	// is closed, so an idle application need not spin. A kind that cannot
	// sleep returns an error matching ErrNotSupported.
	Wait(ctx context.Context) error
	// Stats returns the counters. Every message refused or lost is in one.
	Stats() Stats
	// Close releases everything the backend holds and restores what it
	// changed on the host (XDP programs, promiscuous mode, ...). It is safe to
	// call more than once.
	Close() error
}

// PeerError reports a stream peer that closed or reset its connection.
type PeerError struct {
	Peer netip.AddrPort
	// Reset is true for a reset (RST), false for an orderly close (FIN).
	Reset bool
	Err   error
}

// Error implements error.
func (e *PeerError) Error() string {
	what := "closed the connection"
	if e.Reset {
		what = "reset the connection"
	}
	s := "peer " + e.Peer.String() + " " + what
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *PeerError) Unwrap() error { return e.Err }
