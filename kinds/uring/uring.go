// Package uring registers kind "uring" with dgramio.New and dgramio.NewGroup:
// the kernel's UDP socket through io_uring (multishot receive into a buffer ring).
// Import it for its effect:
//
//	import _ "github.com/dgramio/dgramio/kinds/uring"
package uring

import (
	"github.com/dgramio/dgramio"
	kuring "github.com/dgramio/dgramio/internal/kernel/uring"
)

func init() {
	dgramio.Register(dgramio.KindURing, dgramio.Driver{Open: kuring.New, OpenGroup: kuring.NewGroup})
}
