package dgramio

import (
	"expvar"
	"io"

	"github.com/dgramio/dgramio/internal/metrics"
)

// MetricSet is one backend's Stats with the labels (name, value pairs:
// "queue", "0") that tell it apart in an exposition of several; see
// WritePrometheusSets.
type MetricSet = metrics.Set

// WritePrometheus writes s in the Prometheus text exposition format
// (version 0.0.4), for a /metrics handler: every counter of Stats as
// dgramio_<name>_total (dgramio_tx_queued_total), levels as gauges
// (dgramio_conns, dgramio_sock_rcv_buf_bytes), Stats.Lost() as
// dgramio_lost_total, the layers' counts as
// dgramio_layer_total{layer="socket",name="drops",loss="true"} (counter),
// the layers' levels (Counter.Gauge: sends in flight, connections open,
// rtt_us_max) as dgramio_layer{...} (gauge), and the mode in dgramio_info. Every sample carries kind and the labels, given as
// name, value pairs (an odd count or an invalid name is an error).
func WritePrometheus(w io.Writer, s Stats, labels ...string) error {
	return metrics.WritePrometheus(w, s, labels...)
}

// WritePrometheusSets writes several backends' counters (one per queue,
// say) in one exposition: each family once, a sample per set.
func WritePrometheusSets(w io.Writer, sets ...MetricSet) error {
	return metrics.Write(w, sets...)
}

// PublishExpvar publishes b's Stats under name in the expvar registry
// (served as JSON at /debug/vars, with the snake-case names the tools
// write: "tx_queued", "layers"): b.Stats() is read at each request, so it
// must stay callable for as long as the process serves it (expvar cannot
// unpublish; a closed backend keeps reporting its last counters where its
// kind allows). A name already published is an error.
func PublishExpvar(name string, b Backend) (expvar.Var, error) {
	return metrics.PublishExpvar(name, b.Stats)
}
