package testutil

import "net"

// EchoUDP sends every datagram c receives back to its sender, on a
// goroutine of its own, until c is closed (the caller closes it). A
// datagram of more than 64 KiB is cut to 64 KiB.
func EchoUDP(c *net.UDPConn) {
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
}
