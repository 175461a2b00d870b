package conformance

import (
	"errors"
	"net"
	"net/netip"
	"time"
)

// DUT is a device under test: a TCP/IP stack the bench talks to through raw
// Ethernet frames (Link), plus the few socket operations a case needs on the
// DUT's side (listen, connect, read, write, close) and its counters. Every
// case runs against a fresh DUT, made by a Factory for that case's Setup.
//
// To point the suite at another stack, implement DUT and Factory (see
// oursFactory for a stack over an in-memory wire, linuxFactory for a kernel
// in a network namespace) and call Run or RunCase with the Factory.
type DUT interface {
	// Info describes the DUT: its addresses, the bench's, what it can do.
	Info() Info
	// Link is the bench's end of the wire to the DUT.
	Link() Link
	// Clock is the DUT's clock, which timer cases read and move.
	Clock() Clock
	// Listen opens a listening TCP socket on the DUT's address and port.
	Listen(port uint16, o SockOpts) (Listener, error)
	// Connect starts a TCP connection from the DUT to a bench address. It
	// does not wait for the handshake (the bench answers the SYN): Conn
	// operations wait for it as they need.
	Connect(to netip.AddrPort, o SockOpts) (Conn, error)
	// ListenUDP opens a UDP socket on the DUT's address and port. A DUT
	// without UDP sockets (see CapUDP) returns an error.
	ListenUDP(port uint16) (UDPConn, error)
	// Counters returns the DUT's counters under the common names of
	// Counter* (only those it keeps).
	Counters() (map[string]uint64, error)
	// Close removes everything the DUT made.
	Close() error
}

// Factory makes DUTs, one per case run.
type Factory interface {
	// Name is the DUT's name in subtest names and the report ("ours-memio",
	// "linux"); it must not contain '/' or spaces.
	Name() string
	// New makes a DUT for one case. It returns an error matching
	// dgramio.ErrNotSupported or a *dgramio.PrivilegeError when the DUT cannot be
	// made on this host (the case is then skipped, failed in CI).
	New(tb TB, s Setup) (DUT, error)
}

// Setup is what a case asks of the DUT beyond the defaults.
type Setup struct {
	// MTU of the DUT's interface (largest IP packet). 0: 1500.
	MTU int
	// RTOMin is the DUT's minimum retransmission timeout. 0: the DUT's
	// default (Linux 200 ms; ours tcp.Tuning's 25 ms).
	RTOMin time.Duration
	// Neigh are the DUT's neighbour cache timers; zero fields keep the
	// DUT's defaults.
	Neigh NeighTimes
	// SYNCookies makes the DUT answer every SYN to a listener with a SYN
	// cookie (Linux: net.ipv4.tcp_syncookies = 2 in its namespace; the
	// native engine: Options.AlwaysSYNCookies). Cases that set it need
	// CapSYNCookies.
	SYNCookies bool
	// IPv6 turns IPv6 on at the DUT (Info.Addr6 and its link-local
	// address); off, the DUT sends no IPv6 of its own (MLD reports, ...)
	// into the IPv4 cases. Cases that set it need CapIPv6.
	IPv6 bool
}

// NeighTimes are the timers of a DUT's neighbour cache (RFC 4861 §10's
// BaseReachableTime, DELAY_FIRST_PROBE_TIME and RetransTimer, which Linux
// applies to ARP too: net.ipv4.neigh.<dev>.base_reachable_time_ms,
// delay_first_probe_time, retrans_time_ms).
type NeighTimes struct {
	// Reachable is the base reachable time: an entry confirmed by an
	// answer stays REACHABLE for 0.5 to 1.5 times it (RFC 4861 §6.3.2's
	// random factor; a DUT may use exactly it), then it is STALE.
	Reachable time.Duration
	// DelayFirstProbe is how long an entry used while STALE waits in DELAY
	// for an upper-layer confirmation before it is probed (Linux takes
	// whole seconds). A DUT without a DELAY state probes at once.
	DelayFirstProbe time.Duration
	// Retrans is the time between two requests or probes.
	Retrans time.Duration
}

