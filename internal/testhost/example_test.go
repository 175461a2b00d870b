//go:build linux

package testhost_test

import (
	"fmt"
	"net"

	"github.com/dgramio/dgramio/internal/testhost"
)

// A UDP socket in each namespace (Host.ListenUDP makes it inside the
// namespace; it is used outside). Needs root, so it has no Output line and
// only compiles.
func Example() {
	p, err := testhost.New(testhost.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()

	rx, err := p.B.ListenUDP(5000)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rx.Close()
	tx, err := p.A.ListenUDP(0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tx.Close()
	tx.WriteToUDPAddrPort([]byte("hello"), rx.LocalAddr().(*net.UDPAddr).AddrPort())
	buf := make([]byte, 64)
	n, from, _ := rx.ReadFromUDPAddrPort(buf)
	fmt.Println(string(buf[:n]), "from", from.Addr() == p.A.Addr)
}
