package native

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Clock tells the engine's time. memio.FakeClock satisfies it; nil in
// Options means the monotonic clock of time.Now.
type Clock interface{ Now() time.Time }

// Congestion names a congestion control algorithm.
type Congestion string

// Congestion control algorithms.
const (
	// NewReno is RFC 5681 slow start and congestion avoidance with RFC 6582
	// fast recovery, and SACK-based loss recovery (RFC 6675) when the peer
	// permits SACK.
	NewReno Congestion = "newreno"
	// CUBIC is RFC 9438's window growth in congestion avoidance and its
	// multiplicative decrease (0.7), with the same loss recovery.
	CUBIC Congestion = "cubic"
	// BBR is BBR v1 (draft-cardwell-iccrg-bbr-congestion-control-00, as
	// Linux's tcp_bbr): cwnd and a pacing rate from the measured
	// bottleneck bandwidth and minimum RTT, not cut by a random loss;
	// the same loss recovery (docs/loss.md).
	BBR Congestion = "bbr"
)

// Defaults of Options.
const (
	DefaultMaxConns   = 1024
	DefaultSendBuf    = 256 << 10
	DefaultRecvBuf    = 256 << 10
	DefaultMinRTO     = 25 * time.Millisecond
	DefaultMaxRTO     = 60 * time.Second
	DefaultInitialRTO = time.Second // RFC 6298 §2.1
	DefaultTimeWait   = 60 * time.Second
	DefaultSYNBacklog = 128
	DefaultMaxRetries = 15 // RFC 1122 §4.2.3.5: R2 well over 100 s
	DefaultSYNRetries = 6
	DefaultARPRetries = 3
	DefaultARPTimeout = time.Second
	// DefaultKeepaliveInterval and DefaultKeepaliveCount are the probes'
	// spacing and number once Keepalive's idle time has passed.
	DefaultKeepaliveInterval = 75 * time.Second
	DefaultKeepaliveCount    = 9
	// DefaultChallengeACKLimit is how many RFC 5961 challenge ACKs the
	// engine sends per second at most (RFC 5961 §7).
	DefaultChallengeACKLimit = 1000
	// DefaultSYNACKRetries is how many times a SYN-ACK is sent again
	// before a half-open passive connection is dropped: 1+2+4+8+16+32 s,
	// about 63 s from a 1 s RTO (Linux's tcp_synack_retries).
	DefaultSYNACKRetries = 5
	// DefaultOrphanRetries is how many zero-window probes a connection
	// the application closed sends before it is aborted (Linux's
	// tcp_orphan_retries of 0, which means 8).
	DefaultOrphanRetries = 8

	// Hardening against the link (docs/hardening-net.md).

	// DefaultARPEntries bounds the neighbour cache (Linux's gc_thresh3).
	DefaultARPEntries = 1024
	// DefaultARPReachable is how long a neighbour stays REACHABLE after it
	// answered (Linux's base_reachable_time, RFC 4861 §10
	// REACHABLE_TIME); then it is STALE, used but probed again when a
	// connection's retransmission or a Dial needs it.
	DefaultARPReachable = 30 * time.Second
	// DefaultReassemblyMemory bounds the buffers of IPv4 reassembly
	// (Linux's ipfrag_high_thresh): 64 datagrams of the largest size.
	DefaultReassemblyMemory = 4 << 20
	// DefaultReassemblyTimeout is RFC 791 §3.2's recommended timer.
	DefaultReassemblyTimeout = 15 * time.Second
	// DefaultICMPRateLimit and DefaultICMPBurst bound the ICMP errors the
	// engine sends (Linux's icmp_msgs_per_sec and icmp_msgs_burst).
	DefaultICMPRateLimit = 1000
	DefaultICMPBurst     = 50

	// Memory that follows use (docs/memory.md).

	// DefaultInitRecvWindow is the receive window a connection starts
	// with before auto-tuning raises it (about what Linux's tcp_rmem
	// default of 128 KiB announces).
	DefaultInitRecvWindow = 64 << 10
	// DefaultMaxTimeWait is the least default of MaxTimeWait: TIME-WAIT
	// for 1,092 connections a second with the 60 s of DefaultTimeWait,
	// about 4.5 MiB of records and table at most (Linux's
	// tcp_max_tw_buckets is 262,144 on a large host).
	DefaultMaxTimeWait = 1 << 16
	// DefaultPoolIdle is how long a ring may stay in the engine's pool
	// untaken before it is freed.
	DefaultPoolIdle = time.Second
)