// Info describes a DUT.
type Info struct {
	// Name is the Factory's name.
	Name string
	// Kind is what the DUT is made of.
	Kind Kind
	// MAC and Addr are the DUT's; BenchMAC and BenchAddr the bench's (the
	// DUT has BenchAddr → BenchMAC as a static neighbour, so it never ARPs
	// for the bench). Spare is another address on the link that nobody
	// owns and the DUT has no neighbour entry for: the bench answers ARP for
	// it only when a case says so.
	MAC, BenchMAC   net.HardwareAddr
	Addr, BenchAddr netip.Addr
	Spare           netip.Addr
	// Addr6, BenchAddr6 and Spare6 are their IPv6 counterparts, from
	// 2001:2::/48 (RFC 5180), set when the case's Setup asks for IPv6:
	// the DUT has BenchAddr6 → BenchMAC as a static neighbour, and no
	// entry for Spare6.
	Addr6, BenchAddr6, Spare6 netip.Addr
	// MTU is the DUT's interface MTU.
	MTU int
	// Lacks lists the capabilities the DUT does not have, each with the
	// reason; cases that need one are not run on it (the report says why).
	Lacks map[Cap]string
}

// Kind is what a DUT is made of.
type Kind string

// The kinds of DUT.
const (
	// KindOurs is our stack (stack/ + tcp/: gVisor netstack tuned as the
	// tcp-* kinds tune it), over an in-memory wire or a veth.
	KindOurs Kind = "ours"
	// KindLinux is the Linux kernel's stack in a network namespace.
	KindLinux Kind = "linux"
)

// Cap is something a DUT may lack; a case that needs it does not run there.
type Cap string

// Capabilities.
const (
	// CapARP: the stack under test answers and sends ARP itself.
	CapARP Cap = "arp"
	// CapIP: the stack under test receives every IPv4 datagram sent to its
	// address (ICMP, other protocols, other ports), not only its TCP flows.
	CapIP Cap = "ip"
	// CapUDP: the DUT has UDP sockets.
	CapUDP Cap = "udp"
	// CapIPv6: the DUT serves IPv6 (RFC 8200) with neighbour discovery
	// (RFC 4861), ICMPv6 (RFC 4443) and TCP over IPv6, on an address from
	// 2001:2::/48 when Setup.IPv6 asks for it.
	CapIPv6 Cap = "ipv6"
	// CapFastTimeWait: TIME-WAIT (2 MSL) can be waited out in a test: the
	// DUT's clock is fake.
	CapFastTimeWait Cap = "fast-time-wait"
	// CapSYNCookies: the DUT can be told to answer every SYN with a SYN
	// cookie (Setup.SYNCookies).
	CapSYNCookies Cap = "syn-cookies"
)

// Clock is a DUT's clock. Timer cases read it (frames carry the time they
// were taken) and move it: a fake clock moves only when Advance says so,
// running the timers that fall due; a real clock is waited for.
type Clock interface {
	// Now is the DUT's time since it was made.
	Now() time.Duration
	// Advance lets d pass on the DUT: a fake clock moves by d at once,
	// running the timers due; a real clock sleeps for d.
	Advance(d time.Duration)
	// Fake reports whether the clock moves only by Advance.
	Fake() bool
}

// Link is the bench's end of the wire to a DUT.
type Link interface {
	// Send puts one Ethernet frame on the wire towards the DUT. frame is
	// copied; the caller keeps it.
	Send(frame []byte) error
	// Recv returns the next frame the DUT sent, a copy the caller owns,
	// waiting up to wait (real time) for one; nil and no error when none
	// came.
	Recv(wait time.Duration) ([]byte, error)
}

// Settler is implemented by a DUT that can tell when it has taken every
// frame the bench sent (an in-memory wire): the bench waits for it before
// it moves a fake clock, so that a timer does not fire before the frame that
// would have stopped it is processed.
type Settler interface {
	Settle(wait time.Duration)
}

// AnswerWaiter is implemented by a DUT that answers within a known real
// time whatever the load (an in-memory stack on a fake clock, where no
// timer runs unless the bench moves it): the bench waits that long for an
// answer instead of DefaultAnswer, so that a missing answer fails quickly.
type AnswerWaiter interface {
	AnswerWait() time.Duration
}

