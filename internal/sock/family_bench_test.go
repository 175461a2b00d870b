package sock

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
)

// BenchmarkFamilyPingPong measures the kernel's own cost of a UDP round
// trip over the test hosts' veth pair in each family, with the socket
// calls of kinds udp and uring and nothing of dgramio around them: a
// client socket bound and connected (the load generator's), a server
// socket bound to its address and answering each datagram with
// sendmmsg to the address recvmmsg gave (the echo's), both driven from
// one thread so that no wake-up or scheduling is measured (on veth the
// receiving side's softirq runs inside the sender's system call).
//
// One op is one round trip (batch datagrams there and back) in each of
// the six variants in turn, IPv4 and IPv6, the server socket unconnected
// (the echo without reply sockets), connected to the client (what the
// per-datagram route lookups of an unconnected socket cost), and "reply":
// an unconnected server socket with a connected reply socket beside it
// in one SO_REUSEPORT group (sock.Replies), which receives and answers
// the client, after an epoll_wait that names it (kind udp's Rx with reply
// sockets open). Interleaving them puts the host's slow and fast moments
// on every variant alike; the metrics are each variant's median round
// trip per datagram ("v4-unconn-p50-ns" …).
func BenchmarkFamilyPingPong(b *testing.B) {
	p := hosttest.New(b, testhost.Options{IPv6: true})
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			type variant struct {
				name string
				pp   *pinger
				ns   []int64
			}
			var vs []*variant
			port := uint16(5400)
			for _, mode := range []string{"unconn", "conn", "reply", "replynoep", "replywild"} {
				for _, v6 := range []bool{false, true} {
					a, s := p.A.Addr, p.B.Addr
					name := "v4"
					if v6 {
						a, s, name = p.A.Addr6, p.B.Addr6, "v6"
					}
					name += "-" + mode
					port += 2
					pp := newPinger(b, p, netip.AddrPortFrom(a, port), netip.AddrPortFrom(s, port+1), batch, mode)
					defer pp.close()
					vs = append(vs, &variant{name: name, pp: pp})
				}
			}
			for b.Loop() {
				for _, v := range vs {
					t0 := time.Now()
					v.pp.roundTrip(b)
					v.ns = append(v.ns, time.Since(t0).Nanoseconds())
				}
			}
			for _, v := range vs {
				slices.Sort(v.ns)
				b.ReportMetric(float64(v.ns[len(v.ns)/2])/float64(batch), v.name+"-p50-ns")
			}
		})
	}
}

// pinger is a client socket and a server socket in the test hosts, and
// the message arrays of one round trip between them.
type pinger struct {
	cfd, sfd           int
	ctx, crx, stx, srx []unix.Mmsghdr
	stxNames, srxNames []Name
	srvConn            bool
	main, ep           int // mode "reply": the unconnected server socket, the epoll instance
	evs                []unix.EpollEvent
}

