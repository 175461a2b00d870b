package dgramio

import (
	"errors"
	"fmt"
	"net"
)

// ErrNotSupported is the one sentinel for "this host, kernel or build cannot
// do that". It is always wrapped by an *UnsupportedError that names the
// feature; test with errors.Is(err, ErrNotSupported).
var ErrNotSupported = errors.New("not supported")

// ErrClosed is what data-path calls return after Close (net.ErrClosed).
var ErrClosed = net.ErrClosed

// The causes Backend.Queue and Backend.QueueTo return, the same on every
// kind. Each is a plain value compared with == or errors.Is; returning one
// allocates nothing. A refused message is not queued anywhere and is
// counted in Stats under its cause; the caller still owns it.
var (
	// ErrBackPressure: the send slots (or a stream connection's staging)
	// are full. Flush, then queue the message again.
	ErrBackPressure = errors.New("dgramio: send slots full (back-pressure): Flush, then queue again")
	// ErrTooLarge: the payload is larger than Config.MaxDatagram (on
	// stream kinds, the record limit). It never fits; split it or raise
	// MaxDatagram.
	ErrTooLarge = errors.New("dgramio: payload larger than Config.MaxDatagram")
	// ErrNoRoute: there is nowhere to send it: Queue on a backend with no
	// destination (a datagram server: answer with QueueTo) or no open
	// connection; QueueTo to a peer with no connection, to an address of a
	// family the kind cannot send to, or to one a raw kind cannot resolve.
	ErrNoRoute = errors.New("dgramio: no route to the destination (no destination, connection or resolvable address)")
)

// ErrNoDPDK is the error of a build without DPDK asked for a DPDK kind
// (dpdk, tcp-dpdk): those need cgo, libdpdk and the build tag dpdk. It is
// an *UnsupportedError, so it matches ErrNotSupported too; callers wrap it
// with the kind (fmt.Errorf("kind %s: %w", kind, ErrNoDPDK)).
var ErrNoDPDK error = &UnsupportedError{Feature: "DPDK",
	Hint: "this binary was built without DPDK: install libdpdk-dev (make deps) and build with -tags dpdk"}

// UnsupportedError says which feature is missing, the minimum kernel (or
// build tag, sysctl, …) that provides it, and what to do about it. It matches
// ErrNotSupported through errors.Is.
type UnsupportedError struct {
	// Feature names what is missing: "io_uring multishot RECVMSG",
	// "kind dpdk (build tag dpdk)".
	Feature string
	// MinKernel is the first Linux version that has the feature, or "".
	MinKernel string
	// Hint says what the user can do; it may be empty.
	Hint string
	// Err is the underlying error, if there is one (an errno from a probe).
	Err error
}

// Error implements error.
func (e *UnsupportedError) Error() string {
	s := e.Feature + " not supported"
	if e.MinKernel != "" {
		s += " (requires Linux >= " + e.MinKernel + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// Is reports whether target is ErrNotSupported.
func (e *UnsupportedError) Is(target error) bool { return target == ErrNotSupported }

// Unwrap returns the underlying error.
func (e *UnsupportedError) Unwrap() error { return e.Err }

// NotSupported builds an *UnsupportedError.
func NotSupported(feature, minKernel, hint string, err error) error {
	return &UnsupportedError{Feature: feature, MinKernel: minKernel, Hint: hint, Err: err}
}

// ConfigError is returned by validation for one bad field of Config, before
// any syscall is made. Field is the Go field name ("MaxDatagram",
// "XDP.FrameSize"); Reason says what is wrong and what to do.
type ConfigError struct {
	Field  string
	Value  any
	Reason string
}

// Error implements error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("dgramio: config %s=%v: %s", e.Field, e.Value, e.Reason)
}

// BadField builds a *ConfigError for field, whose value is value, with
// the reason formatted from format and args.
func BadField(field string, value any, format string, args ...any) error {
	return &ConfigError{Field: field, Value: value, Reason: fmt.Sprintf(format, args...)}
}

// PrivilegeError says that an operation needs a capability the process lacks.
// It matches os.ErrPermission through errors.Is (the wrapped errno does).
type PrivilegeError struct {
	// Op is what was attempted ("attach XDP program", "create AF_XDP socket").
	Op string
	// Capability names what is needed ("CAP_NET_ADMIN", "CAP_BPF and CAP_NET_ADMIN").
	Capability string
	// Err is the errno (EPERM or EACCES).
	Err error
}

// Error implements error.
func (e *PrivilegeError) Error() string {
	return fmt.Sprintf("%s: %v: needs %s (run as root, or grant it to the binary with setcap)",
		e.Op, e.Err, e.Capability)
}

// Unwrap returns the errno.
func (e *PrivilegeError) Unwrap() error { return e.Err }
