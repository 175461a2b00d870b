package udp

import (
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/sock"
)

// NewGroup opens kind udp with cfg.Queues queues (see sock.Group): a
// server binds one socket per queue to Config.Port in an SO_REUSEPORT
// group, at once and in queue order, and steers it by CPU: a datagram that
// the kernel receives on CPU Config.CPUs[q] goes to queue q's socket (a
// classic BPF program, sock.SteerByCPU; without CPUs, the kernel's flow
// hash picks). A client opens one socket per queue, each its own flow
// (ephemeral source port, or LocalPort+q). Call NewGroup in the network
// namespace the sockets belong to; OpenQueue(q) on the goroutine that
// will poll queue q, which it pins to CPUs[q] as New pins to CPUs[0].
//
// On a NIC, RSS spreads flows over receive queues and each queue's
// interrupt runs on its own CPU, so a flow stays on one CPU and so on one
// socket. On veth (no interrupts) a frame is received on the CPU that sent
// it: the peer's pollers must be pinned for a flow to stay on one queue.
func NewGroup(cfg dgramio.Config) (dgramio.QueueGroup, error) {
	return sock.NewGroup(cfg, dgramio.KindUDP, openQueue)
}

func openQueue(cfg dgramio.Config, fd int, g sock.Granted, note string) (dgramio.Backend, error) {
	if fd < 0 {
		b, err := New(cfg)
		if err != nil {
			return nil, err
		}
		u := b.(*Backend)
		u.mode += ", " + note
		return u, nil
	}
	th, err := cpu.Claim(cfg.CPUs, false)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	b, err := newBackend(cfg, fd, g, th)
	if err != nil {
		return nil, err
	}
	b.mode += ", " + note
	return b, nil
}
