package netconn

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/dgramio/dgramio/internal/stack"
)

// notifier is a waiter.EventListener that leaves a token in its channel
// (capacity 1) for each event; a full channel already says "look again".
type notifier chan struct{}

// NotifyEvent implements waiter.EventListener. Netstack's goroutines call it.
func (n notifier) NotifyEvent(waiter.EventMask) {
	select {
	case n <- struct{}{}:
	default:
	}
}

// Conn is a TCP connection of a Service: a net.Conn with the half-close,
// buffer and address methods of *net.TCPConn. Read and Write go straight
// to netstack's endpoint (netstack copies: b is not kept after a call
// returns); a call that cannot go on blocks until netstack signals
// readiness, the deadline passes (os.ErrDeadlineExceeded), or Close.
//
// Errors are *net.OpError with Net "tcp", as the standard library's:
// errors.Is(err, net.ErrClosed) after Close, errors.Is(err,
// syscall.ECONNRESET) after a reset (ECONNREFUSED, ETIMEDOUT,
// EHOSTUNREACH, EPIPE after CloseWrite...), err.(net.Error).Timeout() for
// a deadline. Read returns io.EOF, unwrapped, once the peer's FIN is
// reached.
//
// All methods are safe for concurrent use; Reads are serialized among
// themselves, and so are Writes.
type Conn struct {
	s            *Service
	nc           *nconn // the native engine's side; nil on netstack
	ep           tcpip.Endpoint
	wq           *waiter.Queue
	laddr, raddr *net.TCPAddr

	rdEntry, wrEntry waiter.Entry
	rdReady, wrReady notifier
	done             chan struct{} // closed by Close (or the Service's)
	closeOnce        sync.Once

	rdMu sync.Mutex
	rdW  tcpip.SliceWriter
	wrMu sync.Mutex
	wrR  bytes.Reader

	rdDL, wrDL deadline
}

var _ net.Conn = (*Conn)(nil)

// readMask and writeMask are the events that may let a blocked Read or
// Write (or connect) go on; errors and hang-ups wake both.
const (
	readMask  = waiter.ReadableEvents | waiter.EventHUp | waiter.EventErr
	writeMask = waiter.WritableEvents | waiter.EventHUp | waiter.EventErr
)

// newConn wraps ep (not yet registered with the Service).
func newConn(s *Service, ep tcpip.Endpoint, wq *waiter.Queue) *Conn {
	c := &Conn{s: s, ep: ep, wq: wq,
		rdReady: make(notifier, 1), wrReady: make(notifier, 1), done: make(chan struct{})}
	c.rdEntry.Init(c.rdReady, readMask)
	c.wrEntry.Init(c.wrReady, writeMask)
	wq.EventRegister(&c.rdEntry)
	wq.EventRegister(&c.wrEntry)
	return c
}

// setAddrs reads the endpoint's addresses (once connected).
func (c *Conn) setAddrs() {
	if a, err := c.ep.GetLocalAddress(); err == nil {
		c.laddr = tcpAddr(a)
	}
	if a, err := c.ep.GetRemoteAddress(); err == nil {
		c.raddr = tcpAddr(a)
	}
}

func tcpAddr(a tcpip.FullAddress) *net.TCPAddr {
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(stack.AddrOf(a.Addr), a.Port))
}

// closed reports whether Close ran.
func (c *Conn) closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *Conn) opErr(op string, err error) error {
	return opError(op, c.laddr, c.raddr, syscallError(op, err))
}

