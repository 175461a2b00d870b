//go:build linux

package wire_test

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/dgramio/dgramio/internal/wire"
)

// A UDP datagram from A to B over a wire that delays each frame by 5 ms;
// the sockets are made inside each host's namespace with Do, as on a
// testhost.Pair. In a test, use wire.NewT(t, opts), which logs the seed.
// Needs root, so it has no Output line and only compiles.
func Example() {
	w, err := wire.New(wire.Options{Delay: 5 * time.Millisecond, Loss: 0.01, Seed: 42})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()

	var rx, tx *net.UDPConn
	_ = w.B.Do(func() (err error) {
		rx, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(w.B.Addr, 5000)))
		return err
	})
	_ = w.A.Do(func() (err error) {
		tx, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(w.B.Addr, 5000)))
		return err
	})
	defer rx.Close()
	defer tx.Close()
	tx.Write([]byte("hello"))
	rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, _ := rx.Read(buf)
	fmt.Println(string(buf[:n]))
	fmt.Println("A→B:", w.Stats(wire.AtoB))
}
