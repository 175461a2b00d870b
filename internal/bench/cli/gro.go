package cli

import (
	"fmt"

	"github.com/safchain/ethtool"
)

// groFeature is the ethtool name of generic receive offload.
const groFeature = "rx-gro"

// setGRO sets GRO on iface, from a thread inside its namespace (the
// ethtool socket belongs to the namespace it is made in), reads it back,
// and returns what it was before.
func setGRO(iface string, on bool) (was bool, err error) {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return false, fmt.Errorf("ethtool socket: %w", err)
	}
	defer e.Close()
	st, err := e.FeaturesWithState(iface)
	if err != nil {
		return false, fmt.Errorf("ethtool get features %s: %w", iface, err)
	}
	f, ok := st[groFeature]
	if !ok || !f.Available {
		return false, fmt.Errorf("%s: %s cannot be changed (%+v)", iface, groFeature, f)
	}
	if f.Active == on {
		return on, nil
	}
	if err := e.Change(iface, map[string]bool{groFeature: on}); err != nil {
		return f.Active, fmt.Errorf("ethtool set %s %v on %s: %w", groFeature, on, iface, err)
	}
	now, err := e.Features(iface)
	if err != nil {
		return f.Active, fmt.Errorf("ethtool get features %s: %w", iface, err)
	}
	if now[groFeature] != on {
		return f.Active, fmt.Errorf("%s: %s reads back %v after setting it %v", iface, groFeature, now[groFeature], on)
	}
	return f.Active, nil
}

// groForNAPI turns GRO on at both ends of the veth pair in use for a
// cell of uring+napi and returns what puts each end back as it was. On
// veth, a receiving end without GRO (the kernel's default) takes its
// packets through the per-CPU backlog, not through a NAPI instance: the
// socket then has no NAPI ID (SO_INCOMING_NAPI_ID 0) and io_uring's NAPI
// busy polling has nothing to poll. Real ports are left alone (a NIC's
// queue is a NAPI instance with or without GRO), as is a run without a
// veth pair. On error, whatever was changed is put back before it
// returns.
func (nb *netbench) groForNAPI() (restore func(), err error) {
	if nb.cur == nil || nb.cur.pair == nil {
		return func() {}, nil
	}
	type changed struct {
		s   *side
		was bool
	}
	var done []changed
	restore = func() {
		for i := len(done) - 1; i >= 0; i-- {
			c := done[i]
			if c.was {
				continue
			}
			if err := c.s.ep.Do(func() error { _, err := setGRO(c.s.iface, false); return err }); err != nil {
				nb.prog.logf("netbench: put GRO back off on %s: %v", c.s.iface, err)
			}
		}
	}
	for _, s := range []*side{nb.a, nb.b} {
		var was bool
		err := s.ep.Do(func() error {
			var err error
			was, err = setGRO(s.iface, true)
			return err
		})
		if err != nil {
			// The change may have half happened (set, but read back
			// otherwise): put this end back too.
			done = append(done, changed{s, was})
			restore()
			return nil, fmt.Errorf("GRO on %s: %w", s.iface, err)
		}
		done = append(done, changed{s, was})
	}
	return restore, nil
}