// Read reads up to len(b) bytes. It blocks until data is there, the peer's
// FIN is reached (0, io.EOF), the connection fails, the read deadline
// passes or the Conn is closed.
func (c *Conn) Read(b []byte) (int, error) {
	c.rdMu.Lock()
	defer c.rdMu.Unlock()
	if c.closed() {
		return 0, c.opErr("read", net.ErrClosed)
	}
	if len(b) == 0 {
		return 0, nil
	}
	if c.nc != nil {
		return c.nativeRead(b)
	}
	for {
		dl, expired := c.rdDL.wait()
		if expired {
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		c.rdW = b
		res, terr := c.ep.Read(&c.rdW, tcpip.ReadOptions{})
		c.rdW = nil
		switch terr.(type) {
		case nil:
			if c.s.tune.Moderate {
				c.ep.ModerateRecvBuf(res.Count)
			}
			return res.Count, nil
		case *tcpip.ErrWouldBlock:
		default:
			if c.closed() {
				return 0, c.opErr("read", net.ErrClosed)
			}
			return 0, c.opErr("read", streamError(terr))
		}
		select {
		case <-c.rdReady:
		case <-dl:
		case <-c.done:
			return 0, c.opErr("read", net.ErrClosed)
		}
	}
}

// Write writes b, blocking while netstack's send buffer (Config.TCP.SendBuf)
// is full. It returns len(b), or fewer bytes with the error that stopped
// it: the write deadline (os.ErrDeadlineExceeded), Close (net.ErrClosed),
// CloseWrite (EPIPE) or the connection's failure (ECONNRESET, ETIMEDOUT...).
func (c *Conn) Write(b []byte) (int, error) {
	c.wrMu.Lock()
	defer c.wrMu.Unlock()
	if c.closed() {
		return 0, c.opErr("write", net.ErrClosed)
	}
	if c.nc != nil {
		return c.nativeWrite(b)
	}
	n := 0
	for n < len(b) {
		dl, expired := c.wrDL.wait()
		if expired {
			return n, c.opErr("write", os.ErrDeadlineExceeded)
		}
		c.wrR.Reset(b[n:])
		m, terr := c.ep.Write(&c.wrR, tcpip.WriteOptions{})
		c.wrR.Reset(nil)
		n += int(m)
		switch terr.(type) {
		case nil:
			if m > 0 {
				continue
			}
		case *tcpip.ErrWouldBlock:
		default:
			if c.closed() {
				return n, c.opErr("write", net.ErrClosed)
			}
			return n, c.opErr("write", streamError(terr))
		}
		select {
		case <-c.wrReady:
		case <-dl:
		case <-c.done:
			return n, c.opErr("write", net.ErrClosed)
		}
	}
	return n, nil
}

// Close closes the connection: blocked Reads and Writes return
// net.ErrClosed, and netstack sends FIN after what is queued (RST, as
// Linux, if received data was left unread). Close does not wait for the
// peer. A second Close returns an error matching net.ErrClosed.
func (c *Conn) Close() error {
	if !c.shut() {
		return c.opErr("close", net.ErrClosed)
	}
	c.s.removeConn(c)
	return nil
}

// shut closes the connection without telling the Service (whose Close
// calls it); false if it was closed already.
func (c *Conn) shut() bool {
	first := false
	c.closeOnce.Do(func() {
		first = true
		close(c.done)
		if c.nc != nil {
			c.nativeShut()
			return
		}
		c.wq.EventUnregister(&c.rdEntry)
		c.wq.EventUnregister(&c.wrEntry)
		c.rdDL.stop()
		c.wrDL.stop()
		c.ep.Close()
	})
	return first
}

// CloseWrite shuts down the sending side (FIN once the queued data is
// sent); further Writes fail with EPIPE. Reads go on.
func (c *Conn) CloseWrite() error {
	if c.nc != nil {
		return c.nativeCloseWrite()
	}
	return c.shutdown(tcpip.ShutdownWrite)
}

// CloseRead shuts down the receiving side: Reads return io.EOF at once,
// and what arrives later is discarded. Writes go on.
func (c *Conn) CloseRead() error {
	if c.nc != nil {
		return c.nativeCloseRead()
	}
	return c.shutdown(tcpip.ShutdownRead)
}

func (c *Conn) shutdown(how tcpip.ShutdownFlags) error {
	if c.closed() {
		return c.opErr("close", net.ErrClosed)
	}
	if terr := c.ep.Shutdown(how); terr != nil {
		return c.opErr("close", streamError(terr))
	}
	return nil
}

// LocalAddr returns our address and port (*net.TCPAddr).
func (c *Conn) LocalAddr() net.Addr { return c.laddr }

// RemoteAddr returns the peer's address and port (*net.TCPAddr).
func (c *Conn) RemoteAddr() net.Addr { return c.raddr }

// SetDeadline sets the read and write deadlines (zero: none). A deadline
// applies to calls already blocked as well as later ones.
func (c *Conn) SetDeadline(t time.Time) error {
	if c.closed() {
		return c.opErr("set", net.ErrClosed)
	}
	c.rdDL.set(t)
	c.wrDL.set(t)
	return nil
}

// SetReadDeadline sets the read deadline (zero: none).
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.closed() {
		return c.opErr("set", net.ErrClosed)
	}
	c.rdDL.set(t)
	return nil
}

