//go:build linux

package testhost_test

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/dgramio/dgramio/internal/testhost"
)

// A UDP socket in each namespace; the sockets are made inside Do and used
// outside it. Needs root, so it has no Output line and only compiles.
func Example() {
	p, err := testhost.New(testhost.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()

	var rx, tx *net.UDPConn
	_ = p.B.Do(func() (err error) {
		rx, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.B.Addr, 5000)))
		return err
	})
	_ = p.A.Do(func() (err error) {
		tx, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(p.B.Addr, 5000)))
		return err
	})
	defer rx.Close()
	defer tx.Close()
	tx.Write([]byte("hello"))
	buf := make([]byte, 64)
	n, from, _ := rx.ReadFromUDPAddrPort(buf)
	fmt.Println(string(buf[:n]), "from", from.Addr() == p.A.Addr)
}