// SockOpts are options of a DUT socket, set before listen or connect.
type SockOpts struct {
	// RecvBuf is the receive buffer in bytes (SO_RCVBUF; for ours, the
	// endpoint's buffer). 0: the default.
	RecvBuf int
	// KeepAlive turns keepalive on with these timers (RFC 1122 §4.2.3.6).
	KeepAlive *KeepAlive
	// IPv6 makes Listen listen on the DUT's IPv6 address (Info.Addr6)
	// instead of its IPv4 one. Connect takes the family of its address.
	IPv6 bool
}

// KeepAlive is the keepalive of a socket: the first probe after Idle
// without traffic, then one every Interval, Count unanswered probes before
// the connection is dropped.
type KeepAlive struct {
	Idle, Interval time.Duration
	Count          int
}

// Listener is a listening TCP socket on the DUT.
type Listener interface {
	// Accept waits up to wait for a connection that completed its
	// handshake; ErrWouldBlock when none did.
	Accept(wait time.Duration) (Conn, error)
	// Close closes the socket (connections not accepted yet are reset).
	Close() error
}

// Conn is a TCP connection on the DUT. Its errors are ErrWouldBlock,
// ErrReset, ErrTimedOut, io.EOF or the DUT's own.
type Conn interface {
	// Write queues p on the connection without blocking and returns how
	// many bytes were taken (0 and ErrWouldBlock when the send buffer is
	// full).
	Write(p []byte) (int, error)
	// Read waits up to wait for data and reads it into p. io.EOF: the peer
	// closed (FIN) and everything was read; ErrReset: the connection was
	// reset; ErrTimedOut: given up (retransmissions, keepalive);
	// ErrWouldBlock: nothing came within wait.
	Read(p []byte, wait time.Duration) (int, error)
	// Shutdown closes the sending direction (FIN after the queued data).
	Shutdown() error
	// Close closes the connection (FIN, or RST when unread data is left).
	Close() error
}

// UDPConn is a UDP socket on the DUT.
type UDPConn interface {
	// Read waits up to wait for one datagram and copies it into p.
	Read(p []byte, wait time.Duration) (int, netip.AddrPort, error)
	// Close closes the socket.
	Close() error
}

// Socket errors shared by every DUT.
var (
	// ErrWouldBlock: nothing happened within the wait.
	ErrWouldBlock = errors.New("conformance: would block")
	// ErrReset: the connection was reset (ECONNRESET).
	ErrReset = errors.New("conformance: connection reset")
	// ErrTimedOut: the connection was given up (ETIMEDOUT).
	ErrTimedOut = errors.New("conformance: connection timed out")
)

// Common counter names (DUT.Counters). Our stack reports netstack's
// counters under these names, Linux its SNMP MIB (/proc/net/snmp, netstat)
// counters.
const (
	CounterIPHeaderErrors   = "ip_header_errors"     // IPv4 datagrams dropped for a bad header (checksum, version, length)
	CounterIPReassembled    = "ip_reassembled"       // datagrams reassembled from fragments
	CounterICMPEchoReplies  = "icmp_echo_replies"    // echo replies sent
	CounterTCPChecksumErr   = "tcp_checksum_errors"  // segments dropped for a bad checksum
	CounterTCPResetsSent    = "tcp_resets_sent"      // segments with RST sent
	CounterTCPRetransmits   = "tcp_retransmits"      // segments retransmitted
	CounterTCPFastRetrans   = "tcp_fast_retransmits" // fast retransmissions (dupack or SACK)
	CounterTCPTimeouts      = "tcp_timeouts"         // retransmission timer expiries
	CounterTCPPassiveOpens  = "tcp_passive_opens"    // connections opened from LISTEN
	CounterTCPActiveOpens   = "tcp_active_opens"     // connections opened by connect
	CounterTCPSegmentsIn    = "tcp_segments_in"      // segments received
	CounterUDPNoPort        = "udp_no_port"          // UDP datagrams to a port nobody listens on
	CounterUDPChecksumErr   = "udp_checksum_errors"  // UDP datagrams dropped for a bad checksum
	CounterARPRepliesSent   = "arp_replies_sent"     // ARP replies sent
	CounterARPRequestsSent  = "arp_requests_sent"    // ARP requests sent
	CounterIPDeliveredLocal = "ip_delivered"         // datagrams delivered to a transport protocol
)
