// Package pcapio is a frameio.FrameIO that captures: it wraps another
// FrameIO and writes every frame sent (accepted by TxFrame) and every frame
// received (delivered by RxFrames) to two pcap files (libpcap's format,
// nanosecond time stamps, written here: no libpcap, no other package).
// tcpdump cannot see what AF_XDP and DPDK take from the kernel; this can,
// and tcpdump -r, Wireshark and gopacket read the files.
//
// Config.Pcap names a file prefix: Wrap(fio, cfg.Pcap) writes
// <prefix>-tx.pcap and <prefix>-rx.pcap and returns fio itself when the
// prefix is empty, so a raw backend's constructor applies it in one line.
// Read and ReadFile read such a file back, frame by frame.
//
// # Cost
//
// A capture costs a copy into a buffered writer per frame and one write(2)
// per batch (at each Kick that follows TxFrame calls, and at the end of each
// RxFrames call that delivered frames), so the files are complete up to the
// last batch even if the process is killed later. It is for debugging, not
// for measuring: Stats.Mode says "+pcap".
//
// # Threading
//
// As frameio.FrameIO says: the transmit side (TxFrame, Kick) and the
// receive side (RxFrames, Wait) may run in two goroutines; each has its own
// file and writer. Stats, MAC and MTU may be called from any goroutine.
// Close must not race with either side.
//
// This package is API: it wraps any FrameIO.
package pcapio

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
)

// Snaplen is the snapshot length written in the files' headers; longer
// frames (none at a 9000-byte MTU) are cut to it, their full length kept in
// the record.
const Snaplen = 262144

// Suffixes of the two files after the prefix.
const (
	TxSuffix = "-tx.pcap"
	RxSuffix = "-rx.pcap"
)

// Wrap returns fio unchanged when prefix is empty. Otherwise it creates
// (or truncates) prefix+"-tx.pcap" and prefix+"-rx.pcap" and returns a
// capturing FrameIO over fio that implements frameio.Waiter (and an
// Interrupt method) exactly when fio does. On error fio is left open and
// nothing is created; the caller still owns fio. On success the returned
// FrameIO owns fio: its Close closes fio and the files.
func Wrap(fio frameio.FrameIO, prefix string) (frameio.FrameIO, error) {
	if prefix == "" {
		return fio, nil
	}
	tx, err := os.Create(prefix + TxSuffix)
	if err != nil {
		return nil, fmt.Errorf("pcapio: %w", err)
	}
	rx, err := os.Create(prefix + RxSuffix)
	if err != nil {
		tx.Close()
		os.Remove(tx.Name())
		return nil, fmt.Errorf("pcapio: %w", err)
	}
	c, err := New(fio, tx, rx)
	if err != nil {
		tx.Close()
		rx.Close()
		os.Remove(tx.Name())
		os.Remove(rx.Name())
		return nil, err
	}
	c.files = []*os.File{tx, rx}
	return c.As(), nil
}

// Capture is the capturing FrameIO over another one. Get one from New (or
// Wrap, which returns it as a frameio.FrameIO of the right shape).
type Capture struct {
	fio      frameio.FrameIO
	tx, rx   side
	files    []*os.File
	deliver  func([]byte) // the caller's, during RxFrames
	capRx    func([]byte) // c.rxFrame, bound once (no allocation per call)
	closeErr error
	closed   bool
}

// side is one file: its writer and counters.
type side struct {
	out    io.Writer
	buf    *bufio.Writer
	hdr    [recordHeaderLen]byte // a record's header, built in place
	dirty  bool
	frames atomic.Uint64
	errs   atomic.Uint64
	err    atomic.Pointer[error] // the first write error
}

// New returns a capture of fio that writes pcap files to tx and rx (each
// gets its file header at once). The Capture owns fio (Close closes it) but
// not tx and rx: closing them after Close is the caller's (Wrap does it).
// Use As for a value that implements frameio.Waiter when fio does.
func New(fio frameio.FrameIO, tx, rx io.Writer) (*Capture, error) {
	c := &Capture{fio: fio}
	for _, s := range []struct {
		side *side
		w    io.Writer
		name string
	}{{&c.tx, tx, "tx"}, {&c.rx, rx, "rx"}} {
		s.side.out = s.w
		s.side.buf = bufio.NewWriterSize(s.w, 64<<10)
		_, _ = s.side.buf.Write(appendFileHeader(nil, Snaplen))
		if err := s.side.buf.Flush(); err != nil {
			return nil, fmt.Errorf("pcapio: %s header: %w", s.name, err)
		}
	}
	c.capRx = c.rxFrame
	return c, nil
}

// As returns c as a frameio.FrameIO that also implements frameio.Waiter
// when the wrapped FrameIO does, and Interrupt() when it does (package
// stack's Interrupter).
func (c *Capture) As() frameio.FrameIO {
	_, w := c.fio.(frameio.Waiter)
	_, i := c.fio.(interface{ Interrupt() })
	switch {
	case w && i:
		return &captureWI{c}
	case w:
		return &captureW{c}
	case i:
		return &captureI{c}
	}
	return c
}

