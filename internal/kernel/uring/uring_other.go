//go:build !(linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64))

package uring

import "github.com/dgramio/dgramio"

// New reports that kind uring is not available: it needs io_uring, which
// only Linux has, and package kernel/iouring supports 64-bit platforms
// only.
func New(cfg dgramio.Config) (dgramio.Backend, error) {
	return nil, dgramio.NotSupported("kind uring", "", "io_uring needs 64-bit Linux; use kind udp", nil)
}

// NewGroup reports that kind uring is not available, as New does.
func NewGroup(cfg dgramio.Config) (dgramio.QueueGroup, error) {
	return nil, dgramio.NotSupported("kind uring", "", "io_uring needs 64-bit Linux; use kind udp", nil)
}
