package native

import (
	"sort"
	"time"

	"github.com/dgramio/dgramio/internal/poison"
)

// Memory that follows use (docs/memory.md). A connection holds a send or
// receive ring only while it uses it: the ring comes from the engine's
// pool when the first byte is written or arrives, and goes back when the
// connection ends, or when it was found empty at two trims of the pool in
// a row (an empty ring lists its connection for the next trim, which
// takes it if it is still empty then), so that a connection that
// exchanges requests and answers keeps its rings, at their homes, without
// a trip to the pool per message, and one that idles gives them up
// within two PoolIdle.
// The rings come in size classes, powers of two from minRing up to the
// buffer's size; a connection takes the class its bytes need, or the
// class it held last if that is larger (so that a busy connection does
// not grow a small ring again at each burst), and a ring that fills up is
// replaced by one of the next class, its bytes copied once. A pooled ring
// that no connection took for a whole PoolIdle is freed: a steady load
// reuses the same rings without allocating, and an engine that went idle
// gives its memory back to the runtime.

// minRing is the smallest ring.
const minRing = 4 << 10

// bufPool is the engine's rings not in use, by class.
type bufPool struct {
	classes []int      // ring sizes, ascending
	free    [][][]byte // per class: the rings given back, the latest last
	low     []int      // per class: the fewest free since the last trim
	trimAt  int64      // when the next trim is due; 0: none armed
	used    int64      // bytes of the rings connections hold
	pooled  int64      // bytes of the rings in free
	allocs  uint64     // rings allocated
	trimmed uint64     // rings freed by trims
	// grown is what auto-tuning added to the windows of the connections
	// there are, weighted by their round trips (Conn.account), against
	// Options.RecvMemory.
	grown int64
	// tuned counts the connections whose windows auto-tuning raised, or
	// wanted to raise, under RecvMemory (memState.tuned): its share is
	// RecvMemory over them. pressUntil is until when a window is held
	// below what it wanted by the bound (growWindow): until then a window
	// above its connection's share is lowered to it (shareWindow).
	tuned      int
	pressUntil int64
	// empty lists the connections whose rings were empty once since the
	// last trim (memState.listed).
	empty []int32
}

// init makes the classes of the send rings (powers of two up to
// sendBuf) and of the receive rings (the same plus the receive slack,
// up to recvBuf plus it).
func (p *bufPool) init(sendBuf, recvBuf, slack int) {
	add := func(n int) {
		if i := sort.SearchInts(p.classes, n); i == len(p.classes) || p.classes[i] != n {
			p.classes = append(p.classes, 0)
			copy(p.classes[i+1:], p.classes[i:])
			p.classes[i] = n
		}
	}
	for s := minRing; s < sendBuf; s <<= 1 {
		add(s)
	}
	add(sendBuf)
	for s := minRing; s < recvBuf; s <<= 1 {
		add(s + slack)
	}
	add(recvBuf + slack)
	p.free = make([][][]byte, len(p.classes))
	p.low = make([]int, len(p.classes))
}

// class is the index of the class of size n, one of p.classes.
func (p *bufPool) class(n int) int { return sort.SearchInts(p.classes, n) }

// sendClass is the size of the smallest send ring that holds n bytes.
func (e *Engine) sendClass(n int) int {
	s := minRing
	for s < n {
		s <<= 1
	}
	return min(s, e.o.SendBuf)
}

// recvClass is the size of the smallest receive ring that holds n bytes.
func (e *Engine) recvClass(n int) int {
	slack := rcvSlack(e.o.RecvBuf)
	s := minRing
	for s+slack < n {
		s <<= 1
	}
	return min(s, e.o.RecvBuf) + slack
}

// recvRingMax is the largest receive ring: RecvBuf and the slack that
// rounding the window up may announce beyond it.
func (e *Engine) recvRingMax() int { return e.o.RecvBuf + rcvSlack(e.o.RecvBuf) }

// getRing takes a ring of size n, a class, from the pool, or allocates it.
func (e *Engine) getRing(n int) []byte {
	p := &e.pool
	p.used += int64(n)
	k := p.class(n)
	f := p.free[k]
	if i := len(f) - 1; i >= 0 {
		b := f[i]
		f[i] = nil
		p.free[k] = f[:i]
		p.low[k] = min(p.low[k], i)
		p.pooled -= int64(n)
		return b
	}
	p.allocs++
	return make([]byte, n)
}

