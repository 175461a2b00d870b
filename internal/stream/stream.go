// Package stream is the one stream layer of the stream kinds: kernel tcp
// (package kernel/tcp) and the userspace TCP kinds tcp-xdp and tcp-dpdk
// (package tcp) run their dgramio.Backend methods Queue, QueueTo, Flush and Rx
// through a Layer. It holds the connection set, each connection's record
// staging (record.Staging) and decoding (record.Decoder), or its raw
// bytes (dgramio.FramingRaw), Queue's all-or-none across connections,
// back-pressure, the bytes a Flush released moving on with every Rx and
// Flush, send stalls, each connection's life (opened, the peer's FIN, a
// reset, ended) counted and, with Options.Events, delivered by Rx as
// Packets with Event set, the loop's own closes, resets and pauses of one
// connection (dgramio.Conns), the removal of ended connections, and the
// counting (dgramio.Stats's message fields). No connection's end is an error
// of Rx or Flush: those report the transport's failures only.
//
// Under it is a Transport, which moves bytes and knows nothing of records:
// kernel TCP (a socket per connection, epoll), netstack (gVisor endpoints),
// and any engine whose connections are non-blocking and polled. A
// transport implements two small interfaces:
//
//   - Transport: Poll moves the engine on (frames in, timers due), Accept
//     hands the layer the connections a server accepted, Watch names the
//     connections that became readable, Push sends what the connections
//     wrote (one kick per call). A run-to-completion engine maps
//     Poll(budget), Accept() (*Conn, ok) and Flush() onto them one to
//     one; kernel TCP's Poll does nothing and its Push has nothing to kick.
//   - Conn: Write copies what fits in the send buffer and returns how much
//     (0, nil when it is full); Read returns (n, nil) with data, (0, nil)
//     when there is none, io.EOF after the peer's FIN, or the error that
//     ended the connection; Readable and Writable are cheap hints; Close
//     ends our direction in order (FIN after what was written) and
//     releases the connection; Abort resets it. A non-blocking engine
//     connection plugs in with a one-line method each, and embeds a Hook.
//
// A Conn that is also a Lender lends its received bytes in place: the
// layer hands out the whole records at their front as slices of the
// transport's buffer, and gives the bytes back at the next Rx, so a
// record is neither copied into the layer's decoder nor read. One that is
// a Stager stages the records queued for it in its own send buffer, held
// until Flush releases them: the layer keeps no staging of its own for
// it, and never writes to it.
//
// # Work in proportion to what moves
//
// A server may hold ten thousand connections of which a handful speak at
// a time, so no Rx or Flush walks the set: the layer keeps the
// connections that have something to do in short lists (reported
// readable by Watch, with records decoded and not delivered, with
// released bytes the transport has not taken, with records staged since
// the last Flush, delivered from in the last Rx, ended or finishing) and
// visits those only. Only Queue, which stages for every connection, and
// closing (Abandon, Linger, ReadOut, Close) touch them all. A connection
// is read once Watch reported it and until a read comes back short, so a
// Transport must report a connection whenever bytes, its peer's FIN or an
// error arrive after the layer's last read of it, or that read left some
// behind; one that reports a connection that has nothing costs a read
// that returns (0, nil).
//
// A peer's FIN ends its direction only. The layer delivers the records the
// peer sent, then counts the FIN (PeerCloses) and queues its
// dgramio.EventPeerFIN, and keeps the connection writable: answers queued
// until the Flush after the Rx that delivers the event go out (and those
// of a caller that paused the peer, until it resumes, or whose last
// answer QueueTo refused for back-pressure, until one is queued or
// Options.FinishTimeout passes without one), and once they have
// all been written the layer closes its side too (Conn.Close), after
// which QueueTo to that peer counts as "queue_no_conn" and EventEnded
// follows. A reset, or a failed write, ends both directions at once:
// records still staged are counted in TxDropped, and the records the
// transport had received and the layer had not delivered yet are read out
// and counted in RxClosed, as at Close; EventReset (with the
// *dgramio.PeerError of the cause) and EventEnded follow. A connection's
// end is reported once: a reset or failed write after its EventPeerFIN
// was queued is counted so, and only EventEnded follows.
//
// In u32 framing (dgramio.FramingU32) records carry a 4-byte prefix
// (record.NewStaging32, NewDecoder32), read by the Lender path and Sent
// alike. In raw framing (dgramio.FramingRaw) a "record" is what one QueueTo
// appends (staged without a prefix, record.NewRawStaging) and what one
// Packet of Rx carries (record.NewRawDecoder: the bytes read, at most
// MaxRecord a Packet; a Lender's bytes are lent in place as they lie).
// A transport's Sent learns where each append starts (Sent.SetRaw): from
// Stage on a Stager, from Appended (the layer calls it as it stages an
// append, on a Conn that is an Appender) otherwise, so that an append
// whose first byte the peer never acknowledged moves from TxSent to
// TxDropped as a record does.
//
// # Closing
//
// TCP loses nothing, so a stream loses records only where an end stops:
// a backend that closes calls Abandon (staged records: TxDropped), then
// Linger, then Close. Linger ends our direction of each connection whose
// Conn is a HalfCloser (FIN) and keeps reading until the peer closes too,
// so that what the peer still sends (an echo's answers) is read rather
// than reset away; every whole record read then, and every record
// decoded and not delivered, counts in RxClosed (dgramio.Stats layer
// "stream", counter "rx_closed", a loss).
//
// What was written and never acknowledged is lost too: a transport
// follows the record starts it wrote (Sent), and one whose Conn is an
// Unacker lets the layer move the records whose first byte the peer never
// acknowledged from TxSent to TxDropped when the connection fails and at
// Close (which resets those connections, so that they are lost as
// counted), and keep a finished connection until the peer acknowledged
// its last answers.
//
// A Layer is not safe for concurrent use: the backend calls it from its
// poll loop only, and reads Counters under the same exclusion.
package stream

import (
	"errors"
	"io"
	"net/netip"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/poison"
	"github.com/dgramio/dgramio/internal/record"
)

// Conn is one connection of a Transport, non-blocking in every method.
// Its type embeds a Hook.
type Conn interface {
	// Write copies from p what the send buffer takes and returns how many
	// bytes; (0, nil) when it is full. A non-nil error ends the
	// connection: a *dgramio.PeerError says whether it was a reset, any other
	// error counts as one.
	Write(p []byte) (int, error)
	// Read copies received bytes into p: (n, nil) with data, (0, nil) when
	// there is none now, (0, io.EOF) after the peer's FIN, or the error
	// that ended the connection (as for Write).
	Read(p []byte) (int, error)
	// Readable reports whether Read may return something (data, EOF or
	// an error). A transport that cannot tell cheaply returns true. The
	// layer asks it of a connection Watch reported, before reading.
	Readable() bool
	// Writable reports whether Write would take bytes now. A transport
	// that cannot tell cheaply returns true.
	Writable() bool
	// SetReading tells the transport whether the layer will read the
	// connection (false while delivery is held, and after the peer's FIN),
	// so that one that sleeps on readiness does not wake for it.
	SetReading(on bool)
	// Close ends our direction in order (FIN after what was written) and
	// releases the connection; the layer calls it once and never again
	// touches the connection.
	Close()
	// Abort resets the connection and releases it, as Close.
	Abort()
	hook() *Hook
}

