package dgramio

import (
	"net"
	"net/netip"
	"slices"
	"time"
)

// Role says which side of a conversation a backend is.
type Role int

const (
	// RoleClient sends to Config.Dests (UDP) or connects to them (TCP).
	RoleClient Role = iota
	// RoleServer binds Config.Port on Config.LocalIP, accepts connections
	// (TCP) and answers whoever sends to it with QueueTo.
	RoleServer
)

// String returns "client" or "server".
func (r Role) String() string {
	if r == RoleServer {
		return "server"
	}
	return "client"
}

// MaxQueues bounds Config.Queues.
const MaxQueues = 256

// Defaults of Config: the batch sizes and buffers every kind uses, so that
// the kinds compare with the same application settings.
const (
	DefaultMaxDatagram = 1472 // 1500-byte MTU minus IPv4 and UDP headers
	// DefaultMaxDatagram6 is DefaultMaxDatagram of a datagram kind's IPv6
	// Config: a 1500-byte MTU minus the IPv6 and UDP headers.
	DefaultMaxDatagram6 = 1452
	DefaultTxQueue      = 256      // messages Queue accepts before Flush
	DefaultTxBatch      = 16       // messages per sendmmsg / ring submit
	DefaultRxBatch      = 32       // messages per recvmmsg / ring poll
	DefaultBusyPollUs   = 50       // SO_BUSY_POLL
	DefaultSockBuf      = 16 << 20 // SO_RCVBUF / SO_SNDBUF
	DefaultReplySockets = 64       // connected reply sockets per udp/uring server queue
	MaxReplySockets     = 4096     // the most Config.ReplySockets allows
	DefaultConnectWait  = 5 * time.Second
	MaxRecord           = 65535 // largest record on the u16 length-prefixed stream
)

// The peer table of the raw datagram kinds (Config.Peers).
const (
	DefaultPeers = 1 << 16
	MaxPeers     = 1 << 24
)

