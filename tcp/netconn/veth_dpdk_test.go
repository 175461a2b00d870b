//go:build dpdk

package netconn

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// TestHTTPServerOverDPDK: the same unchanged net/http server over tcp-dpdk
// (a net_af_xdp vdev on A's veth end), through the same Service code as
// tcp-xdp; a kernel http.Client in B gets the answers. DPDK cannot sleep on
// the queue, so the idle poller naps.
func TestHTTPServerOverDPDK(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	addr := peertest.Addr(p.A, 3)
	cfg := dgramio.Config{Kind: dgramio.KindTCPDPDK, LocalIP: addr, Port: 8080}
	cfg.DPDK.VDev = fmt.Sprintf("net_af_xdp_netconn0,iface=%s", p.A.Iface)
	s := openVeth(t, p.A, cfg, Options{})
	ln := listen(t, s, 8080)
	srv := &http.Server{Handler: hello}
	go srv.Serve(ln)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: peertest.Dialer(p.B)}}
	defer client.CloseIdleConnections()
	for i := 0; i < 10; i++ {
		resp, err := client.Get(fmt.Sprintf("http://%s:8080/d%d", addr, i))
		if err != nil {
			t.Fatalf("GET %d: %v (stats %+v)", i, err, s.Stats())
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("hello /d%d from %s:", i, p.B.Addr); !strings.HasPrefix(string(body), want) {
			t.Fatalf("GET %d: %q", i, body)
		}
	}
	st := s.Stats()
	t.Logf("mode %q; naps %d", st.Mode, counter(st, "netconn", "naps"))
	if !strings.Contains(st.Mode, "dpdk") {
		t.Errorf("mode %q: not DPDK", st.Mode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	peertest.CloseClean(t, s, p.A)
}