// Hook is embedded in every Conn type: the layer keeps its own record of
// the connection there, so that Watch's reports reach it without a
// lookup. The zero value is ready; a Conn is in one Layer at most.
type Hook struct{ c *conn }

func (h *Hook) hook() *Hook { return h }

// HalfCloser is implemented by a Conn that can end our direction alone
// (FIN) and go on reading: Layer.Linger uses it.
type HalfCloser interface {
	CloseWrite() error
}

// Unacker is implemented by a Conn that can tell how many of the records
// written to it the peer has not acknowledged the first byte of (it
// follows them with a Sent). When such a connection fails, and at Close,
// the layer moves those records from TxSent to TxDropped: they never
// reached the peer, and Close resets a connection that has any (so that
// the loss it counted is the loss that happens: the transport does not
// deliver them later).
type Unacker interface {
	// UnackedRecords returns the records written whose first byte the
	// peer has not acknowledged, and whether the connection has ended
	// (they never will be).
	UnackedRecords() (records int, ended bool)
}

// Ender is implemented by a Conn that can tell, without reading, that it
// ended (the peer reset it): the layer asks it of a held connection
// (Hold) that Watch reported, since it does not read one until it is
// resumed, so that a reset is not left unseen for as long as the caller
// holds the connection for an answer that will never fit. Ended returns
// the error that ended the connection (as Read would), or nil.
type Ender interface {
	Ended() error
}

// Appender is implemented by an Unacker that follows a raw stream
// (dgramio.FramingRaw) through the layer's staging: the layer calls
// Appended with the length of each QueueTo it stages for the connection,
// before any of it is written (Sent.Appended), so that the transport can
// tell where each append starts.
type Appender interface {
	Appended(n int)
}

// Lender is implemented by a Conn whose transport can lend the bytes it
// received in place: the layer then hands out the records it finds whole
// at their front as slices of the transport's buffer, instead of copying
// them into its decoder first. It falls back on Read (and its decoder)
// for what it cannot use in place: a record cut by the end of what Peek
// returns, or one longer than Options.MaxRecord, at the front.
type Lender interface {
	// Peek returns received bytes that follow those lent, contiguous in
	// the transport's buffer (not necessarily all there are: Readable
	// says whether more follow), without taking them.
	Peek() []byte
	// Lend marks Peek's first n bytes as lent: they stay in place and
	// unchanged, Readable no longer counts them, and the next Peek
	// starts after them.
	Lend(n int)
	// Consume takes back all that was lent (the transport's Read and
	// Close would).
	Consume()
}

// Stager is implemented by a Conn whose transport takes each record into
// its own send buffer as it is queued and holds it there until the
// layer's Flush releases it: the layer then stages nothing itself, and a
// record is copied once, at Queue, instead of into the layer's staging
// and again at Flush. The layer uses either Stage and Release or Write
// on a connection, never both.
type Stager interface {
	// Room returns how many bytes Stage would take now (0: the buffer is
	// full, or the connection sends no more).
	Room() int
	// Stage copies one record, head (its length prefix) and then body,
	// after what was staged before, all of it or nothing (false, when
	// Room is short). It is not sent before Release.
	Stage(head, body []byte) bool
	// Release makes every record staged written: the transport sends
	// them as its windows allow.
	Release()
	// Unstage drops every record staged and not released.
	Unstage()
}

// Transport is the engine under a Layer.
type Transport interface {
	// Poll moves the engine on: frames in (ACKs that open windows
	// included), timers due. Every Rx calls it first, and so does every
	// Flush that no Rx came before since the last Flush: a poll loop
	// that calls Rx and then Flush polls once a step, and one that only
	// sends still takes its ACKs. A Push that no Poll came before since
	// the last Push reads the engine's clock itself. Poll reports false
	// only when nothing happened that Accept, Watch or Push would act on
	// (no frame taken, no connection to accept, none become readable,
	// nothing to send or kick): an Rx with no work of its own then ends
	// there, which makes a spinning loop's empty Rx cheap. A transport
	// that cannot tell returns true.
	Poll() bool
	// Accept calls add for each connection a server has accepted since
	// the last call, with the peer's address, without blocking.
	Accept(add func(c Conn, peer netip.AddrPort))
	// Watch calls mark, without blocking, for each connection of the
	// layer that has something to read (bytes, the peer's FIN, an error)
	// that arrived after the layer's last read of it or that the read
	// left behind (the FIN after the bytes it took): at least once for
	// each such arrival or read. Reporting one that has nothing costs a
	// read that returns (0, nil). A connection the layer does not read
	// (Conn.SetReading false) need not be reported. Every Poll that
	// reports true is followed by Accept and Watch; Ready calls Watch
	// too.
	Watch(mark func(c Conn))
	// Push sends what the connections wrote. Its error is the device's.
	Push() error
}

// Holder is implemented by the backends of the stream kinds (Layer.Hold):
// a caller that could not queue an answer to a peer holds the peer, so
// that back-pressure reaches it, until the answer fits.
type Holder interface {
	Hold(peer netip.AddrPort, on bool) bool
}

// Options size and tune a Layer.
type Options struct {
	// MaxRecord is the largest record payload (Config.MaxDatagram).
	MaxRecord int
	// RxBatch bounds the records one Rx returns (Config.RxBatch).
	RxBatch int
	// StagingSize and DecoderSize are each connection's send staging and
	// receive buffer, in bytes. A Stager's connection stages in its own
	// buffer, at most StagingSize bytes between two Flushes.
	StagingSize, DecoderSize int
	// SendStall, when positive, reports a connection that takes no byte
	// for that long while released bytes wait (a Stager: whose room does
	// not grow while a record it refused waits), once per stall: counted
	// in Stalls and, with Events, delivered as dgramio.EventStalled whose Err
	// is StallError(peer, stalled). It is no error of Rx or Flush.
	SendStall  time.Duration
	StallError func(peer netip.AddrPort, stalled time.Duration) error
	// FinishTimeout bounds how long a finished connection of an Unacker
	// waits for the peer to acknowledge what was written (0: 10 s).
	FinishTimeout time.Duration
	// Framing is dgramio.FramingU16 (or "": records) or dgramio.FramingRaw
	// (bytes: a record is what one QueueTo appends, or what one Packet of
	// Rx carries; see dgramio.FramingRaw).
	Framing dgramio.Framing
	// Events makes Rx deliver each connection's life as Packets with
	// Event set (dgramio.Config.Events).
	Events bool
}

// Counters are the layer's counts, as dgramio.Stats names them where it has
// the name.
type Counters struct {
	// Those every record moves, first: one cache line.
	TxQueued, TxSent, TxBytes, RxDelivered, RxBytes uint64
	// StreamTx and StreamRx count the bytes written to and read from the
	// transport, record prefixes included.
	StreamTx, StreamRx                    uint64
	TxBackpressure, TxOversize, TxDropped uint64
	RxTruncated, RxMalformed              uint64
	Accepts, Resets, PeerCloses           uint64
	// NoConn counts Queue and QueueTo calls that found no connection
	// (layer "tcp", counter "queue_no_conn").
	NoConn uint64
	// RxClosed counts records the transport received that were never
	// delivered because their connection ended or the backend closed
	// (read out and counted by reap, Abandon and Linger).
	RxClosed uint64
	// Stalls counts reported send stalls.
	Stalls uint64
}