// Config selects a packet path and everything it needs. The zero value of
// each field means "the default", so a Config needs only Kind, addresses and
// Port. Validate it with Validate; New does so before any syscall.
type Config struct {
	// Kind is one of the Kind constants (KindUDP, ..., KindTCPDPDK).
	Kind Kind
	// Role is RoleClient (default) or RoleServer.
	Role Role

	// Iface is the network interface of the raw kinds (xdp, dpdk, tcp-xdp,
	// tcp-dpdk). The kernel kinds ignore it.
	Iface string
	// LocalIP is our address, IPv4 or IPv6 (an IPv4-mapped IPv6 address
	// is taken as IPv4). Required for raw kinds and for a server; a kernel
	// client may leave it unset (the kernel picks the source). Its family
	// is the Config's (see IPv6): a kernel server serves every address of
	// the family with 0.0.0.0 or ::, and an unset LocalIP is 0.0.0.0
	// unless the Dests are IPv6. Every kind serves both families
	// (IPv6Kinds); an IPv6 link-local address (it would need a zone) is
	// refused.
	LocalIP netip.Addr
	// Dests are the receivers of a client, each an address and port of
	// LocalIP's family (an IPv4-mapped IPv6 address is taken as IPv4). A
	// message queued with Queue goes to every one of them (fan-out). A
	// destination with port 0 is at Port. A server may leave it empty.
	Dests []netip.AddrPort
	// Port is the port a server listens on, and a client's port for every
	// destination that names none. A client whose destinations all name
	// their port may leave it 0: defaults make it the first one's.
	Port uint16
	// LocalPort is a client's source port. 0: an ephemeral port on kernel
	// kinds and tcp-*, Port itself on the raw datagram kinds (xdp, dpdk).
	LocalPort uint16
	// DstMAC, when set, is the peer's MAC address on raw kinds; otherwise it
	// is resolved (neighbour table or ARP).
	DstMAC net.HardwareAddr

	// MaxDatagram is the largest payload accepted by Queue and delivered by
	// Rx, in bytes. Default 1472 (1452 for a datagram kind over IPv6:
	// what one 1500-byte frame carries). Stream kinds allow up to 65535 (the u16
	// record length); in FramingRaw it bounds the bytes one QueueTo
	// appends and one Packet of Rx carries.
	MaxDatagram int
	// Framing is how the stream kinds cut their byte streams into
	// messages: FramingU16 (the default: u16 length-prefixed records),
	// FramingU32 (u32 length-prefixed records) or FramingRaw (bytes as they
	// arrived). The datagram kinds refuse any other than FramingU16.
	Framing Framing
	// Events makes Rx of a stream kind deliver each connection's life
	// (opened, the peer's FIN, a reset, ended) as Packets with Event set
	// (see Event); without it they are only counted in Stats. The
	// datagram kinds refuse it.
	Events bool
	// TxQueue is how many messages Queue holds before Flush; Queue returns
	// false beyond it (back-pressure). Default 256.
	TxQueue int
	// TxBatch is how many messages go to the kernel or the ring per call.
	// Default 16.
	TxBatch int
	// RxBatch is how many messages one receive call takes. Default 32.
	RxBatch int
	// Peers bounds the table of peers of the raw datagram kinds (xdp,
	// dpdk): where QueueTo finds a peer's MAC. Beyond it, a new peer
	// replaces the one heard from or answered longest ago, never one of
	// the last Rx. About 330 bytes a peer, allocated as peers arrive: 20 MiB
	// for the 65536 of the default. Default 65536;
	// at least RxBatch, at most 16777216. Other kinds ignore it.
	Peers int
	// BusyPollUs is SO_BUSY_POLL on socket kinds, in microseconds. Default
	// 50; negative turns it off.
	BusyPollUs int
	// SockBuf is SO_RCVBUF and SO_SNDBUF in bytes. Default 16 MiB. Forced
	// (SO_RCVBUFFORCE) with CAP_NET_ADMIN, otherwise capped by the kernel
	// (net.rmem_max); the size obtained is reported in Stats.
	SockBuf int
	// ReplySockets bounds the connected reply sockets of a udp or uring
	// server queue whose LocalIP is one address: a peer that keeps sending
	// gets a socket bound to the server's address and port
	// (SO_REUSEPORT) and connected to it, which takes that peer's
	// datagrams and sends the answers QueueTo gives it, without the
	// route lookup per datagram of an unconnected socket; one idle for 2 s
	// is closed (docs/ipv6.md, "Connected reply sockets"). Default 64, at
	// most 4096; negative turns them off (the server socket is then not
	// SO_REUSEPORT). Other kinds, clients and a server on every address
	// (LocalIP unset, 0.0.0.0 or ::) have none.
	ReplySockets int
	// Nagle turns Nagle's algorithm on for stream kinds. It is off by
	// default (TCP_NODELAY): Nagle holds small records back waiting for an
	// ACK, which costs more latency than the choice of stack.
	Nagle bool
	// ConnectTimeout bounds a client's connect on stream kinds. Default 5 s.
	ConnectTimeout time.Duration

	// Queues is the number of queues, one poller each. 0 means 1. New
	// opens one queue; several (up to MaxQueues) are opened with
	// dgramio.NewGroup, one backend per queue, each polled by its own
	// goroutine.
	Queues int
	// CPUs pins the pollers: CPUs[i] is queue i's CPU. Empty: no pinning.
	// With CPUs set, New locks the calling goroutine to its OS thread and
	// pins it to CPUs[0]; call New on the goroutine that will poll (a
	// group's Open(q) pins to CPUs[q] the same way). Close gives that
	// thread the affinity it had before New, from any goroutine (on
	// another, the poller's goroutine stays locked to its thread, unpinned,
	// until it ends). Exception: tcp-xdp and tcp-dpdk on the netstack
	// engine bind every thread of the process to CPUs[0] until Close.
	CPUs []int
	// Poll says how the application's pollers wait: PollBusy ("busy", the
	// default) spins on Rx, one poller per CPU, and a group refuses more
	// busy pollers than the process has CPUs; PollYield ("yield") sleeps
	// in Wait (poll(2), a CQ wait) or yields when Rx finds nothing, so that
	// more pollers than CPUs still make progress (correctness tests, a
	// small benchmark on a small host; not a measurement of the fast path).
	// Backends behave the same either way: the mode is the contract of
	// the loop that drives them, and it is shown in Stats.Mode.
	Poll Poll

	// Pcap, when set, is a file name prefix: the raw kinds (xdp, dpdk,
	// tcp-xdp, tcp-dpdk) write every frame they send and receive to
	// <Pcap>-tx.pcap and <Pcap>-rx.pcap (tcpdump cannot see what AF_XDP and
	// DPDK take from the kernel). It costs a write per frame: for debugging,
	// not for measuring.
	Pcap string

	// URing holds the options of kind uring.
	URing URingOptions
	// XDP holds the options of the AF_XDP kinds (xdp, tcp-xdp).
	XDP XDPOptions
	// DPDK holds the options of the DPDK kinds (dpdk, tcp-dpdk).
	DPDK DPDKOptions
	// TCP holds the tuning of the userspace TCP (tcp-xdp, tcp-dpdk).
	TCP TCPTuning

	// prepared is set by Prepare: PrepareOne and PrepareGroup do not
	// validate such a Config again.
	prepared bool
}

