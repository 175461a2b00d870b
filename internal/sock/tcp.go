package sock

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
)

// TuneTCP applies the options of kind tcp to a TCP socket, the same on both
// ends: TCP_NODELAY unless cfg.Nagle (Nagle holds small records
// back waiting for an ACK), TCP_QUICKACK (delayed ACKs slow the sender's
// window at low rates; the kernel leaves quick-ack mode again on its own, so
// this sets the starting mode, not a permanent one), SO_RCVBUF/SO_SNDBUF =
// cfg.SockBuf (see SetBuffers; set before listen or connect, so the window
// scale covers it; it also turns the kernel's buffer auto-tuning off), and
// SO_BUSY_POLL = cfg.BusyPollUs (see SetBusyPoll). It does not change
// O_NONBLOCK: open the socket with SOCK_NONBLOCK and accept with
// SOCK_NONBLOCK. A connection accepted from a tuned listener inherits these
// options; tuning it again is harmless.
func TuneTCP(fd int, cfg dgramio.Config) (Granted, error) {
	var g Granted
	if !cfg.Nagle {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
			return g, fmt.Errorf("setsockopt TCP_NODELAY: %w", err)
		}
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1); err != nil {
		return g, fmt.Errorf("setsockopt TCP_QUICKACK: %w", err)
	}
	if err := SetBuffers(fd, cfg.SockBuf, &g); err != nil {
		return g, err
	}
	if err := SetBusyPoll(fd, cfg.BusyPollUs, &g); err != nil {
		return g, err
	}
	return g, nil
}

// TCPCounters are the TCP_INFO fields that tell a slow connection from a
// lossy one. None counts a lost message (TCP retransmits what it loses).
type TCPCounters struct {
	// RetransSegs is total_retrans: segments retransmitted.
	RetransSegs uint64
	// RetransBytes is bytes_retrans (Linux >= 4.19).
	RetransBytes uint64
	// SegsOut and SegsIn count segments sent and received (Linux >= 4.2).
	SegsOut, SegsIn uint64
	// RTOs is total_rto, retransmission timeouts (Linux >= 6.7).
	RTOs uint64
	// RTTMaxUs is the smoothed RTT in µs (the largest, after Add).
	RTTMaxUs uint64
}

// ReadTCPInfo reads fd's TCP_INFO.
func ReadTCPInfo(fd int) (TCPCounters, error) {
	ti, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return TCPCounters{}, fmt.Errorf("getsockopt TCP_INFO: %w", err)
	}
	return TCPCounters{
		RetransSegs:  uint64(ti.Total_retrans),
		RetransBytes: ti.Bytes_retrans,
		SegsOut:      uint64(ti.Segs_out),
		SegsIn:       uint64(ti.Segs_in),
		RTOs:         uint64(ti.Total_rto),
		RTTMaxUs:     uint64(ti.Rtt),
	}, nil
}

// Add adds o's counters to c and keeps the larger RTT.
func (c *TCPCounters) Add(o TCPCounters) {
	c.RetransSegs += o.RetransSegs
	c.RetransBytes += o.RetransBytes
	c.SegsOut += o.SegsOut
	c.SegsIn += o.SegsIn
	c.RTOs += o.RTOs
	c.RTTMaxUs = max(c.RTTMaxUs, o.RTTMaxUs)
}

// Counters returns c as layer "tcp" counters for Stats.Layers.
func (c TCPCounters) Counters() []dgramio.Counter {
	return []dgramio.Counter{
		{Layer: "tcp", Name: "retrans_segs", Value: c.RetransSegs},
		{Layer: "tcp", Name: "retrans_bytes", Value: c.RetransBytes},
		{Layer: "tcp", Name: "segs_out", Value: c.SegsOut},
		{Layer: "tcp", Name: "segs_in", Value: c.SegsIn},
		{Layer: "tcp", Name: "rto_expiries", Value: c.RTOs},
		{Layer: "tcp", Name: "rtt_us_max", Value: c.RTTMaxUs, Gauge: true},
	}
}
