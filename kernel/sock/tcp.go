package sock

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio/internal/core"
)

// TuneTCP applies the options of kind tcp to a TCP socket, the same on both
// ends (seed §3): TCP_NODELAY unless cfg.Nagle (Nagle holds small records
// back waiting for an ACK), TCP_QUICKACK (delayed ACKs slow the sender's
// window at low rates; the kernel leaves quick-ack mode again on its own, so
// this sets the starting mode, not a permanent one), SO_RCVBUF/SO_SNDBUF =
// cfg.SockBuf (see SetBuffers; set before listen or connect, so the window
// scale covers it; it also turns the kernel's buffer auto-tuning off), and
// SO_BUSY_POLL = cfg.BusyPollUs (see SetBusyPoll). It does not change
// O_NONBLOCK: open the socket with SOCK_NONBLOCK and accept with
// SOCK_NONBLOCK. A connection accepted from a tuned listener inherits these
// options; tuning it again is harmless.
func TuneTCP(fd int, cfg core.Config) (Granted, error) {
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

// TCPInfo returns the counters of TCP_INFO that tell a slow connection from
// a lossy one, as layer "tcp" counters: retransmitted segments
// (total_retrans; Linux >= 2.6.x), bytes retransmitted (Linux >= 4.19),
// segments out and in, RTO expiries (Linux >= 6.7), the smoothed RTT in µs
// and the congestion window. None of them counts a lost message (TCP
// retransmits what it loses), so Loss is false.
func TCPInfo(fd int) ([]core.Counter, error) {
	ti, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
	if err != nil {
		return nil, fmt.Errorf("getsockopt TCP_INFO: %w", err)
	}
	return []core.Counter{
		{Layer: "tcp", Name: "retrans_segs", Value: uint64(ti.Total_retrans)},
		{Layer: "tcp", Name: "retrans_bytes", Value: ti.Bytes_retrans},
		{Layer: "tcp", Name: "segs_out", Value: uint64(ti.Segs_out)},
		{Layer: "tcp", Name: "segs_in", Value: uint64(ti.Segs_in)},
		{Layer: "tcp", Name: "rto_expiries", Value: uint64(ti.Total_rto)},
		{Layer: "tcp", Name: "rtt_us", Value: uint64(ti.Rtt)},
		{Layer: "tcp", Name: "snd_cwnd", Value: uint64(ti.Snd_cwnd)},
	}, nil
}