// URingOptions tunes kind uring.
type URingOptions struct {
	// Entries is the SQ size (power of two). Default 256.
	Entries int
	// RxBuffers is the number of buffers in the provided buffer ring
	// (power of two). Default 256.
	RxBuffers int
	// SQPoll makes a kernel thread take submissions (IORING_SETUP_SQPOLL).
	// It requires SQCPU.
	SQPoll bool
	// SQCPU pins the SQPOLL thread (IORING_SETUP_SQ_AFF). It must differ
	// from the poller's CPU. -1 or unset with SQPoll: refused.
	SQCPU *int
	// NAPI registers NAPI busy polling on the ring (io_uring_register_napi,
	// Linux >= 6.9), with BusyPollUs as its timeout.
	NAPI bool
	// Interrupts turns cooperative task running off: the kernel then
	// completes a receive by interrupting the ring's thread wherever it
	// runs (io_uring's own default) instead of raising a flag that Rx
	// acts on (IORING_SETUP_COOP_TASKRUN and TASKRUN_FLAG, Linux 5.19,
	// used by default and always off with SQPoll). For comparing the two.
	Interrupts bool
}

// XDPOptions tunes the AF_XDP kinds.
type XDPOptions struct {
	// Mode is XDPModeAuto (driver, then SKB as a reported fallback),
	// XDPModeDriver or XDPModeSKB.
	Mode XDPMode
	// Copy is XDPCopyAuto (zero-copy where the driver offers it, else
	// copy), XDPCopyCopy or XDPCopyZero (an error where not offered).
	Copy XDPCopy
	// QueueID is the first NIC queue bound; queue i binds QueueID+i.
	QueueID int
	// FrameSize is the UMEM frame size: 2048 or 4096 (default 4096).
	FrameSize int
	// Frames is the number of UMEM frames per queue. Default 4096, half for
	// receive and half for transmit.
	Frames int
	// RingSize is the size of each of the four rings. Default 2048.
	RingSize int
	// OwnARP makes the datagram kind answer and resolve ARP (IPv6:
	// neighbour discovery) for LocalIP itself instead of leaving the
	// address on the kernel interface; the kernel keeps the ARP of its
	// own addresses there. Kind xdp sets it by itself for a LocalIP the
	// kernel holds on no interface, which no one else would answer for.
	OwnARP bool
	// CarrierWait bounds the wait for carrier after bind. Default 5 s.
	CarrierWait time.Duration
	// SYNRate and SYNBurst bound the SYNs (SYN without ACK) to LocalIP
	// that the tcp-xdp program hands the userspace stack, per CPU of the
	// receiving device: a token bucket refilled at SYNRate per second
	// that holds SYNBurst; a SYN beyond it is dropped in the program and
	// counted (xdp-prog dropped_syn), so that a SYN flood cannot fill the
	// socket's ring ahead of the established connections' segments. A
	// legitimate client retransmits its SYN. 0 means the defaults of the
	// engine (DefaultSYNRate and DefaultSYNBurst for the native engine,
	// DefaultNetstackSYNRate and DefaultNetstackSYNBurst for netstack); a
	// negative SYNRate turns the limit off.
	SYNRate, SYNBurst int
}

// The defaults of XDPOptions.SYNRate and SYNBurst. The native engine's
// are the last line behind its own defence (it answers SYNs beyond its
// backlog with SYN cookies, as Linux does, and keeps no state for them):
// far above the connection rate of a kernel listener, near what one
// engine answers, so that a flood fills neither its ring nor its CPU.
// netstack keeps state for every SYN it answers and takes far fewer.
const (
	DefaultSYNRate          = 50000
	DefaultSYNBurst         = 5000
	DefaultNetstackSYNRate  = 2000
	DefaultNetstackSYNBurst = 1000
)

// DPDKOptions tunes the DPDK kinds.
type DPDKOptions struct {
	// PCI is a real device ("0000:03:00.0"). Either PCI or VDev.
	PCI string
	// VDev is a virtual device ("net_af_xdp0,iface=veth0" or
	// "net_af_packet0,iface=veth0"). Default: net_af_xdp on Iface.
	VDev string
	// HugePages uses hugepages (--in-memory); default --no-huge --no-shconf.
	HugePages bool
	// ExtraArgs are appended to the EAL arguments.
	ExtraArgs []string
	// RxDesc and TxDesc are ring sizes, clamped to the device's limits.
	// Defaults 256 and 512 (a small RX ring stays inside DDIO's cache share).
	RxDesc, TxDesc int
	// Mbufs is the mempool size. Default 8191.
	Mbufs int
	// PrefixLen is the length of LocalIP's on-link prefix and Gateway the
	// router on that link that off-link peers are behind, for the kind
	// dpdk and for tcp-dpdk's native engine (netstack refuses them):
	// frames to an address outside LocalIP/PrefixLen carry Gateway's MAC,
	// found by ARP. They matter on a PCI device, which has
	// no kernel routes to ask; when set they are used on a vdev too
	// instead of the kernel's routes of its interface. PrefixLen 0 (the
	// default) puts every address on the link; Gateway needs PrefixLen,
	// must be on the link and is required when a Dest is off it.
	PrefixLen int
	Gateway   netip.Addr
}

