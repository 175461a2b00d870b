package tcp

import (
	"fmt"
	"os"
	"strings"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/stack/native"
)

// CongestionSysctl is where Linux names the congestion control a new
// socket of the reading thread's network namespace gets
// (net.ipv4.tcp_congestion_control).
const CongestionSysctl = "/proc/sys/net/ipv4/tcp_congestion_control"

// DefaultCongestion is the native engine's congestion control when
// Config.TCP.Congestion is empty and the host names none the engine
// implements (or has no CongestionSysctl to read).
const DefaultCongestion = dgramio.CongestionReno

// readCongestionSysctl reads CongestionSysctl; tests replace it.
var readCongestionSysctl = func() ([]byte, error) { return os.ReadFile(CongestionSysctl) }

// HostCongestion returns the congestion control the native engine runs
// when Config.TCP.Congestion is empty, as a Linux socket of this network
// namespace would: what CongestionSysctl names when the engine implements
// it (bbr → bbr, cubic → cubic, reno → reno, which is NewReno), otherwise
// DefaultCongestion. from says which, for Stats.Mode and the reports:
// "host" or why the default was taken. It reads the file each call: call
// it once per engine.
func HostCongestion() (cc dgramio.Congestion, from string) {
	return hostCongestion(readCongestionSysctl)
}

// hostCongestion is HostCongestion over read.
func hostCongestion(read func() ([]byte, error)) (dgramio.Congestion, string) {
	b, err := read()
	if err != nil {
		return DefaultCongestion, fmt.Sprintf("default, the host's unknown: %v", err)
	}
	name := strings.TrimSpace(string(b))
	switch name {
	case "bbr":
		return dgramio.CongestionBBR, "host"
	case "cubic":
		return dgramio.CongestionCubic, "host"
	case "reno":
		return dgramio.CongestionReno, "host"
	}
	return DefaultCongestion, fmt.Sprintf("default, the host's %q is not implemented", name)
}

// NativeCongestion is the native engine's name for a resolved
// Tuning.Congestion ("reno" is native.NewReno).
func NativeCongestion(c dgramio.Congestion) native.Congestion {
	switch c {
	case dgramio.CongestionCubic:
		return native.CUBIC
	case dgramio.CongestionBBR:
		return native.BBR
	}
	return native.NewReno
}

// congestionMode is mode (Stats.Mode) with the native engine's congestion
// control of t and where it came from: "…, congestion bbr (host)".
func congestionMode(mode string, t Tuning) string {
	cc := fmt.Sprintf("congestion %s (%s)", t.Congestion, t.CongestionFrom)
	if mode == "" {
		return cc
	}
	return mode + ", " + cc
}
