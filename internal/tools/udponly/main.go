// Command udponly is the smallest program of kind udp: it imports the
// root package and kinds/udp only, so that TestUDPOnlyLinksOneKind can
// check what such a program links (no AF_XDP, eBPF, netlink or userspace
// TCP code) and how large it is. It echoes datagrams on a port until
// interrupted:
//
//	go run ./internal/tools/udponly -local 127.0.0.1 -port 5000
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"

	"github.com/dgramio/dgramio"
	_ "github.com/dgramio/dgramio/kinds/udp"
)

func main() {
	local := flag.String("local", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 5000, "UDP port")
	flag.Parse()
	addr, err := netip.ParseAddr(*local)
	if err != nil {
		fmt.Fprintln(os.Stderr, "udponly:", err)
		os.Exit(2)
	}
	b, err := dgramio.New(dgramio.Config{Kind: dgramio.KindUDP, Role: dgramio.RoleServer, LocalIP: addr, Port: uint16(*port), Poll: dgramio.PollYield})
	if err != nil {
		fmt.Fprintln(os.Stderr, "udponly:", err)
		os.Exit(1)
	}
	defer b.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	pkts := make([]dgramio.Packet, 64)
	for ctx.Err() == nil {
		n, err := b.Rx(pkts)
		if err != nil {
			fmt.Fprintln(os.Stderr, "udponly:", err)
			os.Exit(1)
		}
		for _, p := range pkts[:n] {
			b.QueueTo(p.Data, p.From)
		}
		if err := b.Flush(); err != nil {
			fmt.Fprintln(os.Stderr, "udponly:", err)
			os.Exit(1)
		}
		if n == 0 {
			if err := b.Wait(ctx); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "udponly:", err)
				os.Exit(1)
			}
		}
	}
}