// TCPTuning is the tuning of the userspace TCP, mapped onto netstack
// options by package tcp. Zero values mean the defaults documented there.
type TCPTuning struct {
	// SendBuf and RecvBuf are the socket buffers. Default 1 MiB each on
	// netstack; on the native engine (TCP.Stack "native") 4 MiB and 6 MiB,
	// Linux's tcp_wmem and tcp_rmem maxima: its rings and receive window
	// grow to them only as a connection's use and round trip need
	// (docs/memory.md), so an idle connection holds none of it.
	SendBuf, RecvBuf int
	// Congestion is CongestionReno, CongestionCubic, or CongestionBBR
	// (the native engine only). The default is the host's, as the kernel
	// TCP that these kinds bypass would use: Linux's
	// net.ipv4.tcp_congestion_control, read once per process, where the
	// engine implements it (the native engine reno, cubic and bbr;
	// netstack reno and cubic), and CongestionReno otherwise (unreadable,
	// another algorithm such as dctcp, or bbr on netstack).
	// docs/congestion.md says why.
	Congestion Congestion
	// NoSACK turns selective acknowledgements off (on by default).
	NoSACK bool
	// NoModerate turns receive-buffer moderation off (on by default).
	NoModerate bool
	// RACK turns RACK/TLP loss detection on.
	RACK bool
	// MinRTO is the minimum retransmission timeout. Default 25 ms, a tenth
	// of the usual 250 ms floor, for links whose round trip is microseconds.
	MinRTO time.Duration
	// MaxRetries bounds retransmissions before the connection is reset.
	// Default 15.
	MaxRetries int
	// SendStall bounds how long a sender with a closed window drives the
	// stack before reporting that the peer stopped reading (EventStalled
	// with Config.Events; counted in layer "stream" "send_stalls" either
	// way). Default 2 s.
	SendStall time.Duration
	// Stack is the userspace TCP/IP engine of tcp-xdp and tcp-dpdk:
	// TCPStackNative (stack/native, the default: WithDefaults sets it for
	// those kinds) or TCPStackNetstack (gVisor), for Backends and for
	// tcp/netconn alike.
	Stack TCPStack
	// DelayedACK is the native engine's delayed ACK (RFC 1122 §4.2.3.2):
	// 0 takes package tcp's default, a negative value turns it off. It must
	// stay below MinRTO. Netstack has no delayed ACK: a positive value
	// there is an error.
	DelayedACK time.Duration
	// MaxConns bounds the native engine's connection table: the
	// connections one backend (one queue of a group) holds at once, in
	// every state but LISTEN, handshakes in progress and TIME-WAIT
	// included. 0 takes the engine's 1024. A slot costs 1 KiB; a
	// connection's buffers grow with its use up to SendBuf and RecvBuf
	// and go back to a pool when it idles (docs/memory.md). A client
	// that finds the table full gets
	// no connection until a slot frees (counted in native
	// "tcp_conn_table_full"). Netstack has no such table: a positive
	// value there is an error.
	MaxConns int
}

// TCPStack names a userspace TCP/IP engine.
type TCPStack string

// The engines of tcp-xdp and tcp-dpdk.
const (
	// TCPStackNetstack is gVisor netstack (package stack).
	TCPStackNetstack TCPStack = "netstack"
	// TCPStackNative is the engine of our own (package stack/native), run
	// to completion on the poll loop.
	TCPStackNative TCPStack = "native"
)

// String returns the engine's name.
func (s TCPStack) String() string { return string(s) }

// Set parses a flag value (flag.Value): "native" or "netstack".
func (s *TCPStack) Set(v string) error {
	switch t := TCPStack(v); t {
	case TCPStackNetstack, TCPStackNative:
		*s = t
		return nil
	}
	return BadField("TCP.Stack", v, `use "native" (stack/native, the default) or "netstack" (gVisor)`)
}

func (s TCPStack) validate() error {
	switch s {
	case "", TCPStackNetstack:
		return nil
	case TCPStackNative:
		return nil
	}
	return BadField("TCP.Stack", s, `use "native" (stack/native, the default) or "netstack" (gVisor)`)
}

