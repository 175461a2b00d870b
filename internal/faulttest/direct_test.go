//go:build !dpdk

package faulttest

import (
	"os"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/core"
	kuring "github.com/dgramio/dgramio/kernel/uring"
	"github.com/dgramio/dgramio/tcp"
)

// directEnv, set to 1, lets the tests open a kind that dgramio.New does not
// reach yet through its package's constructor, to try a backend before it
// is wired into the root package. Without it such a kind skips (fails in
// CI), as it should.
const directEnv = "DGRAMIO_FAULTTEST_DIRECT"

// direct are the constructors of kinds that may not be wired yet.
var direct = map[string]func(core.Config) (core.Backend, error){
	core.KindURing:  kuring.New,
	core.KindTCPXDP: tcp.NewXDP,
}

// newBackend is dgramio.New, or with DGRAMIO_FAULTTEST_DIRECT=1 the
// package's constructor of a kind dgramio.New does not reach yet.
func newBackend(cfg core.Config) (core.Backend, error) {
	b, err := dgramio.New(cfg)
	if err != nil && notWired(cfg.Kind, err) && os.Getenv(directEnv) == "1" {
		if open, ok := direct[cfg.Kind]; ok {
			return open(cfg)
		}
	}
	return b, err
}
