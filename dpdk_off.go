//go:build !dpdk

package dgramio

import "github.com/dgramio/dgramio/internal/core"

// dpdkOpener reports the DPDK kinds as not supported: this build has no
// DPDK (it needs cgo, libdpdk and the build tag dpdk).
func dpdkOpener(kind string) (openFunc, bool) {
	switch kind {
	case core.KindDPDK, core.KindTCPDPDK:
		return func(core.Config) (core.Backend, error) {
			return nil, core.NotSupported("kind "+kind, "",
				"this binary was built without DPDK: install libdpdk-dev (make deps) and build with -tags dpdk", nil)
		}, true
	}
	return nil, false
}
