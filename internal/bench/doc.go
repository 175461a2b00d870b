// Package bench holds the measuring logic shared by cmd/echo, cmd/loadgen
// and cmd/netbench: the message format, the open-loop load generator, the
// echo loop, the latency histogram, the JSON types of a result, the
// saturation rule and the conservation check.
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
// A cell is saturated when fewer than 99% of the offered messages came back
// or more than 0.1% of those sent were lost; its latency is still recorded.
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
// Each queue's share stays in the result and the cell (PerQueue), and the
// report shows it beside the totals, with a scaling table (ComputeScaling)
// when the run had several numbers of queues.
//
// # Conservation
//
// Every message sent must be either received or counted as lost by some
// layer of either end (core.Stats.Lost and the tools' own drops), computed
// from counters that are not derived from sent minus received. What does not
// add up is reported as unaccounted.
//
// The package depends only on internal/core (the Backend interface), so it
// is tested against the in-memory pair of package benchtest.
package bench
