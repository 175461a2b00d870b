package tcp

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// ErrSendStall is matched (errors.Is) by the *SendStallError that Flush
// returns when a connection took no byte for Config.TCP.SendStall while
// records waited for it.
var ErrSendStall = errors.New("peer stopped reading")

// SendStallError says that a connection's send window stayed closed for
// Stalled (at least Config.TCP.SendStall) while records waited: the peer's
// stack answers but its application stopped reading. The connection stays
// open and its records stay queued; Queue refuses (back-pressure) until the
// peer reads again. Close the backend, or keep flushing and waiting.
type SendStallError struct {
	Peer    netip.AddrPort
	Stalled time.Duration
}

// Error implements error.
func (e *SendStallError) Error() string {
	return fmt.Sprintf("tcp: peer %s stopped reading: send window closed for %v", e.Peer, e.Stalled.Round(time.Millisecond))
}

// Is reports whether target is ErrSendStall.
func (e *SendStallError) Is(target error) bool { return target == ErrSendStall }

// goErr turns a netstack error into a Go error: the errno Linux would give
// where there is one (so errors.Is(err, syscall.ECONNREFUSED) works), else
// netstack's message.
func goErr(err tcpip.Error) error {
	if err == nil {
		return nil
	}
	switch err.(type) {
	case *tcpip.ErrConnectionRefused:
		return syscall.ECONNREFUSED
	case *tcpip.ErrConnectionReset:
		return syscall.ECONNRESET
	case *tcpip.ErrConnectionAborted:
		return syscall.ECONNABORTED
	case *tcpip.ErrTimeout:
		return syscall.ETIMEDOUT
	case *tcpip.ErrHostUnreachable:
		return syscall.EHOSTUNREACH
	case *tcpip.ErrNetworkUnreachable:
		return syscall.ENETUNREACH
	case *tcpip.ErrPortInUse:
		return syscall.EADDRINUSE
	case *tcpip.ErrBadLocalAddress:
		return syscall.EADDRNOTAVAIL
	case *tcpip.ErrClosedForSend:
		return syscall.EPIPE
	case *tcpip.ErrNotConnected:
		return syscall.ENOTCONN
	case *tcpip.ErrWouldBlock:
		return syscall.EAGAIN
	}
	return errors.New(err.String())
}