// Options configure an Engine. Addr or Addr6 is required; zero values take the
// defaults above.
type Options struct {
	// Addr is the engine's IPv4 address; PrefixLen its on-link prefix
	// (default 24); Gateway the next hop for off-link peers (none: off-link
	// peers are unreachable). AllOnLink puts every address on the link
	// (frames go to the peer's own MAC, learnt from its frames or asked by
	// ARP), as a host without a router: PrefixLen and Gateway are then
	// ignored.
	Addr      netip.Addr
	PrefixLen int
	Gateway   netip.Addr
	AllOnLink bool
	// Addr6 is the engine's IPv6 address, PrefixLen6 its on-link prefix
	// (default 64), Gateway6 the next hop for off-link IPv6 peers (a
	// router's link-local address, usually). With Addr6 set the engine
	// serves IPv6 beside IPv4 on the same interface (docs/ipv6.md), on
	// Addr6 and on the link-local address made from the MAC (EUI-64, RFC
	// 4291 Appendix A); Addr may then be left unset (an IPv6-only engine).
	Addr6      netip.Addr
	PrefixLen6 int
	Gateway6   netip.Addr
	// Neighbors are static neighbour entries (never asked, never
	// expire), IPv4 (ARP) or IPv6 (neighbour discovery).
	Neighbors map[netip.Addr]net.HardwareAddr
	// ARPShare, when set, is the group of engines with this Addr and MAC
	// (the queues of one interface) that pass each other the ARP replies
	// they receive: a reply that lands on one queue is known to all.
	ARPShare *ARPShare
	// MTU is the largest IP packet; default and maximum the FrameIO's MTU.
	MTU int
	// Clock is read on every Poll, Flush, Wait and Tick (PollAt and
	// FlushAt take a reading instead); nil: the monotonic clock.
	Clock Clock
	// MaxConns bounds the connection table (every state but LISTEN; TIME-
	// WAIT of a connection the application no longer holds is kept apart,
	// see MaxTimeWait). The table takes 1 KiB per slot at New; a
	// connection holds send and receive rings only while they hold bytes
	// (docs/memory.md), so memory is the table plus the bytes in flight
	// and unread, at most MaxConns * (SendBuf + RecvBuf) more.
	MaxConns int
	// SendBuf and RecvBuf are the most a connection's send and receive
	// buffers hold, in bytes: its rings grow to what they hold, and the
	// receive window follows what the application reads per round trip
	// (auto-tuning) from InitRecvWindow up to RecvBuf.
	SendBuf, RecvBuf int
	// InitRecvWindow is where the receive window starts (default
	// DefaultInitRecvWindow, at most RecvBuf).
	InitRecvWindow int
	// NoBufferTuning fixes the receive window at RecvBuf from the start
	// (no auto-tuning); the rings still come from the pool as bytes need
	// them.
	NoBufferTuning bool
	// RecvMemory bounds what receive-window auto-tuning adds beyond
	// InitRecvWindow over all connections together, as what it can bring
	// into the receive ring while the poll loop is away (5 ms): a window
	// on a round trip longer than that counts in proportion, as its peer
	// spreads it over the round trip. A connection's window grows only
	// while the sum stays below it (as Linux's tcp_rcv_space_adjust stops
	// under tcp_mem pressure). The default is half of the FrameIO's
	// receive ring in full segments when the FrameIO tells its size (an
	// AF_XDP socket), no bound otherwise; negative: no bound.
	RecvMemory int
	// PoolIdle is how long a ring no connection holds stays in the
	// engine's pool for reuse before it is freed (default
	// DefaultPoolIdle).
	PoolIdle time.Duration
	// MSS caps the MSS the engine announces (RFC 6691); default MTU-40.
	MSS int
	// MinRTO, MaxRTO and InitialRTO bound and start the retransmission
	// timeout (RFC 6298). MinRTO bounds the RTO's variance term too, as
	// Linux's rto_min: the RTO is at least SRTT + MinRTO.
	MinRTO, MaxRTO, InitialRTO time.Duration
	// MaxRetries is how many retransmissions of one segment without an ACK
	// give the connection up (ErrTimedOut); SYNRetries the same for a SYN.
	MaxRetries, SYNRetries int
	// TimeWait is 2 MSL, how long TIME-WAIT lasts (RFC 9293 §3.10.7.4).
	// An orphaned FIN-WAIT-2 waits as long.
	TimeWait time.Duration
	// DelayedACK delays ACKs of in-order data up to this long (RFC 1122
	// §4.2.3.2: every second full segment is acknowledged at once); 0 off.
	DelayedACK time.Duration
	// Nagle holds small segments while data is unacknowledged (RFC 896);
	// off by default (records should leave at once).
	Nagle bool
	// Congestion is the congestion control; default NewReno (docs/loss.md
	// "BBR" on choosing). The engine used directly does not look at the
	// host: dgramio.Config's default (TCP.Congestion, which tcp-xdp and
	// tcp-dpdk map here) follows the host's net.ipv4.tcp_congestion_control.
	Congestion Congestion
	// NoSACK, NoTimestamps and NoWindowScale turn off offering and taking
	// SACK (RFC 2018), timestamps (RFC 7323 §3) and window scaling (RFC
	// 7323 §2); all are on by default.
	NoSACK, NoTimestamps, NoWindowScale bool
	// NoRACK turns off the loss detection of RFC 8985 (RACK's reordering
	// timer, tail loss probes) and limited transmit, leaving RFC 6675's
	// DupThresh and the RTO (docs/loss.md); for comparison.
	NoRACK bool
	// NoHyStart turns off HyStart++ (RFC 9406) in CUBIC's first slow
	// start: slow start then ends only at the first loss (docs/loss.md);
	// for comparison. NewReno's slow start never runs it (as Linux's
	// reno), and BBR has its own Startup.
	NoHyStart bool
	// Keepalive is the idle time before the first keepalive probe of every
	// connection (RFC 1122 §4.2.3.6); 0 off. Conn.SetKeepalive overrides it.
	Keepalive         time.Duration
	KeepaliveInterval time.Duration
	KeepaliveCount    int
	// SYNBacklog bounds the connections in SYN-RECEIVED per listener;
	// beyond it the listener answers with SYN cookies (RFC 4987).
	SYNBacklog int
	// NoSYNCookies drops SYNs beyond SYNBacklog instead.
	NoSYNCookies bool
	// AlwaysSYNCookies answers every SYN to a listener with a SYN cookie,
	// keeping no SYN-RECEIVED state (Linux's net.ipv4.tcp_syncookies = 2).
	// NoSYNCookies wins over it.
	AlwaysSYNCookies bool
	// ISNSecret keys the initial sequence numbers (RFC 6528) and the SYN
	// cookies; zero: a random key.
	ISNSecret [16]byte
	// ARPRetries requests, ARPTimeout apart, resolve a peer before Dial's
	// connection fails with ErrHostUnreachable.
	ARPRetries int
	ARPTimeout time.Duration
	// ChallengeACKLimit caps RFC 5961 challenge ACKs per second for the
	// whole engine, drawn at random each second between half and one and
	// a half of it, on top of a limit of one every half second per
	// connection (so that no one learns from its own challenge ACKs what
	// happened on other connections).
	ChallengeACKLimit int
	// SYNACKRetries bounds the retransmissions of a SYN-ACK (default
	// DefaultSYNACKRetries); SYNRetries bounds those of our own SYN.
	SYNACKRetries int
	// MaxSYNReceived bounds the connections in SYN-RECEIVED over all
	// listeners (default MaxConns/4, at least 1); beyond it, as beyond a
	// listener's SYNBacklog, SYNs are answered with cookies.
	MaxSYNReceived int
	// MaxTimeWait bounds the TIME-WAIT records (default the larger of
	// 4*MaxConns and DefaultMaxTimeWait; they are allocated as used and
	// freed once none is left). A
	// connection that reaches TIME-WAIT once the application closed it
	// gives its slot back and waits its 2 MSL in a small record; with
	// MaxTimeWait records in use it skips TIME-WAIT (Linux's
	// tcp_max_tw_buckets), counted in tcp_timewait_overflow.
	MaxTimeWait int
	// UserTimeout, when set, aborts a connection (ErrTimedOut) whose
	// sent data made no progress for this long: retransmissions or
	// zero-window probes answered with a closed window (RFC 5482,
	// Linux's TCP_USER_TIMEOUT). 0: off, MaxRetries alone applies.
	UserTimeout time.Duration
	// OrphanRetries is how many zero-window probes a connection that the
	// application closed with data still unsent sends before it is
	// aborted with a RST (default DefaultOrphanRetries): a peer that
	// keeps its window closed cannot hold it, its slot and its buffers
	// for ever.
	OrphanRetries int

	// Hardening against the link (docs/hardening-net.md).

	// ARPEntries bounds the neighbour cache; a new neighbour with the
	// cache full evicts one no request is pending for (counted
	// arp_evicted). ARPReachable is how long an answer keeps a neighbour
	// REACHABLE.
	ARPEntries   int
	ARPReachable time.Duration
	// ReassemblyMemory bounds the bytes of IPv4 reassembly buffers (one
	// slot per 64 KiB, at least one); a new datagram with every slot taken
	// evicts the oldest. ReassemblyTimeout frees an incomplete datagram.
	ReassemblyMemory  int
	ReassemblyTimeout time.Duration
	// ICMPRateLimit is the ICMP errors the engine sends per second at
	// most, ICMPBurst how many may leave at once.
	ICMPRateLimit int
	ICMPBurst     int
	// NoSlowStartAfterIdle keeps cwnd across an idle period (Linux's
	// tcp_slow_start_after_idle=0); by default a connection idle for an
	// RTO restarts from a smaller window (RFC 5681 §4.1, RFC 7661).
	NoSlowStartAfterIdle bool
}

