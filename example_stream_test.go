package dgramio_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/dgramio/dgramio"
	_ "github.com/dgramio/dgramio/kinds"
)

// A stream server's poll loop in raw framing, with each connection's
// life as events: it answers every line a client sends with the line in
// upper case and closes a client that sends "quit". Rx and Flush fail
// only when the backend does, so the loop may return on any error; a
// client that leaves is an event (here, counted), never an error.
func ExampleConns() {
	b, err := dgramio.New(dgramio.Config{Kind: "tcp", Role: dgramio.RoleServer,
		LocalIP: netip.MustParseAddr("127.0.0.1"), Port: 5099,
		Framing: dgramio.FramingRaw, Events: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()
	done := make(chan struct{})
	go client("127.0.0.1:5099", done) // below: sends two lines, reads, leaves
	conns := b.(dgramio.Conns)
	held := map[netip.AddrPort][]byte{} // a line cut by a packet's end
	pkts := make([]dgramio.Packet, 32)
	ended := 0
	for ended < 1 {
		n, err := b.Rx(pkts)
		if err != nil {
			fmt.Println(err) // the backend itself failed
			return
		}
		for _, p := range pkts[:n] {
			switch p.Event {
			case dgramio.EventData:
				buf := append(held[p.From], p.Data...) // Data is valid until the next Rx
				for {
					line, rest, ok := bytes.Cut(buf, []byte("\n"))
					if !ok {
						break
					}
					if string(line) == "quit" {
						conns.CloseConn(p.From) // FIN after what was queued
					} else {
						b.QueueTo(append(bytes.ToUpper(line), '\n'), p.From)
					}
					buf = rest
				}
				held[p.From] = append(buf[:0:0], buf...)
			case dgramio.EventOpened:
				fmt.Println("opened:", p.From.Addr())
			case dgramio.EventPeerFIN, dgramio.EventReset:
				// The client finished or reset: EventEnded follows.
			case dgramio.EventEnded:
				delete(held, p.From)
				ended++
			}
		}
		if err := b.Flush(); err != nil {
			fmt.Println(err)
			return
		}
		if n == 0 {
			time.Sleep(100 * time.Microsecond) // or b.Wait(ctx)
		}
	}
	<-done
	fmt.Println("ended:", ended, "connection")
	// Output:
	// opened: 127.0.0.1
	// HELLO
	// WORLD
	// ended: 1 connection
}

// client sends two lines and "quit" in pieces, prints what comes back
// until the server's FIN, and closes.
func client(addr string, done chan<- struct{}) {
	defer close(done)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	for _, piece := range []string{"hel", "lo\nwor", "ld\nqu", "it\n"} {
		c.Write([]byte(piece))
		time.Sleep(time.Millisecond)
	}
	out, _ := io.ReadAll(c)
	fmt.Print(string(out))
}