// SetWriteDeadline sets the write deadline (zero: none).
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.closed() {
		return c.opErr("set", net.ErrClosed)
	}
	c.wrDL.set(t)
	return nil
}

// SetReadBuffer sets the connection's receive buffer (netstack's; it turns
// receive-buffer moderation off for this connection, as SO_RCVBUF does on
// Linux). Above Config.TCP.RecvBuf it returns a *BufferLimitError and
// changes nothing.
func (c *Conn) SetReadBuffer(bytes int) error {
	if c.nc != nil {
		return c.setBuffer("read", bytes, c.s.tune.RecvBuf, nil)
	}
	return c.setBuffer("read", bytes, c.s.tune.RecvBuf, c.ep.SocketOptions().SetReceiveBufferSize)
}

// SetWriteBuffer sets the connection's send buffer: how much Write queues
// in netstack before it blocks. Above Config.TCP.SendBuf it returns a
// *BufferLimitError and changes nothing.
func (c *Conn) SetWriteBuffer(bytes int) error {
	if c.nc != nil {
		return c.setBuffer("write", bytes, c.s.tune.SendBuf, nil)
	}
	return c.setBuffer("write", bytes, c.s.tune.SendBuf, c.ep.SocketOptions().SetSendBufferSize)
}

// setBuffer sets the connection's read or write buffer (which) to bytes
// through set, refusing more than limit with a *BufferLimitError.
func (c *Conn) setBuffer(which string, bytes, limit int, set func(size int64, notify bool)) error {
	if c.closed() {
		return c.opErr("set", net.ErrClosed)
	}
	if bytes > limit {
		return c.opErr("set", &BufferLimitError{Buffer: which, Asked: bytes, Limit: limit})
	}
	if set == nil {
		c.nativeSetBuffer(which, bytes)
		return nil
	}
	set(int64(bytes), true)
	return nil
}

// SetNoDelay turns Nagle's algorithm off (true, the default unless
// Config.Nagle) or on for this connection.
func (c *Conn) SetNoDelay(noDelay bool) error {
	if c.closed() {
		return c.opErr("set", net.ErrClosed)
	}
	if c.nc != nil {
		return nil // the native engine's Nagle is the Service's (Config.Nagle)
	}
	c.ep.SocketOptions().SetDelayOption(!noDelay)
	return nil
}

// Buffers returns the connection's current netstack buffer sizes, send
// and receive (the receive buffer grows with moderation, up to
// Config.TCP.RecvBuf).
func (c *Conn) Buffers() (send, recv int) {
	if c.nc != nil {
		send, recv = c.s.tune.SendBuf, c.s.tune.RecvBuf
		if l := int(c.nc.tx.limit.Load()); l > 0 {
			send = l
		}
		return send, recv
	}
	o := c.ep.SocketOptions()
	return int(o.GetSendBufferSize()), int(o.GetReceiveBufferSize())
}

// Service returns the Service the connection belongs to.
func (c *Conn) Service() *Service { return c.s }
