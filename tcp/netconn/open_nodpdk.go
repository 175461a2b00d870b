//go:build !dpdk

package netconn

import (
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/tcp"
)

// OpenDPDK is the Opener of kind tcp-dpdk. This build has no DPDK (build
// tag dpdk): it returns an error matching core.ErrNotSupported.
func OpenDPDK(cfg core.Config) (frameio.FrameIO, tcp.Options, error) {
	return nil, tcp.Options{}, core.NotSupported("kind "+core.KindTCPDPDK, "",
		"this binary was built without DPDK: install libdpdk-dev (make deps) and build with -tags dpdk", nil)
}
