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
// the four variants in turn, IPv4 and IPv6, the server socket unconnected
// (the echo's) and connected to the client (which the echo cannot be: it
// answers whoever sends; it shows what the per-datagram route lookups of
// an unconnected socket cost). Interleaving them puts the host's slow
// and fast moments on every variant alike; the metrics are each
// variant's median round trip per datagram ("v4-unconn-p50-ns" …).
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
			for _, srvConn := range []bool{false, true} {
				for _, v6 := range []bool{false, true} {
					a, s := p.A.Addr, p.B.Addr
					name := "v4"
					if v6 {
						a, s, name = p.A.Addr6, p.B.Addr6, "v6"
					}
					name += map[bool]string{false: "-unconn", true: "-conn"}[srvConn]
					port += 2
					pp := newPinger(b, p, netip.AddrPortFrom(a, port), netip.AddrPortFrom(s, port+1), batch, srvConn)
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
}

func newPinger(b *testing.B, p *testhost.Pair, a, s netip.AddrPort, batch int, srvConn bool) *pinger {
	open := func(h *testhost.Host, local, peer netip.AddrPort, conn bool) int {
		var fd int
		if err := h.Do(func() (err error) {
			c := dgramio.Config{Role: dgramio.RoleServer, LocalIP: local.Addr(), Port: local.Port()}
			fd, err = Socket(c, unix.SOCK_DGRAM, unix.IPPROTO_UDP)
			if err != nil {
				return err
			}
			if err = Bind(fd, local); err != nil {
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
	pp := &pinger{cfd: open(p.A, a, s, true), sfd: open(p.B, s, a, srvConn), srvConn: srvConn}
	pp.ctx, _ = mk(false)
	pp.crx, _ = mk(false)
	pp.stx, pp.stxNames = mk(!srvConn)
	pp.srx, pp.srxNames = mk(true)
	return pp
}

func (pp *pinger) close() { unix.Close(pp.cfd); unix.Close(pp.sfd) }

// roundTrip sends a batch from the client, receives it at the server,
// answers each datagram and receives the answers at the client.
func (pp *pinger) roundTrip(b *testing.B) {
	send(b, pp.cfd, pp.ctx)
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
