package udp

import (
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/sock/socktest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
)

// BenchmarkReplyPingPong is socktest.ReplyPingPong on udp backends: one
// datagram's round trip in each family, with and without reply sockets.
// It is the dgramio-level counterpart of internal/sock's
// BenchmarkFamilyPingPong.
func BenchmarkReplyPingPong(b *testing.B) {
	p := hosttest.New(b, testhost.Options{IPv6: true})
	socktest.ReplyPingPong(b, p, "udp", 1000, func(h *testhost.Host, cfg dgramio.Config) (dgramio.Backend, error) {
		var be dgramio.Backend
		err := h.Do(func() (err error) { be, err = New(cfg); return err })
		return be, err
	})
}
