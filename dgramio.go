// Package dgramio runs one send/receive loop over seven Linux packet paths,
// chosen by Config.Kind:
//
//	udp       kernel UDP socket, sendmmsg/recvmmsg
//	uring     the same UDP socket through io_uring
//	xdp       raw UDP frames over AF_XDP
//	dpdk      raw UDP frames over DPDK (build tag dpdk)
//	tcp       kernel TCP, u16 length-prefixed records
//	tcp-xdp   userspace TCP (gVisor netstack) over AF_XDP
//	tcp-dpdk  userspace TCP over DPDK (build tag dpdk)
//
// The application code, batch sizes and socket options are the same for
// every kind, so the paths compare fairly:
//
//	b, err := dgramio.New(dgramio.Config{Kind: "udp", Dests: []netip.AddrPort{netip.AddrPortFrom(dst, 5000)}, Port: 5000})
//	if err != nil { ... }            // says which field, privilege or feature is wrong
//	defer b.Close()
//	err = b.Queue(payload)           // copies; ErrBackPressure: Flush and retry, the caller keeps it
//	err = b.Flush()                  // the batch leaves here
//	n, err := b.Rx(pkts)             // never blocks; pkts[i].Data valid until the next Rx
//
// # How New reaches the backends without an import cycle
//
// The types every backend needs (Config, Backend, Packet, Stats, the
// errors) live in the leaf package internal/core, which imports no backend.
// Each backend package imports core, never this package. This package
// re-exports core's types as aliases, so dgramio.Config and core.Config are
// the same type, and New imports every backend built in and picks one from
// a table of kinds (each kind's single and group constructor). A user needs
// one import; a backend never needs the root. New and NewGroup apply the
// defaults and validate once (Config.Prepare); the constructors only check
// that a prepared Config is of their kind (and prepare one that is not, when
// called directly). The DPDK kinds are compiled in
// only with the build tag dpdk (they need cgo and libdpdk); without it New
// returns ErrNoDPDK, which matches ErrNotSupported.
//
// # Which packages are API
//
// Besides this package: frameio and its implementations frameio/afxdp (an
// AF_XDP library), frameio/memio (an in-memory pair), frameio/pcapio (a
// capturing wrapper) and frameio/dpdk (build tag dpdk); stack (a gVisor
// link endpoint over any FrameIO); kernel/iouring (a small io_uring
// library that stands alone); tcp/netconn (net.Conn and net.Listener over
// the userspace TCP); conformance (packet-level TCP/IP tests). The
// backend packages (kernel/udp, kernel/uring, kernel/tcp, udp, tcp,
// tcp/record) and the helpers (arp, pad, frameio/afxdp/xdpprog) serve this
// module; everything under internal/ is private. docs/ARCHITECTURE.md
// describes the layers.
//
// # Threading
//
// One goroutine drives a Backend's poll loop (Queue, QueueTo, Flush, Rx,
// Wait); Stats and Close may be called from any goroutine. Rx's data is
// valid until the next Rx; build with -tags dgramio_debug to have it
// overwritten then, so that code keeping it too long fails in tests. Close
// during Rx or Wait makes them return net.ErrClosed.
package dgramio

import (
	"github.com/dgramio/dgramio/internal/core"
)

// Config selects the packet path and everything it needs; see core.Config
// for every field. The zero value of a field means its default.
type Config = core.Config

// Backend is one packet path; see core.Backend for the method contracts.
type Backend = core.Backend

// Packet is one received message: Data (valid until the next Rx) and From.
type Packet = core.Packet

// Stats are a backend's counters; every refused or lost message is in one.
type Stats = core.Stats

// Counter is one named counter of a layer below the backend.
type Counter = core.Counter

// Role is RoleClient or RoleServer.
type Role = core.Role

// The roles.
const (
	RoleClient = core.RoleClient
	RoleServer = core.RoleServer
)

// Option structs of Config.
type (
	URingOptions = core.URingOptions
	XDPOptions   = core.XDPOptions
	DPDKOptions  = core.DPDKOptions
	TCPTuning    = core.TCPTuning
)

// Errors.
type (
	// ConfigError names a bad Config field and what to do.
	ConfigError = core.ConfigError
	// UnsupportedError names a missing feature and its minimum kernel; it
	// matches ErrNotSupported.
	UnsupportedError = core.UnsupportedError
	// PrivilegeError names the capability an operation needs.
	PrivilegeError = core.PrivilegeError
	// PeerError reports a stream peer that closed or reset the connection.
	PeerError = core.PeerError
)

