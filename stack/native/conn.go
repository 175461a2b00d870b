package native

import (
	"io"
	"net/netip"
	"time"

	"github.com/dgramio/dgramio/internal/poison"
)

// State is a connection's state (RFC 9293 §3.3.2).
type State uint8

// The states of RFC 9293 §3.3.2.
const (
	Closed State = iota
	Listen
	SynSent
	SynReceived
	Established
	FinWait1
	FinWait2
	CloseWait
	Closing
	LastAck
	TimeWait
)

var stateNames = [...]string{"CLOSED", "LISTEN", "SYN-SENT", "SYN-RECEIVED", "ESTABLISHED",
	"FIN-WAIT-1", "FIN-WAIT-2", "CLOSE-WAIT", "CLOSING", "LAST-ACK", "TIME-WAIT"}

// String returns the state's name as RFC 9293 spells it.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "UNKNOWN"
}

// synchronized reports whether the state is past the handshake.
func (s State) synchronized() bool { return s >= Established }

// Conn is one TCP connection of an Engine. It lives in the engine's
// table: a *Conn is valid from Dial or Accept until Close or Abort, after
// which the engine reuses it for another connection. Like the engine, it
// must be used from the engine's goroutine only.
type Conn struct {
	// The fields that a segment in order, its ACK and the answer touch
	// come first and together (the slot's first seven cache lines); the
	// state of the handshake, loss recovery, keepalive and the rest
	// follows. BENCHMARKS.md has what the order saves.
	e       *Engine
	idx     int32
	state   State
	user    bool // the application holds it (Dial, Accept) and has not closed it
	queued  bool // in a listener's accept queue
	inDirty bool
	// inReadable: in the engine's list for TakeReadable.
	inReadable bool

	finQueued, finSent bool
	finAcked           bool
	inRecovery         bool
	rttTiming          bool
	hasRTT             bool
	ackNow             bool
	dsackSet           bool
	oooFin             bool
	finRcvd            bool
	sackOK, tsOK       bool
	sndWS, rcvWS       uint8

	raddr        [4]byte
	lport, rport uint16
	mac          [6]byte
	arpEpoch     uint16 // Engine.arpEpoch when mac was taken (refreshMAC)

	// send side: sbuf holds sLen bytes from SND.UNA on at sHead, then the
	// sHeld bytes staged (Stage); sHead goes back to its home whenever
	// the ring empties.
	sbuf              []byte
	sHead, sLen       int
	sHeld             int // staged after the sLen bytes, not sendable before Release
	sndUna, sndNxt    uint32
	sndMax            uint32 // highest sequence number sent
	sndWnd, maxSndWnd uint32
	sndWl1, sndWl2    uint32
	cwnd, ssthresh    uint32
	caAcc             uint32
	smss              int // payload of a full segment (peer's MSS less timestamps)
	peerMSS           int // the peer's MSS, at most ours
	nsacked           int // blocks in sacked
	dupacks           int
	retries           int
	srtt, rttvar, rto int64

	// flightMax is the most in flight since cwndMark, and cwndLimited
	// whether cwnd held data back then: cwnd grows only when it is used
	// (ccAck). lastSend is when data last left (cwndAfterIdle).
	flightMax, cwndMark uint32
	cwndLimited         bool
	lastSend            int64

	// receive side: rbuf holds rLen readable bytes at rHead, then room for
	// out-of-order data at offsets from RCV.NXT; rHead goes back to its
	// home whenever the ring empties (nothing readable, nothing out of
	// order).
	rbuf                   []byte
	rHead, rLen            int
	rLent                  int // of rLen, the bytes at rHead lent in place (Lend)
	rcvCap                 int
	rmss                   int
	nooo                   int // blocks in ooo
	unackedBytes, quickAck int
	rcvNxt                 uint32
	rcvAdv                 uint32 // right edge of the window advertised
	lastAckSent            uint32
	tsRecent               uint32
	tsOff                  uint32
	keepProbes             int
	lastRx                 int64
	err                    error

	// timers: absolute ns, 0 = off; heapAt is the key in the engine's heap.
	tRTO, tDelack, tPersist, tKeep, tWait int64
	heapAt                                int64
	heapIdx                               int32

	// The rest.
	l                   *Listener
	hop                 [4]byte
	macOK               bool
	needSyn             bool
	iss, irs            uint32
	finSeq              uint32
	sacked              []sackBlock // SACK scoreboard (RFC 6675 §3), sorted; grows up to maxBlocks (addBlock)
	cubic               cubicState
	rtxOne              bool
	recoverSet          bool
	recover, rtxNext    uint32
	unaRtx              bool      // the segment at SND.UNA was retransmitted in this recovery
	oowAcked            bool      // rejectAck answered a segment without data, at oowAckAt
	unaRtxAt            int64     // when, at the latest
	unaRtxMark          uint32    // SND.MAX then: a SACK above it is of data sent after that retransmission
	rtxd                rtxRanges // retransmitted in the last recovery
	prr                 prrState  // recovery.go: RFC 6937
	eifel               eifelState
	persistShift        int
	rttSeq              uint32
	rttAt               int64
	oowAckAt            int64 // when rejectAck answered a segment without data (oowAcked)
	keepIdle, keepIntvl time.Duration
	keepCnt             int
	ooo                 []sackBlock // out-of-order data held, sorted; grows up to maxBlocks (addBlock)
	lastOOO             uint32
	oooRecent           [2]uint32 // lastOOO of the blocks that grew before it, latest first (putSACK)
	dsack               sackBlock // duplicate data the next ACK reports (RFC 2883 §4)
	oooFinSeq           uint32
	oooAckNxt           uint32 // RCV.NXT of the duplicate ACKs counted in oooDupAcks
	oooDupAcks          uint8  // immediate duplicate ACKs sent at oooAckNxt
	oooHeld             uint8  // out-of-order segments whose ACK is held (ackOOO)
	wsOK                bool
	persistProbes       int32     // zero-window probes sent since the peer's last ACK
	hs                  hyState   // HyStart++ (hystart.go)
	stallAt             int64     // 1 + when the first retransmission or probe without progress was due (0: none)
	rk                  rackState // RACK-TLP (rack.go)
	bbr                 *bbrState // BBR (bbr.go), nil under another congestion control
	tPace               int64     // pacing timer (pacing.go), 0 = off
	m                   memState  // buffer sizing (bufpool.go)
	// The slot is a whole number of cache lines (960 bytes), so that in
	// the engine's table each one's first fields start a line
	// (TestConnLayout): hs and oowAcked fill what were holes.
}