// putRing gives ring b back to the pool and arms the trim.
func (e *Engine) putRing(b []byte) {
	p := &e.pool
	if poison.Debug { // a reader that kept a slice of it sees garbage
		poison.Fill(b)
	}
	k := p.class(len(b))
	p.free[k] = append(p.free[k], b)
	p.used -= int64(len(b))
	p.pooled += int64(len(b))
	e.armTrim()
}

// dropRing forgets ring b without pooling it: the application may still
// hold slices of it (Peek, Lend), which must keep their bytes.
func (e *Engine) dropRing(b []byte) { e.pool.used -= int64(len(b)) }

// armTrim makes sure a trim is due within PoolIdle.
func (e *Engine) armTrim() {
	if e.pool.trimAt == 0 {
		e.pool.trimAt = e.now + int64(e.o.PoolIdle)
		e.top = min(e.top, e.pool.trimAt)
	}
}

// listEmpty lists c, whose ring just emptied, for the next trim.
func (e *Engine) listEmpty(c *Conn) {
	p := &e.pool
	if len(p.empty) >= len(e.conns) {
		// Connections that ended since left their entries (and their
		// slots' next connections may be listed again): keep one entry
		// per slot still listed, so that the list stays within the table.
		k := 0
		for _, i := range p.empty {
			if d := &e.conns[i]; d.m.listed {
				d.m.listed = false // the later entries of the slot go
				p.empty[k] = i
				k++
			}
		}
		p.empty = p.empty[:k]
		for _, i := range p.empty {
			e.conns[i].m.listed = true
		}
	}
	c.m.listed = true
	p.empty = append(p.empty, c.idx)
	e.armTrim()
}

// trim takes back the rings of the listed connections that are still
// empty, frees the pooled rings that no connection took since the last
// trim, and the TIME-WAIT records and the table's room that an engine
// without TIME-WAIT connections no longer needs. It arms itself again
// while rings are pooled.
func (e *Engine) trim() {
	p := &e.pool
	p.trimAt = 0
	pooled := false
	var again []int32 // idle windows to look at again (idleWindow)
	// The rings taken back now wait in the pool for one more trim.
	for _, i := range p.empty {
		c := &e.conns[i]
		if !c.m.listed {
			continue // its connection ended, the slot went on
		}
		c.m.listed = false
		if c.sbuf != nil && c.sLen == 0 && c.sHeld == 0 {
			e.putRing(c.sbuf)
			c.sbuf, c.sHead = nil, 0
		}
		if c.rbuf != nil && c.rLen == 0 && c.nooo == 0 {
			e.putRing(c.rbuf)
			c.rbuf, c.rHead = nil, 0
		}
		if c.m.tuned && c.rbuf == nil {
			// Its window's growth goes back to RecvMemory once nothing
			// arrived for PoolIdle; until then it stays listed.
			if e.now-c.m.spaceAt >= int64(e.o.PoolIdle) {
				c.idleWindow()
			} else {
				again = append(again, i)
			}
		}
	}
	clear(p.empty)
	p.empty = p.empty[:0]
	if cap(p.empty) > 1024 && len(e.table) < cap(p.empty)/4 {
		p.empty = nil
	}
	for _, i := range again {
		e.conns[i].m.listed = true
		p.empty = append(p.empty, i)
	}
	for k, f := range p.free {
		if d := p.low[k]; d > 0 {
			for i := range d {
				p.pooled -= int64(len(f[i]))
			}
			n := copy(f, f[d:])
			clear(f[n:])
			f = f[:n]
			p.trimmed += uint64(d)
		}
		if len(f) == 0 {
			f = nil // the list's own array too
		}
		p.free[k], p.low[k] = f, len(f)
		pooled = pooled || len(f) > 0
	}
	if e.tw.n == 0 && e.tw.recs != nil {
		// The records' array, and the table's room for their tuples
		// (a Go map does not shrink when its entries go).
		e.tw.recs, e.tw.free = nil, -1
		t := make(map[tuple]int32, e.o.MaxConns)
		for k, v := range e.table {
			t[k] = v
		}
		e.table = t
	}
	if pooled || len(p.empty) > 0 {
		e.armTrim()
	}
}

