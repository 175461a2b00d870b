package dgramio

import (
	"strings"
)

// QueueGroup is what the queues of one kind opened with Config.Queues > 1
// share, and how each queue's backend is opened: a kind's NewGroup builds
// it (the SO_REUSEPORT sockets and their steering, the attached XDP program
// and its socket map, the DPDK port with its queue pairs), and
// dgramio.Group drives it. Everything else (sockets, rings, stacks,
// counters) belongs to one queue and is touched by that queue's poller
// only.
type QueueGroup interface {
	// OpenQueue opens queue q (0 <= q < Config.Queues) on the calling
	// goroutine, which becomes the queue's poller: it pins it to
	// Config.CPUs[q] when set (cpu.Claim), as New does with CPUs[0]. The
	// Backend has the usual single-goroutine contract. Each queue is
	// opened once.
	OpenQueue(q int) (Backend, error)
	// Mode says in a few words how the group spreads flows over its queues
	// ("reuseport by cpu", "xdp rx_queue_index"), for Stats.Mode.
	Mode() string
	// BaseMode is the Stats.Mode of queue 0 without the note that places
	// it in the group ("queue 0 of 4, ..."): what the queues run, for the
	// group's Stats.Mode. It is "" until queue 0 is opened.
	BaseMode() string
	// AppendCounters appends the counters of the shared state (an XDP
	// program's, counted once for all queues) to dst and returns it.
	AppendCounters(dst []Counter) []Counter
	// Close releases the shared state. Call it after every queue's
	// Backend is closed; queues never opened are released here.
	Close() error
}

// SumStats adds up the per-queue counters of a group: every message
// counter, Syscalls and the connection counts are summed; layer counters
// with the same Layer and Name are summed into one (those whose name ends
// in "_max" keep the largest), in the order they first appear; socket
// buffer sizes keep the largest. Kind and Mode are the first queue's.
func SumStats(qs []Stats) Stats {
	var s Stats
	if len(qs) == 0 {
		return s
	}
	s.Kind, s.Mode = qs[0].Kind, qs[0].Mode
	index := make(map[[2]string]int)
	for _, q := range qs {
		s.TxQueued += q.TxQueued
		s.TxBackpressure += q.TxBackpressure
		s.TxOversize += q.TxOversize
		s.TxSent += q.TxSent
		s.TxDropped += q.TxDropped
		s.TxBytes += q.TxBytes
		s.RxDelivered += q.RxDelivered
		s.RxBytes += q.RxBytes
		s.RxTruncated += q.RxTruncated
		s.RxBadChecksum += q.RxBadChecksum
		s.RxMalformed += q.RxMalformed
		s.RxFiltered += q.RxFiltered
		s.Syscalls += q.Syscalls
		s.Conns += q.Conns
		s.Accepts += q.Accepts
		s.Resets += q.Resets
		s.PeerCloses += q.PeerCloses
		s.SockRcvBuf = max(s.SockRcvBuf, q.SockRcvBuf)
		s.SockSndBuf = max(s.SockSndBuf, q.SockSndBuf)
		for _, c := range q.Layers {
			k := [2]string{c.Layer, c.Name}
			i, ok := index[k]
			if !ok {
				index[k] = len(s.Layers)
				s.Layers = append(s.Layers, c)
				continue
			}
			if strings.HasSuffix(c.Name, "_max") {
				s.Layers[i].Value = max(s.Layers[i].Value, c.Value)
			} else {
				s.Layers[i].Value += c.Value
			}
			s.Layers[i].Loss = s.Layers[i].Loss || c.Loss
			s.Layers[i].Gauge = s.Layers[i].Gauge || c.Gauge
		}
	}
	return s
}