// Peer returns the remote address and port.
func (c *Conn) Peer() netip.AddrPort { return netip.AddrPortFrom(c.e.peerAddr(c.raddr), c.rport) }

// LocalPort returns the local port.
func (c *Conn) LocalPort() uint16 { return c.lport }

// State returns the connection's state.
func (c *Conn) State() State { return c.state }

// Err returns why the connection ended (ErrReset, ErrRefused, ErrTimedOut,
// ErrHostUnreachable, ErrAborted), nil while it did not.
func (c *Conn) Err() error { return c.err }

// Write copies as much of p as fits into the send buffer and returns how
// many bytes it took: 0 when the buffer is full, or when the connection
// does not send any more (closed for writing, reset: see Err). The bytes
// leave at the next Flush (or later, as the windows allow), after what
// was staged, which Write releases first. The caller keeps p.
func (c *Conn) Write(p []byte) int {
	c.Release()
	n := min(len(p), c.Room())
	if n == 0 {
		return 0
	}
	c.sendRing(n)
	toRing(c.sbuf, wrap(c.sHead+c.sLen, len(c.sbuf)), p[:n])
	c.sLen += n
	c.e.markDirty(c)
	return n
}

// Room returns how many bytes Write or Stage would take now: 0 when the
// send buffer is full or the connection does not send any more. The
// send buffer is Options.SendBuf, or when that is above sendFloor, what
// is in flight and what the congestion window needs (sendLimit). The
// send ring grows with what it holds (docs/memory.md).
func (c *Conn) Room() int {
	if c.finQueued || c.err != nil {
		return 0
	}
	switch c.state {
	case SynSent, SynReceived, Established, CloseWait:
		return max(0, c.sendLimit()-c.sLen-c.sHeld)
	}
	return 0
}

// sendFloor is the send buffer a connection always has, when
// Options.SendBuf is at least as large: any record fits an idle
// connection's (the stream layer's records are at most 64 KiB).
const sendFloor = 1 << 20

