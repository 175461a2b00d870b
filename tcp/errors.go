package tcp

import (
	"errors"
	"syscall"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// ErrSendStall is the error of a *core.PeerError that Flush returns when a
// connection took no byte for Config.TCP.SendStall while records waited for
// it: the peer's window stayed closed, so the peer stopped reading.
var ErrSendStall = errors.New("tcp: peer stopped reading (send window closed for longer than TCP.SendStall)")

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