// conn is one connection of the set.
type conn struct {
	// The fields of the data path come first, the flags packed together,
	// so that an Rx, a QueueTo and a Flush touch two or three cache lines
	// of the connection; those of closing and stalls follow.
	t     Conn
	peer  netip.AddrPort
	stage *record.Staging
	dec   *record.Decoder
	// ln is t when it is a Lender (nil otherwise); lent: records of this
	// Rx lie in its buffer, consumed at the next Rx (or readOut).
	ln Lender
	// ap is t when the stream is raw and t an Appender (nil otherwise).
	ap Appender
	// sg is t when it is a Stager (nil otherwise: stage holds the
	// records); sgRecs and sgBytes are the records it holds staged since
	// the last Flush and their bytes, length prefixes included.
	sg              Stager
	sgRecs, sgBytes int
	// released is how many bytes at the front of stage.Pending a Flush
	// has released and the transport has not taken yet: every Rx and
	// Flush writes them as it makes room. Bytes staged after them wait
	// for the next Flush.
	released int
	// dead says why the connection ended, nil while it lives.
	dead *dgramio.PeerError
	hdr  [record.HeaderLen32]byte // the length prefix Stage copies
	lent bool
	// hint: Watch reported the connection since the layer last read it.
	hint bool
	// more: the last read filled the decoder's tail, more may wait.
	more bool
	// delivered: this Rx handed out records of this connection.
	delivered bool
	// held: Hold stopped delivery; nothing is read or delivered.
	held bool
	// eof: the peer's FIN was read; reported: its end was counted (and its
	// EventPeerFIN queued).
	eof, reported bool
	// shut: CloseConn asked for the connection to close; local: the
	// connection's end (dead) is ResetConn's.
	shut, local bool
	// events is how many of its events are queued and not delivered.
	events int
	// refused: QueueTo refused an answer to c for back-pressure and
	// queued none since; a caller that keeps the answer to try again has
	// one for c, so a finished c stays open. refusedAt is when reap
	// first saw it so (zero: not yet).
	refused   bool
	refusedAt time.Time
	// removed: it left the set (entries of the work lists that still name
	// it are dropped as met).
	removed bool
	// Membership of the layer's work lists, each at most once.
	inRx, inTx, inStaged, inRead, inEnds bool
	// waitRoom: a record did not fit the Stager, and the layer watches
	// its room grow (the stall) from tx; room is the Room it saw last.
	waitRoom bool
	room     int
	// pos is c's index in Layer.conns.
	pos int
	// sentPayload is the part of stage.TakenPayload already in TxBytes.
	sentPayload uint64
	// stallSince is when released bytes last stopped moving (zero while
	// they move); stallReported: this stall was reported.
	stallSince    time.Time
	stallReported bool
	// closing: both directions are over (the peer's FIN, everything
	// written) and the connection waits for the peer to acknowledge what
	// was written (an Unacker); checked is when reap last asked.
	closing bool
	checked time.Time
	since   time.Time // closing since
}

// open reports whether records staged for c may still be sent.
func (c *conn) open() bool { return c.dead == nil && !c.closing }

// takes reports whether records may still be staged for c (not after
// CloseConn).
func (c *conn) takes() bool { return c.open() && !c.shut }

// wantsRx reports whether an Rx has something to do with c: records
// decoded and not delivered, or a read to make.
func (c *conn) wantsRx() bool {
	return !c.removed && !c.held && !c.shut && !c.local &&
		(c.dec.Complete() || (!c.eof && c.dead == nil && (c.more || c.hint)))
}

// Layer is the stream layer over one Transport. Create it with New.
type Layer struct {
	// The fields of the data path first: an Rx, a QueueTo or a Flush
	// touches the Layer's first five cache lines (the record counters
	// are the fifth), Queue the set too; the rest after them.
	t   Transport
	opt Options
	// polled: an Rx polled the transport since the last Flush, which
	// then need not (see Transport.Poll).
	polled bool

	// The work lists (see the package documentation). rx is in the order
	// Rx visits it: a connection it visited and still has something goes
	// to the back, for fairness; spare is rx's other buffer.
	rx     []*conn
	tx     []*conn // released bytes wait for the transport
	staged []*conn // records staged since the last Flush
	read   []*conn // Rx read or delivered from them: compact next Rx
	ends   []*conn // ended, or the peer finished: for reap

	errs []error // to report, oldest first
	evs  []event // connection events to deliver, oldest first
	// hl is the length of a record's prefix: record.HeaderLen, 0 in raw
	// framing.
	hl     int
	raw    bool
	accept func(Conn, netip.AddrPort)
	mark   func(Conn)
	// last is byPeer's entry that QueueTo found last (nil: none): an
	// answer goes to the peer the one before went to, more often than
	// not, and comparing the address costs less than hashing it. Every
	// change to byPeer forgets it.
	last   *conn
	byPeer map[netip.AddrPort]*conn
	st     Counters
	conns  []*conn // the set, in no particular order
	spare  []*conn
}

// New returns a Layer over t.
func New(t Transport, o Options) *Layer {
	if o.FinishTimeout <= 0 {
		o.FinishTimeout = defaultFinishMax
	}
	s := &Layer{opt: o, t: t, byPeer: make(map[netip.AddrPort]*conn), hl: record.HeaderLen}
	switch o.Framing {
	case dgramio.FramingRaw:
		s.raw, s.hl = true, 0
	case dgramio.FramingU32:
		s.hl = record.HeaderLen32
	}
	s.accept = s.accepted
	s.mark = s.marked
	return s
}

// Add takes c, connected to peer, into the set (a client's connection;
// a server's come through Transport.Accept). Its first Rx reads it.
func (s *Layer) Add(c Conn, peer netip.AddrPort) {
	k := &conn{t: c, peer: peer, pos: len(s.conns), hint: true}
	k.ln, _ = c.(Lender)
	k.sg, _ = c.(Stager)
	if s.raw && k.sg == nil {
		k.ap, _ = c.(Appender)
	}
	size := s.opt.StagingSize
	if k.sg != nil {
		size = 0 // the transport stages
	}
	switch {
	case s.raw:
		k.dec = record.NewRawDecoder(s.opt.MaxRecord, s.opt.DecoderSize)
		k.stage = record.NewRawStaging(size)
	case s.hl == record.HeaderLen32:
		k.dec = record.NewDecoder32(s.opt.MaxRecord, s.opt.DecoderSize)
		k.stage = record.NewStaging32(size)
	default:
		k.dec = record.NewDecoder(s.opt.MaxRecord, s.opt.DecoderSize)
		k.stage = record.NewStaging(size)
	}
	c.hook().c = k
	s.conns = append(s.conns, k)
	s.byPeer[peer] = k
	s.last = nil
	enlist(&s.rx, &k.inRx, k)
	s.event(k, dgramio.EventOpened, nil)
}

func (s *Layer) accepted(c Conn, peer netip.AddrPort) {
	s.Add(c, peer)
	s.st.Accepts++
}

// marked is Watch's mark.
func (s *Layer) marked(c Conn) {
	k := c.hook().c
	if k == nil || k.removed {
		return
	}
	k.hint = true
	enlist(&s.rx, &k.inRx, k)
}

// enlist appends c to the work list *l, unless *in says it is there.
func enlist(l *[]*conn, in *bool, c *conn) {
	if !*in {
		*in = true
		*l = append(*l, c)
	}
}

// Len is the number of connections in the set.
func (s *Layer) Len() int { return len(s.conns) }

