package tcp

import (
	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/sock"
)

// NewGroup opens kind tcp with cfg.Queues queues (see sock.Group). A
// server listens with one listener per queue on Config.Port, an
// SO_REUSEPORT group opened at once in queue order and steered by CPU: a
// connection whose SYN the kernel receives on CPU Config.CPUs[q] is
// accepted by queue q (a classic BPF program, sock.SteerByCPU; without
// CPUs, the kernel's flow hash picks). The connection's later segments are
// the kernel's business (its socket is found by its 4-tuple on any CPU);
// queue q's poller sends and receives on it. A client's queue q connects
// to every destination from sockets of its own (ephemeral source ports,
// or LocalPort+q), so each queue's connections are flows of their own.
// Call NewGroup in the network namespace of the sockets; OpenQueue(q) on
// the goroutine that will poll queue q (pinned to CPUs[q] when set).
func NewGroup(cfg dgramio.Config) (dgramio.QueueGroup, error) {
	return sock.NewGroup(cfg, dgramio.KindTCP, openQueue)
}
