// Package kindcfg is how a kind's constructors begin: the Config they are
// given is checked (one that dgramio.New or NewGroup prepared) or prepared
// (one a test or package built itself), and a group's Config is split
// into its queues' Configs.
package kindcfg

import (
	"strconv"

	"github.com/dgramio/dgramio"
)

// PrepareGroup is how a group constructor of kind (a kind's NewGroup)
// begins. A Config that dgramio.Config.Prepare returned is checked only:
// its Kind must be kind. Any other (a test's, one a package builds itself)
// gets kind when its Kind is empty and is prepared, so that a constructor
// called directly still applies the defaults and refuses a bad field.
// Errors are *dgramio.ConfigErrors.
func PrepareGroup(c dgramio.Config, kind dgramio.Kind) (dgramio.Config, error) {
	if !c.Prepared() {
		if c.Kind == "" {
			c.Kind = kind
		}
		var err error
		if c, err = c.Prepare(); err != nil {
			return c, err
		}
	}
	if c.Kind != kind {
		return c, dgramio.BadField("Kind", c.Kind, "this constructor opens kind %s only; dgramio.New picks the constructor of Config.Kind", kind)
	}
	return c, nil
}

// PrepareOne is how a single-queue constructor of kind (a kind's New)
// begins: PrepareGroup, and one queue only (several are opened through
// dgramio.NewGroup).
func PrepareOne(c dgramio.Config, kind dgramio.Kind) (dgramio.Config, error) {
	c, err := PrepareGroup(c, kind)
	if err != nil {
		return c, err
	}
	if c.Queues > 1 {
		return c, dgramio.BadField("Queues", c.Queues, "New opens one queue; open several with dgramio.NewGroup (one backend per queue, each on its own poller)")
	}
	return c, nil
}

// ForQueue returns the Config of queue q of a group: Queues 1, CPUs the one
// CPU of queue q (none when c.CPUs is empty), XDP.QueueID advanced by q,
// and with several queues Pcap (when set) suffixed "-q<q>", so that each
// queue writes files of its own. Ports are left as they are: each kind
// decides what a queue's port is. A prepared Config stays prepared.
func ForQueue(c dgramio.Config, q int) dgramio.Config {
	if c.Pcap != "" && c.Queues > 1 {
		c.Pcap += "-q" + strconv.Itoa(q)
	}
	c.Queues = 1
	if len(c.CPUs) > q {
		c.CPUs = []int{c.CPUs[q]}
	} else {
		c.CPUs = nil
	}
	c.XDP.QueueID += q
	return c
}