// sendLimit is the send buffer: what is in flight (sent, not yet
// acknowledged) and twice the congestion window more, at least
// sendFloor, at most Options.SendBuf, as Linux's tcp_sndbuf_expand grows
// sk_sndbuf with cwnd up to tcp_wmem's maximum. Bytes written ahead of
// what the window sends in a round trip only wait: a ceiling of
// megabytes, which a long fast path needs in flight, made a sender on a
// slow lossy path queue all of it, seconds of data (a bulk writer's
// last byte arrived 2.5 s after it stopped writing, at 0.1% loss over
// 10 ms each way). The flight is counted apart because a recovery cuts
// cwnd while the bytes SACKed behind a hole stay: twice cwnd alone
// then stopped every write, nothing was sent after a lost
// retransmission, and RACK, which finds it lost by the delivery of a
// segment sent after it (RFC 8985 §6.2), left it to the RTO (0–2 a run
// at 3% loss and 10 ms under BBR, BenchmarkBBRLossyLongPath).
func (c *Conn) sendLimit() int {
	b := c.e.o.SendBuf
	if b <= sendFloor {
		return b
	}
	return min(b, max(sendFloor, int(c.sndMax-c.sndUna)+2*int(c.cwnd)))
}

// Stage copies head and then body into the send buffer after what was
// written and staged before, all of it or, when Room is short of it,
// nothing (it returns false). Staged bytes do not leave before Release:
// a writer stages what it may still take back (Unstage), one unit at a
// time (the stream layer: a record, its length prefix as head), and
// releases at once what it stages between two flushes.
func (c *Conn) Stage(head, body []byte) bool {
	n := len(head) + len(body)
	if n > c.Room() {
		return false
	}
	c.sendRing(n)
	at := wrap(c.sHead+c.sLen+c.sHeld, len(c.sbuf))
	if end := at + n; end <= len(c.sbuf) { // the usual case: no wrap
		k := copy(c.sbuf[at:end], head)
		copy(c.sbuf[at+k:end], body)
	} else {
		toRing(c.sbuf, at, head)
		toRing(c.sbuf, wrap(at+len(head), len(c.sbuf)), body)
	}
	c.sHeld += n
	return true
}

// Release makes the staged bytes written: they leave at the next Flush,
// as the windows allow.
func (c *Conn) Release() {
	if c.sHeld > 0 {
		c.sLen += c.sHeld
		c.sHeld = 0
		c.e.markDirty(c)
	}
}

// Unstage drops the staged bytes.
func (c *Conn) Unstage() {
	c.sHeld = 0
	c.sendHomeIfEmpty()
}

// Read copies received bytes into p. It returns 0, nil when nothing is
// there yet; io.EOF once the peer's FIN was reached; the connection's
// error (ErrReset, ErrTimedOut, ...) when it ended otherwise, after the
// bytes that came before it were read.
func (c *Conn) Read(p []byte) (int, error) {
	c.Consume()
	if c.rLen == 0 {
		if c.finRcvd {
			return 0, io.EOF
		}
		if c.err != nil {
			return 0, c.err
		}
		return 0, nil
	}
	n := min(len(p), c.rLen)
	fromRing(p[:n], c.rbuf, c.rHead)
	c.taken(n)
	return n, nil
}

// wrap is i taken back into a ring of n bytes, for i < 2n: the ring
// positions are a position in it plus a length that fits it, and a
// compare costs less than the division of i % n.
func wrap(i, n int) int {
	if i >= n {
		i -= n
	}
	return i
}

// toRing copies p into ring from position at on, wrapping at its end;
// p fits the ring.
func toRing(ring []byte, at int, p []byte) {
	if k := copy(ring[at:], p); k < len(p) {
		copy(ring, p[k:])
	}
}

// fromRing fills p from ring's position at on, wrapping at its end.
func fromRing(p, ring []byte, at int) {
	if k := copy(p, ring[at:]); k < len(p) {
		copy(p[k:], ring)
	}
}

// Readable reports whether Read would return bytes or an error, or Peek
// bytes: the bytes lent (Lend) do not count.
func (c *Conn) Readable() bool { return c.rLen > c.rLent || c.finRcvd || c.err != nil }

// Peek returns the received bytes that follow those lent (Lend), as many
// as lie contiguous in the receive buffer, without taking them: fewer
// than all when the buffer wraps behind them (Readable is still true
// after lending all of Peek's bytes then), none when nothing is there.
// The slice is valid, and its bytes unchanged, until Consume, Read or
// Close.
//
// Peek and Lend let a reader use received data where it lies instead of
// copying it out (the stream layer hands out records that point into the
// buffer): it peeks, lends the part it uses, and consumes all it lent
// when it is done with it. Until then the lent bytes take their room in
// the receive window, as bytes not read do.
func (c *Conn) Peek() []byte {
	at := wrap(c.rHead+c.rLent, len(c.rbuf))
	n := min(c.rLen-c.rLent, len(c.rbuf)-at)
	return c.rbuf[at : at+n : at+n]
}

