// Package dgramio runs one send/receive loop over seven Linux packet paths,
// chosen by Config.Kind:
//
//	udp       kernel UDP socket, sendmmsg/recvmmsg
//	uring     the same UDP socket through io_uring
//	xdp       raw UDP frames over AF_XDP
//	dpdk      raw UDP frames over DPDK (build tag dpdk)
//	tcp       kernel TCP
//	tcp-xdp   userspace TCP over AF_XDP (the native engine by default, gVisor netstack by Config.TCP.Stack)
//	tcp-dpdk  userspace TCP over DPDK (build tag dpdk)
//
// The application code, batch sizes and socket options are the same for
// every kind, so the paths compare fairly:
//
//	import (
//		"github.com/dgramio/dgramio"
//		_ "github.com/dgramio/dgramio/kinds/udp" // or .../kinds for every kind
//	)
//
//	b, err := dgramio.New(dgramio.Config{Kind: "udp", Dests: ..., Port: 5000})
//	if err != nil { ... }            // says which field, privilege or feature is wrong
//	defer b.Close()
//	err = b.Queue(payload)           // copies; an error says why nothing was queued
//	err = b.Flush()                  // the batch leaves here
//	n, err := b.Rx(pkts)             // never blocks; pkts[i].Data valid until the next Rx
//
// # Kinds are linked by import
//
// This package holds the types (Config, Backend, Packet, Stats, the
// errors) and a registry, as database/sql does with its drivers: each kind
// lives in a package of its own that registers it when imported. Package
// kinds imports every kind; kinds/udp, kinds/uring, kinds/tcp, kinds/xdp,
// kinds/tcpxdp, kinds/dpdk and kinds/tcpdpdk import one each, so a program
// that uses only udp links no AF_XDP, eBPF or userspace TCP code. New for
// a kind the program does not link returns an error matching
// ErrNotSupported that names the import. The DPDK kinds are compiled in
// only with the build tag dpdk (they need cgo and libdpdk); without it
// they return ErrNoDPDK. New and NewGroup apply the defaults and validate
// once (Config.Prepare); the kinds then open what the Config names.
//
// # API packages
//
// Besides this package and kinds: frameio (the FrameIO interface) and its
// implementations frameio/afxdp (an AF_XDP library), frameio/memio (an
// in-memory pair for tests), frameio/pcapio (a capturing wrapper) and
// frameio/dpdk (build tag dpdk); stack/native (the native userspace TCP/IP
// engine over any FrameIO, run to completion by the poll loop);
// tcp/netconn (net.Listener and net.Conn over the userspace TCP, for
// unchanged Go programs); kernel/iouring (a small io_uring library that
// stands alone); conformance (packet-level TCP/IP tests run against our
// engines and Linux side by side). Everything under internal/ serves this
// module only. docs/ARCHITECTURE.md describes the layers.
//
// # Threading
//
// One goroutine drives a Backend's poll loop (Queue, QueueTo, Flush, Rx,
// Wait); Stats and Close may be called from any goroutine. Rx's data is
// valid until the next Rx; build with -tags dgramio_debug to have it
// overwritten then, so that code keeping it too long fails in tests. Close
// during Rx or Wait makes them return net.ErrClosed.
package dgramio

// New fills in cfg's defaults, validates it (before any system call; see
// Config.Prepare), and opens the backend cfg.Kind names. Errors are a
// *ConfigError for a bad field, an error matching ErrNotSupported for what
// this host or build lacks or a kind the program does not link (ErrNoDPDK
// for a DPDK kind in a build without DPDK), or a *PrivilegeError naming
// the capability that is missing.
//
// With cfg.CPUs set, the backend's poller is pinned to cfg.CPUs[0]: call
// New on the goroutine that will poll (see Config.CPUs).
func New(cfg Config) (Backend, error) {
	cfg, err := cfg.Prepare()
	if err != nil {
		return nil, err
	}
	d, err := driver(cfg.Kind)
	if err != nil {
		return nil, err
	}
	return d.Open(cfg)
}
