package dgramio

// Stats are a backend's counters. Message counters count one per
// destination: a message queued for three receivers counts three. Every
// message that was refused or lost is in exactly one counter, so that
// sent = received + the losses that each layer counted.
type Stats struct {
	// Kind is the backend's kind.
	Kind Kind `json:"kind"`
	// Mode says how it runs ("xdp driver copy", "uring sqpoll", ...), as
	// the report shows it.
	Mode string `json:"mode"`

	// TxQueued counts messages accepted by Queue and QueueTo.
	TxQueued uint64 `json:"tx_queued"`
	// TxBackpressure counts messages refused by Queue and QueueTo because
	// the slots were full. They were never ours: the caller kept them.
	TxBackpressure uint64 `json:"tx_backpressure"`
	// TxOversize counts messages refused for being larger than MaxDatagram.
	TxOversize uint64 `json:"tx_oversize"`
	// TxSent counts messages handed to the kernel, the ring or the stream.
	TxSent uint64 `json:"tx_sent"`
	// TxDropped counts queued messages that did not leave: send errors, a
	// TX ring that stayed full, a link that was down.
	TxDropped uint64 `json:"tx_dropped"`
	// TxBytes counts payload bytes sent.
	TxBytes uint64 `json:"tx_bytes"`

	// RxDelivered counts messages returned by Rx; RxBytes their bytes.
	RxDelivered uint64 `json:"rx_delivered"`
	RxBytes     uint64 `json:"rx_bytes"`
	// RxTruncated counts datagrams larger than the receive buffer
	// (MSG_TRUNC), dropped and never delivered cut.
	RxTruncated uint64 `json:"rx_truncated"`
	// RxBadChecksum counts frames dropped for a wrong IPv4 or UDP checksum.
	RxBadChecksum uint64 `json:"rx_bad_checksum"`
	// RxMalformed counts frames or records that could not be parsed.
	RxMalformed uint64 `json:"rx_malformed"`
	// RxFiltered counts frames that were not ours (other port, protocol or
	// address): seen and ignored, not a loss of ours.
	RxFiltered uint64 `json:"rx_filtered"`

	// Syscalls counts system calls made on the data path (Queue, Flush, Rx,
	// Wait), so syscalls per message can be compared across kinds.
	Syscalls uint64 `json:"syscalls"`

	// Conns is the number of connections open now (stream kinds). Accepts,
	// Resets and PeerCloses count accepted connections, connections reset
	// and connections closed by the peer.
	Conns      uint64 `json:"conns"`
	Accepts    uint64 `json:"accepts"`
	Resets     uint64 `json:"resets"`
	PeerCloses uint64 `json:"peer_closes"`

	// SockRcvBuf and SockSndBuf are the buffer sizes the kernel granted
	// (socket kinds), as getsockopt reports them.
	SockRcvBuf int `json:"sock_rcv_buf"`
	SockSndBuf int `json:"sock_snd_buf"`

	// Layers holds the counters of the layers below: the kernel's socket
	// drops, XDP ring statistics, netstack's TCP counters, DPDK's port
	// statistics.
	Layers []Counter `json:"layers"`
}

// Counter is one named counter of one layer.
type Counter struct {
	// Layer is where it is counted: "socket", "xsk", "xdp-prog", "netstack",
	// "dpdk", "arp", ...
	Layer string `json:"layer"`
	// Name is the counter's name in that layer ("drops", "rx_ring_full").
	Name string `json:"name"`
	// Value is its value.
	Value uint64 `json:"value"`
	// Loss is true when the counter counts messages (or frames carrying
	// one message each) that were lost on this path; the tools add these up
	// to check that every message is accounted for.
	Loss bool `json:"loss"`
	// Gauge is true for a level rather than a count: a value that goes
	// down as well as up (sends in flight, connections open now) or the
	// largest seen (rtt_us_max). Prometheus exports it as a gauge; adding
	// two of it (queues, intervals) means a total level, not a rate.
	Gauge bool `json:"gauge,omitempty"`
}

// RxDropped is the sum of the receive-side drops of our own layer.
func (s *Stats) RxDropped() uint64 { return s.RxTruncated + s.RxBadChecksum + s.RxMalformed }

// Lost is the sum of every counter that counts a lost message: our own drops
// and the Loss counters of the layers below.
func (s *Stats) Lost() uint64 {
	n := s.TxDropped + s.RxDropped()
	for _, c := range s.Layers {
		if c.Loss {
			n += c.Value
		}
	}
	return n
}

// Counter returns the value of the named layer counter and whether it exists.
func (s *Stats) Counter(layer, name string) (uint64, bool) {
	for _, c := range s.Layers {
		if c.Layer == layer && c.Name == name {
			return c.Value, true
		}
	}
	return 0, false
}