// Lend marks the first n bytes of Peek's as lent: the next Peek starts
// after them and Readable counts them no more, while they stay in place
// until Consume. n must not exceed len(Peek()).
func (c *Conn) Lend(n int) { c.rLent += n }

// Consume takes back every byte lent, as a Read of them would: the
// receive window opens by as much. Read and Close consume first.
func (c *Conn) Consume() {
	n := c.rLent
	if n == 0 {
		return
	}
	if poison.Debug { // a reader that keeps a lent byte sees garbage
		end := c.rHead + n
		poison.Fill(c.rbuf[c.rHead:min(end, len(c.rbuf))])
		if end > len(c.rbuf) {
			poison.Fill(c.rbuf[:end-len(c.rbuf)])
		}
	}
	c.rLent = 0
	c.taken(n)
}

// taken frees the first n readable bytes of the receive ring, which the
// application read or had lent: the window opens by as much, and the
// connection is named readable again when bytes or the FIN follow.
func (c *Conn) taken(n int) {
	c.rHead = wrap(c.rHead+n, len(c.rbuf))
	c.rLen -= n
	c.recvHomeIfEmpty()
	if c.m.copied += int32(n); c.e.now-c.m.spaceAt >= c.m.rcvRTT {
		c.tuneWindow() // bufpool.go
	}
	c.windowOpened()
	if c.Readable() {
		c.e.markReadable(c)
	}
}

// Slot is c's index in the engine's connection table, 0 <= Slot <
// Options.MaxConns: no two connections the application holds share it,
// and the engine gives it to another connection after Close or Abort.
func (c *Conn) Slot() int { return int(c.idx) }

// Writable reports whether Write would take at least one byte.
func (c *Conn) Writable() bool { return c.Room() > 0 }

// Buffered returns the bytes written but not yet acknowledged by the peer.
func (c *Conn) Buffered() int { return c.sLen }

// SetRecvBuf limits the receive window to n bytes (at most
// Options.RecvBuf; at least one segment), and turns its auto-tuning off
// (as SO_RCVBUF does on Linux). Before the SYN leaves, the window scale
// follows; afterwards the buffer never shrinks below what was advertised
// or received.
func (c *Conn) SetRecvBuf(n int) {
	n = max(min(n, c.e.o.RecvBuf), c.e.mss)
	c.m.locked = true
	if c.state == SynSent && c.needSyn || c.state == Closed {
		c.rcvCap, c.rcvWS = n, wscaleFor(n)
	} else {
		c.rcvCap = max(n, c.rLen+int(c.rcvWnd()))
	}
	c.m.rcvMax = int32(c.rcvCap)
}

// SetKeepalive turns keepalive on (RFC 1122 §4.2.3.6): a probe after idle
// without a received segment, then one every interval, count unanswered
// probes reset the connection (ErrTimedOut). idle 0 turns it off.
func (c *Conn) SetKeepalive(idle, interval time.Duration, count int) {
	c.keepIdle, c.keepIntvl, c.keepCnt = idle, interval, count
	if c.keepIntvl <= 0 {
		c.keepIntvl = c.e.o.KeepaliveInterval
	}
	if c.keepCnt <= 0 {
		c.keepCnt = c.e.o.KeepaliveCount
	}
	c.armKeepalive()
}

// CloseWrite sends FIN after the data written, and after what was staged,
// which it releases (RFC 9293 §3.10.4): the
// peer reads EOF, this side goes on reading. A connection still in
// SYN-SENT is closed at once.
func (c *Conn) CloseWrite() {
	if c.finQueued || c.state == Closed {
		return
	}
	if c.state == SynSent {
		c.toClosed(nil)
		return
	}
	c.Release()
	c.finQueued = true
	c.e.markDirty(c)
}