// rxSlotter is a FrameIO that tells how many frames its receive ring
// holds (frameio/afxdp's XSK).
type rxSlotter interface{ RxSlots() int }

// recvMemoryFor is Options.RecvMemory's default on fio: half of its
// receive ring in full segments when it tells its size, so that the
// windows auto-tuning opens cannot bring more than the ring holds at once
// (on top of the initial windows); 0 (no bound) otherwise.
func recvMemoryFor(fio any, mss int) int {
	if r, ok := fio.(rxSlotter); ok && r.RxSlots() > 0 {
		return r.RxSlots() / 2 * mss
	}
	return 0
}

// BufferStats returns the bytes of the send and receive rings that
// connections hold now, those pooled for reuse, and how many rings the
// engine has allocated and freed (trimmed from the pool) since New.
func (e *Engine) BufferStats() (used, pooled int64, allocs, freed uint64) {
	p := &e.pool
	return p.used, p.pooled, p.allocs, p.trimmed
}

// memState is a connection's buffer sizing: the rings' sizes and the
// receive window's auto-tuning.
type memState struct {
	rcvMax int32 // the window's ceiling: RecvBuf, or SetRecvBuf's size
	// copied is what the application took since spaceAt, space the most
	// it took in one RTT before (Linux's rcvq_space).
	copied, space int32
	// tsFrom is our timestamp clock when in-order data first arrived:
	// echoes from before it are of the handshake, not of a round trip.
	tsFrom  uint32
	spaceAt int64
	// The receiver's RTT estimate (Linux's rcv_rtt_est): the time the
	// peer took to send a window, from rttAt to RCV.NXT reaching rttSeq,
	// or less from an echoed timestamp (rcvRTTFromTS).
	rttSeq  uint32
	grown   int32 // what tuneWindow added to the window, weighted (account), of pool.grown
	rttAt   int64
	rcvRTT  int64
	sRing   int32 // size of the last send ring, the least the next takes
	rRing   int32 // the same for the receive ring
	locked  bool  // SetRecvBuf fixed the window, or Options.NoBufferTuning
	listed  bool  // in pool.empty
	tsArmed bool  // tsFrom is set
	tuned   bool  // counted in pool.tuned
	// minRTT is the least pathRTT seen, in µs (0: none yet), by which
	// account weighs the window.
	minRTT uint32
}

// initMem sets a new connection's buffer sizing.
func (c *Conn) initMem() {
	o := &c.e.o
	c.m = memState{rcvMax: int32(o.RecvBuf), locked: o.NoBufferTuning}
	c.rcvCap = o.RecvBuf
	if !o.NoBufferTuning {
		c.rcvCap = min(o.RecvBuf, o.InitRecvWindow)
	}
}

// sendRing makes the send ring hold n more bytes: it takes a ring when
// it has none, or a larger one, with the bytes it holds copied over.
func (c *Conn) sendRing(n int) {
	have := c.sLen + c.sHeld
	if have+n <= len(c.sbuf) {
		return
	}
	e := c.e
	b := e.getRing(e.sendClass(max(have+n, int(c.m.sRing))))
	c.m.sRing = int32(len(b))
	head := home(len(b), sendHome)
	if old := c.sbuf; old != nil {
		if have > 0 {
			fromRing(b[head:head+have], old, c.sHead)
		}
		e.putRing(old)
	}
	c.sbuf, c.sHead = b, head
}

// recvRing makes the receive ring hold need bytes from its head (the
// readable ones, then what lies out of order): it takes a ring when it
// has none, or a larger one with the bytes copied over.
func (c *Conn) recvRing(need int) {
	e := c.e
	b := e.getRing(e.recvClass(max(need, int(c.m.rRing))))
	c.m.rRing = int32(len(b))
	head := home(len(b), recvHome)
	if old := c.rbuf; old != nil {
		if used := c.recvUsed(); used > 0 {
			fromRing(b[head:head+used], old, c.rHead)
		}
		if c.rLen > 0 {
			e.dropRing(old) // Peek and Lend may have handed out slices of it
		} else {
			e.putRing(old)
		}
	}
	c.rbuf, c.rHead = b, head
}

