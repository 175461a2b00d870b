// Package dgramio runs one send/receive loop over seven Linux packet paths,
// chosen by a string in the config:
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
//	b, err := dgramio.New(dgramio.Config{Kind: "udp", Dests: []netip.Addr{dst}, Port: 5000})
//	if err != nil { ... }            // says which field, privilege or feature is wrong
//	defer b.Close()
//	ok := b.Queue(payload)           // copies; false = back-pressure, the caller keeps it
//	err = b.Flush()                  // the batch leaves here
//	n, err := b.Rx(pkts)             // never blocks; pkts[i].Data valid until the next Rx
//
// # How New reaches the backends without an import cycle
//
// The types every backend needs (Config, Backend, Packet, Stats, the
// errors) live in the leaf package internal/core, which imports no backend.
// Each backend package imports core, never this package. This package
// re-exports core's types as aliases, so dgramio.Config and core.Config are
// the same type, and New imports every backend built in and picks one by
// Config.Kind. A user needs one import; a backend never needs the root. The
// DPDK kinds are compiled in only with the build tag dpdk (they need cgo
// and libdpdk); without it New reports them as ErrNotSupported.
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
func Kinds() []string { return append([]string(nil), core.Kinds...) }

// New validates cfg (before any system call), fills in defaults, and opens
// the backend cfg.Kind names. Errors are a *ConfigError for a bad field, an
// error matching ErrNotSupported for what this host or build lacks, or a
// *PrivilegeError naming the capability that is missing.
//
// With cfg.CPUs set, New locks the calling goroutine to its OS thread and
// pins it to cfg.CPUs[0]: call New on the goroutine that will poll.
func New(cfg Config) (Backend, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	open, ok := opener(cfg.Kind)
	if !ok {
		return nil, core.NotSupported("kind "+cfg.Kind, "", "not built into this version of dgramio", nil)
	}
	return open(cfg)
}
