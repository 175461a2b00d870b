//go:build linux

package udp

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// rawSocket opens an AF_PACKET socket on h's veth end that sees every IPv4
// frame arriving there (whatever its destination MAC) and sends frames as
// they are; it ignores its own. Closed at the end of the test.
func rawSocket(t *testing.T, h *testhost.Host) int {
	t.Helper()
	proto := uint16(unix.ETH_P_IP<<8&0xff00 | unix.ETH_P_IP>>8) // htons
	var fd int
	err := h.Do(func() error {
		var err error
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto))
		if err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: h.Index})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestXDPManyPeers: an xdp server answers 20,000 clients, each with its
// own address and MAC (frames made on B's side by an AF_PACKET socket),
// through a peer table of 16,384: every answer goes to the MAC its request
// came from, none is refused or lost, and the table replaced the oldest
// peers to make room.
func TestXDPManyPeers(t *testing.T) {
	testutil.RequireRoot(t)
	const clients, table, window = 20_000, 1 << 14, 256
	// Clients from 198.19.0.0/16, clear of the pair's own /24 in 198.18.
	const first = 1<<16 - 16
	p := hosttest.New(t, testhost.Options{})
	b := openXDP(t, p.A, dgramio.Config{Kind: dgramio.KindXDP, Role: dgramio.RoleServer, Iface: p.A.Iface,
		LocalIP: p.A.Addr, Port: 5000, Peers: table, Poll: dgramio.PollYield})
	fd := rawSocket(t, p.B)

	defer serveEcho(t, b)()

	server := netip.AddrPortFrom(p.A.Addr, 5000)
	var tmpl Template
	frame := make([]byte, 0, 128)
	buf := make([]byte, 2048)
	answered, wrong := 0, 0
	deadline := time.Now().Add(60 * time.Second)
	for base := 0; base < clients; base += window {
		end := min(base+window, clients)
		for i := base; i < end; i++ {
			from, mac := peerAt(first + i)
			if err := tmpl.Reset(Endpoints{SrcMAC: mac[:], DstMAC: p.A.MAC, Src: from, Dst: server}); err != nil {
				t.Fatal(err)
			}
			if err := unix.Send(fd, tmpl.Append(frame[:0], msg(first+i, 8)), 0); err != nil {
				t.Fatal("send:", err)
			}
		}
		for answered < end && time.Now().Before(deadline) {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if n, _ := unix.Poll(fds, 100); n <= 0 {
				continue
			}
			n, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT)
			if err != nil {
				continue
			}
			d, why := Parse(buf[:n], &Filter{})
			if why != OK || d.From != server {
				continue // not an answer (the kernel's own traffic)
			}
			i := int(binary.BigEndian.Uint32(d.Payload))
			to, mac := peerAt(i)
			if d.To != to || [6]byte(buf[0:6]) != mac {
				wrong++
			}
			answered++
		}
		if answered < end {
			break
		}
	}
	s := b.Stats()
	if answered != clients || wrong != 0 || s.Lost() != 0 {
		t.Fatalf("%d of %d answered, %d to the wrong address or MAC, lost %d: %+v", answered, clients, wrong, s.Lost(), s)
	}
	if v := counter(t, s, "raw", "peers_replaced"); v != clients-table {
		t.Fatalf("peers_replaced %d, want %d", v, clients-table)
	}
}

// serverSendsFirst: the server b queues a datagram to port 6000 of addr
// on h, a kernel peer it never heard from and whose MAC it does not know,
// and polls until h's kernel socket has it: QueueTo returns at once and
// the resolution runs beside the loop.
func serverSendsFirst(t *testing.T, b dgramio.Backend, h *testhost.Host, addr netip.Addr) {
	t.Helper()
	var conn *net.UDPConn
	if err := h.Do(func() error {
		var err error
		conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 6000)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 100)
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, _, err := conn.ReadFromUDP(buf)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(buf[:n])
	}()
	if b.QueueTo([]byte("first word"), netip.AddrPortFrom(addr, 6000)) != nil {
		t.Fatalf("QueueTo to an unresolved peer refused: %+v", b.Stats())
	}
	pkts := make([]dgramio.Packet, 8)
	for i := 0; ; i++ {
		if i%128 == 0 {
			if st := b.Stats(); st.TxDropped != 0 {
				t.Fatalf("the datagram was dropped: %+v", st)
			}
		}
		select {
		case s := <-got:
			if s != "first word" {
				t.Fatalf("peer got %q", s)
			}
			if st := b.Stats(); st.TxSent != 1 || pathLost(st) != 0 {
				t.Fatalf("stats %+v", st)
			}
			return
		default:
		}
		if _, err := b.Rx(pkts); err != nil {
			t.Fatal(err)
		}
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		if ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond); b.Wait(ctx) != nil {
			cancel()
			time.Sleep(time.Millisecond) // dpdk cannot Wait
		} else {
			cancel()
		}
	}
}

// TestXDPServerSendsFirst: the neighbour table lacks the peer; the kernel
// resolves it on request (ARP, or its neighbour solicitation over IPv6)
// while the poll loop runs.
func TestXDPServerSendsFirst(t *testing.T) { forVethFamilies(t, testXDPServerSendsFirst) }

func testXDPServerSendsFirst(t *testing.T, f vethFamily) {
	testutil.RequireRoot(t)
	p := f.pair(t)
	if err := p.A.DelNeigh(f.addr(p.B)); err != nil {
		t.Fatal(err)
	}
	b := openXDP(t, p.A, dgramio.Config{Kind: dgramio.KindXDP, Role: dgramio.RoleServer, Iface: p.A.Iface,
		LocalIP: f.addr(p.A), Port: 5000})
	serverSendsFirst(t, b, p.B, f.addr(p.B))
}

// behindB gives B a second address, in a network A reaches through B
// (A's kernel has a route to 198.19.254.0/24 via B's address), and returns
// it: a peer behind a router (RFC 1122 3.3.1.2: off-link datagrams go to
// the gateway's MAC).
func behindB(t *testing.T, p *testhost.Pair) netip.Addr {
	t.Helper()
	far := netip.MustParsePrefix("198.19.254.0/24")
	addr := far.Addr().Next().Next().Next()
	for _, step := range []struct {
		h  *testhost.Host
		do func(nl *netlink.Handle, l netlink.Link) error
	}{
		{p.B, func(nl *netlink.Handle, l netlink.Link) error {
			return nl.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(32, 32)}})
		}},
		{p.A, func(nl *netlink.Handle, l netlink.Link) error {
			return nl.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: p.B.Addr.AsSlice(),
				Dst: &net.IPNet{IP: far.Addr().AsSlice(), Mask: net.CIDRMask(24, 32)}})
		}},
	} {
		nl, err := netlink.NewHandleAt(step.h.NS)
		if err != nil {
			t.Fatal(err)
		}
		l, err := nl.LinkByIndex(step.h.Index)
		if err == nil {
			err = step.do(nl, l)
		}
		nl.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	// B answers ARP only for addresses of the asker's subnet
	// (arp_ignore 2), as a router does for what lies behind it: an ARP
	// for the far address itself goes unanswered.
	err := p.B.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/conf/"+p.B.Iface+"/arp_ignore", []byte("2"), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	return addr
}