// orDefault sets *v to def when it is the zero value.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// WithDefaults returns c with every zero field set to its default. The
// default of TCP.Congestion follows the host's kernel TCP (read from /proc
// once per process): see TCPTuning.Congestion.
func (c Config) WithDefaults() Config {
	if c.MaxDatagram == 0 && !c.Kind.IsStream() && c.IPv6() {
		c.MaxDatagram = DefaultMaxDatagram6
	}
	orDefault(&c.MaxDatagram, DefaultMaxDatagram)
	orDefault(&c.TxQueue, DefaultTxQueue)
	orDefault(&c.TxBatch, DefaultTxBatch)
	orDefault(&c.RxBatch, DefaultRxBatch)
	orDefault(&c.Peers, DefaultPeers)
	orDefault(&c.BusyPollUs, DefaultBusyPollUs)
	orDefault(&c.SockBuf, DefaultSockBuf)
	orDefault(&c.ConnectTimeout, DefaultConnectWait)
	orDefault(&c.Queues, 1)
	orDefault(&c.Poll, PollBusy)
	if c.Kind.IsStream() {
		orDefault(&c.Framing, FramingU16)
	}
	c.LocalIP = c.LocalIP.Unmap()
	c.Dests = c.withDestPorts()
	if c.Port == 0 && len(c.Dests) > 0 {
		c.Port = c.Dests[0].Port()
	}
	if c.LocalPort == 0 && (c.Kind == KindXDP || c.Kind == KindDPDK) {
		c.LocalPort = c.Port
	}
	orDefault(&c.URing.Entries, 256)
	orDefault(&c.URing.RxBuffers, 256)
	orDefault(&c.XDP.FrameSize, 4096)
	orDefault(&c.XDP.Frames, 4096)
	orDefault(&c.XDP.RingSize, 2048)
	orDefault(&c.XDP.CarrierWait, 5*time.Second)
	orDefault(&c.DPDK.RxDesc, 256)
	orDefault(&c.DPDK.TxDesc, 512)
	orDefault(&c.DPDK.Mbufs, 8191)
	if c.TCP.Stack == "" && (c.Kind == KindTCPXDP || c.Kind == KindTCPDPDK) {
		c.TCP.Stack = TCPStackNative
	}
	if c.TCP.Stack == TCPStackNative {
		// Ceilings its pooled rings and auto-tuned window grow to only as
		// a connection uses them (docs/memory.md).
		orDefault(&c.TCP.SendBuf, 4<<20)
		orDefault(&c.TCP.RecvBuf, 6<<20)
	}
	orDefault(&c.TCP.SendBuf, 1<<20)
	orDefault(&c.TCP.RecvBuf, 1<<20)
	if c.TCP.Congestion == "" {
		c.TCP.Congestion = defaultCongestion(c.TCP.Stack)
	}
	orDefault(&c.TCP.MinRTO, 25*time.Millisecond)
	orDefault(&c.TCP.MaxRetries, 15)
	orDefault(&c.TCP.SendStall, 2*time.Second)
	return c
}

// Prepared reports whether c is a Config that Prepare returned (or a copy
// of one): its defaults applied and validated. A kind's constructor only
// checks the kind of a prepared Config.
func (c Config) Prepared() bool { return c.prepared }