// Close ends the application's use of the connection. With unread data it
// resets the connection (RST, RFC 9293 §3.10.4 and RFC 2525 §2.17);
// otherwise it sends FIN after the data written and the engine finishes
// the close on its own (FIN-WAIT, TIME-WAIT). The Conn must not be used
// afterwards.
func (c *Conn) Close() {
	if !c.user {
		return
	}
	c.Consume()
	if c.rLen > 0 || (c.nooo > 0 && c.state.synchronized()) {
		c.Abort()
		return
	}
	c.user = false
	switch c.state {
	case Closed:
		c.e.release(c)
	case SynSent:
		c.toClosed(nil)
	case TimeWait:
		c.e.toTimeWait(c)
	default:
		c.CloseWrite()
		if c.state == FinWait2 {
			c.tWait = c.e.now + int64(c.e.o.TimeWait)
			c.e.arm(c)
		}
	}
}

// Abort resets the connection: a RST goes to the peer (when the handshake
// got that far) and the connection is gone. The Conn must not be used
// afterwards.
func (c *Conn) Abort() {
	if c.state != Closed && c.state != SynSent && c.state != TimeWait {
		c.sendRST(c.ackSeq())
		c.e.cnt[cTCPAborts]++
	}
	c.user = false
	c.toClosed(ErrAborted)
}

// fail ends the connection with err (nil for a normal end).
func (c *Conn) fail(err error) { c.toClosed(err) }

// toClosed moves to CLOSED: the tuple is free again, the timers are off;
// the slot goes back to the engine unless the application holds it.
func (c *Conn) toClosed(err error) {
	e := c.e
	if c.err == nil {
		c.err = err
	}
	if c.state != Closed {
		if c.state == SynReceived && c.l != nil {
			c.l.synRcvd--
			e.synRcvd--
		}
		e.unlist(tuple{c.raddr, c.lport, c.rport})
	}
	c.state = Closed
	c.tRTO, c.tDelack, c.tPersist, c.tKeep, c.tWait = 0, 0, 0, 0, 0
	e.heapRemove(c)
	e.markReadable(c)
	if !c.user && !c.queued {
		e.release(c)
	}
}

// release gives the slot back, and its rings to the pool.
func (e *Engine) release(c *Conn) {
	if c.state != Closed {
		if c.state == SynReceived && c.l != nil {
			c.l.synRcvd--
			e.synRcvd--
		}
		e.unlist(tuple{c.raddr, c.lport, c.rport})
	}
	e.heapRemove(c)
	c.freeRings()
	idx, dirty, readable := c.idx, c.inDirty, c.inReadable
	*c = Conn{e: e, idx: idx, heapIdx: -1, inDirty: dirty, inReadable: readable}
	e.free = append(e.free, idx)
}

// wscaleFor is the window scale that lets a 16-bit window cover n bytes.
func wscaleFor(n int) uint8 {
	var s uint8
	for s < 14 && n>>s > 0xffff {
		s++
	}
	return s
}

// newConn takes a free slot for the tuple, with buffers and defaults.
func (e *Engine) newConn(raddr [4]byte, lport, rport uint16) *Conn {
	if len(e.free) == 0 {
		e.cnt[cTCPConnTableFull]++
		return nil
	}
	i := e.free[len(e.free)-1]
	e.free = e.free[:len(e.free)-1]
	c := &e.conns[i]
	c.raddr, c.lport, c.rport = raddr, lport, rport
	c.initMem() // the window and send limit to start from
	c.rcvWS = wscaleFor(e.o.RecvBuf)
	c.rmss = e.mssFor(raddr)
	c.smss, c.peerMSS = 536, 536
	c.rto = int64(e.o.InitialRTO)
	c.iss = e.isn(raddr, lport, rport)
	c.tsOff = e.tsOffset(raddr, lport, rport)
	c.quickAck = 2
	if e.o.Keepalive > 0 {
		c.keepIdle, c.keepIntvl, c.keepCnt = e.o.Keepalive, e.o.KeepaliveInterval, e.o.KeepaliveCount
	}
	e.table[tuple{raddr, lport, rport}] = i
	e.peerRef(raddr) // an IPv6 peer's alias lives while the table holds it
	return c
}

// buffers readies c's rings at Dial and when its handshake completes. A
// connection holds its send and receive rings only while it uses them
// (sendRing, recvRing): they come from the engine's pool when the first
// byte is written or arrives and go back once they stayed empty until
// the pool's next trim, so that SYNs that never complete (a flood) and
// idle connections cost a slot but no buffers.
func (c *Conn) buffers() {
	c.sendHomeIfEmpty() // a second call (Dial, then establish) keeps what was written
	c.recvHomeIfEmpty()
}

