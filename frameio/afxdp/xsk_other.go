//go:build !linux

package afxdp

import (
	"context"
	"net"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/frameio/afxdp/xdpprog"
)

// XSK is an AF_XDP socket; AF_XDP exists only on Linux, so here Open always
// fails and XSK has no working methods.
type XSK struct{}

// ErrNoCarrier is matched by Open's error when the link has no carrier.
var ErrNoCarrier = net.UnknownNetworkError("no carrier")

// Open returns an error matching dgramio.ErrNotSupported: AF_XDP is Linux only.
func Open(o Options) (*XSK, error) {
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return nil, dgramio.NotSupported("AF_XDP sockets", "4.18", "AF_XDP exists only on Linux", nil)
}

// TxFrame returns false.
func (x *XSK) TxFrame(frame []byte) bool { return false }

// TxSlot returns nil.
func (x *XSK) TxSlot() []byte { return nil }

// TxCommit returns false.
func (x *XSK) TxCommit(n int) bool { return false }

// Kick returns net.ErrClosed.
func (x *XSK) Kick() error { return net.ErrClosed }

// RxFrames returns 0.
func (x *XSK) RxFrames(max int, deliver func(frame []byte)) int { return 0 }

// RxReady returns false.
func (x *XSK) RxReady() bool { return false }

// Wait returns net.ErrClosed.
func (x *XSK) Wait(ctx context.Context) error { return net.ErrClosed }

// WaitUntil returns net.ErrClosed.
func (x *XSK) WaitUntil(ctx context.Context, deadline time.Time) error { return net.ErrClosed }

// Interrupt does nothing.
func (x *XSK) Interrupt() {}

// MAC returns nil.
func (x *XSK) MAC() net.HardwareAddr { return nil }

// MTU returns 0.
func (x *XSK) MTU() int { return 0 }

// Stats returns zero counters.
func (x *XSK) Stats() frameio.Stats { return frameio.Stats{} }

// Close returns nil.
func (x *XSK) Close() error { return nil }

// Mode says how the socket runs; here, that it does not.
func (x *XSK) Mode() string { return "unsupported" }

// Program is an XDP program shared by the sockets of several queues;
// AF_XDP exists only on Linux, so AttachProgram always fails.
type Program struct{}

// AttachProgram returns an error matching dgramio.ErrNotSupported.
func AttachProgram(o ProgramOptions) (*Program, error) {
	return nil, dgramio.NotSupported("XDP programs", "4.18", "XDP exists only on Linux", nil)
}

// Mode returns "".
func (p *Program) Mode() string { return "" }

// Counters returns zero counters.
func (p *Program) Counters() (xdpprog.Counts, error) { return xdpprog.Counts{}, nil }

// Close returns nil.
func (p *Program) Close() error { return nil }