// Prepare returns c with its defaults (WithDefaults), validated
// (Validate, before any system call) and marked as prepared. dgramio.New
// and dgramio.NewGroup prepare the Config they are given, once; the
// kinds' constructors only check a prepared Config (Prepared) and prepare
// any other. A copy of a prepared Config is prepared:
// change such a copy only in ways Validate would accept.
func (c Config) Prepare() (Config, error) {
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return c, err
	}
	c.prepared = true
	return c, nil
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// Validate checks c (after WithDefaults) without making any syscall. Each
// problem is a *ConfigError naming the field; the first one found is
// returned.
func (c Config) Validate() error {
	for _, check := range []func() error{c.checkPath, c.checkAddrs, c.checkSizes, c.checkQueues, c.checkURing, c.checkXDP, c.checkDPDK, c.checkTCP} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// checkPath checks the kind, the role and the device of a raw kind.
func (c Config) checkPath() error {
	if !c.Kind.Known() {
		return BadField("Kind", c.Kind, "unknown kind; use %s", enumList(kinds))
	}
	if c.Role != RoleClient && c.Role != RoleServer {
		return BadField("Role", c.Role, "use RoleClient or RoleServer")
	}
	if c.Kind.IsRaw() && c.Iface == "" && !c.Kind.IsDPDK() {
		return BadField("Iface", c.Iface, "kind %s needs the network interface to attach to", c.Kind)
	}
	if c.Kind.IsDPDK() || c.DPDK.PCI != "" || c.DPDK.VDev != "" {
		return c.DPDK.CheckDevice(c.Iface)
	}
	return nil
}

// CheckDevice checks that o and iface name one DPDK device: DPDK.PCI, or
// DPDK.VDev, or else a net_af_xdp vdev on iface. The error is a
// *ConfigError.
func (o DPDKOptions) CheckDevice(iface string) error {
	if iface == "" && o.PCI == "" && o.VDev == "" {
		return BadField("Iface", iface, "a DPDK kind needs an interface (for a net_af_xdp vdev), DPDK.VDev or DPDK.PCI")
	}
	if o.PCI != "" && o.VDev != "" {
		return BadField("DPDK.VDev", o.VDev, "set DPDK.PCI or DPDK.VDev, not both")
	}
	return nil
}

// IPv6Kinds are the kinds that serve IPv6 today; every kind serves IPv4.
// Every kind serves both families (one per Config); tcp-xdp and tcp-dpdk
// on either engine.
var IPv6Kinds = []Kind{KindUDP, KindURing, KindTCP, KindXDP, KindDPDK, KindTCPXDP, KindTCPDPDK}

// ServesIPv6 reports whether kind k serves IPv6 (see IPv6Kinds).
func (k Kind) ServesIPv6() bool { return slices.Contains(IPv6Kinds, k) }

// ServesIPv6 reports whether c's kind, with c's engine, serves IPv6.
func (c Config) ServesIPv6() bool { return c.Kind.ServesIPv6() }

// IPv6 reports whether c is an IPv6 Config: its LocalIP is IPv6, or it
// has no LocalIP and its first destination is IPv6 (IPv4-mapped
// addresses count as IPv4). Validate refuses a Config whose addresses mix
// the families, so this is the family of every address in it.
func (c Config) IPv6() bool {
	if c.LocalIP.IsValid() {
		return !c.LocalIP.Unmap().Is4()
	}
	return len(c.Dests) > 0 && c.Dests[0].Addr().IsValid() && !c.Dests[0].Addr().Unmap().Is4()
}

// familyName names the family of a Config, as IPv6 says.
func familyName(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}

// checkAddrs checks LocalIP, Dests, Port and DstMAC: one family in all
// of them, a family the kind serves.
func (c Config) checkAddrs() error {
	v6 := c.IPv6()
	if v6 && !c.ServesIPv6() {
		field, val := "LocalIP", any(c.LocalIP)
		if !c.LocalIP.IsValid() {
			field, val = "Dests", c.Dests
		}
		return BadField(field, val, "kind %s serves IPv4 only today; the kinds that serve IPv6 are %s", c.Kind, enumList(IPv6Kinds))
	}
	if c.LocalIP.IsValid() && c.LocalIP.Zone() != "" {
		return BadField("LocalIP", c.LocalIP, "an address with a zone is not supported: use a global address")
	}
	if c.LocalIP.Is6() && c.LocalIP.IsLinkLocalUnicast() {
		return BadField("LocalIP", c.LocalIP, "a link-local address names no interface without a zone, and zones are not supported: use a global address")
	}
	if c.Kind.IsRaw() && !c.LocalIP.IsValid() {
		return BadField("LocalIP", c.LocalIP, "kind %s needs our IP address", c.Kind)
	}
	if c.Kind.IsRaw() && (c.LocalIP.IsUnspecified() || c.LocalIP.IsMulticast() || c.LocalIP == netip.AddrFrom4([4]byte{255, 255, 255, 255})) {
		return BadField("LocalIP", c.LocalIP, "kind %s answers for one address of one host: give it an address of its own", c.Kind)
	}
	if c.Role == RoleClient && len(c.Dests) == 0 {
		return BadField("Dests", c.Dests, "a client needs at least one destination (address and port)")
	}
	dests := c.withDestPorts()
	seen := make(map[netip.AddrPort]bool, len(dests))
	for i, d := range dests {
		a := d.Addr()
		if !a.IsValid() {
			return BadField("Dests", d, "destination %d has no address", i)
		}
		if a.Is4() == v6 {
			return BadField("Dests", d, "destination %d is an %s address, and this Config is %s (LocalIP %v, destination 0 %v): use one family in LocalIP and every destination", i, familyName(!v6), familyName(v6), c.LocalIP, dests[0])
		}
		if a.Zone() != "" || a.Is6() && a.IsLinkLocalUnicast() {
			return BadField("Dests", d, "destination %d is link-local: an address with a zone (a link-local one) is not supported", i)
		}
		if d.Port() == 0 {
			return BadField("Port", c.Port, "destination %d (%v) names no port: give it one (198.18.0.2:5000) or set Port", i, d.Addr())
		}
		if seen[d] {
			return BadField("Dests", d, "destination %d is listed twice (a message would go to it twice)", i)
		}
		seen[d] = true
		if c.Kind.IsRaw() && a == c.LocalIP.Unmap() {
			return BadField("Dests", d, "a raw kind cannot send to its own address")
		}
		if c.Kind == KindTCPXDP && d.Port() != dests[0].Port() {
			return BadField("Dests", d, "kind tcp-xdp's XDP program steers one server port to the socket: destination %d is at port %d, destination 0 at %d; use one port, or kind tcp or tcp-dpdk for several", i, d.Port(), dests[0].Port())
		}
	}
	if c.Port == 0 && c.Role == RoleServer {
		return BadField("Port", c.Port, "set the UDP/TCP port the server listens on")
	}
	if c.DstMAC != nil && len(c.DstMAC) != 6 {
		return BadField("DstMAC", c.DstMAC, "an Ethernet MAC address has 6 bytes")
	}
	return nil
}

// checkSizes checks the message size, the batches and the socket options.
func (c Config) checkSizes() error {
	maxD := 9000 - 28
	if c.Kind.IsStream() {
		maxD = MaxRecord
	}
	if c.MaxDatagram < 1 || c.MaxDatagram > maxD {
		return BadField("MaxDatagram", c.MaxDatagram, "must be between 1 and %d for kind %s", maxD, c.Kind)
	}
	if err := c.checkFraming(); err != nil {
		return err
	}
	if c.TxQueue < 1 {
		return BadField("TxQueue", c.TxQueue, "must be at least 1")
	}
	if c.TxBatch < 1 || c.TxBatch > 1024 {
		return BadField("TxBatch", c.TxBatch, "must be between 1 and 1024")
	}
	if c.RxBatch < 1 || c.RxBatch > 1024 {
		return BadField("RxBatch", c.RxBatch, "must be between 1 and 1024")
	}
	if c.Peers < c.RxBatch || c.Peers > MaxPeers {
		return BadField("Peers", c.Peers, "must be between RxBatch (%d: the peers of one Rx) and %d", c.RxBatch, MaxPeers)
	}
	if c.SockBuf < 4096 {
		return BadField("SockBuf", c.SockBuf, "must be at least 4096 bytes")
	}
	if c.ReplySockets > MaxReplySockets {
		return BadField("ReplySockets", c.ReplySockets, "must be at most %d (a file descriptor each; negative: none)", MaxReplySockets)
	}
	if c.ConnectTimeout < 0 {
		return BadField("ConnectTimeout", c.ConnectTimeout, "must not be negative")
	}
	return nil
}

// checkQueues checks Queues, CPUs and Poll.
func (c Config) checkQueues() error {
	if c.Queues < 1 || c.Queues > MaxQueues {
		return BadField("Queues", c.Queues, "must be between 1 and %d", MaxQueues)
	}
	if len(c.CPUs) != 0 && len(c.CPUs) != c.Queues {
		return BadField("CPUs", c.CPUs, "give one CPU per queue (%d queues)", c.Queues)
	}
	if err := c.TCP.Stack.validate(); err != nil {
		return err
	}
	if !slices.Contains(polls, c.Poll) {
		return BadField("Poll", c.Poll, `use "busy" (spin on Rx, one CPU per poller) or "yield" (sleep in Wait when idle)`)
	}
	for i, cpu := range c.CPUs {
		if cpu < 0 {
			return BadField("CPUs", c.CPUs, "CPU numbers are not negative")
		}
		if c.Poll == PollBusy && slices.Contains(c.CPUs[:i], cpu) {
			return BadField("CPUs", c.CPUs, `CPU %d is named twice: two busy pollers on one CPU take turns at the scheduler's pace (milliseconds); give each queue its own CPU, or set Poll "yield"`, cpu)
		}
	}
	return nil
}

// checkURing checks URing on kind uring.
func (c Config) checkURing() error {
	if c.Kind != KindURing {
		return nil
	}
	if !isPow2(c.URing.Entries) || c.URing.Entries > 32768 {
		return BadField("URing.Entries", c.URing.Entries, "must be a power of two up to 32768")
	}
	if !isPow2(c.URing.RxBuffers) || c.URing.RxBuffers > 32768 {
		return BadField("URing.RxBuffers", c.URing.RxBuffers, "must be a power of two up to 32768")
	}
	if !c.URing.SQPoll {
		return nil
	}
	if c.URing.SQCPU == nil || *c.URing.SQCPU < 0 {
		return BadField("URing.SQCPU", "unset", "SQPOLL needs an explicit CPU for the kernel's SQ thread (IORING_SETUP_SQ_AFF): an unpinned SQ thread next to a busy poller turns microseconds into milliseconds")
	}
	if slices.Contains(c.CPUs, *c.URing.SQCPU) {
		return BadField("URing.SQCPU", *c.URing.SQCPU, "the SQ thread's CPU must differ from the pollers' CPUs %v", c.CPUs)
	}
	return nil
}

// checkXDP checks XDP on the AF_XDP kinds.
func (c Config) checkXDP() error {
	if !c.Kind.IsXDP() {
		return nil
	}
	if !slices.Contains(xdpModes, c.XDP.Mode) {
		return BadField("XDP.Mode", c.XDP.Mode, "use %s", enumList(xdpModes))
	}
	if !slices.Contains(xdpCopies, c.XDP.Copy) {
		return BadField("XDP.Copy", c.XDP.Copy, "use %s", enumList(xdpCopies))
	}
	if c.XDP.FrameSize != 2048 && c.XDP.FrameSize != 4096 {
		return BadField("XDP.FrameSize", c.XDP.FrameSize, "must be 2048 or 4096")
	}
	if !isPow2(c.XDP.Frames) || c.XDP.Frames < 64 {
		return BadField("XDP.Frames", c.XDP.Frames, "must be a power of two, at least 64")
	}
	if !isPow2(c.XDP.RingSize) || c.XDP.RingSize > c.XDP.Frames {
		return BadField("XDP.RingSize", c.XDP.RingSize, "must be a power of two no larger than XDP.Frames")
	}
	if c.XDP.QueueID < 0 {
		return BadField("XDP.QueueID", c.XDP.QueueID, "must not be negative")
	}
	return nil
}

// checkDPDK checks the next-hop settings of the DPDK kinds: an off-link
// Dest needs a gateway on the link, since nothing else knows its router
// on a PCI device.
func (c Config) checkDPDK() error {
	d := c.DPDK
	if !c.Kind.IsDPDK() {
		return nil
	}
	if c.Kind == KindTCPDPDK && c.TCP.Stack == TCPStackNetstack && (d.PrefixLen != 0 || d.Gateway.IsValid()) {
		return BadField("DPDK.Gateway", d.Gateway, "the netstack engine sends to every peer on the link and takes no DPDK.PrefixLen or DPDK.Gateway; use TCP.Stack %q (the default) or leave them unset", TCPStackNative)
	}
	bits := 32
	if c.IPv6() {
		bits = 128
	}
	if d.PrefixLen < 0 || d.PrefixLen > bits {
		return BadField("DPDK.PrefixLen", d.PrefixLen, "must be between 0 (every address on the link) and %d", bits)
	}
	if d.PrefixLen == 0 {
		if d.Gateway.IsValid() {
			return BadField("DPDK.PrefixLen", d.PrefixLen, "DPDK.Gateway %v needs LocalIP's on-link prefix length (24 for a /24) to tell which peers are behind it", d.Gateway)
		}
		return nil
	}
	link := netip.PrefixFrom(c.LocalIP, d.PrefixLen).Masked()
	if d.Gateway.IsValid() {
		if d.Gateway.Unmap().Is4() == c.IPv6() || !link.Contains(d.Gateway.Unmap()) || d.Gateway.Unmap() == c.LocalIP {
			return BadField("DPDK.Gateway", d.Gateway, "must be another %s address on LocalIP's link %v", familyName(c.IPv6()), link)
		}
		return nil
	}
	for _, ap := range c.Dests {
		if dst := ap.Addr().Unmap(); !link.Contains(dst) {
			what := "the DPDK port"
			if d.PCI != "" {
				what = "a PCI port (no kernel routes to ask)"
			}
			return BadField("DPDK.Gateway", "unset", "destination %v is off LocalIP's link %v, and on %s its frames go to a router: set DPDK.Gateway to the router's address on %v (or DPDK.PrefixLen 0 if the peer answers ARP or neighbour discovery on this link itself)", dst, link, what, link)
		}
	}
	return nil
}

// checkTCP checks TCP on the userspace TCP kinds.
func (c Config) checkTCP() error {
	if !c.Kind.IsStream() || c.Kind == KindTCP {
		return nil
	}
	if !slices.Contains(congestions, c.TCP.Congestion) {
		return BadField("TCP.Congestion", c.TCP.Congestion, "use %s", enumList(congestions))
	}
	if c.TCP.Congestion == CongestionBBR && c.TCP.Stack == TCPStackNetstack {
		return BadField("TCP.Congestion", c.TCP.Congestion, `netstack has no BBR: use "reno" or "cubic", or TCP.Stack %q`, TCPStackNative)
	}
	if c.TCP.SendBuf < 4096 || c.TCP.RecvBuf < 4096 {
		return BadField("TCP.SendBuf", c.TCP.SendBuf, "TCP.SendBuf and TCP.RecvBuf must be at least 4096")
	}
	if c.TCP.MinRTO < time.Millisecond {
		return BadField("TCP.MinRTO", c.TCP.MinRTO, "must be at least 1ms")
	}
	if c.TCP.MaxRetries < 1 {
		return BadField("TCP.MaxRetries", c.TCP.MaxRetries, "must be at least 1")
	}
	if c.TCP.MaxConns < 0 {
		return BadField("TCP.MaxConns", c.TCP.MaxConns, "must not be negative (0: the engine's default)")
	}
	return nil
}

// withDestPorts returns Dests with their addresses unmapped and Port for
// every port 0: a new slice when that changes any (the caller's is never
// written), Dests itself otherwise.
func (c Config) withDestPorts() []netip.AddrPort {
	for i, d := range c.Dests {
		if d.Port() != 0 && !d.Addr().Is4In6() {
			continue
		}
		out := slices.Clone(c.Dests)
		for j := i; j < len(out); j++ {
			p := out[j].Port()
			if p == 0 {
				p = c.Port
			}
			out[j] = netip.AddrPortFrom(out[j].Addr().Unmap(), p)
		}
		return out
	}
	return c.Dests
}
