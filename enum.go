package dgramio

import (
	"fmt"
	"slices"
	"strings"
)

// Kind names a packet path; Config.Kind takes one of the Kind constants.
// Its text is the kind's name ("tcp-xdp"), in flags, JSON and reports.
// A Kind is a flag.Value whose Set accepts only the known kinds; JSON
// decodes any name into it (a record read back may come from a kind this
// build does not know), and Config.Validate refuses an unknown one.
type Kind string

// The kinds of packet path.
const (
	KindUDP     Kind = "udp"      // kernel UDP socket, sendmmsg/recvmmsg
	KindURing   Kind = "uring"    // the same UDP socket through io_uring
	KindXDP     Kind = "xdp"      // raw UDP over AF_XDP
	KindDPDK    Kind = "dpdk"     // raw UDP over DPDK (build tag dpdk)
	KindTCP     Kind = "tcp"      // kernel TCP, length-prefixed records
	KindTCPXDP  Kind = "tcp-xdp"  // userspace TCP (TCP.Stack: native or netstack) over AF_XDP
	KindTCPDPDK Kind = "tcp-dpdk" // userspace TCP over DPDK (build tag dpdk)
)

var kinds = []Kind{KindUDP, KindURing, KindXDP, KindDPDK, KindTCP, KindTCPXDP, KindTCPDPDK}

// Kinds returns every kind, in the order the tools show them. The slice is
// the caller's.
func Kinds() []Kind { return slices.Clone(kinds) }

// String returns the kind's name.
func (k Kind) String() string { return string(k) }

// Known reports whether k is one of the Kind constants.
func (k Kind) Known() bool { return slices.Contains(kinds, k) }

// IsStream reports whether k carries records over a TCP stream.
func (k Kind) IsStream() bool { return k == KindTCP || k == KindTCPXDP || k == KindTCPDPDK }

// IsRaw reports whether k moves raw Ethernet frames (no kernel socket on
// the data path): it needs Config.Iface (or a DPDK device) and
// Config.LocalIP.
func (k Kind) IsRaw() bool { return k == KindXDP || k.IsDPDK() || k == KindTCPXDP }

// IsDPDK reports whether k runs over DPDK (build tag dpdk).
func (k Kind) IsDPDK() bool { return k == KindDPDK || k == KindTCPDPDK }

// IsXDP reports whether k runs over AF_XDP (Config.XDP applies).
func (k Kind) IsXDP() bool { return k == KindXDP || k == KindTCPXDP }

// Set parses a kind's name (flag.Value).
func (k *Kind) Set(s string) error { return parseEnum(k, "kind", s, kinds) }

// Poll says how an application's pollers wait (Config.Poll).
type Poll string

// The poll modes.
const (
	// PollBusy spins on Rx, one poller per CPU.
	PollBusy Poll = "busy"
	// PollYield sleeps in Wait (or yields) when Rx finds nothing, so that
	// more pollers than CPUs still make progress.
	PollYield Poll = "yield"
)

var polls = []Poll{PollBusy, PollYield}

// String returns "busy" or "yield".
func (p Poll) String() string { return string(p) }

// Set parses "busy" or "yield" (flag.Value).
func (p *Poll) Set(s string) error { return parseEnum(p, "poll mode", s, polls) }

// UnmarshalText parses "busy" or "yield".
func (p *Poll) UnmarshalText(b []byte) error { return p.Set(string(b)) }

// XDPMode is how an XDP program is attached (XDPOptions.Mode).
type XDPMode string

// The XDP attach modes.
const (
	// XDPModeAuto (the zero value) tries driver mode, then falls back to
	// SKB mode and reports it in Stats.Mode.
	XDPModeAuto XDPMode = ""
	// XDPModeDriver attaches in driver (native) mode or fails.
	XDPModeDriver XDPMode = "driver"
	// XDPModeSKB attaches in SKB (generic) mode.
	XDPModeSKB XDPMode = "skb"
)

var xdpModes = []XDPMode{XDPModeAuto, XDPModeDriver, XDPModeSKB}

// String returns the mode's name, "" for XDPModeAuto.
func (m XDPMode) String() string { return string(m) }

// Set parses "", "driver" or "skb" (flag.Value).
func (m *XDPMode) Set(s string) error { return parseEnum(m, "XDP mode", s, xdpModes) }

// UnmarshalText parses "", "driver" or "skb".
func (m *XDPMode) UnmarshalText(b []byte) error { return m.Set(string(b)) }

// XDPCopy says whether an AF_XDP socket binds in copy or zero-copy mode
// (XDPOptions.Copy).
type XDPCopy string

// The AF_XDP bind modes.
const (
	// XDPCopyAuto (the zero value) binds zero-copy where the driver offers
	// it, copy mode otherwise.
	XDPCopyAuto XDPCopy = ""
	// XDPCopyCopy binds in copy mode.
	XDPCopyCopy XDPCopy = "copy"
	// XDPCopyZero binds zero-copy or fails.
	XDPCopyZero XDPCopy = "zerocopy"
)

var xdpCopies = []XDPCopy{XDPCopyAuto, XDPCopyCopy, XDPCopyZero}

// String returns the mode's name, "" for XDPCopyAuto.
func (c XDPCopy) String() string { return string(c) }

// Set parses "", "copy" or "zerocopy" (flag.Value).
func (c *XDPCopy) Set(s string) error { return parseEnum(c, "XDP copy mode", s, xdpCopies) }

// UnmarshalText parses "", "copy" or "zerocopy".
func (c *XDPCopy) UnmarshalText(b []byte) error { return c.Set(string(b)) }

// Congestion names a congestion control algorithm of the userspace TCP
// (TCPTuning.Congestion, whose default is the host's where the engine
// implements it), by the names Linux's net.ipv4.tcp_congestion_control
// uses.
type Congestion string

// The congestion control algorithms.
const (
	// CongestionReno is NewReno (loss-based), the default where the
	// host's algorithm cannot be read or the engine does not implement it.
	CongestionReno Congestion = "reno"
	// CongestionCubic is CUBIC (loss-based), Linux's own default.
	CongestionCubic Congestion = "cubic"
	// CongestionBBR is BBR v1, as Linux's tcp_bbr, which some hosts make
	// their default: the native engine only (TCP.Stack "native"),
	// docs/loss.md.
	CongestionBBR Congestion = "bbr"
)

var congestions = []Congestion{CongestionReno, CongestionCubic, CongestionBBR}

// String returns "reno", "cubic" or "bbr".
func (c Congestion) String() string { return string(c) }

// Set parses "reno", "cubic" or "bbr" (flag.Value).
func (c *Congestion) Set(s string) error { return parseEnum(c, "congestion control", s, congestions) }

// UnmarshalText parses "reno", "cubic" or "bbr".
func (c *Congestion) UnmarshalText(b []byte) error { return c.Set(string(b)) }

// parseEnum sets *dst to s when s names one of valid, and otherwise
// returns an error listing them.
func parseEnum[T ~string](dst *T, what, s string, valid []T) error {
	if slices.Contains(valid, T(s)) {
		*dst = T(s)
		return nil
	}
	return fmt.Errorf("unknown %s %q; use %s", what, s, enumList(valid))
}

// enumList returns valid as `"a", "b" or "c"`.
func enumList[T ~string](valid []T) string {
	q := make([]string, len(valid))
	for i, v := range valid {
		q[i] = fmt.Sprintf("%q", string(v))
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
