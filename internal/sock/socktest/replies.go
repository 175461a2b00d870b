package socktest

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
)

// ReplyServe starts an echo server of the kind under test with cfg (a
// server's Role, LocalIP and Port set) where the test's server lives, and
// returns a function giving its Stats while it runs and one that stops it
// and returns its final Stats.
type ReplyServe func(t *testing.T, cfg dgramio.Config) (live, stop func() dgramio.Stats)

// ReplyDial opens a client of the kind under test, polled by the calling
// goroutine, where the test's clients live.
type ReplyDial func(cfg dgramio.Config) (dgramio.Backend, error)

// ReplySockets checks a udp or uring server's connected reply sockets
// (sock.Replies, Config.ReplySockets) between srvIP (the server's
// address) and cliIP, the counters in layer: a peer that keeps sending
// gets a socket of its own, which receives its datagrams and sends its
// answers, with nothing lost at the switch; the socket is closed once
// idle, without loss, and the peer is served by the server socket, then
// by a new reply socket; peers beyond the table's size are all answered
// from the server socket; ReplySockets -1 makes none. idle is
// sock.ReplyIdle, which it shortens for the test (socktest cannot import
// sock, whose tests import it).
func ReplySockets(t *testing.T, srvIP, cliIP netip.Addr, port uint16, layer string, idle *time.Duration, serve ReplyServe, dial ReplyDial) {
	was := *idle
	*idle = 300 * time.Millisecond
	t.Cleanup(func() { *idle = was })
	size := func(i int) int { return 4 + i%200 }
	counter := func(st dgramio.Stats, name string) uint64 {
		v, _ := st.Counter(layer, name)
		return v
	}
	client := func(t *testing.T, p uint16) dgramio.Backend {
		c, err := dial(dgramio.Config{LocalIP: cliIP, Dests: []netip.AddrPort{netip.AddrPortFrom(srvIP, p)}, Port: p})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	exchange := func(t *testing.T, c dgramio.Backend, n int, live func() dgramio.Stats) {
		t.Helper()
		if err := Exchange(c, n, 32, size); err != nil {
			t.Fatalf("%v\nclient %+v\nserver %+v", err, c.Stats(), live())
		}
	}

	t.Run("HotPeerThenIdle", func(t *testing.T) {
		live, stop := serve(t, dgramio.Config{Role: dgramio.RoleServer, LocalIP: srvIP, Port: port})
		c := client(t, port)
		exchange(t, c, 3000, live)
		st := live()
		if counter(st, "reply_opened") != 1 || counter(st, "reply_sockets") != 1 {
			t.Fatalf("after 3000 datagrams of one peer: reply_opened %d, reply_sockets %d, want 1 and 1\n%+v",
				counter(st, "reply_opened"), counter(st, "reply_sockets"), st)
		}
		// Past the first few, its datagrams reach the connected socket,
		// and the answers leave from it.
		if rx, tx := counter(st, "reply_rx"), counter(st, "reply_tx"); rx < 2900 || tx < 2900 {
			t.Fatalf("reply_rx %d, reply_tx %d of 3000: the peer's datagrams did not go through its socket\n%+v", rx, tx, st)
		}
		// Idle: the sweep closes it; nothing was left in it.
		deadline := time.Now().Add(10 * time.Second)
		for counter(live(), "reply_closed") == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the idle reply socket was not closed: %+v", live())
			}
			time.Sleep(20 * time.Millisecond)
		}
		st = live()
		if counter(st, "reply_sockets") != 0 || counter(st, "reply_socket_drops") != 0 {
			t.Fatalf("after the sweep: reply_sockets %d, reply_socket_drops %d, want 0 and 0",
				counter(st, "reply_sockets"), counter(st, "reply_socket_drops"))
		}
		// The peer comes back: served by the server socket, then by a
		// new socket of its own.
		exchange(t, c, 3000, live)
		st = stop()
		if counter(st, "reply_opened") != 2 {
			t.Errorf("the peer back: reply_opened %d, want 2", counter(st, "reply_opened"))
		}
		cs := c.Stats()
		if st.RxDelivered != 6000 || st.TxSent != 6000 || st.Lost() != 0 || cs.Lost() != 0 {
			t.Errorf("server received %d, sent %d, lost %d; client lost %d; want 6000, 6000, 0, 0\n%+v",
				st.RxDelivered, st.TxSent, st.Lost(), cs.Lost(), st)
		}
		if counter(st, "reply_closed") != 2 || counter(st, "reply_sockets") != 0 {
			t.Errorf("after Close: reply_closed %d, reply_sockets %d, want 2 and 0", counter(st, "reply_closed"), counter(st, "reply_sockets"))
		}
	})

	t.Run("MorePeersThanSockets", func(t *testing.T) {
		// More than 4 sockets open: kind udp reads them through epoll.
		const peers, each, most = 12, 300, 6
		*idle = time.Second // none idle while the peers take turns
		defer func() { *idle = 300 * time.Millisecond }()
		live, stop := serve(t, dgramio.Config{Role: dgramio.RoleServer, LocalIP: srvIP, Port: port + 1, ReplySockets: most})
		for i := range peers {
			exchange(t, client(t, port+1), each, live)
			if n := counter(live(), "reply_sockets"); n > most {
				t.Fatalf("peer %d: %d reply sockets, at most %d allowed", i, n, most)
			}
		}
		// All idle at once: closed together (kind udp: through epoll).
		deadline := time.Now().Add(10 * time.Second)
		for counter(live(), "reply_sockets") != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("idle reply sockets not closed: %s", ReplyCounters(live(), layer))
			}
			time.Sleep(20 * time.Millisecond)
		}
		st := stop()
		if d := counter(st, "reply_socket_drops"); d != 0 {
			t.Errorf("reply_socket_drops %d, want 0", d)
		}
		if counter(st, "reply_full") == 0 || counter(st, "reply_opened") < most {
			t.Errorf("reply_full %d, reply_opened %d: want the table filled, then hot peers left on the server socket",
				counter(st, "reply_full"), counter(st, "reply_opened"))
		}
		if rx := counter(st, "reply_rx"); rx < most*(each-50) {
			t.Errorf("reply_rx %d: the %d peers with a socket were not served through it", rx, most)
		}
		if st.RxDelivered != peers*each || st.TxSent != peers*each || st.Lost() != 0 {
			t.Errorf("server received %d, sent %d, lost %d; want %d, %d, 0", st.RxDelivered, st.TxSent, st.Lost(), peers*each, peers*each)
		}
	})

	t.Run("Off", func(t *testing.T) {
		live, stop := serve(t, dgramio.Config{Role: dgramio.RoleServer, LocalIP: srvIP, Port: port + 2, ReplySockets: -1})
		exchange(t, client(t, port+2), 1000, live)
		st := stop()
		if _, ok := st.Counter(layer, "reply_opened"); ok {
			t.Errorf("ReplySockets -1: reply counters present: %+v", st)
		}
		if st.RxDelivered != 1000 || st.Lost() != 0 {
			t.Errorf("server received %d, lost %d", st.RxDelivered, st.Lost())
		}
	})
}

// ReplyCounters formats the reply counters of st, for logs.
func ReplyCounters(st dgramio.Stats, layer string) string {
	var s string
	for _, c := range st.Layers {
		if c.Layer == layer && len(c.Name) > 6 && c.Name[:6] == "reply_" {
			s += fmt.Sprintf("%s=%d ", c.Name, c.Value)
		}
	}
	return s
}
