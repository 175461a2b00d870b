// Package load is the open-loop load engine of cmd/dgramio-echo, cmd/dgramio-loadgen and
// cmd/netbench: the message format, the load generator's loop (Load), the
// echo loop (Echo), the latency histogram, and the results both return.
// It depends only on internal/core (the Backend interface), so it is
// tested against the in-memory pair of package benchtest and raw
// datagram backends over frameio/memio.
//
// # Method
//
// The load generator sends messages at a fixed rate without waiting for
// answers (open loop). Each message carries a sequence number and the time
// it was scheduled to leave, in nanoseconds of the generator's monotonic
// clock; the round-trip time is measured from that scheduled time, so a
// sender that falls behind shows up as latency instead of being hidden (no
// coordinated omission). The echo reflects every message back on the same
// kind. Messages scheduled during the warm-up are sent and accounted for but
// not measured.
//
// One loop both sends and receives, and shares its CPU between the two:
// each round sends at most SendBurst batches of what is due, then reads
// until the backend has no full batch for it or RxBurst reads were made. A
// sender that cannot keep to its schedule sends the rest in the next
// rounds, late (LoadResult.Late, and its lag), instead of starving its own
// receive side, whose socket buffer or RX ring would overflow.
//
// # Several queues
//
// A load generator with N queues runs one Load per queue, each on its own
// backend (a flow of its own) and goroutine, sharing one schedule
// (LoadOptions.Queue, Queues, Start): message g goes out from queue
// g mod N, so the queues offer Rate/N each, interleaved, and an answer
// that reaches another queue than its message's is recognized and counted
// (other_queue). MergeLoads merges their histograms, so the percentiles and
// the achieved rate are the run's; MergeEchoes adds up an echo's queues.
// Each queue's share stays in the result (PerQueue).
package load
