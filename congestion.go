package dgramio

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// hostCongestionPath is Linux's net.ipv4.tcp_congestion_control: the
// congestion control the kernel's TCP gives a new socket. A network
// namespace created after boot starts with the initial namespace's value.
const hostCongestionPath = "/proc/sys/net/ipv4/tcp_congestion_control"

// hostCongestion returns the host's congestion control by name ("bbr",
// "cubic", "dctcp"...), read once per process; an error where it cannot
// be read (not Linux, no /proc). A variable so that tests can replace it.
var hostCongestion = sync.OnceValues(readHostCongestion)

func readHostCongestion() (string, error) {
	b, err := os.ReadFile(hostCongestionPath)
	if err != nil {
		return "", fmt.Errorf("host congestion control: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// defaultCongestion is TCPTuning.Congestion's default for the engine s:
// the host's (hostCongestion), as the kernel TCP that the userspace TCP
// bypasses would use, where s implements it (the native engine reno,
// cubic and bbr; netstack, and an engine not yet chosen, reno and cubic);
// CongestionReno otherwise (unreadable, or another algorithm).
func defaultCongestion(s TCPStack) Congestion {
	name, err := hostCongestion()
	if err != nil {
		return CongestionReno
	}
	switch c := Congestion(name); c {
	case CongestionCubic:
		return c
	case CongestionBBR:
		if s == TCPStackNative {
			return c
		}
	}
	return CongestionReno
}
