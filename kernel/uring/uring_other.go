//go:build !(linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64))

package uring

import "github.com/dgramio/dgramio/internal/core"

// New reports that kind uring is not available: it needs io_uring, which
// only Linux has, and package kernel/iouring supports 64-bit platforms
// only.
func New(cfg core.Config) (core.Backend, error) {
	return nil, core.NotSupported("kind uring", "", "io_uring needs 64-bit Linux; use kind udp", nil)
}

// NewGroup reports that kind uring is not available, as New does.
func NewGroup(cfg core.Config) (core.QueueGroup, error) {
	return nil, core.NotSupported("kind uring", "", "io_uring needs 64-bit Linux; use kind udp", nil)
}
