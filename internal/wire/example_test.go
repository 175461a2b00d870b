//go:build linux

package wire_test

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/dgramio/dgramio/internal/wire"
)

// A UDP datagram from A to B over a wire that delays each frame by 5 ms;
// the sockets are made inside each host's namespace (testhost's
// Host.ListenUDP), as on a testhost.Pair. In a test, use wire.NewT(t,
// opts), which logs the seed. Needs root, so it has no Output line and
// only compiles.
func Example() {
	w, err := wire.New(wire.Options{Delay: 5 * time.Millisecond, Loss: 0.01, Seed: 42})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()

	rx, err := w.B.ListenUDP(5000)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rx.Close()
	tx, err := w.A.ListenUDP(0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tx.Close()
	tx.WriteToUDPAddrPort([]byte("hello"), netip.AddrPortFrom(w.B.Addr, 5000))
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, _ := rx.Read(buf)
	fmt.Println(string(buf[:n]))
	fmt.Println("A→B:", w.Stats(wire.AtoB))
}
