package metrics_test

import (
	"encoding/json"
	"fmt"
	"github.com/dgramio/dgramio/metrics"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	_ "github.com/dgramio/dgramio/kinds"
)

var expvarRuns atomic.Int64

// A real backend's counters through both exports: a datagram over
// loopback shows up in the Prometheus text and in the expvar JSON.
func TestMetricsOfABackend(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	srv, err := dgramio.New(dgramio.Config{Kind: "udp", Role: dgramio.RoleServer, LocalIP: lo, Port: 47391})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cli, err := dgramio.New(dgramio.Config{Kind: "udp", Dests: []netip.AddrPort{netip.AddrPortFrom(lo, 47391)}, Port: 47391})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if cli.Queue([]byte("hello")) != nil || cli.Flush() != nil {
		t.Fatal("send failed")
	}
	pkts := make([]dgramio.Packet, 4)
	for deadline := time.Now().Add(20 * time.Second); ; {
		n, err := srv.Rx(pkts)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the datagram did not arrive")
		}
		time.Sleep(time.Millisecond)
	}

	var b strings.Builder
	if err := metrics.WritePrometheus(&b, srv.Stats(), "queue", "0"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# TYPE dgramio_rx_delivered_total counter\n",
		`dgramio_rx_delivered_total{kind="udp",queue="0"} 1` + "\n",
		`dgramio_rx_bytes_total{kind="udp",queue="0"} 5` + "\n",
		`dgramio_layer_total{kind="udp",queue="0",layer="socket",name="drops",loss="true"} 0` + "\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("exposition lacks %q:\n%s", want, b.String())
		}
	}

	// expvar cannot unpublish: each run of the test (-count) takes a name
	// of its own.
	name := fmt.Sprintf("dgramio_test_udp_server_%d", expvarRuns.Add(1))
	v, err := metrics.PublishExpvar(name, srv.Stats)
	if err != nil {
		t.Fatal(err)
	}
	var s dgramio.Stats
	if err := json.Unmarshal([]byte(v.String()), &s); err != nil {
		t.Fatal(err)
	}
	if s.Kind != "udp" || s.RxDelivered != 1 {
		t.Fatalf("expvar: %+v", s)
	}
	if _, err := metrics.PublishExpvar(name, srv.Stats); err == nil {
		t.Fatal("a name published twice")
	}
}
