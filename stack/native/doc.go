// Package native is a TCP/IP engine (IPv4 and IPv6) of our own over one
// frameio.FrameIO, in the style of lwIP's NO_SYS mode: one owner, driven
// by the poll loop, nothing running behind it.
//
// # Model
//
// An Engine has no goroutines and no locks. Its owner calls Poll, which
// takes frames from the FrameIO and runs Ethernet, ARP, IPv4, ICMP and
// TCP input in the same call (answers such as ARP replies, RSTs and echo
// replies go to the FrameIO's TX slots at once), then fires the timers
// that are due; Flush builds the segments every connection has due from
// its send buffer, each in one scratch frame (padded to 60 bytes) that
// the FrameIO copies into a TX slot, and kicks the FrameIO once; Wait sleeps until a frame arrives (frameio.Waiter) or the next
// timer is due. Timers are data (per-connection deadlines in a heap), read
// from Options.Clock on every Poll, Flush and Wait; a poll loop that polls
// and flushes in one step reads the clock once (Engine.Tick) and passes
// the reading to PollAt and FlushAt. Every method of the
// Engine, its Listeners and its Conns must be called from one goroutine
// at a time.
//
// The connection table, the timer heap and the work lists are sized by
// Options.MaxConns at New; a connection's send and receive rings (up to
// Options.SendBuf, RecvBuf) come from the engine's pool while it uses
// them and go back when it idles or ends, and its receive window follows
// what the application reads (docs/memory.md). A ring that empties starts
// again at a fixed place near its front, so that a connection of requests
// and answers, which empties both rings every round trip, keeps touching
// the same few cache lines (and pages) of them. In steady state nothing
// allocates per segment or per message.
//
// # Protocol
//
//   - Ethernet and ARP (RFC 826): answers for Options.Addr, learns from
//     requests addressed to it and answers to its own, resolves next hops
//     without blocking (the gateway for off-link peers), static
//     Options.Neighbors; a bounded cache with RFC 4861 §7.3's neighbour
//     states as Linux keeps them (REACHABLE, STALE, PROBE), evicting the
//     least recently used, and connections that follow a neighbour's new
//     MAC; the engines of a group (queues with one address and MAC) share
//     the ARP replies they receive through an ARPShare.
//   - IPv4 (RFC 791, RFC 1122 §3.2): header checksum; options, bad
//     versions and lengths dropped, each counted. The engine does not
//     fragment what it sends: an echo reply too big for the MTU is
//     dropped and counted.
//   - ICMP (RFC 792, RFC 1122 §3.2.2): echo replies; protocol and port
//     unreachable for datagrams the engine has no use for (UDP included).
//   - IPv6 (RFC 8200) beside IPv4 on the same interface, with
//     Options.Addr6 (and the link-local address of the MAC): extension
//     headers walked within bounds, reassembly (overlaps drop the packet,
//     RFC 5722), ICMPv6 (RFC 4443: echo, port unreachable and Parameter
//     Problem rate-limited, Packet Too Big lowering a connection's MSS per
//     RFC 8201), neighbour discovery (RFC 4861: answers for our addresses,
//     resolution with the neighbour states), TCP with the IPv6
//     pseudo-header and an MSS of MTU-60 (engine6.go).
//   - TCP (RFC 9293): every state, active, passive and simultaneous open
//     and close, half-close, TIME-WAIT with a configurable 2 MSL and reuse
//     (RFC 6191), kept in small records apart from the connection table
//     once the application let go of the connection, RST for segments without a connection (§3.10.7.1), the
//     acceptability test and ACK rules (§3.10.7.4; a valid ACK is taken
//     while the receive window is zero), SYN+FIN dropped and counted, RFC
//     5961 challenge ACKs (limited per connection), ISNs per RFC 6528,
//     ephemeral ports per RFC 6056 §3.3.4, the MSS option (RFC 6691),
//     RST for data to a connection the application closed (RFC 1122
//     §4.2.2.13). The segment an established connection expects next
//     (in order, an ACK that moves SND.UNA or carries data, no SACK
//     blocks) takes a short path that does what the general one does for
//     it (header prediction, counted in tcp_predicted).
//   - Data: rings as send and receive buffers, out-of-order data held in
//     the receive ring, RTO per RFC 6298 (configurable minimum, backoff,
//     Karn), delayed ACK per RFC 1122 §4.2.3.2 (off by default), Nagle off
//     by default, persist timer and zero-window probes, keepalive armed
//     from the handshake (RFC 1122 §4.2.3.6).
//   - RFC 7323 window scaling and timestamps (RTTM, PAWS with one tick of
//     slack for reordered segments); SACK (RFC 2018) both ways with
//     SACK-based loss recovery (RFC 6675; a lost retransmission found by
//     RACK's rule, RFC 8985 §6.2) and NewReno (RFC 5681, RFC 6582); CUBIC
//     (RFC 9438) as Options.Congestion "cubic"; BBR v1
//     (draft-cardwell-iccrg-bbr-congestion-control-00, with delivery-rate
//     sampling and pacing) as "bbr". D-SACK (RFC 2883): data
//     that arrives twice is reported in the next ACK, and the peer's
//     D-SACKs of data the last recovery retransmitted are counted as
//     spurious retransmissions (RFC 3708 §2; no undo of the cwnd cut).
//   - ACKs that answer rejected segments without data (out of the
//     window, PAWS, an ACK of unsent data) are rate-limited (RFC 5961 §7),
//     so two ends out of step cannot bounce ACKs for ever.
//   - IPv4 reassembly (RFC 791 §3.2) bounded by memory, the oldest
//     datagram evicted, overlapping fragments dropped (RFC 5722 §4, as
//     Linux); ICMP errors rate-limited; "fragmentation needed" lowers a
//     connection's MSS (RFC 1191, checked as RFC 5927 §5.1 advises).
//   - SYN cookies (RFC 4987) when a listener's SYN backlog, or
//     SYN-RECEIVED over all listeners, is full.
//   - Every state has a way out no peer controls: persist, orphans,
//     SYN-RECEIVED and TIME-WAIT are bounded (docs/hardening.md).
//
// # Buffers and errors
//
// Conn.Write copies into the send ring and returns what it took (0 when
// full); Conn.Read copies out of the receive ring and returns 0, nil when
// nothing is there. The caller keeps its slices. Errors are values
// (ErrReset, ErrRefused, ErrTimedOut, ErrHostUnreachable, ErrAborted,
// io.EOF): returning one allocates nothing.
//
// # Counters
//
// AppendCounters reports layer "native": every frame the engine did not
// take is counted under its reason (ip_bad_checksum, tcp_checksum_errors,
// tcp_out_of_window, tcp_syn_fin_dropped, ...).
package native
