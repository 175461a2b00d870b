package dgramio

import (
	"errors"
	"fmt"
	"net/netip"
)

// Framing is how the stream kinds (tcp, tcp-xdp, tcp-dpdk) cut their TCP
// byte streams into the messages Queue, QueueTo and Rx move
// (Config.Framing). Its text is the framing's name, in flags, JSON and
// reports. The datagram kinds carry one message per datagram and refuse
// any framing but FramingU16 (their default, which changes nothing).
type Framing string

// The framings.
const (
	// FramingU16 (the default of the stream kinds; "" means it too) puts
	// every message on the stream as one record: a big-endian u16 length
	// and that many bytes. Rx delivers whole records, Queue and QueueTo
	// take one record of up to Config.MaxDatagram bytes.
	FramingU16 Framing = "u16"
	// FramingRaw moves bytes: Rx hands each connection's bytes as they
	// arrived, in Packets of at most Config.MaxDatagram bytes (one read of
	// the transport may come as several), and QueueTo appends its payload
	// (at most Config.MaxDatagram bytes a call) to the connection's stream,
	// so that any protocol can be parsed in place. Boundaries between
	// Packets mean nothing: a parser keeps what it has not consumed (a
	// copy: Data is valid until the next Rx) and goes on at the next
	// Packet of the same From. The counts of Stats treat each QueueTo and
	// each delivered Packet as one message.
	FramingRaw Framing = "raw"
	// FramingU32 is FramingU16 with a big-endian u32 length prefix (as
	// the message length of SBE's framing header, here counting the
	// payload only); a message still carries at most Config.MaxDatagram
	// (up to 65535) bytes, and a longer one from the peer is skipped and
	// counted in Stats.RxTruncated, as with u16.
	FramingU32 Framing = "u32"
)

var framings = []Framing{FramingU16, FramingRaw, FramingU32}

// String returns "u16", "raw" or "u32" ("u16" for the zero value).
func (f Framing) String() string {
	if f == "" {
		return string(FramingU16)
	}
	return string(f)
}

// Set parses "u16", "raw" or "u32" (flag.Value).
func (f *Framing) Set(s string) error { return parseEnum(f, "framing", s, framings) }

// UnmarshalText parses "u16", "raw" or "u32".
func (f *Framing) UnmarshalText(b []byte) error { return f.Set(string(b)) }

// Event says what a Packet of a stream kind reports (Packet.Event): data,
// or a change in the life of the connection Packet.From names. Rx
// delivers events only with Config.Events; the zero value is data.
//
// A connection's events come in this order: EventOpened, its data, then
// either EventPeerFIN (the peer sent all it will) and later EventEnded,
// or EventReset and EventEnded; one that the loop closed or reset itself
// (Conns) ends with EventEnded alone, with or without an EventPeerFIN
// before it.
type Event uint8

// The events.
const (
	// EventData: Data holds bytes of the connection (a record, or raw
	// bytes).
	EventData Event = iota
	// EventOpened: a server accepted the connection, or a client's
	// connection to one of Config.Dests is up. It comes before any of its
	// data.
	EventOpened
	// EventPeerFIN: the peer closed its direction (FIN), after all the
	// data it sent was delivered. The connection still sends: what the
	// loop queues to From until its next Flush goes out, then the layer
	// closes our direction too (FIN) and, once the peer acknowledged
	// everything, EventEnded follows. Pause keeps it open longer (until
	// Resume). A reset or failed write after it ends the connection with
	// EventEnded alone: its end was reported, what it dropped is counted.
	EventPeerFIN
	// EventReset: the connection was reset by the peer or failed (a
	// retransmission timeout, an unreachable host). Err is a *PeerError
	// with the cause (errors.Is matches the errno). What was staged for
	// it counts in Stats.TxDropped. EventEnded follows.
	EventReset
	// EventEnded: the connection left the set; From names no connection
	// any more (QueueTo counts it as "queue_no_conn"), and a new
	// connection may come from the same address.
	EventEnded
	// EventStalled: the connection took no byte for Config.TCP.SendStall
	// while bytes waited for it (its peer's stack answers, its
	// application stopped reading); Err says for how long (a
	// *tcp.SendStallError). It comes once per stall, between EventOpened
	// and the connection's end, and changes nothing: the connection stays,
	// Queue refuses until the peer reads again; the loop may wait,
	// CloseConn or ResetConn it. Userspace TCP kinds only.
	EventStalled
)

var eventNames = [...]string{"data", "opened", "peer-fin", "reset", "ended", "stalled"}

// String returns the event's name: "data", "opened", "peer-fin", "reset",
// "ended" or "stalled".
func (e Event) String() string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return fmt.Sprintf("event(%d)", uint8(e))
}

// ErrNoConn is what the Conns methods return for an address that names no
// connection (never one, or one that ended).
var ErrNoConn = errors.New("no connection to that peer")

// Conns is implemented by the Backend of every stream kind (tcp,
// tcp-xdp, tcp-dpdk): a poll loop reaches one connection through it,
// by the address its Packets carry in From. Get it with a type
// assertion:
//
//	conns, ok := b.(dgramio.Conns)
//
// Its methods belong to the poll loop (the goroutine that calls Rx and
// Flush), return ErrNoConn for an address that names no connection and
// an error matching net.ErrClosed after Close.
type Conns interface {
	// CloseConn closes the connection in order: what was queued for it
	// goes out at the next Flush, then our FIN; what it sends from now on
	// is not delivered (counted in the "stream" layer's "rx_closed"). Its
	// EventEnded follows once the peer acknowledged everything.
	CloseConn(peer netip.AddrPort) error
	// ResetConn resets the connection (RST) at the next Rx or Flush:
	// what was queued for it and not sent counts in Stats.TxDropped, what
	// it sent and was not delivered in "rx_closed", and Stats.Resets
	// counts it. Its EventEnded follows (no EventReset: the loop knows).
	ResetConn(peer netip.AddrPort) error
	// Pause stops reading the connection: Rx delivers nothing of it, and
	// its peer's sending stops when TCP's window closes (back-pressure
	// for a peer that sends faster than the loop can answer). A paused
	// connection whose peer finished (EventPeerFIN) is not closed either.
	// A connection that ended (the peer reset it) is not paused
	// (ErrNoConn), also while its end is still to be delivered; a paused
	// one that ends is noticed all the same, and its records and end
	// come out once it is resumed.
	Pause(peer netip.AddrPort) error
	// Resume undoes Pause: what arrived meanwhile is delivered.
	Resume(peer netip.AddrPort) error
}

// checkFraming checks Framing and Events: any framing on a stream kind,
// and on a datagram kind only the default and no events.
func (c Config) checkFraming() error {
	if c.Framing != "" && !c.Framing.known() {
		return BadField("Framing", c.Framing, "unknown framing; use %s", enumList(framings))
	}
	if c.Kind.IsStream() {
		return nil
	}
	if c.Framing != "" && c.Framing != FramingU16 {
		return BadField("Framing", c.Framing, "kind %s carries one message per datagram: framing applies to the stream kinds (tcp, tcp-xdp, tcp-dpdk) only", c.Kind)
	}
	if c.Events {
		return BadField("Events", c.Events, "kind %s has no connections: connection events apply to the stream kinds (tcp, tcp-xdp, tcp-dpdk) only", c.Kind)
	}
	return nil
}

func (f Framing) known() bool {
	for _, v := range framings {
		if f == v {
			return true
		}
	}
	return false
}
