package dgramio

import (
	"github.com/dgramio/dgramio/internal/core"
	ktcp "github.com/dgramio/dgramio/kernel/tcp"
	kudp "github.com/dgramio/dgramio/kernel/udp"
	"github.com/dgramio/dgramio/kernel/uring"
	"github.com/dgramio/dgramio/tcp"
	"github.com/dgramio/dgramio/udp"
)

type openFunc func(core.Config) (core.Backend, error)

// opener returns the constructor of kind, if this build has one. The DPDK
// kinds come from dpdk_on.go (build tag dpdk) or dpdk_off.go.
func opener(kind string) (openFunc, bool) {
	switch kind {
	case core.KindUDP:
		return kudp.New, true
	case core.KindURing:
		return uring.New, true
	case core.KindTCP:
		return ktcp.New, true
	case core.KindXDP:
		return udp.NewXDP, true
	case core.KindTCPXDP:
		return tcp.NewXDP, true
	}
	return dpdkOpener(kind)
}
