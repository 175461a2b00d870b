//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package uring

import (
	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/sock"
)

// NewGroup opens kind uring with cfg.Queues queues, sharing sockets as
// kind udp's group does (see package kernel/udp's NewGroup and sock.Group):
// a server's queues are an SO_REUSEPORT group steered by CPU (Config.CPUs;
// the flow hash without), a client's queues each have a socket of their
// own. Each queue has its own ring, created by OpenQueue(q) on the
// goroutine that polls queue q (SINGLE_ISSUER: only that thread submits),
// which it locks and pins to CPUs[q] when set. With URing.SQPoll every
// queue's ring has its own SQ thread, all on URing.SQCPU, and the sends
// leave from that CPU: on veth, where the peer processes a frame on the
// sender's CPU, the peer then answers every queue on SQCPU's queue.
func NewGroup(cfg dgramio.Config) (dgramio.QueueGroup, error) {
	return sock.NewGroup(cfg, dgramio.KindURing, func(qc dgramio.Config, fd int, g sock.Granted, note string) (dgramio.Backend, error) {
		b, err := openQueue(qc, fd, g, note)
		if err != nil {
			return nil, err
		}
		return b, nil
	})
}