func newPinger(b *testing.B, p *testhost.Pair, a, s netip.AddrPort, batch int, mode string) *pinger {
	reuse := mode == "reply" || mode == "replynoep" || mode == "replywild"
	open := func(h *testhost.Host, local, peer netip.AddrPort, conn bool) int {
		var fd int
		if err := h.Do(func() (err error) {
			c := dgramio.Config{Role: dgramio.RoleServer, LocalIP: local.Addr(), Port: local.Port()}
			fd, err = Socket(c, unix.SOCK_DGRAM, unix.IPPROTO_UDP)
			if err != nil {
				return err
			}
			if reuse {
				if err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
					return err
				}
			}
			bindTo := local
			if mode == "replywild" && conn {
				bindTo = netip.AddrPortFrom(BindAddr(dgramio.Config{LocalIP: netip.IPv6Unspecified()}, 0).Addr(), local.Port())
				if local.Addr().Is4() {
					bindTo = netip.AddrPortFrom(netip.IPv4Unspecified(), local.Port())
				}
			}
			if err = Bind(fd, bindTo); err != nil {
				return err
			}
			if conn {
				return unix.Connect(fd, Sockaddr(peer))
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		return fd
	}
	mk := func(named bool) ([]unix.Mmsghdr, []Name) {
		buf := make([]byte, batch*2048)
		iov := make([]unix.Iovec, batch)
		msgs := make([]unix.Mmsghdr, batch)
		names := make([]Name, batch)
		for i := range msgs {
			iov[i].Base = &buf[i*2048]
			iov[i].SetLen(64)
			msgs[i].Hdr.Iov = &iov[i]
			msgs[i].Hdr.SetIovlen(1)
			if named {
				msgs[i].Hdr.Name = NamePtr(&names[i])
			}
		}
		return msgs, names
	}
	srvConn := mode != "unconn"
	pp := &pinger{main: -1, ep: -1}
	if reuse {
		pp.main = open(p.B, s, a, false)
	}
	pp.cfd, pp.sfd, pp.srvConn = open(p.A, a, s, true), open(p.B, s, a, srvConn), srvConn
	if mode == "reply" {
		var err error
		if pp.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
			b.Fatal(err)
		}
		for i, fd := range []int{pp.main, pp.sfd} {
			if err := unix.EpollCtl(pp.ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(i)}); err != nil {
				b.Fatal(err)
			}
		}
		pp.evs = make([]unix.EpollEvent, 2)
	}
	pp.ctx, _ = mk(false)
	pp.crx, _ = mk(false)
	pp.stx, pp.stxNames = mk(!srvConn)
	pp.srx, pp.srxNames = mk(true)
	return pp
}

func (pp *pinger) close() {
	unix.Close(pp.cfd)
	unix.Close(pp.sfd)
	if pp.main >= 0 {
		unix.Close(pp.main)
		unix.Close(pp.ep)
	}
}

// roundTrip sends a batch from the client, receives it at the server,
// answers each datagram and receives the answers at the client.
func (pp *pinger) roundTrip(b *testing.B) {
	send(b, pp.cfd, pp.ctx)
	if pp.ep >= 0 {
		n, err := unix.EpollWait(pp.ep, pp.evs, 0)
		if err != nil || n != 1 || pp.evs[0].Fd != 1 {
			b.Fatalf("epoll_wait: %d ready (%v), want the reply socket alone", n, err)
		}
	}
	recvAll(b, pp.sfd, pp.srx, true)
	for i := range pp.stx {
		pp.stx[i].Hdr.Iov.SetLen(int(pp.srx[i].Len))
		if !pp.srvConn {
			pp.stx[i].Hdr.Namelen = PutRaw(&pp.stxNames[i], FromRaw(&pp.srxNames[i]))
		}
	}
	send(b, pp.sfd, pp.stx)
	recvAll(b, pp.cfd, pp.crx, false)
}

func send(b *testing.B, fd int, msgs []unix.Mmsghdr) {
	for off := 0; off < len(msgs); {
		n, e := Sendmmsg(fd, msgs[off:], 0)
		if e != 0 {
			b.Fatal(e)
		}
		off += n
	}
}

// recvAll receives len(msgs) datagrams; on veth they are queued by the
// time the sender's system call returns, so it fails rather than waits.
func recvAll(b *testing.B, fd int, msgs []unix.Mmsghdr, named bool) {
	for got := 0; got < len(msgs); {
		for i := got; i < len(msgs); i++ {
			msgs[i].Hdr.Iov.SetLen(2048)
			if named {
				msgs[i].Hdr.Namelen = NameLen
			}
		}
		n, e := Recvmmsg(fd, msgs[got:], unix.MSG_DONTWAIT)
		if e == unix.EAGAIN {
			b.Fatalf("lost: %d of %d arrived", got, len(msgs))
		}
		if e != 0 {
			b.Fatal(e)
		}
		got += n
	}
}