// recvUsed is the bytes of the receive ring from its head that hold
// something: the readable ones and up to the end of the data held out
// of order.
func (c *Conn) recvUsed() int {
	n := c.rLen
	for i := range c.nooo {
		n = max(n, c.rLen+int(c.ooo[i].end-c.rcvNxt))
	}
	return min(n, len(c.rbuf))
}

// freeRings gives both rings back to the pool, and what auto-tuning
// added to its window back to Options.RecvMemory (the connection ends).
func (c *Conn) freeRings() {
	c.e.pool.grown -= int64(c.m.grown)
	c.m.grown = 0
	if c.m.tuned {
		c.m.tuned = false
		c.e.pool.tuned--
	}
	if c.sbuf != nil {
		c.e.putRing(c.sbuf)
		c.sbuf = nil
	}
	if c.rbuf != nil {
		if c.rLent > 0 {
			c.e.dropRing(c.rbuf)
		} else {
			c.e.putRing(c.rbuf)
		}
		c.rbuf = nil
	}
}

// rcvRTTMeasure samples the receiver's RTT estimate once the peer sent
// the window that was open at rttAt (Linux's tcp_rcv_rtt_measure), and
// starts the next sample: the time a window takes to arrive is at least
// one round trip, and about one when the peer sends as fast as the
// window lets it.
func (c *Conn) rcvRTTMeasure() {
	m := &c.m
	now := c.e.now
	if m.rttAt != 0 {
		if r := now - m.rttAt; r > 0 {
			if m.rcvRTT == 0 || r < m.rcvRTT {
				m.rcvRTT = r
			} else {
				m.rcvRTT += (r - m.rcvRTT) / 8
			}
		}
	}
	m.rttSeq = c.rcvNxt + max(c.rcvWnd(), uint32(c.rmss))
	m.rttAt = now
}

// rcvRTTFromTS samples the receiver's RTT from the timestamp that a
// full-sized in-order segment of s echoes (Linux's
// tcp_rcv_rtt_measure_ts): the echo is of our latest segment the peer
// had when it sent s, so the time since is at least a round trip, and
// about one when it is our ACK that let s leave. Without it the first
// sample waits for a whole window to arrive, several round trips in slow
// start, and the window stays at InitRecvWindow while the sender's cwnd
// outgrows it. Echoes from before the data began (the handshake's, of
// however long ago) are no round trip; and it only lowers the estimate:
// an echo after the peer idled is of an old segment, and the timestamp
// clock counts milliseconds, coarser than a short path, which
// rcvRTTMeasure's samples then follow.
func (c *Conn) rcvRTTFromTS(s *segment) {
	m := &c.m
	if !c.tsOK || !s.hasTS || s.tsEcr == 0 {
		return
	}
	now := c.tsNow()
	if !m.tsArmed {
		m.tsFrom, m.tsArmed = now, true
		return
	}
	if len(s.payload) < c.rmss || seqLT(s.tsEcr, m.tsFrom) {
		return
	}
	if d := int64(int32(now-s.tsEcr)) * 1e6; d > 0 && (m.rcvRTT == 0 || d < m.rcvRTT) {
		m.rcvRTT = d
	}
}

// tuneWindow is dynamic right-sizing (Linux's tcp_rcv_space_adjust): once
// per receiver RTT it compares what the peer delivered in that time (what
// the application took, and what is held out of order behind a hole) with
// the most it delivered before, and when it delivered more, raises the
// window to twice that and some (the peer's rate may double in slow
// start), up to the ceiling. The window then follows the rate the
// application drains at times the round trip, as the peer needs it to
// keep sending, rather than the buffer's size; a loss does not hide the
// bytes that arrived behind it until the retransmission fills the hole.
// A slow reader's bytes wait in order, not counted, and its window stays.
func (c *Conn) tuneWindow() {
	m := &c.m
	rtt := m.rcvRTT
	if rtt == 0 {
		if !c.hasRTT {
			return
		}
		rtt = c.srtt
	}
	now := c.e.now
	if now-m.spaceAt < rtt || m.spaceAt == 0 {
		if m.spaceAt == 0 {
			m.spaceAt, m.copied = now, 0
		}
		return
	}
	copied, space := int64(m.copied)+int64(c.oooBytes()), int64(m.space)
	m.copied, m.spaceAt = 0, now
	c.account() // the round trip may have changed
	c.shareWindow()
	space = int64(m.space)
	if copied <= space {
		return
	}
	m.space = int32(copied)
	if m.locked {
		return
	}
	win := 2*copied + 16*int64(c.rmss)
	if space > 0 {
		win += 2 * win * (copied - space) / space
	}
	c.growWindow(win, 0)
}