// A ring's home is where its position goes whenever it is empty (at the
// start, and each time its bytes have all been taken), so that traffic of
// requests and answers, which empties both rings every round trip, writes
// and reads the same few cache lines instead of moving through a ring of
// megabytes to lines last touched that many bytes ago (a miss to memory
// on each). The homes lie inside the first page and apart from its start:
// the runtime page-aligns a large buffer, and the fronts of the other hot
// buffers (the stream layer's staging and decoder, the frames) share the
// first cache sets; the two rings of a connection take sets of their own.
const (
	sendHome = 1536
	recvHome = 2560
)

// home is a ring of n bytes' home position h, or 0 when the ring is too
// small to have it.
func home(n, h int) int {
	if h < n {
		return h
	}
	return 0
}

// sendHomeIfEmpty moves the send ring's position home when it holds
// nothing, and lists the connection for the pool's next trim, which
// takes the ring back if it is still empty then (bufpool.go).
func (c *Conn) sendHomeIfEmpty() {
	if c.sLen == 0 && c.sHeld == 0 {
		c.sHead = home(len(c.sbuf), sendHome)
		if !c.m.listed && c.sbuf != nil {
			c.e.listEmpty(c)
		}
	}
}

// recvHomeIfEmpty moves the receive ring's position home when it holds
// nothing: no readable bytes and no out-of-order data, which lies at
// offsets from the position. The connection is listed for the pool's
// next trim, as for the send ring.
func (c *Conn) recvHomeIfEmpty() {
	if c.rLen == 0 && c.nooo == 0 {
		c.rHead = home(len(c.rbuf), recvHome)
		if !c.m.listed && c.rbuf != nil {
			c.e.listEmpty(c)
		}
	}
}

// Dial opens a connection to dst from srcPort (0: an ephemeral port). The
// SYN leaves at the next Flush, after ARP when the next hop is not known
// yet (the engine asks and does not block); a peer that does not answer
// ARP fails the connection with ErrHostUnreachable. Writes before the
// handshake completes are buffered.
func (e *Engine) Dial(dst netip.AddrPort, srcPort uint16) (*Conn, error) {
	if e.closed {
		return nil, ErrClosed
	}
	ra, hop, ok := e.dialTo(dst)
	if !ok {
		return nil, ErrHostUnreachable
	}
	defer e.peerUnref(ra) // dialTo's hold on an IPv6 peer's alias (engine6.go)
	if srcPort == 0 {
		if srcPort, ok = e.ephemeral(ra, dst.Port()); !ok {
			return nil, ErrPortInUse
		}
	}
	if i, used := e.table[tuple{ra, srcPort, dst.Port()}]; used {
		// RFC 6191: our new ISN is above the old connection's.
		if i < 0 {
			e.twFree(^i)
		} else if old := &e.conns[i]; old.state == TimeWait {
			e.release(old)
		} else {
			return nil, ErrPortInUse
		}
	}
	e.tick()
	c := e.newConn(ra, srcPort, dst.Port())
	if c == nil {
		return nil, ErrTableFull
	}
	c.buffers()
	c.user, c.state, c.hop = true, SynSent, hop
	c.sndUna, c.sndNxt, c.sndMax = c.iss, c.iss, c.iss
	c.needSyn = true
	e.cnt[cTCPActiveOpens]++
	e.markDirty(c)
	return c, nil
}

// markReadable notes that c may have become readable (bytes, the peer's
// FIN, its end), for TakeReadable.
func (e *Engine) markReadable(c *Conn) {
	if !c.inReadable {
		c.inReadable = true
		e.readable = append(e.readable, c.idx)
	}
}

// TakeReadable calls fn, once each, for every connection the application
// holds that may have become readable since the last call: bytes arrived
// in order, the peer's FIN, the connection ended, or a Read left it
// readable (Readable says which have something to Read). A connection
// that is readable and was not named has been named before, and not read
// since. An application with many connections reads only these. fn must
// not call the engine.
func (e *Engine) TakeReadable(fn func(c *Conn)) {
	for _, i := range e.readable {
		c := &e.conns[i]
		c.inReadable = false
		if c.user {
			fn(c)
		}
	}
	e.readable = e.readable[:0]
}

func (e *Engine) markDirty(c *Conn) {
	if !c.inDirty {
		c.inDirty = true
		e.dirty = append(e.dirty, c.idx)
	}
}
