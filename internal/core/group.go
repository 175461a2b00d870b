package core

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
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
	// AppendCounters appends the counters of the shared state (an XDP
	// program's, counted once for all queues) to dst and returns it.
	AppendCounters(dst []Counter) []Counter
	// Close releases the shared state. Call it after every queue's
	// Backend is closed; queues never opened are released here.
	Close() error
}

// ForQueue returns the Config of queue q of a group: Queues 1, CPUs the one
// CPU of queue q (none when c.CPUs is empty), XDP.QueueID advanced by q,
// and with several queues Pcap (when set) suffixed "-q<q>", so that each
// queue writes files of its own. Ports are left as they are: each kind
// decides what a queue's port is.
func (c Config) ForQueue(q int) Config {
	if c.Pcap != "" && c.Queues > 1 {
		c.Pcap += "-q" + strconv.Itoa(q)
	}
	c.Queues = 1
	if len(c.CPUs) > q {
		c.CPUs = []int{c.CPUs[q]}
	} else {
		c.CPUs = nil
	}
	c.XDP.QueueID += q
	return c
}

// CheckOneQueue is the check of every kind's New: one queue only. Several
// queues are opened through dgramio.NewGroup (a *ConfigError naming
// Queues otherwise).
func CheckOneQueue(c Config) error {
	if c.Queues > 1 {
		return badField("Queues", c.Queues, "New opens one queue; open several with dgramio.NewGroup (one backend per queue, each on its own poller)")
	}
	return nil
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
		}
	}
	return s
}

// QueueSlots keeps QueueGroup's rule that each queue is opened once: which
// queues of a group have been taken, safe for concurrent use.
type QueueSlots struct {
	mu    sync.Mutex
	taken []bool
}

// NewQueueSlots returns the slots of n queues, none taken.
func NewQueueSlots(n int) *QueueSlots { return &QueueSlots{taken: make([]bool, n)} }

// Take marks queue q taken. It returns a *ConfigError naming Queues when
// the group has no queue q, and an error prefixed who when q was taken
// before.
func (s *QueueSlots) Take(who string, q int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q < 0 || q >= len(s.taken) {
		return badField("Queues", len(s.taken), "queue %d does not exist", q)
	}
	if s.taken[q] {
		return fmt.Errorf("%s: queue %d is open already", who, q)
	}
	s.taken[q] = true
	return nil
}

// TakeRest marks every queue not taken yet and returns them in order: the
// queues a group's Close releases because nobody opened them.
func (s *QueueSlots) TakeRest() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rest []int
	for q, t := range s.taken {
		if !t {
			s.taken[q] = true
			rest = append(rest, q)
		}
	}
	return rest
}