// Conn returns the transport connection i of the set (0 <= i < Len), in
// no particular order: the order changes when a connection leaves.
func (s *Layer) Conn(i int) Conn { return s.conns[i].t }

// Staged returns connection i's bytes released and not yet taken, and its
// staged bytes and records (a record partly taken counts).
func (s *Layer) Staged(i int) (released, bytes, records int) {
	c := s.conns[i]
	return c.released, c.staged(), c.stage.Records() + c.sgRecs
}

// staged is the bytes of the records staged for c (in the layer or by
// its Stager) and not yet taken by the transport.
func (c *conn) staged() int { return c.stage.Len() + c.sgBytes }

// fits reports whether a record of n payload bytes can be staged for c:
// a Stager holds at most StagingSize bytes staged between two Flushes,
// as the layer's own staging would, within the room of its buffer.
func (s *Layer) fits(c *conn, n int) bool {
	if c.sg != nil {
		need := s.hl + n
		return c.sgBytes+need <= s.opt.StagingSize && c.sg.Room() >= need
	}
	return c.stage.Fits(n)
}

// put stages payload as one record for c, and reports whether it fitted.
func (s *Layer) put(c *conn, payload []byte) bool {
	if c.sg == nil {
		if c.stage.Put(payload) != nil {
			return false
		}
		if c.ap != nil {
			c.ap.Appended(len(payload))
		}
		return true
	}
	n := len(payload)
	if c.sgBytes+s.hl+n > s.opt.StagingSize {
		return false // Flush first
	}
	if s.hl == record.HeaderLen32 {
		c.hdr = [record.HeaderLen32]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	} else {
		c.hdr = [record.HeaderLen32]byte{byte(n >> 8), byte(n)}
	}
	if !c.sg.Stage(c.hdr[:s.hl], payload) {
		s.watchRoom(c)
		return false
	}
	c.sgRecs++
	c.sgBytes += s.hl + n
	c.waitRoom = false
	return true
}

// watchRoom notes that a record did not fit c's Stager: until one does,
// every Rx and Flush looks whether its room grew, and reports a stall
// when it did not for SendStall (the transport's buffer takes no byte).
func (s *Layer) watchRoom(c *conn) {
	if !c.waitRoom {
		c.waitRoom = true
		c.room = c.sg.Room()
		c.stallSince, c.stallReported = time.Time{}, false
		enlist(&s.tx, &c.inTx, c)
	}
}

// release makes what c's Stager staged written and counts it taken.
func (s *Layer) release(c *conn) {
	if c.sgRecs == 0 {
		return
	}
	c.sg.Release()
	s.st.TxSent += uint64(c.sgRecs)
	s.st.TxBytes += uint64(c.sgBytes - s.hl*c.sgRecs)
	s.st.StreamTx += uint64(c.sgBytes)
	c.sgRecs, c.sgBytes = 0, 0
}

// Counters returns the counts so far.
func (s *Layer) Counters() Counters { return s.st }

// Fill copies the counts that dgramio.Stats has fields for into st, and Conns.
func (s *Layer) Fill(st *dgramio.Stats) {
	c := &s.st
	st.TxQueued, st.TxBackpressure, st.TxOversize = c.TxQueued, c.TxBackpressure, c.TxOversize
	st.TxSent, st.TxDropped, st.TxBytes = c.TxSent, c.TxDropped, c.TxBytes
	st.RxDelivered, st.RxBytes, st.RxTruncated, st.RxMalformed = c.RxDelivered, c.RxBytes, c.RxTruncated, c.RxMalformed
	st.Accepts, st.Resets, st.PeerCloses = c.Accepts, c.Resets, c.PeerCloses
	st.Conns = uint64(len(s.conns))
	st.Layers = append(st.Layers, dgramio.Counter{Layer: "stream", Name: "rx_closed", Value: c.RxClosed, Loss: true})
}

// Report queues err for the next Rx or Flush to return.
func (s *Layer) Report(err error) { s.errs = append(s.errs, err) }

// Queue stages payload as one record for every connection that can still
// send, all of them or none. It returns nil, or stages nothing anywhere
// and returns dgramio.ErrNoRoute when there is no connection (NoConn),
// dgramio.ErrTooLarge when the payload exceeds MaxRecord (TxOversize, one per
// connection), or dgramio.ErrBackPressure when any connection's staging lacks
// room (TxBackpressure, one per connection). It is the one call whose cost
// grows with the set.
func (s *Layer) Queue(payload []byte) error {
	var n uint64
	fits := true
	for _, c := range s.conns {
		if c.takes() {
			n++
			fits = fits && s.fits(c, len(payload))
		}
	}
	switch {
	case n == 0:
		s.st.NoConn++
		return dgramio.ErrNoRoute
	case len(payload) > s.opt.MaxRecord:
		s.st.TxOversize += n
		return dgramio.ErrTooLarge
	case s.raw && len(payload) == 0:
		s.st.TxQueued += n // nothing to append: sent as it is queued
		s.st.TxSent += n
		return nil
	case !fits:
		s.st.TxBackpressure += n
		for _, c := range s.conns {
			if c.sg != nil && c.takes() && c.sg.Room() < s.hl+len(payload) {
				s.watchRoom(c)
			}
		}
		return dgramio.ErrBackPressure
	}
	for _, c := range s.conns {
		if c.takes() {
			_ = s.put(c, payload) // fits said yes
			enlist(&s.staged, &c.inStaged, c)
		}
	}
	s.st.TxQueued += n
	return nil
}

// QueueTo stages payload as one record for the connection to peer to. It
// returns what Queue does; a peer that is not (or no longer) connected is
// dgramio.ErrNoRoute and counts in NoConn.
func (s *Layer) QueueTo(payload []byte, to netip.AddrPort) error {
	c := s.last
	if c == nil || c.peer != to {
		c = s.byPeer[to]
		s.last = c
	}
	switch {
	case c == nil || c.dead != nil || c.shut:
		s.st.NoConn++
		return dgramio.ErrNoRoute
	case len(payload) > s.opt.MaxRecord:
		s.st.TxOversize++
		return dgramio.ErrTooLarge
	case s.raw && len(payload) == 0:
		s.st.TxQueued++ // nothing to append: sent as it is queued
		s.st.TxSent++
		return nil
	case !s.put(c, payload):
		s.st.TxBackpressure++
		c.refused = true
		return dgramio.ErrBackPressure
	}
	if c.refused {
		c.refused, c.refusedAt = false, time.Time{}
	}
	enlist(&s.staged, &c.inStaged, c)
	s.st.TxQueued++
	return nil
}

// waitsAnswer reports, for reap, whether c's last answer was refused for
// back-pressure and none was queued since. A caller that gave the answer
// up holds c open for FinishTimeout at most, counted from when reap first
// found it waiting, or from the last answer it queued since.
func (s *Layer) waitsAnswer(c *conn) bool {
	if !c.refused {
		return false
	}
	now := time.Now()
	if c.refusedAt.IsZero() {
		c.refusedAt = now
	}
	return now.Sub(c.refusedAt) < s.opt.FinishTimeout
}

