//go:build linux

package testhost

import (
	"fmt"
	"sort"
	"strings"

	"github.com/safchain/ethtool"
)

// offloadOff says whether an ethtool feature is one New turns off: every TX
// checksum offload, TCP segmentation offload (all variants), generic
// segmentation offload and UDP segmentation offload. With any of them on, a
// kernel sender on veth hands the peer frames with a partial checksum or
// 64 KiB super-frames, which a raw path sees as corrupt.
//
// The TSO variants are matched by pattern ("tx-tcp*-segmentation") because
// kernels add new ones (tx-tcp-accecn-segmentation in 6.18).
func offloadOff(name string) bool {
	switch name {
	case "tx-generic-segmentation", "tx-udp-segmentation":
		return true
	}
	return strings.HasPrefix(name, "tx-checksum-") ||
		strings.HasPrefix(name, "tx-tcp") && strings.HasSuffix(name, "-segmentation")
}

// setOffloads turns the offloads of offloadOff on or off on iface through
// the ETHTOOL_SFEATURES ioctl, then reads them back. It must run on a thread
// inside iface's namespace (the ioctl socket belongs to the namespace it is
// made in). It returns the features that read back in the wrong state,
// sorted: when turning off, those the driver cannot change (fixed on).
func setOffloads(iface string, on bool) ([]string, error) {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return nil, fmt.Errorf("ethtool socket: %w", err)
	}
	defer e.Close()
	st, err := e.FeaturesWithState(iface)
	if err != nil {
		return nil, fmt.Errorf("ethtool get features %s: %w", iface, err)
	}
	change := map[string]bool{}
	for name, s := range st {
		if offloadOff(name) && s.Available && s.Active != on {
			change[name] = on
		}
	}
	if len(change) > 0 {
		if err := e.Change(iface, change); err != nil {
			return nil, fmt.Errorf("ethtool set features %s: %w", iface, err)
		}
	}
	return wrongOffloads(e, iface, on)
}

// wrongOffloads reads the features back and lists those of offloadOff that
// are not in state on.
func wrongOffloads(e *ethtool.Ethtool, iface string, on bool) ([]string, error) {
	now, err := e.Features(iface)
	if err != nil {
		return nil, fmt.Errorf("ethtool get features %s: %w", iface, err)
	}
	var wrong []string
	for name, active := range now {
		if offloadOff(name) && active != on {
			wrong = append(wrong, name)
		}
	}
	sort.Strings(wrong)
	return wrong, nil
}

// Offloads returns the state of the TX checksum, TSO, GSO and UDP
// segmentation features of the veth end, read now with ETHTOOL_GFEATURES
// from inside the namespace: feature name → active.
func (h *Host) Offloads() (map[string]bool, error) {
	out := map[string]bool{}
	err := h.onHome(func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return fmt.Errorf("ethtool socket: %w", err)
		}
		defer e.Close()
		now, err := e.Features(h.Iface)
		if err != nil {
			return fmt.Errorf("ethtool get features %s: %w", h.Iface, err)
		}
		for name, active := range now {
			if offloadOff(name) {
				out[name] = active
			}
		}
		return nil
	})
	return out, err
}
