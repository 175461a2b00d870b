package dgramio

import (
	"fmt"
	"sort"
	"sync"
)

// Driver is how New and NewGroup open one kind. A kind's package registers
// its Driver when it is imported (package kinds and its sub-packages); a
// program calls Register only to add a kind of its own.
type Driver struct {
	// Open opens a single-queue backend. It receives a Config that
	// Config.Prepare returned (defaults applied, validated), of the
	// Driver's kind.
	Open func(Config) (Backend, error)
	// OpenGroup sets up what the queues of a group share (see Group). nil:
	// the kind has no groups, and NewGroup with Queues > 1 refuses it.
	OpenGroup func(Config) (QueueGroup, error)
}

var registry struct {
	sync.RWMutex
	drivers map[Kind]Driver
}

// Register makes kind available to New and NewGroup. It panics if kind is
// registered twice or d.Open is nil, as database/sql's Register does: both
// are programming errors found at start-up.
func Register(kind Kind, d Driver) {
	if d.Open == nil {
		panic("dgramio: Register of kind " + string(kind) + " with a nil Open")
	}
	registry.Lock()
	defer registry.Unlock()
	if registry.drivers == nil {
		registry.drivers = make(map[Kind]Driver)
	}
	if _, dup := registry.drivers[kind]; dup {
		panic("dgramio: Register called twice for kind " + string(kind))
	}
	registry.drivers[kind] = d
}

// Registered returns the kinds this program links (imported through
// package kinds or its sub-packages), in the order Kinds lists them, then
// any others by name.
func Registered() []Kind {
	registry.RLock()
	defer registry.RUnlock()
	var out []Kind
	for _, k := range Kinds() {
		if _, ok := registry.drivers[k]; ok {
			out = append(out, k)
		}
	}
	var extra []Kind
	for k := range registry.drivers {
		if !k.Known() {
			extra = append(extra, k)
		}
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i] < extra[j] })
	return append(out, extra...)
}

// driver returns kind's Driver, or the error New reports for a kind this
// program does not link: it names the import that brings it in.
func driver(kind Kind) (Driver, error) {
	registry.RLock()
	d, ok := registry.drivers[kind]
	registry.RUnlock()
	if ok {
		return d, nil
	}
	pkg := kindPackage(kind)
	if pkg == "" {
		return d, NotSupported("kind "+string(kind), "", "no such kind is registered in this program", nil)
	}
	hint := fmt.Sprintf(`not linked into this program: add import _ "github.com/dgramio/dgramio/kinds/%s" (one kind) or _ "github.com/dgramio/dgramio/kinds" (every kind)`, pkg)
	if kind.IsDPDK() {
		hint += ", and build with -tags dpdk"
		return d, fmt.Errorf("kind %s: %s: %w", kind, hint, ErrNoDPDK)
	}
	return d, NotSupported("kind "+string(kind), "", hint, nil)
}

// kindPackage is the name of the package under kinds/ that registers kind.
func kindPackage(kind Kind) string {
	switch kind {
	case KindUDP:
		return "udp"
	case KindURing:
		return "uring"
	case KindXDP:
		return "xdp"
	case KindDPDK:
		return "dpdk"
	case KindTCP:
		return "tcp"
	case KindTCPXDP:
		return "tcpxdp"
	case KindTCPDPDK:
		return "tcpdpdk"
	}
	return ""
}
