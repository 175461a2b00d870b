package dgramio

import (
	"github.com/dgramio/dgramio/internal/core"
	ktcp "github.com/dgramio/dgramio/kernel/tcp"
	kudp "github.com/dgramio/dgramio/kernel/udp"
	"github.com/dgramio/dgramio/kernel/uring"
	"github.com/dgramio/dgramio/tcp"
	"github.com/dgramio/dgramio/udp"
)

// kindEntry is how New and NewGroup open one kind: its single-queue and
// its group constructor. Both take a Config that core.Config.Prepare
// returned.
type kindEntry struct {
	open  func(core.Config) (core.Backend, error)
	group func(core.Config) (core.QueueGroup, error)
}

// kindTable is every kind this build has: the kernel and AF_XDP kinds
// here, the DPDK kinds from dpdkKinds (dpdk_on.go with the build tag
// dpdk, dpdk_off.go without it).
var kindTable = joinKinds(map[core.Kind]kindEntry{
	core.KindUDP:    {kudp.New, kudp.NewGroup},
	core.KindURing:  {uring.New, uring.NewGroup},
	core.KindTCP:    {ktcp.New, ktcp.NewGroup},
	core.KindXDP:    {udp.NewXDP, udp.NewXDPGroup},
	core.KindTCPXDP: {tcp.NewXDP, tcp.NewXDPGroup},
}, dpdkKinds)

func joinKinds(a, b map[core.Kind]kindEntry) map[core.Kind]kindEntry {
	for k, e := range b {
		a[k] = e
	}
	return a
}

// lookup returns cfg.Kind's entry, or the error New reports for a kind
// this version does not know (Validate refuses those first).
func lookup(kind core.Kind) (kindEntry, error) {
	e, ok := kindTable[kind]
	if !ok {
		return e, core.NotSupported("kind "+string(kind), "", "not built into this version of dgramio", nil)
	}
	return e, nil
}