// Hold stops (on) or resumes delivery from peer: while held, Rx delivers
// no record of that connection and reads nothing from it, so that its
// stream backs up to the peer (TCP's window closes). A caller that could
// not queue an answer holds the peer until the answer fits. A peer that
// finished (FIN) is not closed while held. It returns false when peer has
// no connection.
func (s *Layer) Hold(peer netip.AddrPort, on bool) bool {
	c := s.byPeer[peer]
	if c == nil || on && c.dead != nil {
		// An ended connection is not paused: a caller that holds a
		// peer until its answer fits would wait for it for ever (its
		// records wait for the Resume to be delivered, and its end
		// for them). Resume still lets them out.
		return false
	}
	if c.held != on {
		c.held = on
		if !c.eof && c.dead == nil && !c.shut {
			c.t.SetReading(!on)
		}
		if !on {
			// What came while it was held was reported and passed over.
			c.hint = true
			enlist(&s.rx, &c.inRx, c)
		}
	}
	return true
}

// Flush releases every connection's staged records to its stream and
// writes them, as much as each transport connection takes; what it does
// not take moves on with every later Rx and Flush. It polls the transport
// and accepts first unless an Rx did since the last Flush (a poll loop's
// Rx, then its answers' Flush, polls once), removes the connections that
// ended, and pushes what was written. It returns the device's error from
// Push, or the oldest unreported error queued by Report; never one
// connection's end or stall.
func (s *Layer) Flush() error {
	if !s.polled {
		s.t.Poll()
		s.t.Accept(s.accept)
		s.t.Watch(s.mark)
	}
	s.polled = false
	for _, c := range s.staged {
		c.inStaged = false
		switch {
		case c.removed || !c.open():
		case c.sg != nil:
			s.release(c)
		default:
			c.released = c.stage.Len()
			enlist(&s.tx, &c.inTx, c)
		}
	}
	forget(s.staged)
	s.staged = s.staged[:0]
	s.sendAll()
	s.reap()
	if err := s.t.Push(); err != nil {
		return err
	}
	return s.takeErr()
}

// forget clears l's entries, so that the list's array does not keep
// removed connections alive. The lists of the data path hold a handful:
// a loop's stores cost less than clear's call into the runtime, and the
// loop is not a range loop, which the compiler would turn into that call.
func forget(l []*conn) {
	for i := 0; i < len(l); i++ {
		l[i] = nil
	}
}

// sendAll writes the released bytes of every connection that has some.
// The check is apart from the loop so that it inlines into Rx and Flush,
// which then skip the call when the list is empty (most of the time).
func (s *Layer) sendAll() {
	if len(s.tx) > 0 {
		s.sendEach()
	}
}

// sendEach is sendAll's loop.
func (s *Layer) sendEach() {
	k := 0
	for _, c := range s.tx {
		if c.sg != nil {
			if !c.removed && c.dead == nil && c.waitRoom && s.roomMoved(c) {
				s.tx[k] = c
				k++
			} else {
				c.inTx = false
			}
			continue
		}
		if !c.removed {
			s.send(c)
		}
		if !c.removed && c.dead == nil && c.released > 0 {
			s.tx[k] = c
			k++
		} else {
			c.inTx = false
		}
	}
	forget(s.tx[k:])
	s.tx = s.tx[:k]
}

// send writes c's released bytes, as many as the transport takes.
func (s *Layer) send(c *conn) {
	if c.dead != nil || c.released == 0 {
		return
	}
	p := c.stage.Pending()[:c.released]
	n, err := c.t.Write(p)
	if n > 0 {
		c.released -= n
		s.st.TxSent += uint64(c.stage.Consume(n))
		taken := c.stage.TakenPayload()
		s.st.TxBytes += taken - c.sentPayload
		c.sentPayload = taken
		s.st.StreamTx += uint64(n)
		c.stallSince, c.stallReported = time.Time{}, false
	}
	if err != nil {
		c.released = 0
		s.kill(c, err)
		return
	}
	if c.released > 0 && s.opt.SendStall > 0 {
		s.watchStall(c)
	}
}

// roomMoved is send for a Stager that refused a record: the stall clock
// starts again whenever its room grew. It reports whether c is still
// waiting (a record of MaxRecord bytes does not fit yet).
func (s *Layer) roomMoved(c *conn) bool {
	r := c.sg.Room()
	if r > c.room {
		c.stallSince, c.stallReported = time.Time{}, false
	}
	c.room = r
	if r >= s.hl+s.opt.MaxRecord {
		c.waitRoom = false
		return false
	}
	if s.opt.SendStall > 0 {
		s.watchStall(c)
	}
	return true
}

// watchStall reports c once when its released bytes have not moved for
// SendStall (for a Stager: its room did not grow while a record waited).
func (s *Layer) watchStall(c *conn) {
	now := time.Now()
	if c.stallSince.IsZero() {
		c.stallSince = now
		return
	}
	if !c.stallReported && now.Sub(c.stallSince) >= s.opt.SendStall {
		c.stallReported = true
		s.st.Stalls++
		if s.opt.Events {
			s.event(c, dgramio.EventStalled, s.opt.StallError(c.peer, now.Sub(c.stallSince)))
		}
	}
}

// kill ends c after err from its transport; reap removes it.
func (s *Layer) kill(c *conn, err error) {
	if c.dead != nil {
		return
	}
	var pe *dgramio.PeerError
	if !errors.As(err, &pe) {
		pe = &dgramio.PeerError{Reset: true, Err: err}
	}
	pe.Peer = c.peer
	c.dead = pe
	enlist(&s.ends, &c.inEnds, c)
}

// Rx returns up to min(len(pkts), RxBatch) records from the connections,
// reading each at most once per call, starting each call where the last
// one stopped. pkts[i].Data points into the connection's decoder (or a
// Lender's buffer) and is valid until the next Rx, even when the
// connection ends before it; From is the connection's peer. A record longer
// than MaxRecord is skipped as it arrives and counted in RxTruncated. Like
// Flush, Rx polls the transport, accepts, writes what earlier Flushes
// released, removes the connections that ended and pushes. With
// Options.Events the connections' events queued since the last Rx come
// first (Packet.Event set, Data empty; they count toward the batch, not
// in RxDelivered). With no record to return, its error is Push's or the
// oldest unreported one of Report.
func (s *Layer) Rx(pkts []dgramio.Packet) (int, error) {
	for _, c := range s.read {
		// The records of the last Rx are done with: make room, also after
		// a read that only skipped an oversize record.
		c.inRead = false
		c.dec.Compact()
		c.endLoan()
		c.delivered = false
		if poison.Debug {
			poison.Fill(c.dec.Tail())
		}
	}
	forget(s.read)
	s.read = s.read[:0]
	busy := s.t.Poll()
	s.polled = true
	if !busy && len(s.rx) == 0 && len(s.tx) == 0 && len(s.ends) == 0 && len(s.errs) == 0 && len(s.evs) == 0 {
		return 0, nil // nothing arrived, nothing waits: an empty Rx of a spinning loop
	}
	s.t.Accept(s.accept)
	s.t.Watch(s.mark)
	s.sendAll()
	want := min(len(pkts), s.opt.RxBatch)
	e := 0
	if len(s.evs) > 0 {
		e = s.deliverEvents(pkts, want)
	}
	k := s.receiveAll(pkts, e, want)
	s.st.RxDelivered += uint64(k - e)
	s.reap()
	if len(s.evs) > 0 && k < want {
		k += s.deliverEvents(pkts[k:], want-k) // the ends reap found
	}
	if err := s.t.Push(); err != nil {
		if k == 0 {
			return 0, err
		}
		s.errs = append(s.errs, err)
	}
	if k > 0 {
		return k, nil
	}
	return 0, s.takeErr()
}

