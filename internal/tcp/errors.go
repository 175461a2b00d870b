package tcp

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// ErrSendStall is matched (errors.Is) by the *SendStallError of an
// EventStalled (Config.Events): a connection took no byte for
// Config.TCP.SendStall while records waited for it.
var ErrSendStall = errors.New("peer stopped reading")

// SendStallError says that a connection's send window stayed closed for
// Stalled (at least Config.TCP.SendStall) while records waited: the peer's
// stack answers but its application stopped reading. The connection stays
// open and its records stay queued; Queue refuses (back-pressure) until the
// peer reads again. Wait, or close or reset the connection (dgramio.Conns).
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

// GoError turns a netstack error into a Go error that keeps its identity:
// the errno Linux gives for the same condition (so that
// errors.Is(err, syscall.ECONNREFUSED) works and err is a net.Error whose
// Timeout is true for ETIMEDOUT), or, for the few conditions without one,
// netstack's message. nil for nil. Callers that read or write a stream map
// ErrClosedForReceive to io.EOF themselves: it is the peer's FIN, not an
// error.
func GoError(err tcpip.Error) error { return goErr(err) }

// goErr is GoError.
func goErr(err tcpip.Error) error {
	if err == nil {
		return nil
	}
	switch err.(type) {
	case *tcpip.ErrConnectionRefused:
		return syscall.ECONNREFUSED
	case *tcpip.ErrConnectionReset:
		return syscall.ECONNRESET
	case *tcpip.ErrConnectionAborted, *tcpip.ErrAborted:
		return syscall.ECONNABORTED
	case *tcpip.ErrTimeout:
		return syscall.ETIMEDOUT
	case *tcpip.ErrHostUnreachable:
		return syscall.EHOSTUNREACH
	case *tcpip.ErrHostDown:
		return syscall.EHOSTDOWN
	case *tcpip.ErrNetworkUnreachable:
		return syscall.ENETUNREACH
	case *tcpip.ErrNoNet:
		return errNoNet
	case *tcpip.ErrPortInUse:
		return syscall.EADDRINUSE
	case *tcpip.ErrNoPortAvailable, *tcpip.ErrBadLocalAddress:
		// Linux's connect(2) says EADDRNOTAVAIL when the ephemeral
		// ports are used up.
		return syscall.EADDRNOTAVAIL
	case *tcpip.ErrClosedForSend:
		return syscall.EPIPE
	case *tcpip.ErrNotConnected:
		return syscall.ENOTCONN
	case *tcpip.ErrAlreadyConnected:
		return syscall.EISCONN
	case *tcpip.ErrAlreadyConnecting:
		return syscall.EALREADY
	case *tcpip.ErrConnectStarted:
		return syscall.EINPROGRESS
	case *tcpip.ErrWouldBlock:
		return syscall.EAGAIN
	case *tcpip.ErrNoBufferSpace:
		return syscall.ENOBUFS
	case *tcpip.ErrMessageTooLong:
		return syscall.EMSGSIZE
	case *tcpip.ErrDestinationRequired:
		return syscall.EDESTADDRREQ
	case *tcpip.ErrAddressFamilyNotSupported:
		return syscall.EAFNOSUPPORT
	case *tcpip.ErrNotPermitted:
		return syscall.EPERM
	case *tcpip.ErrNotSupported, *tcpip.ErrUnknownProtocolOption:
		return syscall.EOPNOTSUPP
	case *tcpip.ErrBroadcastDisabled:
		return syscall.EACCES
	case *tcpip.ErrBadAddress, *tcpip.ErrBadBuffer:
		return syscall.EFAULT
	case *tcpip.ErrEndpointBusy:
		return syscall.EBUSY
	case *tcpip.ErrDuplicateAddress, *tcpip.ErrDuplicateNICID:
		return syscall.EEXIST
	case *tcpip.ErrUnknownNICID, *tcpip.ErrUnknownDevice, *tcpip.ErrInvalidNICID:
		return syscall.ENODEV
	case *tcpip.ErrNoSuchFile:
		return syscall.ENOENT
	case *tcpip.ErrQueueSizeNotSupported:
		return syscall.ENOTTY
	case *tcpip.ErrInvalidEndpointState, *tcpip.ErrInvalidOptionValue, *tcpip.ErrAlreadyBound,
		*tcpip.ErrUnknownProtocol, *tcpip.ErrInvalidPortRange, *tcpip.ErrMalformedHeader,
		*tcpip.ErrMissingRequiredFields, *tcpip.ErrMulticastInputCannotBeOutput:
		return syscall.EINVAL
	}
	return errors.New(err.String())
}