// oooGrow opens the window when data is queued out of order, as Linux
// grows the receive buffer from tcp_data_queue_ofo (tcp_rcvbuf_grow in
// recent kernels): to twice the most the peer delivered in a round trip
// (room for the sender's rate to double) plus what lies from RCV.NXT to
// the end of the data held. A hole holds RCV.NXT while the sender goes on
// past it, and the retransmission takes a round trip or more: a window
// sized for in-order delivery alone would close on the data that follows
// the hole exactly when the sender needs room. Only with SACK: without
// it, a window that moves makes the peer's duplicate ACK count void (RFC
// 5681 §2 (e)), and it would not start fast retransmit.
func (c *Conn) oooGrow() {
	if c.m.locked || !c.sackOK || c.nooo == 0 {
		return
	}
	held := int64(c.ooo[c.nooo-1].end - c.rcvNxt)
	c.growWindow(2*int64(c.m.space)+held, held)
}

// growWindow raises the window's cap towards win, within the ceiling and
// Options.RecvMemory; it never lowers it. What RecvMemory bounds is what
// the windows' growth can bring into the receive ring while the loop is
// away (ringWait): a peer sends its window over a round trip, clocked by
// our ACKs, so of a window on a path of round trip rtt longer than
// ringWait only the part ringWait/rtt arrives in that time (account).
// Counting every window whole capped one connection on a long path (10
// ms each way: a bandwidth-delay product of megabytes) at half the ring,
// and counting at least half of it at the whole ring, below what the
// path needs once a loss holds a round trip of data behind a hole; on a
// short path (rtt ≤ ringWait) the whole growth counts. On a long path
// the window may also pass the bound by held, the bytes it holds out of
// order behind a hole (oooGrow): they arrived already, and cannot come
// into the receive ring again; without it 16 connections on a lossy 10
// ms path were held to 0.7 of the kernel's rate. A burst larger
// than the ring (a loop away for longer than ringWait, a peer that does
// not pace) is dropped at the ring and counted there (the FrameIO's
// rx_dropped), and repaired as any loss.
func (c *Conn) growWindow(win, held int64) {
	m := &c.m
	want := min(win, int64(m.rcvMax))
	if b := int64(c.e.o.RecvMemory); b > 0 {
		// The engine's bound (Linux's tcp_mem pressure): the others'
		// growth and this one's at the new cap stay within it, but a
		// connection may always grow to its share, the others giving
		// back what they hold above theirs (shareWindow).
		p := &c.e.pool
		base := c.initCap()
		if want > base && !m.tuned {
			m.tuned = true
			p.tuned++
		}
		room := b - (p.grown - int64(m.grown))
		share := c.windowShare(held)
		rtt := c.pathRTT()
		if rtt > ringWait {
			room = room*rtt/ringWait + held
		}
		if want > base+room && room < share {
			// Held below its share: the others give back.
			p.pressUntil = max(p.pressUntil, c.e.now+2*max(rtt, ringWait))
		}
		want = min(want, base+max(room, share))
	}
	if want > int64(c.rcvCap) {
		c.rcvCap = int(want)
	}
	c.account()
}

// recvShare is a connection's share of Options.RecvMemory among the
// connections that auto-tuning grew (pool.tuned), as what its window's
// growth beyond initCap counts against it (account).
func (c *Conn) recvShare() int64 {
	return int64(c.e.o.RecvMemory) / int64(max(c.e.pool.tuned, 1))
}

// windowShare is the growth beyond initCap a connection's window may
// always reach: its share of Options.RecvMemory (recvShare) as a window.
// On a round trip longer than ringWait a window counts ringWait/rtt of
// itself (account), so the share is recvShare*rtt/ringWait, and held,
// the bytes the connection holds out of order behind a hole, come on
// top as they do on the bound (growWindow).
func (c *Conn) windowShare(held int64) int64 {
	s := c.recvShare()
	if rtt := c.pathRTT(); rtt > ringWait {
		s = s*rtt/ringWait + held
	}
	return s
}