// setDefaults fills zero fields and checks the rest against mtu, the
// FrameIO's MTU.
func (o *Options) setDefaults(mtu int) error {
	if o.Addr.IsValid() && !o.Addr.Is4() {
		return errors.New("native: Options.Addr must be an IPv4 address (an IPv6 one goes in Addr6)")
	}
	if o.Addr6.IsValid() && (!o.Addr6.Is6() || o.Addr6.Is4In6() || o.Addr6.Zone() != "" ||
		!o.Addr6.IsGlobalUnicast() && !o.Addr6.IsPrivate()) {
		return fmt.Errorf("native: Options.Addr6 %v is not a unicast IPv6 address without a zone", o.Addr6)
	}
	if !o.Addr.IsValid() && !o.Addr6.IsValid() {
		return errors.New("native: Options.Addr (IPv4) or Addr6 (IPv6) is required")
	}
	if o.PrefixLen6 == 0 {
		o.PrefixLen6 = 64
	}
	if o.PrefixLen6 < 1 || o.PrefixLen6 > 128 {
		return fmt.Errorf("native: Options.PrefixLen6 %d is not in 1..128", o.PrefixLen6)
	}
	if o.Gateway6.IsValid() && (!o.Gateway6.Is6() || o.Gateway6.Is4In6()) {
		return errors.New("native: Options.Gateway6 must be an IPv6 address")
	}
	if o.PrefixLen == 0 {
		o.PrefixLen = 24
	}
	if o.PrefixLen < 1 || o.PrefixLen > 32 {
		return fmt.Errorf("native: Options.PrefixLen %d is not in 1..32", o.PrefixLen)
	}
	if o.Gateway.IsValid() && !o.Gateway.Is4() {
		return errors.New("native: Options.Gateway must be an IPv4 address")
	}
	if o.MTU == 0 || o.MTU > mtu {
		o.MTU = mtu
	}
	if o.MTU < 576 {
		return fmt.Errorf("native: MTU %d is below the 576 every IPv4 host must take (RFC 791)", o.MTU)
	}
	if o.Addr6.IsValid() && o.MTU < minMTU6 {
		return fmt.Errorf("native: MTU %d is below the 1280 every IPv6 link carries (RFC 8200 §5)", o.MTU)
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxConns, DefaultMaxConns)
	def(&o.SendBuf, DefaultSendBuf)
	def(&o.RecvBuf, DefaultRecvBuf)
	def(&o.InitRecvWindow, DefaultInitRecvWindow)
	defd(&o.PoolIdle, DefaultPoolIdle)
	if o.MSS <= 0 || o.MSS > o.MTU-40 {
		o.MSS = o.MTU - 40
	}
	defd(&o.MinRTO, DefaultMinRTO)
	defd(&o.MaxRTO, DefaultMaxRTO)
	defd(&o.InitialRTO, DefaultInitialRTO)
	if o.InitialRTO < o.MinRTO {
		o.InitialRTO = o.MinRTO
	}
	if o.MaxRTO < o.MinRTO {
		return fmt.Errorf("native: MaxRTO %v is below MinRTO %v", o.MaxRTO, o.MinRTO)
	}
	def(&o.MaxRetries, DefaultMaxRetries)
	def(&o.SYNRetries, DefaultSYNRetries)
	defd(&o.TimeWait, DefaultTimeWait)
	if o.Congestion == "" {
		o.Congestion = NewReno
	}
	if o.Congestion != NewReno && o.Congestion != CUBIC && o.Congestion != BBR {
		return fmt.Errorf("native: congestion control %q is not implemented (use %q, %q or %q)", o.Congestion, NewReno, CUBIC, BBR)
	}
	defd(&o.KeepaliveInterval, DefaultKeepaliveInterval)
	def(&o.KeepaliveCount, DefaultKeepaliveCount)
	def(&o.SYNBacklog, DefaultSYNBacklog)
	def(&o.ARPRetries, DefaultARPRetries)
	defd(&o.ARPTimeout, DefaultARPTimeout)
	def(&o.ChallengeACKLimit, DefaultChallengeACKLimit)
	def(&o.SYNACKRetries, DefaultSYNACKRetries)
	def(&o.MaxSYNReceived, max(o.MaxConns/4, 1))
	def(&o.MaxTimeWait, max(4*o.MaxConns, DefaultMaxTimeWait))
	def(&o.OrphanRetries, DefaultOrphanRetries)
	if o.UserTimeout < 0 {
		return fmt.Errorf("native: UserTimeout %v is negative (0 turns it off)", o.UserTimeout)
	}
	def(&o.ARPEntries, DefaultARPEntries)
	defd(&o.ARPReachable, DefaultARPReachable)
	def(&o.ReassemblyMemory, DefaultReassemblyMemory)
	defd(&o.ReassemblyTimeout, DefaultReassemblyTimeout)
	def(&o.ICMPRateLimit, DefaultICMPRateLimit)
	def(&o.ICMPBurst, DefaultICMPBurst)
	o.ICMPRateLimit = min(o.ICMPRateLimit, 1e9)
	if o.DelayedACK < 0 {
		// A deadline before the engine's start would read as none armed.
		return fmt.Errorf("native: DelayedACK %v is negative (0 turns delayed ACKs off)", o.DelayedACK)
	}
	if o.DelayedACK >= o.MinRTO {
		return fmt.Errorf("native: DelayedACK %v must be below MinRTO %v, or the peer retransmits before the ACK leaves", o.DelayedACK, o.MinRTO)
	}
	if o.SendBuf < o.MSS || o.RecvBuf < o.MSS {
		return fmt.Errorf("native: SendBuf %d and RecvBuf %d must hold one segment (%d bytes)", o.SendBuf, o.RecvBuf, o.MSS)
	}
	if o.SendBuf > 1<<30 || o.RecvBuf > 1<<30 {
		return errors.New("native: SendBuf and RecvBuf must be at most 1 GiB (RFC 7323 §2.3)")
	}
	return nil
}