// receiveAll visits the connections of rx in order until want records
// are in pkts (k are there already), and returns how many. Those it did not reach keep their
// place at the front; those it visited that still have something go to
// the back; the rest leave rx.
func (s *Layer) receiveAll(pkts []dgramio.Packet, k, want int) int {
	i := 0
	for ; i < len(s.rx) && k < want; i++ {
		if c := s.rx[i]; c.wantsRx() {
			k = s.receive(c, pkts, k, want)
			enlist(&s.read, &c.inRead, c)
		} else if c.held {
			s.heldEnded(c)
		}
	}
	if i < len(s.rx) {
		s.rotate(i)
		return k
	}
	// Every connection visited (the common case): keep those that still
	// have something, in order, where they are.
	n := 0
	for _, c := range s.rx {
		if c.wantsRx() {
			s.rx[n] = c
			n++
		} else {
			c.inRx = false
		}
	}
	forget(s.rx[n:])
	s.rx = s.rx[:n]
	return k
}

// heldEnded ends c, a held connection Watch reported, when its transport
// says it ended (Ender): its Queue then says dgramio.ErrNoRoute, what was
// staged for it counts in TxDropped, and the reset counts in Resets once
// the records it delivered before are done with.
func (s *Layer) heldEnded(c *conn) {
	if c.dead != nil || !c.hint || c.closing {
		return
	}
	c.hint = false
	if e, ok := c.t.(Ender); ok {
		if err := e.Ended(); err != nil {
			s.kill(c, err)
		}
	}
}

// rotate is receiveAll's end when it stopped at rx[i], before the end
// of the list: those it did not reach go to the front, those it visited
// that still have something to the back, in their order.
func (s *Layer) rotate(i int) {
	next := append(s.spare[:0], s.rx[i:]...)
	for _, c := range s.rx[:i] {
		if c.wantsRx() {
			next = append(next, c)
		} else {
			c.inRx = false
		}
	}
	forget(s.rx)
	s.rx, s.spare = next, s.rx[:0]
}

// receive delivers c's records into pkts[k:want], reading the transport
// once when the buffered records run out, and returns the new k.
func (s *Layer) receive(c *conn, pkts []dgramio.Packet, k, want int) int {
	read := false
	for k < want {
		r, err := c.dec.Next()
		if err != nil { // record.ErrOversize: dropped by the decoder
			s.st.RxTruncated++
			continue
		}
		if r != nil {
			pkts[k] = dgramio.Packet{Data: r, From: c.peer}
			s.st.RxBytes += uint64(len(r))
			c.delivered = true
			k++
			continue
		}
		if read || c.eof || c.dead != nil {
			break
		}
		if !c.more && !(c.hint && c.t.Readable()) {
			c.hint = false // reported with nothing to read after all
			break
		}
		tail := c.dec.Tail()
		if len(tail) == 0 {
			c.more = true // full of records handed out in this call
			break
		}
		c.hint = false
		if c.ln != nil && c.dec.Idle() {
			if n := s.lend(c, pkts, k, want); n > k {
				k = n
				break // what follows the loan is read at the next Rx
			}
		}
		n, err := c.t.Read(tail)
		read = true
		switch {
		case err == io.EOF:
			c.more = false
			c.eof = true
			s.st.PeerCloses++
			c.t.SetReading(false)
			enlist(&s.ends, &c.inEnds, c)
		case err != nil:
			c.more = false
			s.kill(c, err)
		default:
			c.dec.Commit(n)
			s.st.StreamRx += uint64(n)
			c.more = n == len(tail)
		}
	}
	return k
}

// lend delivers into pkts[k:want] the records that lie whole at the front
// of what c's Lender peeks, in place, lends their bytes and returns the
// new k; it delivers none when the front record is cut or longer than
// MaxRecord, or nothing is there, and receive then reads.
func (s *Layer) lend(c *conn, pkts []dgramio.Packet, k, want int) int {
	p := c.ln.Peek()
	off := 0
	for s.raw && k < want && off < len(p) {
		n := min(len(p)-off, s.opt.MaxRecord)
		pkts[k] = dgramio.Packet{Data: p[off : off+n : off+n], From: c.peer}
		s.st.RxBytes += uint64(n)
		k++
		off += n
	}
	hl := s.hl
	for !s.raw && k < want && len(p)-off >= hl {
		n := prefixLen(p[off:], hl)
		end := off + hl + n
		if n > s.opt.MaxRecord || end > len(p) {
			break
		}
		pkts[k] = dgramio.Packet{Data: p[off+hl : end : end], From: c.peer}
		s.st.RxBytes += uint64(n)
		k++
		off = end
	}
	if off == 0 {
		return k
	}
	c.ln.Lend(off)
	c.lent, c.delivered = true, true
	s.st.StreamRx += uint64(off)
	c.more = c.t.Readable() // bytes behind the loan (the batch ended, the buffer wraps, a cut record): the next Rx
	return k
}

// endLoan gives back what c's transport lent for the records of the last
// Rx.
func (c *conn) endLoan() {
	if c.lent {
		c.lent = false
		c.ln.Consume()
	}
}

// Ready reports whether an Rx now may return something or move a stream
// on without the transport waking: an event to report, records decoded
// and not delivered, a connection that may be read (Watch reported it, or
// its last read filled the buffer) or that may take released bytes. A
// transport whose Writable always says true sleeps on its own readiness
// instead (epoll).
func (s *Layer) Ready() bool {
	if len(s.errs) > 0 || len(s.evs) > 0 {
		return true
	}
	s.t.Watch(s.mark)
	for _, c := range s.rx {
		if c.wantsRx() && (c.dec.Complete() || c.more || c.t.Readable()) {
			return true
		}
	}
	for _, c := range s.tx {
		if !c.removed && c.dead == nil && c.released > 0 && c.t.Writable() {
			return true
		}
	}
	return false
}

// Pending reports whether the next Rx has something for the caller that
// no transport event will announce: an error to report, or records
// decoded and not delivered (an Rx stopped at its batch). A backend whose
// Wait sleeps on the transport's own readiness (kernel tcp's epoll)
// returns at once when it is true.
func (s *Layer) Pending() bool {
	if len(s.errs) > 0 || len(s.evs) > 0 {
		return true
	}
	for _, c := range s.rx {
		if !c.removed && !c.held && c.dec.Complete() {
			return true
		}
	}
	return false
}

// reap removes the connections that ended and have nothing left to
// deliver, counting them and queueing their PeerErrors, and closes our
// side of those whose peer finished once everything staged for them is
// written and they are not held (a holder still has answers for them).
// An Unacker's connection is closed only once the peer acknowledged what
// was written (finished), so that answers the peer never gets are
// counted.
func (s *Layer) reap() {
	if len(s.ends) > 0 {
		s.reapEach()
	}
}