// shareWindow lowers a window that auto-tuning grew beyond its
// connection's share of Options.RecvMemory (windowShare) while another
// connection's window is held below its own share by the bound
// (pool.pressUntil), so that the connections that receive at once share
// the receive ring rather than the first to grow keeping it. On every
// round trip: 16 BBR connections at 1% and 3% loss and 10 ms each way,
// first come first served, moved 1.16 and 0.93 Gbit/s with the slowest
// at a quarter of the mean; shared, 1.47 and 1.31 with it at 0.64 and
// 0.35 (BENCHMARKS.md). The right edge already advertised stays where
// it is (window never moves it back, RFC 9293 §3.8.6.2.2): the lower cap
// takes effect as the application reads. What the connection delivered
// per round trip is lowered with it (memState.space), so that its window
// grows again once the others end or idle.
func (c *Conn) shareWindow() {
	m := &c.m
	if c.e.o.RecvMemory <= 0 || !m.tuned || m.locked || c.e.now >= c.e.pool.pressUntil {
		return
	}
	to := c.initCap() + c.windowShare(int64(c.oooBytes()))
	if int64(c.rcvCap) <= to {
		return
	}
	c.rcvCap = int(to)
	m.space = min(m.space, int32(to/2))
	c.account()
	c.e.cnt[cTCPRcvWndShared]++
}

// idleWindow gives back what auto-tuning added to the window of a
// connection that received nothing for Options.PoolIdle and holds no
// receive ring (trim): an idle connection keeps no share of
// Options.RecvMemory from the others. The advertised right edge stays
// (window); the window grows again with what the application reads.
func (c *Conn) idleWindow() {
	m := &c.m
	c.rcvCap = int(min(int64(c.rcvCap), c.initCap()))
	m.space, m.copied = 0, 0
	c.account()
	m.tuned = false
	c.e.pool.tuned--
	c.e.cnt[cTCPRcvWndIdle]++
}

// ringWait is how long the poll loop is taken to be away from the
// receive ring at most, for Options.RecvMemory's accounting (growWindow).
const ringWait = int64(5 * time.Millisecond)

// initCap is the window a connection starts with.
func (c *Conn) initCap() int64 {
	return int64(min(c.e.o.InitRecvWindow, int(c.m.rcvMax)))
}

// pathRTT is the least round trip the connection has known, in ns: of
// the receiver's estimate, the smoothed RTT (of the handshake, on a
// connection that only receives) and RACK's minimum, now and before
// (memState.minRTT). The least, because the estimates grow with the
// window on a short path through a loaded loop (a window of a megabyte
// takes milliseconds to pass it), and a longer round trip would count
// that window for less exactly when it fills the ring; 0 with none.
func (c *Conn) pathRTT() int64 {
	r := c.m.rcvRTT
	if c.hasRTT && c.srtt > 0 && (r == 0 || c.srtt < r) {
		r = c.srtt
	}
	if m := c.rk.minRTT; m > 0 && (r == 0 || m < r) {
		r = m
	}
	if us := r / 1e3; us > 0 && (c.m.minRTT == 0 || us < int64(c.m.minRTT)) {
		c.m.minRTT = uint32(min(us, 1<<32-1))
	}
	if c.m.minRTT > 0 {
		r = min(r, int64(c.m.minRTT)*1e3)
	}
	return r
}

// account sets what this connection's window counts against
// Options.RecvMemory (memState.grown, of pool.grown): its growth beyond
// initCap, times ringWait/rtt when the round trip is
// longer than ringWait (growWindow says why).
func (c *Conn) account() {
	if c.m.locked {
		return
	}
	g := max(0, int64(c.rcvCap)-c.initCap())
	if rtt := c.pathRTT(); rtt > ringWait {
		g = g * ringWait / rtt
	}
	c.e.pool.grown += g - int64(c.m.grown)
	c.m.grown = int32(g)
}

// oooBytes is the bytes held out of order.
func (c *Conn) oooBytes() int {
	n := 0
	for i := range c.nooo {
		n += int(c.ooo[i].end - c.ooo[i].start)
	}
	return n
}
