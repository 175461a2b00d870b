//go:build linux

package uring

import (
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/sock/socktest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
)

// BenchmarkReplyPingPong is socktest.ReplyPingPong on uring backends
// (both rings on this goroutine's thread), as kind udp's benchmark of the
// same name.
func BenchmarkReplyPingPong(b *testing.B) {
	p := hosttest.New(b, testhost.Options{IPv6: true})
	socktest.ReplyPingPong(b, p, "uring", 100000, func(h *testhost.Host, cfg dgramio.Config) (dgramio.Backend, error) {
		return openIn(h, cfg)
	})
}
