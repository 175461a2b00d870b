package socktest

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testutil"
)

// ReplyOpen opens a backend of the kind under test with cfg in h's
// network namespace.
type ReplyOpen func(h *testhost.Host, cfg dgramio.Config) (dgramio.Backend, error)

// ReplyPingPong measures one datagram's round trip through two backends
// of a kind (open; layer names its counters) over p's veth pair, driven
// from one goroutine (client Queue and Flush, server Rx, QueueTo and
// Flush, client Rx), in each family, with the server's reply sockets on
// (the default) and off (ReplySockets -1). One op is a round trip in each
// of the four variants in turn, so that the host's slow and fast moments
// fall on all alike; the metrics are each variant's median
// ("v6-reply-p50-ns" …). An Rx that finds nothing is tried again up to
// spins times: on veth a datagram is queued by the time its sender's
// system call returns, but a ring's completion may follow it.
func ReplyPingPong(b *testing.B, p *testhost.Pair, layer string, spins int, open ReplyOpen) {
	type variant struct {
		name     string
		cli, srv dgramio.Backend
		ns       []int64
	}
	var vs []*variant
	port := uint16(5330)
	for _, reply := range []bool{false, true} {
		for _, v6 := range []bool{false, true} {
			a, s, name := p.A.Addr, p.B.Addr, "v4"
			if v6 {
				a, s, name = p.A.Addr6, p.B.Addr6, "v6"
			}
			cfg := dgramio.Config{Role: dgramio.RoleServer, LocalIP: s, Port: port, ReplySockets: -1}
			name += "-noreply"
			if reply {
				cfg.ReplySockets = 0
				name = name[:2] + "-reply"
			}
			srv, err := open(p.B, cfg)
			if err != nil {
				testutil.SkipIfNotSupported(b, err)
				b.Fatal(err)
			}
			defer srv.Close()
			cli, err := open(p.A, dgramio.Config{LocalIP: a, Dests: []netip.AddrPort{netip.AddrPortFrom(s, port)}})
			if err != nil {
				b.Fatal(err)
			}
			defer cli.Close()
			vs = append(vs, &variant{name: name, cli: cli, srv: srv})
			port++
		}
	}
	payload := make([]byte, 64)
	pkts := make([]dgramio.Packet, 32)
	rx := func(be dgramio.Backend) dgramio.Packet {
		for tries := 0; ; tries++ {
			n, err := be.Rx(pkts)
			if err != nil {
				b.Fatal(err)
			}
			if n == 1 {
				return pkts[0]
			}
			if n > 1 || tries > spins {
				b.Fatalf("Rx: %d datagrams after %d tries, want 1", n, tries)
			}
		}
	}
	trip := func(v *variant) {
		if err := v.cli.Queue(payload); err != nil {
			b.Fatal(err)
		}
		v.cli.Flush()
		pk := rx(v.srv)
		if err := v.srv.QueueTo(pk.Data, pk.From); err != nil {
			b.Fatal(err)
		}
		v.srv.Flush()
		rx(v.cli)
	}
	for _, v := range vs {
		for range 100 { // the peer becomes hot
			trip(v)
		}
	}
	for b.Loop() {
		for _, v := range vs {
			t0 := time.Now()
			trip(v)
			v.ns = append(v.ns, time.Since(t0).Nanoseconds())
		}
	}
	for _, v := range vs {
		slices.Sort(v.ns)
		b.ReportMetric(float64(v.ns[len(v.ns)/2]), v.name+"-p50-ns")
		if st := v.srv.Stats(); v.name[3:] == "reply" {
			if n, _ := st.Counter(layer, "reply_opened"); n != 1 {
				b.Errorf("%s: reply_opened %d, want 1", v.name, n)
			}
		}
	}
}
