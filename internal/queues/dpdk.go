//go:build dpdk

package queues

import (
	"errors"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/dpdk"
	"github.com/dgramio/dgramio/internal/kindcfg"
)

// DPDK is what the groups over one DPDK port (kinds dpdk and tcp-dpdk)
// share: the group's Config, the port with a RX/TX queue pair per queue,
// and the Slots of those queues. A kind's group embeds it and adds its
// OpenQueue and Mode; BaseMode, AppendCounters and Close come from here.
type DPDK struct {
	Cfg   dgramio.Config
	Port  *dpdk.Port // queue 0's Port, which owns the device
	Slots *Slots
}

// OpenDPDK opens the DPDK port of a group's cfg (as kindcfg.PrepareGroup
// returned it) with cfg.Queues queues (dpdk.OptionsFrom, with
// dpdk.Options.Queues set). Errors are dpdk.Open's.
func OpenDPDK(cfg dgramio.Config) (*DPDK, error) {
	o := dpdk.OptionsFrom(cfg)
	o.Queues = cfg.Queues
	port, err := dpdk.Open(o)
	if err != nil {
		return nil, err
	}
	return &DPDK{Cfg: cfg, Port: port, Slots: NewSlots(cfg.Queues)}, nil
}

// Take marks queue q taken (Slots.Take; errors prefixed who) and returns
// its Port and its Config (kindcfg.ForQueue).
func (d *DPDK) Take(who string, q int) (*dpdk.Port, dgramio.Config, error) {
	if err := d.Slots.Take(who, q); err != nil {
		return nil, dgramio.Config{}, err
	}
	return d.Port.Queue(q), kindcfg.ForQueue(d.Cfg, q), nil
}

// BaseMode is queue 0's Stats.Mode without its note. See dgramio.QueueGroup.
func (d *DPDK) BaseMode() string { return d.Slots.BaseMode() }

// AppendCounters appends the device's counters (dpdk.Port.DeviceStats),
// counted once for all queues.
func (d *DPDK) AppendCounters(dst []dgramio.Counter) []dgramio.Counter {
	return append(dst, d.Port.DeviceStats().Layers...)
}

// Close closes the queues never opened; the device goes with the last
// queue closed. Close the opened queues' backends first.
func (d *DPDK) Close() error {
	var errs []error
	for _, q := range d.Slots.TakeRest() {
		errs = append(errs, d.Port.Queue(q).Close())
	}
	return errors.Join(errs...)
}
