package dgramio_test

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/bench/benchtest"
	"github.com/dgramio/dgramio/internal/sock/socktest"
	"github.com/dgramio/dgramio/internal/tcp"
	"github.com/dgramio/dgramio/internal/testutil"
	"github.com/dgramio/dgramio/internal/udp"
	_ "github.com/dgramio/dgramio/kinds"
)

// sendPair is a client and a server of one kind; to is the address the
// client's QueueTo reaches the server at.
type sendPair struct {
	cli, srv dgramio.Backend
	to       netip.AddrPort
	stream   bool
}

const causeMax = 512 // MaxDatagram of every pair below

var (
	memSrv = netip.MustParseAddr("198.18.0.2")
	memCli = netip.MustParseAddr("198.18.0.1")
	lo     = netip.MustParseAddr("127.0.0.1")
	lo6    = netip.IPv6Loopback()
)

// sendPairs opens, for every kind the default build has, a client with one
// destination and its server: kernel kinds on loopback, raw kinds over an
// in-memory wire (memio), and the fake backend the load generator's tests
// use.
var sendPairs = map[string]func(t *testing.T) sendPair{
	"udp": func(t *testing.T) sendPair {
		return kernelPair(t, dgramio.KindUDP, socktest.FreePort(t, unix.SOCK_DGRAM))
	},
	"uring": func(t *testing.T) sendPair {
		return kernelPair(t, dgramio.KindURing, socktest.FreePort(t, unix.SOCK_DGRAM))
	},
	"tcp": func(t *testing.T) sendPair {
		return kernelPair(t, dgramio.KindTCP, socktest.FreePort(t, unix.SOCK_STREAM))
	},
	// The kernel kinds over IPv6, on ::1.
	"udp-ipv6": func(t *testing.T) sendPair {
		return kernelPairOn(t, dgramio.KindUDP, lo6, socktest.FreePort(t, unix.SOCK_DGRAM))
	},
	"uring-ipv6": func(t *testing.T) sendPair {
		return kernelPairOn(t, dgramio.KindURing, lo6, socktest.FreePort(t, unix.SOCK_DGRAM))
	},
	"tcp-ipv6": func(t *testing.T) sendPair {
		return kernelPairOn(t, dgramio.KindTCP, lo6, socktest.FreePort(t, unix.SOCK_STREAM))
	},
	"xdp": func(t *testing.T) sendPair { return rawPair(t, memCli, memSrv) },
	// The raw datagram kinds (xdp and dpdk are one udp.Raw) over IPv6.
	"xdp-ipv6": func(t *testing.T) sendPair {
		return rawPair(t, netip.MustParseAddr("2001:2::1"), netip.MustParseAddr("2001:2::2"))
	},
	"tcp-xdp": func(t *testing.T) sendPair {
		a, b := memio.NewPair(memio.Options{})
		srv, err := tcp.NewOverFrameIO(dgramio.Config{Kind: dgramio.KindTCPXDP, Role: dgramio.RoleServer, Iface: "memio",
			LocalIP: memSrv, Port: 5000, MaxDatagram: causeMax, TxQueue: 8}, a, tcp.Options{Mode: "memio"})
		if err != nil {
			t.Fatal(err)
		}
		// The client connects in its constructor: the server answers
		// (ARP, SYN) only while it is polled.
		stop, polled := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(polled)
			pkts := make([]dgramio.Packet, 8)
			for {
				select {
				case <-stop:
					return
				default:
				}
				srv.Rx(pkts)
				srv.Flush()
				time.Sleep(100 * time.Microsecond)
			}
		}()
		cli, err := tcp.NewOverFrameIO(dgramio.Config{Kind: dgramio.KindTCPXDP, Iface: "memio", LocalIP: memCli,
			Dests: []netip.AddrPort{netip.AddrPortFrom(memSrv, 5000)}, Port: 5000, MaxDatagram: causeMax, TxQueue: 8}, b, tcp.Options{Mode: "memio"})
		close(stop)
		<-polled
		if err != nil {
			srv.Close()
			t.Fatal(err)
		}
		return sendPair{cli: cli, srv: srv, to: netip.AddrPortFrom(memSrv, 5000), stream: true}
	},
	"fake": func(t *testing.T) sendPair {
		cli, srv := benchtest.NewPair(benchtest.Options{TxQueue: 8, MaxDatagram: causeMax})
		return sendPair{cli: cli, srv: srv, to: benchtest.ServerAddr}
	},
}

func kernelPair(t *testing.T, kind dgramio.Kind, port uint16) sendPair {
	return kernelPairOn(t, kind, lo, port)
}

