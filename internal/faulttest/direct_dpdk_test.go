//go:build dpdk

package faulttest

import (
	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/core"
)

// newBackend is dgramio.New.
func newBackend(cfg core.Config) (core.Backend, error) { return dgramio.New(cfg) }