// record writes one frame to s, stamped now.
func (s *side) record(frame []byte) {
	n := len(frame)
	if n > Snaplen {
		n = Snaplen
	}
	h := appendRecordHeader(s.hdr[:0], time.Now(), n, len(frame))
	if _, err := s.buf.Write(h); err != nil {
		s.fail(err)
		return
	}
	if _, err := s.buf.Write(frame[:n]); err != nil {
		s.fail(err)
		return
	}
	s.dirty = true
	s.frames.Add(1)
}

// flush writes out what record buffered.
func (s *side) flush() {
	if !s.dirty {
		return
	}
	s.dirty = false
	if err := s.buf.Flush(); err != nil {
		s.fail(err)
		// A bufio.Writer keeps failing once it failed: start afresh so a
		// transient error (a full disk freed) does not end the capture.
		s.buf.Reset(s.out)
	}
}

func (s *side) fail(err error) {
	s.err.CompareAndSwap(nil, &err)
	s.errs.Add(1)
}

// TxFrame implements frameio.FrameIO: a frame the wrapped FrameIO accepts
// is also written to the TX file.
func (c *Capture) TxFrame(frame []byte) bool {
	if !c.fio.TxFrame(frame) {
		return false
	}
	c.tx.record(frame)
	return true
}

// Kick implements frameio.FrameIO; it also writes out the TX file's buffer.
func (c *Capture) Kick() error {
	err := c.fio.Kick()
	c.tx.flush()
	return err
}

// RxFrames implements frameio.FrameIO: each frame is written to the RX file
// before it is delivered.
func (c *Capture) RxFrames(max int, deliver func(frame []byte)) int {
	c.deliver = deliver
	n := c.fio.RxFrames(max, c.capRx)
	c.deliver = nil
	if n > 0 {
		c.rx.flush()
	}
	return n
}

func (c *Capture) rxFrame(frame []byte) {
	c.rx.record(frame)
	c.deliver(frame)
}

// MAC implements frameio.FrameIO.
func (c *Capture) MAC() net.HardwareAddr { return c.fio.MAC() }

// MTU implements frameio.FrameIO.
func (c *Capture) MTU() int { return c.fio.MTU() }

// Stats implements frameio.FrameIO: the wrapped FrameIO's counters, its
// Mode followed by " +pcap", and layer "pcap" counters: tx_frames and
// rx_frames written, tx_write_errors and rx_write_errors (frames not in the
// files; the frames themselves went through).
func (c *Capture) Stats() frameio.Stats {
	s := c.fio.Stats()
	s.Mode += " +pcap"
	s.Layers = append(s.Layers[:len(s.Layers):len(s.Layers)],
		dgramio.Counter{Layer: "pcap", Name: "tx_frames", Value: c.tx.frames.Load()},
		dgramio.Counter{Layer: "pcap", Name: "rx_frames", Value: c.rx.frames.Load()},
		dgramio.Counter{Layer: "pcap", Name: "tx_write_errors", Value: c.tx.errs.Load()},
		dgramio.Counter{Layer: "pcap", Name: "rx_write_errors", Value: c.rx.errs.Load()},
	)
	return s
}

// Err returns the first write error of either file, or nil. Safe from any
// goroutine.
func (c *Capture) Err() error {
	var errs []error
	if err := c.tx.err.Load(); err != nil {
		errs = append(errs, fmt.Errorf("pcapio: tx file: %w", *err))
	}
	if err := c.rx.err.Load(); err != nil {
		errs = append(errs, fmt.Errorf("pcapio: rx file: %w", *err))
	}
	return errors.Join(errs...)
}

// Unwrap returns the wrapped FrameIO.
func (c *Capture) Unwrap() frameio.FrameIO { return c.fio }

// Close implements frameio.FrameIO: it closes the wrapped FrameIO, writes
// out both files and closes those Wrap created. It returns the wrapped
// FrameIO's error joined with any write error. A second Close returns the
// first one's result.
func (c *Capture) Close() error {
	if c.closed {
		return c.closeErr
	}
	c.closed = true
	errs := []error{c.fio.Close()}
	for _, s := range []*side{&c.tx, &c.rx} {
		s.dirty = true
		s.flush()
	}
	errs = append(errs, c.Err())
	for _, f := range c.files {
		if err := f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("pcapio: %w", err))
		}
	}
	c.closeErr = errors.Join(errs...)
	return c.closeErr
}

// captureW adds Wait; captureI adds Interrupt; captureWI both.
type (
	captureW  struct{ *Capture }
	captureI  struct{ *Capture }
	captureWI struct{ *Capture }
)

// Wait implements frameio.Waiter by waiting on the wrapped FrameIO.
func (c *captureW) Wait(ctx context.Context) error { return c.fio.(frameio.Waiter).Wait(ctx) }

// Interrupt calls the wrapped FrameIO's Interrupt.
func (c *captureI) Interrupt() { c.fio.(interface{ Interrupt() }).Interrupt() }

// Wait implements frameio.Waiter by waiting on the wrapped FrameIO.
func (c *captureWI) Wait(ctx context.Context) error { return c.fio.(frameio.Waiter).Wait(ctx) }

// Interrupt calls the wrapped FrameIO's Interrupt.
func (c *captureWI) Interrupt() { c.fio.(interface{ Interrupt() }).Interrupt() }

var (
	_ frameio.FrameIO = (*Capture)(nil)
	_ frameio.Waiter  = (*captureW)(nil)
	_ frameio.Waiter  = (*captureWI)(nil)
)
