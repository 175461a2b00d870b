package netconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"

	"gvisor.dev/gvisor/pkg/tcpip"

	"github.com/dgramio/dgramio/internal/tcp"
)

// ErrConnLimit is matched (errors.Is) by the *ConnLimitError of an Accept or
// Dial past Options.MaxConns.
var ErrConnLimit = errors.New("connection limit reached")

// ErrBufferLimit is matched (errors.Is) by the *BufferLimitError of
// SetReadBuffer or SetWriteBuffer past the Config's per-connection buffers.
var ErrBufferLimit = errors.New("buffer larger than the per-connection limit")

// ConnLimitError says that a connection was refused because the Service
// already had Limit connections open (Options.MaxConns). An accepted one was
// reset (the peer sees ECONNRESET); a dial was not started. It is a
// net.Error that is Temporary and not a Timeout, as the kernel's accept with
// EMFILE is: net/http's Server backs off and accepts again.
type ConnLimitError struct {
	// Op is "accept" or "dial".
	Op string
	// Limit is Options.MaxConns.
	Limit int
	// Peer is the refused peer (accept) or the dialled address (dial).
	Peer netip.AddrPort
}

// Error implements error.
func (e *ConnLimitError) Error() string {
	what := "the peer was reset"
	if e.Op == "dial" {
		what = "no connection was attempted"
	}
	return fmt.Sprintf("netconn: %s %s: %d connections open, the limit (Options.MaxConns): %s", e.Op, e.Peer, e.Limit, what)
}

// Is reports whether target is ErrConnLimit.
func (e *ConnLimitError) Is(target error) bool { return target == ErrConnLimit }

// Timeout implements net.Error: false.
func (e *ConnLimitError) Timeout() bool { return false }

// Temporary implements net.Error: true (closing connections makes room).
func (e *ConnLimitError) Temporary() bool { return true }

// BufferLimitError says that SetReadBuffer or SetWriteBuffer asked for more
// than a connection may hold: Config.TCP.RecvBuf or Config.TCP.SendBuf,
// which bound each connection's memory in netstack.
type BufferLimitError struct {
	// Buffer is "read" or "write".
	Buffer string
	// Asked is the size asked for, Limit the largest allowed.
	Asked, Limit int
}

// Error implements error.
func (e *BufferLimitError) Error() string {
	field := "TCP.RecvBuf"
	if e.Buffer == "write" {
		field = "TCP.SendBuf"
	}
	return fmt.Sprintf("netconn: %s buffer of %d bytes is above the per-connection limit of %d (Config.%s)", e.Buffer, e.Asked, e.Limit, field)
}

// Is reports whether target is ErrBufferLimit.
func (e *BufferLimitError) Is(target error) bool { return target == ErrBufferLimit }

// timeoutError is a dial's context deadline, as the standard library
// reports it: "i/o timeout", a net.Error whose Timeout is true, matching
// context.DeadlineExceeded and os.ErrDeadlineExceeded.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
func (timeoutError) Is(target error) bool {
	return target == context.DeadlineExceeded || target == os.ErrDeadlineExceeded
}

// ctxError maps a dial context's error as the standard library does.
func ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return timeoutError{}
	}
	return err
}

// streamError maps a netstack error of a read or write on a connection:
// the peer's FIN is io.EOF (reads only), everything else keeps its errno
// (tcp.GoError).
func streamError(terr tcpip.Error) error {
	if _, ok := terr.(*tcpip.ErrClosedForReceive); ok {
		return io.EOF
	}
	return tcp.GoError(terr)
}

// syscallError wraps an errno in an *os.SyscallError naming the system
// call Linux would have failed in ("read", "connect"), as the standard
// library does; other errors are returned as they are.
func syscallError(call string, err error) error {
	if errno, ok := err.(syscall.Errno); ok {
		return os.NewSyscallError(call, errno)
	}
	return err
}

// opError wraps err as the standard library's TCP does: *net.OpError with
// Net "tcp", so that errors.Is(err, net.ErrClosed), errors.Is(err,
// syscall.ECONNRESET) and err.(net.Error).Timeout() answer as for a kernel
// socket. io.EOF is returned as it is.
func opError(op string, local, remote net.Addr, err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return &net.OpError{Op: op, Net: "tcp", Source: local, Addr: remote, Err: err}
}

// Compile-time checks that our errors are net.Errors.
var (
	_ net.Error = (*ConnLimitError)(nil)
	_ net.Error = timeoutError{}
	_ error     = syscall.Errno(0)
)