// kernelPairOn is kernelPair on the loopback address lo.
func kernelPairOn(t *testing.T, kind dgramio.Kind, lo netip.Addr, port uint16) sendPair {
	srv, err := dgramio.New(dgramio.Config{Kind: kind, Role: dgramio.RoleServer, LocalIP: lo, Port: port,
		MaxDatagram: causeMax, TxQueue: 8})
	testutil.SkipIfNotSupported(t, err)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := dgramio.New(dgramio.Config{Kind: kind, LocalIP: lo, Dests: []netip.AddrPort{netip.AddrPortFrom(lo, port)}, Port: port,
		MaxDatagram: causeMax, TxQueue: 8})
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	return sendPair{cli: cli, srv: srv, to: netip.AddrPortFrom(lo, port), stream: kind.IsStream()}
}

// connect polls both ends of a stream pair until each has its connection.
func connect(t *testing.T, p sendPair) {
	pkts := make([]dgramio.Packet, 8)
	for end := time.Now().Add(30 * time.Second); ; {
		p.cli.Flush()
		p.cli.Rx(pkts)
		p.srv.Flush()
		p.srv.Rx(pkts)
		if p.cli.Stats().Conns > 0 && p.srv.Stats().Conns > 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("no connection after 30s; client %+v", p.cli.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

// rawPair is a udp.Raw client at cli and server at srv over memio.
func rawPair(t *testing.T, cliIP, srvIP netip.Addr) sendPair {
	a, b := memio.NewPair(memio.Options{})
	cli, err := udp.NewRaw(dgramio.Config{Kind: dgramio.KindXDP, Iface: "memio", LocalIP: cliIP,
		Dests: []netip.AddrPort{netip.AddrPortFrom(srvIP, 5000)}, Port: 5000, LocalPort: 40000, DstMAC: memio.DefaultMACB,
		MaxDatagram: causeMax, TxQueue: 8}, a, udp.RawOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := udp.NewRaw(dgramio.Config{Kind: dgramio.KindXDP, Iface: "memio", Role: dgramio.RoleServer,
		LocalIP: srvIP, Port: 5000, MaxDatagram: causeMax, TxQueue: 8}, b, udp.RawOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sendPair{cli: cli, srv: srv, to: netip.AddrPortFrom(srvIP, 5000)}
}

// TestQueueCauses checks that Queue and QueueTo return the same sentinel
// for the same cause on every kind, count it in Stats as before, and
// allocate nothing to say so.
func TestQueueCauses(t *testing.T) {
	for _, kind := range []string{"udp", "uring", "xdp", "tcp", "tcp-xdp", "fake"} {
		t.Run(kind, func(t *testing.T) {
			p := sendPairs[kind](t)
			defer p.srv.Close()
			defer p.cli.Close()
			small, big := []byte("x"), make([]byte, causeMax+1)
			nowhere := netip.MustParseAddrPort("[2001:2::1]:9") // every pair here is IPv4
			check := func(what string, want error, f func() error) {
				t.Helper()
				if err := f(); err != want {
					t.Errorf("%s: %v, want %v", what, err, want)
				}
				if a := testing.AllocsPerRun(20, func() { _ = f() }); a != 0 {
					t.Errorf("%s: %.1f allocations a call, want 0", what, a)
				}
			}
			if p.stream {
				// No connection yet: nowhere to send.
				check("server Queue, no connection", dgramio.ErrNoRoute, func() error { return p.srv.Queue(small) })
				connect(t, p)
				check("QueueTo a peer with no connection", dgramio.ErrNoRoute,
					func() error { return p.cli.QueueTo(small, netip.AddrPortFrom(p.to.Addr(), p.to.Port()+1)) })
			}

			check("Queue too large", dgramio.ErrTooLarge, func() error { return p.cli.Queue(big) })
			check("QueueTo too large", dgramio.ErrTooLarge, func() error { return p.cli.QueueTo(big, p.to) })
			if n := p.cli.Stats().TxOversize; n < 2 {
				t.Errorf("TxOversize %d after the refusals, want them counted", n)
			}
			check("QueueTo IPv6", dgramio.ErrNoRoute, func() error { return p.cli.QueueTo(small, nowhere) })
			if !p.stream {
				// A datagram server has no destination of its own.
				check("server Queue", dgramio.ErrNoRoute, func() error { return p.srv.Queue(small) })
			}

			var err error
			for i := 0; i < 1<<16 && err == nil; i++ {
				err = p.cli.Queue(small)
			}
			if err != dgramio.ErrBackPressure {
				t.Fatalf("Queue until refused: %v, want ErrBackPressure", err)
			}
			if p.cli.Stats().TxBackpressure == 0 {
				t.Error("the back-pressure was not counted in TxBackpressure")
			}
			check("Queue full", dgramio.ErrBackPressure, func() error { return p.cli.Queue(small) })
			check("QueueTo full", dgramio.ErrBackPressure, func() error { return p.cli.QueueTo(small, p.to) })

			if err := p.cli.Close(); err != nil {
				t.Fatal(err)
			}
			check("Queue closed", dgramio.ErrClosed, func() error { return p.cli.Queue(small) })
			check("QueueTo closed", dgramio.ErrClosed, func() error { return p.cli.QueueTo(small, p.to) })
			if !errors.Is(p.cli.Queue(small), net.ErrClosed) {
				t.Error("ErrClosed does not match net.ErrClosed")
			}
		})
	}
}

// refusals sums the counters of QueueTo's ErrNoRoute on every kind
// (docs/sending.md).
func refusals(st dgramio.Stats) uint64 {
	var n uint64
	for _, c := range [][2]string{{"udp", "queue_bad_dest"}, {"uring", "queue_bad_dest"}, {"raw", "tx_unresolved"}, {"tcp", "queue_no_conn"}} {
		v, _ := st.Counter(c[0], c[1])
		n += v
	}
	return n
}

// TestQueueToOddAddresses (issue 37): QueueTo, on both ends of every
// kind and over both families of the kernel kinds and the raw datagram
// kinds (xdp and dpdk share udp.Raw, run here over memio), given an address of
// the other family, the zero AddrPort, an unspecified, multicast or
// zoneless link-local address, or port 0, neither panics nor queues: it
// returns ErrNoRoute and counts it in the kind's refusal counter, the same
// everywhere. An IPv4-mapped address is the IPv4 address it maps: the
// mapped form of the peer's address reaches the peer, and on an IPv6
// pair it is of the other family.
func TestQueueToOddAddresses(t *testing.T) {
	for _, kind := range []string{"udp", "uring", "tcp", "xdp", "tcp-xdp", "udp-ipv6", "uring-ipv6", "tcp-ipv6", "xdp-ipv6"} {
		t.Run(kind, func(t *testing.T) {
			p := sendPairs[kind](t)
			defer p.srv.Close()
			defer p.cli.Close()
			if p.stream {
				connect(t, p)
			}
			port := p.to.Port()
			other := netip.AddrPortFrom(netip.MustParseAddr("2001:2::2"), port)
			if p.to.Addr().Is6() {
				other = netip.AddrPortFrom(netip.MustParseAddr("198.18.0.2"), port)
			}
			odd := []netip.AddrPort{
				other,
				netip.AddrPortFrom(netip.AddrFrom16(other.Addr().As16()), port), // mapped: IPv4 on an IPv6 pair, IPv6 never
				{},
				netip.AddrPortFrom(netip.IPv4Unspecified(), port),
				netip.AddrPortFrom(netip.IPv6Unspecified(), port),
				netip.AddrPortFrom(netip.MustParseAddr("224.0.0.1"), port),
				netip.AddrPortFrom(netip.MustParseAddr("ff02::1"), port),
				netip.AddrPortFrom(netip.MustParseAddr("fe80::1"), port),
				netip.AddrPortFrom(p.to.Addr(), 0),
				netip.AddrPortFrom(netip.AddrFrom16(p.to.Addr().As16()), 0), // mapped, port 0
			}
			if p.to.Addr().Is6() {
				odd[1] = netip.AddrPortFrom(netip.AddrFrom16(netip.MustParseAddr("198.18.0.2").As16()), port)
			}
			for _, end := range []struct {
				name string
				b    dgramio.Backend
			}{{"client", p.cli}, {"server", p.srv}} {
				for _, to := range odd {
					before := end.b.Stats()
					var err error
					func() {
						defer func() {
							if r := recover(); r != nil {
								t.Fatalf("%s QueueTo(%v) panicked: %v", end.name, to, r)
							}
						}()
						err = end.b.QueueTo([]byte("x"), to)
					}()
					after := end.b.Stats()
					if err != dgramio.ErrNoRoute {
						t.Errorf("%s QueueTo(%v) = %v, want ErrNoRoute", end.name, to, err)
					}
					if got := refusals(after) - refusals(before); got != 1 || after.TxQueued != before.TxQueued {
						t.Errorf("%s QueueTo(%v): %d refusals counted, queued %d more; want 1 and 0", end.name, to, got, after.TxQueued-before.TxQueued)
					}
				}
			}
			// The mapped form of the server's address reaches it.
			if !p.to.Addr().Is4() {
				return
			}
			mapped := netip.AddrPortFrom(netip.AddrFrom16(p.to.Addr().As16()), port)
			if err := p.cli.QueueTo([]byte("mapped"), mapped); err != nil {
				t.Fatalf("QueueTo(%v) = %v, want it taken as %v", mapped, err, p.to)
			}
			if err := p.cli.Flush(); err != nil {
				t.Fatal(err)
			}
			got := ""
			socktest.Collect(t, p.srv, func() bool { return got != "" }, func(pk dgramio.Packet) {
				got = string(pk.Data)
				if pk.From.Addr().Is4In6() || !pk.From.IsValid() {
					t.Errorf("From %v", pk.From)
				}
			})
			if got != "mapped" {
				t.Errorf("the server received %q", got)
			}
		})
	}
}

// TestClientTwoPorts: a client's destinations may differ in port alone;
// one Queue reaches each (fan-out), on the kernel datagram kinds, the raw
// datagram kinds (their frames carry each destination's port) and kernel
// TCP (a connection to each).
func TestClientTwoPorts(t *testing.T) {
	for _, kind := range []dgramio.Kind{dgramio.KindUDP, dgramio.KindURing, dgramio.KindTCP} {
		t.Run(string(kind), func(t *testing.T) {
			typ := unix.SOCK_DGRAM
			if kind.IsStream() {
				typ = unix.SOCK_STREAM
			}
			var srvs []dgramio.Backend
			var dests []netip.AddrPort
			for range 2 {
				port := socktest.FreePort(t, typ)
				srv, err := dgramio.New(dgramio.Config{Kind: kind, Role: dgramio.RoleServer, LocalIP: lo, Port: port})
				testutil.SkipIfNotSupported(t, err)
				if err != nil {
					t.Fatal(err)
				}
				defer srv.Close()
				srvs = append(srvs, srv)
				dests = append(dests, netip.AddrPortFrom(lo, port))
			}
			if dests[0].Port() == dests[1].Port() {
				t.Fatalf("two servers on one port %v", dests)
			}
			// No Config.Port: each destination names its own.
			cli, err := dgramio.New(dgramio.Config{Kind: kind, Dests: dests})
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			pkts := make([]dgramio.Packet, 8)
			got := make([]int, len(srvs))
			queued := false
			for end := time.Now().Add(30 * time.Second); got[0] == 0 || got[1] == 0; {
				if time.Now().After(end) {
					t.Fatalf("after 30s the servers got %v; client %+v", got, cli.Stats())
				}
				if !queued {
					// A stream client queues once its connections are up.
					switch err := cli.Queue([]byte("both")); err {
					case nil:
						queued = true
					case dgramio.ErrNoRoute:
					default:
						t.Fatalf("Queue: %v", err)
					}
				}
				cli.Flush()
				cli.Rx(pkts)
				for i, srv := range srvs {
					n, _ := srv.Rx(pkts)
					for _, p := range pkts[:n] {
						if string(p.Data) != "both" {
							t.Fatalf("server %d got %q", i, p.Data)
						}
					}
					got[i] += n
					srv.Flush()
				}
				time.Sleep(time.Millisecond)
			}
			if got[0] != 1 || got[1] != 1 {
				t.Errorf("servers got %v messages, want one each", got)
			}
		})
	}
	t.Run("xdp", func(t *testing.T) {
		a, b := memio.NewPair(memio.Options{})
		dests := []netip.AddrPort{netip.AddrPortFrom(memSrv, 5000), netip.AddrPortFrom(memSrv, 5001)}
		cli, err := udp.NewRaw(dgramio.Config{Kind: dgramio.KindXDP, Iface: "memio", LocalIP: memCli,
			Dests: dests, LocalPort: 40000, DstMAC: memio.DefaultMACB}, a, udp.RawOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		if err := cli.Queue([]byte("both")); err != nil {
			t.Fatal(err)
		}
		if err := cli.Flush(); err != nil {
			t.Fatal(err)
		}
		// Ethernet (14) and IPv4 without options (20), then UDP: source
		// and destination port.
		var ports [][2]uint16
		for end := time.Now().Add(10 * time.Second); len(ports) < 2 && time.Now().Before(end); {
			b.RxFrames(8, func(f []byte) {
				ports = append(ports, [2]uint16{uint16(f[34])<<8 | uint16(f[35]), uint16(f[36])<<8 | uint16(f[37])})
			})
			time.Sleep(time.Millisecond)
		}
		want := [][2]uint16{{40000, 5000}, {40000, 5001}}
		if len(ports) != 2 || ports[0] != want[0] || ports[1] != want[1] {
			t.Errorf("frames' UDP ports (source, destination) %v, want %v", ports, want)
		}
	})
}