// reapEach is reap's loop.
func (s *Layer) reapEach() {
	k := 0
	for _, c := range s.ends {
		switch {
		case c.removed:
			c.inEnds = false
			continue
		case c.dead != nil && !c.delivered && (c.local || !c.dec.Complete()):
			// Not while records of the last Rx are out: reading out
			// compacts the decoder and ends a loan under them.
			if c.dead.Reset {
				s.st.Resets++
			} else if !c.eof {
				s.st.PeerCloses++
			}
			s.dropStaged(c)
			s.countUnacked(c)
			s.readOut(c)
			s.cutRecord(c)
			if !c.local && !(c.eof && c.reported) {
				// Once per connection: a write that fails after
				// the peer's FIN was reported ends the same
				// connection (what it drops is counted).
				s.event(c, dgramio.EventReset, c.dead)
			}
			s.remove(c)
			s.drop(c)
			c.t.Abort()
			continue
		case c.shut && c.dead == nil && !c.delivered:
			if !c.reported {
				// CloseConn: what the peer sent is not delivered.
				c.reported = true
				s.readOut(c)
				s.cutRecord(c)
			}
			if c.staged() == 0 {
				s.remove(c)
				if s.finished(c) {
					s.drop(c)
					continue
				}
			}
		case c.eof && !c.delivered && !c.dec.Complete():
			if !c.reported {
				c.reported = true
				s.cutRecord(c)
				s.event(c, dgramio.EventPeerFIN, nil)
			}
			if c.events == 0 && c.staged() == 0 && !c.held && !s.waitsAnswer(c) {
				s.remove(c)
				if s.finished(c) {
					s.drop(c)
					continue
				}
			}
		}
		s.ends[k] = c
		k++
	}
	forget(s.ends[k:])
	s.ends = s.ends[:k]
}

// drop takes c out of the set: later reports of it are ignored, and the
// work lists drop it as they meet it.
func (s *Layer) drop(c *conn) {
	s.event(c, dgramio.EventEnded, nil)
	c.removed, c.inEnds = true, false
	c.t.hook().c = nil
	last := s.conns[len(s.conns)-1]
	s.conns[c.pos], last.pos = last, c.pos
	s.conns[len(s.conns)-1] = nil
	s.conns = s.conns[:len(s.conns)-1]
}

// checkEvery bounds how often reap asks an Unacker whose connection is
// closing whether the peer acknowledged what was written; after
// Options.FinishTimeout without that, the peer is taken for gone: what it
// did not acknowledge counts in TxDropped and the connection is reset (a
// peer that vanished would otherwise hold its connection for as long as
// the transport retransmits, minutes).
const (
	checkEvery       = time.Millisecond
	defaultFinishMax = 10 * time.Second
)

// finished sends c's FIN (a HalfCloser) as soon as its directions are
// both over, and closes c once nothing it wrote waits for the peer's
// acknowledgement (reap asks at each Rx and Flush, so a backend that is
// not called releases it at its Close), or resets it and counts
// what never will be acknowledged once the connection ended or
// Options.FinishTimeout has passed; until then
// c stays in the set, closing, taking no more records. It reports
// whether c was released.
func (s *Layer) finished(c *conn) bool {
	u, ok := c.t.(Unacker)
	if !ok {
		c.t.Close()
		return true
	}
	now := time.Now()
	if !c.closing {
		c.closing, c.since = true, now
		if h, ok := c.t.(HalfCloser); ok {
			// Our FIN now, after the last answer: the peer need not
			// wait for the acknowledgements (nor for our next Rx).
			_ = h.CloseWrite()
		}
	} else if now.Sub(c.checked) < checkEvery {
		return false
	}
	c.checked = now
	n, ended := u.UnackedRecords()
	switch {
	case n == 0:
		c.t.Close()
	case ended || now.Sub(c.since) >= s.opt.FinishTimeout:
		s.countUnacked(c)
		c.t.Abort()
	default:
		return false
	}
	return true
}

// countUnacked moves the records c's transport took and its peer never
// acknowledged the first byte of (Unacker) from TxSent to TxDropped, and
// returns how many.
func (s *Layer) countUnacked(c *conn) uint64 {
	u, ok := c.t.(Unacker)
	if !ok {
		return 0
	}
	k, _ := u.UnackedRecords()
	n := min(uint64(max(k, 0)), s.st.TxSent)
	s.st.TxSent -= n
	s.st.TxDropped += n
	return n
}

// readOutMax bounds the reads of one readOut, against a peer that sends
// as fast as we read.
const readOutMax = 64

// readOut reads what c's transport still holds, up to EOF, an error,
// nothing more now or readOutMax reads, counts its whole records and those decoded and not
// delivered in RxClosed (oversize ones in RxTruncated); a partial record
// stays in the decoder (the caller cuts it once the stream is over,
// cutRecord). It reports whether it read to EOF or
// an error (the peer's direction is over).
func (s *Layer) readOut(c *conn) (ended bool) {
	c.endLoan()
	for range readOutMax {
		s.countUndelivered(c)
		c.dec.Compact()
		tail := c.dec.Tail()
		if len(tail) == 0 {
			// Only a record longer than the buffer, which Next skips as
			// it comes: cannot happen after countUndelivered.
			break
		}
		n, err := c.t.Read(tail)
		if n > 0 {
			c.dec.Commit(n)
			s.st.StreamRx += uint64(n)
		}
		if err != nil || n == 0 {
			ended = err != nil
			break
		}
	}
	s.countUndelivered(c)
	return ended
}

// drain reads out c (readOut) until its transport has nothing more, for
// Close: there the transport takes no more from the peer (kernel tcp shut
// the socket's reading down; the engines are not driven any more), so
// what is left is finite, and a receive buffer holds far more than the
// reads of one readOut (a 32 MiB socket buffer of answers).
func (s *Layer) drain(c *conn) {
	for {
		before := s.st.StreamRx
		if s.readOut(c) || s.st.StreamRx == before {
			return
		}
	}
}

// countUndelivered counts the whole records c's decoder holds in RxClosed
// and consumes them.
func (s *Layer) countUndelivered(c *conn) {
	for {
		r, err := c.dec.Next()
		switch {
		case err != nil:
			s.st.RxTruncated++
		case r == nil:
			return
		default:
			s.st.RxClosed++
		}
	}
}

// cutRecord counts the partial record that c's end cut off, once.
func (s *Layer) cutRecord(c *conn) {
	if c.dec.Buffered() > 0 {
		s.st.RxMalformed++
	}
	c.dec.Reset()
}

func (s *Layer) remove(c *conn) {
	if s.byPeer[c.peer] == c {
		delete(s.byPeer, c.peer)
		s.last = nil
	}
}

// takeErr returns the oldest unreported error, once.
func (s *Layer) takeErr() error {
	if len(s.errs) == 0 {
		return nil
	}
	err := s.errs[0]
	copy(s.errs, s.errs[1:])
	s.errs[len(s.errs)-1] = nil
	s.errs = s.errs[:len(s.errs)-1]
	return err
}

// Abandon counts what is still staged, for a backend that closes: a
// record whose head the stream already took counts as sent, not dropped
// (the receiver sees it cut and counts it, RxMalformed); every other
// staged record counts in TxDropped, on every connection, ended or not.
// The stagings are empty afterwards.
func (s *Layer) Abandon() {
	for _, c := range s.conns {
		s.dropStaged(c)
	}
}

// dropStaged counts what c has staged and empties its staging: a record
// whose head the stream took counts as sent (the receiver sees it cut, or
// an Unacker's count moves it to TxDropped when the peer never
// acknowledged its head), every other one in TxDropped.
func (s *Layer) dropStaged(c *conn) {
	if c.sgRecs > 0 {
		s.st.TxDropped += uint64(c.sgRecs)
		c.sg.Unstage()
		c.sgRecs, c.sgBytes = 0, 0
	}
	n := uint64(c.stage.Records())
	if c.stage.Started() {
		n--
		s.st.TxSent++
	}
	s.st.TxDropped += n
	c.stage.Reset()
	c.released = 0
}

