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

// groupOpener returns the group constructor of kind (NewGroup), if this
// build has one. The DPDK kinds come from dpdkGroups (dpdk_on.go).
func groupOpener(kind string) (groupOpenFunc, bool) {
	switch kind {
	case core.KindUDP:
		return kudp.NewGroup, true
	case core.KindURing:
		return uring.NewGroup, true
	case core.KindTCP:
		return ktcp.NewGroup, true
	case core.KindXDP:
		return udp.NewXDPGroup, true
	case core.KindTCPXDP:
		return tcp.NewXDPGroup, true
	case core.KindDPDK, core.KindTCPDPDK:
		if dpdkGroups != nil {
			return dpdkGroups(kind)
		}
		return func(core.Config) (core.QueueGroup, error) {
			return nil, core.NotSupported("kind "+kind, "",
				"this binary was built without DPDK: install libdpdk-dev (make deps) and build with -tags dpdk", nil)
		}, true
	}
	return nil, false
}
