package socktest

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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

// ReplyDo runs fn where the test's clients live (testhost.Host.Do), for
// plain sockets.
type ReplyDo func(fn func() error) error

// ReplySockets checks a udp or uring server's connected reply sockets
// (sock.Replies, Config.ReplySockets) between srvIP (the server's
// address) and cliIP, the counters in layer: a peer that keeps sending
// gets a socket of its own, which receives its datagrams and sends its
// answers, with nothing lost at the switch; the socket is closed once
// idle, without loss, and the peer is served by the server socket, then
// by a new reply socket; peers beyond the table's size are all answered
// from the server socket, 2000 of them (plain sockets made with do)
// against the default table of 64; ReplySockets -1 makes none. idle is
// sock.ReplyIdle, which it shortens for the test (socktest cannot import
// sock, whose tests import it).
func ReplySockets(t *testing.T, srvIP, cliIP netip.Addr, port uint16, layer string, idle *time.Duration, serve ReplyServe, dial ReplyDial, do ReplyDo) {
	// Long enough that no socket idles out while its peer takes turns
	// with the test's others on a loaded host.
	was := *idle
	*idle = time.Second
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
		*idle = 3 * time.Second // none idle while the peers take turns
		defer func() { *idle = time.Second }()
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

	t.Run("ManyPeers", func(t *testing.T) {
		const rounds, peers, each = 4, 500, 10
		live, stop := serve(t, dgramio.Config{Role: dgramio.RoleServer, LocalIP: srvIP, Port: port + 3})
		dst := sockaddrOf(netip.AddrPortFrom(srvIP, port+3))
		for round := range rounds {
			fds := make([]int, peers)
			for i := range fds {
				fds[i] = -1
			}
			defer func() {
				for _, fd := range fds {
					if fd >= 0 {
						unix.Close(fd)
					}
				}
			}()
			if err := do(func() error {
				for i := range fds {
					fd, err := unix.Socket(familyOf(srvIP), unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
					if err != nil {
						return err
					}
					fds[i] = fd
					if err := unix.Bind(fd, sockaddrOf(netip.AddrPortFrom(cliIP, 0))); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			var msg [8]byte
			for k := range each {
				for i, fd := range fds {
					binary.BigEndian.PutUint32(msg[:], uint32(round*peers+i))
					binary.BigEndian.PutUint32(msg[4:], uint32(k))
					if err := unix.Sendto(fd, msg[:], 0, dst); err != nil {
						t.Fatalf("peer %d: sendto: %v", i, err)
					}
				}
			}
			got := make([]int, peers)
			left := peers * each
			deadline := time.Now().Add(20 * time.Second)
			for left > 0 {
				progress := false
				for i, fd := range fds {
					n, _, err := unix.Recvfrom(fd, msg[:], unix.MSG_DONTWAIT)
					if err == unix.EAGAIN {
						continue
					}
					if err != nil || n != 8 || binary.BigEndian.Uint32(msg[:]) != uint32(round*peers+i) || binary.BigEndian.Uint32(msg[4:]) >= each {
						t.Fatalf("peer %d: answer %x (%d bytes, %v)", i, msg[:n], n, err)
					}
					got[i]++
					left--
					progress = true
				}
				if !progress {
					if time.Now().After(deadline) {
						t.Fatalf("round %d: %d answers missing; server %s", round, left, ReplyCounters(live(), layer))
					}
					time.Sleep(time.Millisecond)
				}
			}
			for i, n := range got {
				if n != each {
					t.Fatalf("round %d: peer %d got %d answers, want %d", round, i, n, each)
				}
			}
			if n := counter(live(), "reply_sockets"); n > dgramio.DefaultReplySockets {
				t.Fatalf("%d reply sockets open, at most %d allowed", n, dgramio.DefaultReplySockets)
			}
		}
		st := stop()
		if counter(st, "reply_opened") < dgramio.DefaultReplySockets || counter(st, "reply_full") == 0 {
			t.Errorf("want the table filled and hot peers left on the server socket: %s", ReplyCounters(st, layer))
		}
		if st.RxDelivered != rounds*peers*each || st.TxSent != rounds*peers*each || st.Lost() != 0 {
			t.Errorf("server received %d, sent %d, lost %d; want %d, %d, 0", st.RxDelivered, st.TxSent, st.Lost(), rounds*peers*each, rounds*peers*each)
		}
		t.Logf("server: %s", ReplyCounters(st, layer))
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

func familyOf(ip netip.Addr) int {
	if ip.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

func sockaddrOf(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}
	}
	return &unix.SockaddrInet6{Addr: ap.Addr().As16(), Port: int(ap.Port())}
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