// ErrNotSupported is matched (errors.Is) by every error that says this host,
// kernel or build lacks what a Config asks for.
var ErrNotSupported = core.ErrNotSupported

// Kind names a packet path (Config.Kind); its text is the kind's name, and
// it parses from a flag (Set, which accepts the known kinds only).
type Kind = core.Kind

// The typed options of Config, each with String and parsing (Set for
// flags, UnmarshalText), which accept the valid values only.
type (
	// Poll is Config.Poll: PollBusy or PollYield.
	Poll = core.Poll
	// XDPMode is XDPOptions.Mode.
	XDPMode = core.XDPMode
	// XDPCopy is XDPOptions.Copy.
	XDPCopy = core.XDPCopy
	// Congestion is TCPTuning.Congestion.
	Congestion = core.Congestion
)

// The values of XDPOptions.Mode, XDPOptions.Copy and TCPTuning.Congestion.
const (
	XDPModeAuto     = core.XDPModeAuto
	XDPModeDriver   = core.XDPModeDriver
	XDPModeSKB      = core.XDPModeSKB
	XDPCopyAuto     = core.XDPCopyAuto
	XDPCopyCopy     = core.XDPCopyCopy
	XDPCopyZero     = core.XDPCopyZero
	CongestionReno  = core.CongestionReno
	CongestionCubic = core.CongestionCubic
)

// ErrNoDPDK is what New and NewGroup return, wrapped with the kind, for a
// DPDK kind in a build without the tag dpdk. It matches ErrNotSupported.
var ErrNoDPDK = core.ErrNoDPDK

// The kinds, as Config.Kind takes them.
const (
	KindUDP     = core.KindUDP
	KindURing   = core.KindURing
	KindXDP     = core.KindXDP
	KindDPDK    = core.KindDPDK
	KindTCP     = core.KindTCP
	KindTCPXDP  = core.KindTCPXDP
	KindTCPDPDK = core.KindTCPDPDK
)

// Kinds returns every kind, in the order the tools show them.
func Kinds() []Kind { return core.Kinds() }

// New fills in cfg's defaults, validates it (before any system call; see
// Config.Prepare), and opens the backend cfg.Kind names. Errors are a
// *ConfigError for a bad field, an error matching ErrNotSupported for what
// this host or build lacks (ErrNoDPDK for a DPDK kind in a build without
// DPDK), or a *PrivilegeError naming the capability that is missing.
//
// With cfg.CPUs set, New locks the calling goroutine to its OS thread and
// pins it to cfg.CPUs[0]: call New on the goroutine that will poll.
func New(cfg Config) (Backend, error) {
	cfg, err := cfg.Prepare()
	if err != nil {
		return nil, err
	}
	e, err := lookup(cfg.Kind)
	if err != nil {
		return nil, err
	}
	return e.open(cfg)
}

// Byte streams and connection events of the stream kinds (tcp, tcp-xdp,
// tcp-dpdk): Config.Framing, Config.Events, Packet.Event and Conns.
type (
	// Framing is Config.Framing: FramingU16, FramingU32 or FramingRaw.
	Framing = core.Framing
	// Event is Packet.Event: EventData, or what happened to the
	// connection Packet.From names.
	Event = core.Event
	// Conns is implemented by the Backend of every stream kind: close,
	// reset, pause or resume one connection from the poll loop.
	Conns = core.Conns
)

// The framings and the events.
const (
	FramingU16   = core.FramingU16
	FramingRaw   = core.FramingRaw
	FramingU32   = core.FramingU32
	EventData    = core.EventData
	EventOpened  = core.EventOpened
	EventPeerFIN = core.EventPeerFIN
	EventReset   = core.EventReset
	EventEnded   = core.EventEnded
	EventStalled = core.EventStalled
)

// ErrNoConn is what the Conns methods return for an address that names
// no connection.
var ErrNoConn = core.ErrNoConn

// What Queue and QueueTo return besides nil, the same on every kind (see
// docs/sending.md). Each is a plain value: compare with errors.Is.
var (
	// ErrBackPressure: the send slots are full; Flush, then queue again.
	ErrBackPressure = core.ErrBackPressure
	// ErrTooLarge: the payload exceeds Config.MaxDatagram.
	ErrTooLarge = core.ErrTooLarge
	// ErrNoRoute: no destination, no connection to that peer, or an
	// address the kind cannot send to.
	ErrNoRoute = core.ErrNoRoute
	// ErrClosed: the backend is closed; it is net.ErrClosed.
	ErrClosed = core.ErrClosed
)