// Linger, for a backend that closes, after Abandon: it ends our direction
// of every live connection whose Conn is a HalfCloser (FIN) and reads
// them until each peer has closed its direction too (EOF), fails, or has
// sent nothing for idle, or until max has passed, counting every record
// read, and every one decoded and never delivered, in RxClosed. On
// Unackers it also waits, within the same bounds, for what was written
// to be acknowledged (idle then runs from the last record acknowledged),
// so that Close counts as lost only what the peer never acknowledged, not
// what an acknowledgement on its way would have cleared. wait sleeps at
// most d for one of conns (those still read) to become readable, driving
// the transport (conns may be empty: it then only lets acknowledgements
// in); it may allocate.
// Connections that cannot half-close are only read out once. Afterwards
// nothing undelivered is left uncounted; what the peer sends after
// Close is reset away by the transport and is the peer's to count (its
// failed writes: TxDropped).
func (s *Layer) Linger(idle, max time.Duration, wait func(conns []Conn, d time.Duration)) {
	for _, c := range s.conns {
		h, ok := c.t.(HalfCloser)
		switch {
		case c.dead != nil:
			s.readOut(c)
		case c.eof || !ok:
			c.eof = s.readOut(c) || c.eof
		case h.CloseWrite() != nil:
			s.readOut(c)
			c.eof = true
		}
	}
	start := time.Now()
	last := start
	unacked := s.unsettled()
	var waiting []Conn
	for {
		before := s.st.StreamRx
		waiting = waiting[:0]
		for _, c := range s.conns {
			if c.dead == nil && !c.eof {
				c.eof = s.readOut(c)
				if !c.eof {
					waiting = append(waiting, c.t)
				}
			}
		}
		now := time.Now()
		if u := s.unsettled(); s.st.StreamRx != before || u < unacked {
			last, unacked = now, u
		}
		if (len(waiting) == 0 && unacked == 0) || now.Sub(last) >= idle || now.Sub(start) >= max {
			return
		}
		wait(waiting, min(idle-now.Sub(last), max-now.Sub(start)))
	}
}

// unsettled is the number of records written to the live connections of
// Unackers whose first byte the peer has not acknowledged yet.
func (s *Layer) unsettled() int {
	n := 0
	for _, c := range s.conns {
		if u, ok := c.t.(Unacker); ok && c.dead == nil {
			if k, ended := u.UnackedRecords(); !ended {
				n += k
			}
		}
	}
	return n
}

// ReadOut reads out what every connection's transport holds, as Close
// does first, counting the undelivered records in RxClosed, and closes
// nothing: for a backend that closes, before it stops its transport
// from taking more (kernel tcp shuts its sockets down between ReadOut
// and Close, so that Close reads the rest and nothing arrives after).
func (s *Layer) ReadOut() {
	for _, c := range s.conns {
		s.readOut(c)
	}
}

// Close closes every connection (Conn.Close; Conn.Abort for one that
// failed) and empties the set. It first reads out all that each transport
// still holds (the transport must take no more from the peer by then),
// counting the undelivered records in RxClosed and a cut one
// in RxMalformed. On a Conn that is an Unacker, the records whose first
// byte the peer has not acknowledged move from TxSent to TxDropped, and
// a connection that has any is reset (Conn.Abort): they are lost, as
// counted. Call Abandon first to count what was staged (and Linger to
// read what the peers still send and give what was written time to be
// acknowledged).
func (s *Layer) Close() {
	for _, c := range s.conns {
		s.drain(c)
		s.cutRecord(c)
		if s.countUnacked(c) > 0 || c.dead != nil {
			c.t.Abort()
		} else {
			c.t.Close()
		}
	}
	for _, c := range s.conns {
		c.removed = true
		c.t.hook().c = nil
	}
	clear(s.conns)
	s.conns = s.conns[:0]
	clear(s.byPeer)
	s.last = nil
	clear(s.evs)
	s.evs = s.evs[:0]
	for _, l := range []*[]*conn{&s.rx, &s.spare, &s.tx, &s.staged, &s.read, &s.ends} {
		clear(*l)
		*l = (*l)[:0]
	}
}

// event is a connection event queued for Rx (Options.Events).
type event struct {
	c   *conn
	ev  dgramio.Event
	err error
}

// event queues ev of c for the next Rx, with Options.Events.
func (s *Layer) event(c *conn, ev dgramio.Event, err error) {
	if s.opt.Events {
		s.evs = append(s.evs, event{c: c, ev: ev, err: err})
		c.events++
	}
}

// deliverEvents moves the oldest queued events into pkts[:want] and
// returns how many. A connection whose EventPeerFIN went out counts as
// delivered from in this Rx, so that reap leaves it as it is until the
// next one: the loop answers the FIN before ours.
func (s *Layer) deliverEvents(pkts []dgramio.Packet, want int) int {
	k := 0
	for ; k < len(s.evs) && k < want; k++ {
		e := &s.evs[k]
		pkts[k] = dgramio.Packet{From: e.c.peer, Event: e.ev, Err: e.err}
		e.c.events--
		if e.ev == dgramio.EventPeerFIN {
			e.c.delivered = true
			enlist(&s.read, &e.c.inRead, e.c)
		}
	}
	n := copy(s.evs, s.evs[k:])
	clear(s.evs[n:])
	s.evs = s.evs[:n]
	return k
}

// ErrResetByApp is the cause of a connection that ResetConn reset.
var ErrResetByApp = errors.New("connection reset by the application (ResetConn)")

// CloseConn closes the connection to peer in order (dgramio.Conns): nothing
// more of it is read or delivered (what the transport holds counts in
// RxClosed), what was queued for it goes out at the next Flush, then our
// FIN, and it leaves the set (EventEnded) as a connection whose peer
// finished would. QueueTo to peer counts in NoConn from now on. It
// returns false when peer has no connection.
func (s *Layer) CloseConn(peer netip.AddrPort) bool {
	c := s.byPeer[peer]
	if c == nil {
		return false
	}
	if !c.shut && c.dead == nil {
		c.shut = true
		if !c.eof && !c.held {
			c.t.SetReading(false)
		}
		enlist(&s.ends, &c.inEnds, c)
	}
	return true
}

// ResetConn resets the connection to peer (dgramio.Conns) at the next Rx or
// Flush that has no record of it out: what is staged counts in
// TxDropped, what was received and not delivered in RxClosed, and Resets
// counts it; EventEnded follows, no EventReset. It returns false when
// peer has no connection.
func (s *Layer) ResetConn(peer netip.AddrPort) bool {
	c := s.byPeer[peer]
	if c == nil {
		return false
	}
	if c.dead == nil {
		c.dead = &dgramio.PeerError{Peer: peer, Reset: true, Err: ErrResetByApp}
		c.local = true
		if !c.eof && !c.held && !c.shut {
			c.t.SetReading(false)
		}
		enlist(&s.ends, &c.inEnds, c)
	}
	return true
}

// ConnErr is the error of a dgramio.Conns method for the layer's answer:
// nil when the peer had a connection, dgramio.ErrNoConn when not.
func ConnErr(ok bool) error {
	if ok {
		return nil
	}
	return dgramio.ErrNoConn
}
