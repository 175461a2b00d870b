package tcp

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// TestGoError: every netstack error a TCP endpoint can return keeps its
// identity as the errno Linux gives (nothing falls back to a bare string
// but the peer's FIN, which readers turn into io.EOF), and the timeout is
// a net.Error whose Timeout is true.
func TestGoError(t *testing.T) {
	for _, tc := range []struct {
		in   tcpip.Error
		want syscall.Errno
	}{
		{&tcpip.ErrConnectionRefused{}, syscall.ECONNREFUSED},
		{&tcpip.ErrConnectionReset{}, syscall.ECONNRESET},
		{&tcpip.ErrConnectionAborted{}, syscall.ECONNABORTED},
		{&tcpip.ErrAborted{}, syscall.ECONNABORTED},
		{&tcpip.ErrTimeout{}, syscall.ETIMEDOUT},
		{&tcpip.ErrHostUnreachable{}, syscall.EHOSTUNREACH},
		{&tcpip.ErrHostDown{}, syscall.EHOSTDOWN},
		{&tcpip.ErrNetworkUnreachable{}, syscall.ENETUNREACH},
		{&tcpip.ErrNoNet{}, syscall.ENONET},
		{&tcpip.ErrPortInUse{}, syscall.EADDRINUSE},
		{&tcpip.ErrNoPortAvailable{}, syscall.EADDRNOTAVAIL},
		{&tcpip.ErrBadLocalAddress{}, syscall.EADDRNOTAVAIL},
		{&tcpip.ErrClosedForSend{}, syscall.EPIPE},
		{&tcpip.ErrNotConnected{}, syscall.ENOTCONN},
		{&tcpip.ErrAlreadyConnected{}, syscall.EISCONN},
		{&tcpip.ErrAlreadyConnecting{}, syscall.EALREADY},
		{&tcpip.ErrConnectStarted{}, syscall.EINPROGRESS},
		{&tcpip.ErrWouldBlock{}, syscall.EAGAIN},
		{&tcpip.ErrNoBufferSpace{}, syscall.ENOBUFS},
		{&tcpip.ErrMessageTooLong{}, syscall.EMSGSIZE},
		{&tcpip.ErrDestinationRequired{}, syscall.EDESTADDRREQ},
		{&tcpip.ErrAddressFamilyNotSupported{}, syscall.EAFNOSUPPORT},
		{&tcpip.ErrNotPermitted{}, syscall.EPERM},
		{&tcpip.ErrNotSupported{}, syscall.EOPNOTSUPP},
		{&tcpip.ErrUnknownProtocolOption{}, syscall.EOPNOTSUPP},
		{&tcpip.ErrBroadcastDisabled{}, syscall.EACCES},
		{&tcpip.ErrBadAddress{}, syscall.EFAULT},
		{&tcpip.ErrBadBuffer{}, syscall.EFAULT},
		{&tcpip.ErrEndpointBusy{}, syscall.EBUSY},
		{&tcpip.ErrDuplicateAddress{}, syscall.EEXIST},
		{&tcpip.ErrUnknownNICID{}, syscall.ENODEV},
		{&tcpip.ErrNoSuchFile{}, syscall.ENOENT},
		{&tcpip.ErrQueueSizeNotSupported{}, syscall.ENOTTY},
		{&tcpip.ErrInvalidEndpointState{}, syscall.EINVAL},
		{&tcpip.ErrInvalidOptionValue{}, syscall.EINVAL},
		{&tcpip.ErrAlreadyBound{}, syscall.EINVAL},
	} {
		got := GoError(tc.in)
		if !errors.Is(got, tc.want) {
			t.Errorf("GoError(%T) = %v, want %v", tc.in, got, tc.want)
		}
	}
	var ne net.Error
	if !errors.As(GoError(&tcpip.ErrTimeout{}), &ne) || !ne.Timeout() {
		t.Errorf("ETIMEDOUT is not a net.Error with Timeout")
	}
	if GoError(nil) != nil {
		t.Errorf("GoError(nil) != nil")
	}
	if err := GoError(&tcpip.ErrClosedForReceive{}); err == nil {
		t.Errorf("the peer's FIN mapped to nil")
	}
}
