package sock

import (
	"fmt"
	"net/netip"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
)

// Connected reply sockets.
//
// A server socket answers whoever sends, so it is not connected, and the
// kernel then looks up a route for every datagram it sends (udp_sendmsg,
// udpv6_sendmsg) and for every one it receives (no early demux for an
// unconnected socket). A socket bound to the same address and port with
// SO_REUSEPORT and connected to one peer takes that peer's datagrams from
// the server socket: the kernel's UDP lookup scores a connected socket
// above an unconnected one (and finds it by early demux, with the route it
// cached), and a reuseport group that holds a connected socket is scored
// socket by socket rather than picked by hash or program. Sends on it
// reuse the route it cached at connect. Replies keeps such sockets for the
// peers that keep sending, a bounded number of them per server socket.

// Defaults of Replies.
const (
	// ReplyHot is how many datagrams a peer sends the server socket within
	// one period of hotPeriod before it gets a connected socket of its
	// own.
	ReplyHot = 8
	// hotPeriod is how long hot counts last.
	hotPeriod = 500 * time.Millisecond
)

// ReplyIdle is how long a connected reply socket may receive nothing
// before it is closed; the sweep that closes idle ones runs every
// ReplyIdle/4. A variable for tests.
var ReplyIdle = 2 * time.Second

// hotSlots is the size of the direct-mapped table that counts datagrams
// per peer on the server socket (40 KiB): peers that share a slot reset
// each other's count, so it is large against the peers that send at once.
const hotSlots = 1024

type hotSlot struct {
	peer netip.AddrPort
	n    uint32
	gen  uint32
}

// Reply is one connected reply socket.
type Reply struct {
	// Fd is the socket, -1 when the slot is free.
	Fd int
	// Peer is the address the socket is connected to.
	Peer netip.AddrPort
	// Closing is set once the socket refuses new datagrams (a filter that
	// drops everything, counted by the kernel in its drops) and waits for
	// the kind to read what it holds before Release.
	Closing bool
	// Armed and Cancelled are for the kind's own use (uring: the
	// receive is in flight, its cancellation submitted).
	Armed, Cancelled bool
	// Gen changes each time the slot is reused.
	Gen uint16

	rx     uint64 // datagrams read from it (Heard counts them)
	mark   uint64 // rx at the last sweep
	active time.Duration
}

// Replies is the table of connected reply sockets of one server socket. It
// is driven by the kind's poll loop alone (not safe for concurrent use).
type Replies struct {
	cfg    dgramio.Config
	local  netip.AddrPort
	v6     bool
	Slots  []Reply // len is the most sockets at once; index i is slot i
	InUse  int     // slots with Fd >= 0 (closing ones included)
	byPeer map[netip.AddrPort]int
	hot    [hotSlots]hotSlot
	gen    uint32 // sweep generation: hot counts of older ones are stale
	start  time.Time
	next   time.Duration // when the next sweep is due
	hotAt  time.Duration // when the hot counts' period began
	name   Name
	// The server socket's network namespace, where reply sockets must
	// be made: nsIno identifies it, nsFd (SIOCGSKNS; -1 without
	// CAP_NET_ADMIN) lets a thread in another one join it to make them.
	nsIno uint64
	nsFd  int

	// Counters: sockets made, closed (idle, or at Close), opens that
	// failed (the peer stays on the server socket), hot peers left on the
	// server socket because every slot was taken, and the kernel's drops
	// (SO_MEMINFO) of the sockets closed: a full receive buffer, or, once
	// closing, every datagram that arrived (a loss).
	Opened, Closed, OpenFailed, Full, ClosedDrops uint64
	// Rx counts the datagrams read from reply sockets (Got), Tx those the
	// kind sent on them (it adds them).
	Rx, Tx uint64
}

// RepliesFor returns the table for the server socket fd bound to local
// that cfg describes, or nil when cfg asks for none (Config.ReplySockets negative),
// is no server, or local is not one address: a connected socket's source
// address is its bound one, and a wildcard-bound server cannot know which
// of its addresses a peer sent to.
//
// Reply sockets are made in the server socket's network namespace: by
// the poll loop directly when its thread is in it, otherwise by joining it
// for the while (setns, which needs CAP_SYS_ADMIN; without it the peer
// stays on the server socket, counted in reply_open_failed). Close
// releases what RepliesFor holds.
func RepliesFor(cfg dgramio.Config, fd int, local netip.AddrPort) *Replies {
	n := ReplySocketsOf(cfg)
	if n == 0 || !local.Addr().IsValid() || local.Addr().IsUnspecified() {
		return nil
	}
	r := &Replies{cfg: cfg, local: local, v6: cfg.IPv6(), Slots: make([]Reply, n), byPeer: make(map[netip.AddrPort]int, n), start: time.Now(), nsFd: -1}
	r.nsFd, r.nsIno = socketNetns(fd)
	for i := range r.Slots {
		r.Slots[i].Fd = -1
	}
	r.next = ReplyIdle / 4
	return r
}

// ReplySocketsOf is how many connected reply sockets a queue of cfg keeps:
// 0 unless cfg is a server with a LocalIP set; Config.ReplySockets, or
// dgramio.DefaultReplySockets when that is 0; 0 when it is negative.
func ReplySocketsOf(cfg dgramio.Config) int {
	if cfg.Role != dgramio.RoleServer || !cfg.LocalIP.IsValid() || cfg.LocalIP.IsUnspecified() || cfg.ReplySockets < 0 {
		return 0
	}
	if cfg.ReplySockets == 0 {
		return dgramio.DefaultReplySockets
	}
	return cfg.ReplySockets
}

// Lookup returns the slot of the reply socket connected to peer, or -1. A
// closing socket is not used for sending.
func (r *Replies) Lookup(peer netip.AddrPort) int {
	if r.InUse == 0 {
		return -1
	}
	i, ok := r.byPeer[peer]
	if !ok || r.Slots[i].Closing {
		return -1
	}
	return i
}

// Got counts n datagrams read from slot i's socket.
func (r *Replies) Got(i, n int) {
	r.Slots[i].rx += uint64(n)
	r.Rx += uint64(n)
}

// Heard counts a datagram from peer read from the server socket, and
// returns true when peer has become hot: the caller then calls Open. A
// peer that has a socket already (its datagrams that reached the server
// socket before the connect) is not hot again.
func (r *Replies) Heard(peer netip.AddrPort) bool {
	h := hashPeer(peer) & (hotSlots - 1)
	s := &r.hot[h]
	if s.peer != peer || s.gen != r.gen {
		*s = hotSlot{peer: peer, n: 1, gen: r.gen}
		return false
	}
	s.n++
	if s.n != ReplyHot {
		return false
	}
	if _, ok := r.byPeer[peer]; ok {
		return false
	}
	if r.InUse == len(r.Slots) {
		r.Full++
		return false
	}
	return true
}

func hashPeer(ap netip.AddrPort) uint32 {
	a := ap.Addr().As16()
	h := uint32(2166136261)
	for _, b := range a[8:] {
		h = (h ^ uint32(b)) * 16777619
	}
	h = (h ^ uint32(ap.Port())) * 16777619
	return h ^ h>>16
}

// Open makes a connected reply socket for peer in a free slot and returns
// the slot, or -1 when none is free or the kernel refused (counted in
// OpenFailed; the peer stays on the server socket). The socket is set up
// as the server socket (buffers, busy poll), SO_REUSEPORT, bound to the
// server's address and port, and connected to peer. It allocates nothing.
func (r *Replies) Open(peer netip.AddrPort) int {
	i := -1
	for j := range r.Slots {
		if r.Slots[j].Fd < 0 {
			i = j
			break
		}
	}
	if i < 0 {
		r.Full++
		return -1
	}
	fd, err := r.open(peer)
	if err != nil {
		r.OpenFailed++
		return -1
	}
	s := &r.Slots[i]
	*s = Reply{Fd: fd, Peer: peer, Gen: s.Gen + 1, active: time.Since(r.start)}
	r.byPeer[peer] = i
	r.InUse++
	r.Opened++
	return i
}

func (r *Replies) open(peer netip.AddrPort) (fd int, err error) {
	if ino, err := threadNetns(); err != nil || ino != r.nsIno {
		if r.nsFd < 0 {
			return -1, fmt.Errorf("reply socket: the poll loop's thread is in another network namespace than the server socket")
		}
		return r.openIn(peer)
	}
	return r.openHere(peer)
}

// openIn makes the socket with the thread in the server's namespace.
func (r *Replies) openIn(peer netip.AddrPort) (fd int, err error) {
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return -1, err
	}
	defer unix.Close(orig)
	if err := unix.Setns(r.nsFd, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return -1, err
	}
	fd, err = r.openHere(peer)
	if serr := unix.Setns(orig, unix.CLONE_NEWNET); serr != nil {
		// The thread stays in the other namespace: keep it locked, so
		// that it ends with its goroutine rather than serve another.
		if err == nil {
			unix.Close(fd)
		}
		return -1, serr
	}
	runtime.UnlockOSThread()
	return fd, err
}

// socketNetns returns a descriptor of fd's network namespace (SIOCGSKNS,
// which needs CAP_NET_ADMIN; -1 without) and its identity; without the
// descriptor, the identity is the calling thread's namespace's.
func socketNetns(fd int) (int, uint64) {
	ns, err := unix.IoctlRetInt(fd, unix.SIOCGSKNS)
	if err == nil {
		var st unix.Stat_t
		if unix.Fstat(ns, &st) == nil {
			unix.CloseOnExec(ns)
			return ns, st.Ino
		}
		unix.Close(ns)
	}
	ino, _ := threadNetns()
	return -1, ino
}

// threadNetns identifies the calling thread's network namespace.
func threadNetns() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// Close releases the namespace descriptor (after every slot's Release).
func (r *Replies) Close() {
	if r != nil && r.nsFd >= 0 {
		unix.Close(r.nsFd)
		r.nsFd = -1
	}
}

func (r *Replies) openHere(peer netip.AddrPort) (fd int, err error) {
	family := unix.AF_INET
	if r.v6 {
		family = unix.AF_INET6
	}
	fd, err = unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return -1, err
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
		}
	}()
	if r.v6 {
		if err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1); err != nil {
			return
		}
	}
	var g Granted
	if err = SetBuffers(fd, r.cfg.SockBuf, &g); err != nil {
		return
	}
	if err = SetBusyPoll(fd, r.cfg.BusyPollUs, &g); err != nil {
		return
	}
	// Bound to every address and connected, the socket takes the source
	// address routing gives the peer, and the kernel moves it to the
	// head of the chain of sockets bound to that address and port, out
	// of any reuseport group (udp_lib_rehash): IPv6's early demux looks
	// at the first socket of that chain only (__udp6_lib_demux_lookup),
	// and a reuseport group with a connected socket in it would have its
	// lookups scored socket by socket. Bound to the server's address
	// directly, it would join the server socket's group, behind it.
	if err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		return
	}
	wild := netip.AddrPortFrom(netip.IPv4Unspecified(), r.local.Port())
	if r.v6 {
		wild = netip.AddrPortFrom(netip.IPv6Unspecified(), r.local.Port())
	}
	if err = r.rawAddrCall(unix.SYS_BIND, fd, wild); err != nil {
		return
	}
	if err = r.rawAddrCall(unix.SYS_CONNECT, fd, peer); err != nil {
		return
	}
	// Routing may pick another of our addresses than the one the peer
	// sent to: then the socket is of no use (the peer's datagrams still
	// reach the server socket, and answers would come from elsewhere).
	l := uint32(NameLen)
	r.name = Name{}
	if _, _, e := unix.RawSyscall(unix.SYS_GETSOCKNAME, uintptr(fd), uintptr(unsafe.Pointer(&r.name)), uintptr(unsafe.Pointer(&l))); e != 0 {
		return fd, e
	}
	if got := FromRaw(&r.name); got != r.local {
		return fd, errOtherSource
	}
	return
}

var errOtherSource = fmt.Errorf("reply socket: routing chose another source address than the server's")

// rawAddrCall is bind or connect with r.name, which does not allocate as
// the x/sys/unix wrappers do.
func (r *Replies) rawAddrCall(nr uintptr, fd int, ap netip.AddrPort) error {
	l := PutRaw(&r.name, ap)
	_, _, e := unix.Syscall(nr, uintptr(fd), uintptr(unsafe.Pointer(&r.name)), uintptr(l))
	if e != 0 {
		return e
	}
	return nil
}

// UntilSweep is how long until the next sweep is due (at least a
// millisecond), for a Wait that must return by then: 0 when no socket is
// open, which leaves the sweep to the next datagram.
func (r *Replies) UntilSweep() time.Duration {
	if r.InUse == 0 {
		return 0
	}
	return max(r.next-time.Since(r.start), time.Millisecond)
}

// Due reports whether a sweep is due; the kind calls it now and then (it
// reads the clock).
func (r *Replies) Due() bool { return time.Since(r.start) >= r.next }

// Sweep starts closing the sockets that received nothing for ReplyIdle
// (see StartClose); the kind reads what each still holds, then calls
// Release. It returns whether any socket started closing. Every
// hotPeriod it also starts a new period of hot counts.
func (r *Replies) Sweep() bool {
	now := time.Since(r.start)
	r.next = now + ReplyIdle/4
	if now-r.hotAt >= hotPeriod {
		r.hotAt = now
		r.gen++
	}
	any := false
	for i := range r.Slots {
		s := &r.Slots[i]
		if s.Fd < 0 || s.Closing {
			continue
		}
		if s.rx != s.mark {
			s.mark, s.active = s.rx, now
			continue
		}
		if now-s.active >= ReplyIdle {
			r.StartClose(i)
			any = true
		}
	}
	return any
}

// dropAll is a classic BPF program that accepts nothing.
var dropAll = []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}

// StartClose disconnects slot i's socket (connect to AF_UNSPEC), so that
// its peer's datagrams go to the server socket from now on, nothing lost,
// and gives it a filter that drops whatever still reaches it (bound to
// every address, it would otherwise take datagrams for another of the
// host's addresses on the port until Release closes it; the kernel counts
// them in its drops, reply_socket_drops), and marks it Closing. What it
// received before stays queued for the kind to read.
func (r *Replies) StartClose(i int) {
	s := &r.Slots[i]
	unspec := unix.RawSockaddr{Family: unix.AF_UNSPEC}
	_, _, _ = unix.Syscall(unix.SYS_CONNECT, uintptr(s.Fd), uintptr(unsafe.Pointer(&unspec)), unsafe.Sizeof(unspec))
	fp := unix.SockFprog{Len: 1, Filter: &dropAll[0]}
	_ = unix.SetsockoptSockFprog(s.Fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fp)
	s.Closing = true
	delete(r.byPeer, s.Peer)
}

// Release closes slot i's socket (Closing or not, after the kind has read
// what it wanted from it) and frees the slot. It returns how many
// datagrams the socket still held, read and discarded (the kind counts
// them with its rx_unread_at_close, a loss); the kernel's drops of the
// socket go to ClosedDrops.
func (r *Replies) Release(i int) (unread uint64) {
	s := &r.Slots[i]
	if s.Fd < 0 {
		return 0
	}
	unread = DrainUnread(s.Fd, 1<<20)
	if d, err := Drops(s.Fd); err == nil {
		r.ClosedDrops += d
	}
	unix.Close(s.Fd)
	if !s.Closing {
		delete(r.byPeer, s.Peer)
	}
	s.Fd, s.Closing, s.Armed, s.Cancelled, s.Peer = -1, false, false, false, netip.AddrPort{}
	r.InUse--
	r.Closed++
	return unread
}

// Counters appends the table's counters under layer: reply_sockets
// (open now, a gauge), reply_opened, reply_closed, reply_open_failed,
// reply_full, reply_rx and reply_tx (datagrams received and sent on reply
// sockets, also in the Stats' totals), and reply_socket_drops (a loss:
// the kernel's drops of the reply sockets, as layer "socket" "drops" is
// the server socket's, those closed and those open; it reads each open
// one's SO_MEMINFO).
func (r *Replies) Counters(dst []dgramio.Counter, layer string) []dgramio.Counter {
	if r == nil {
		return dst
	}
	drops := r.ClosedDrops
	for i := range r.Slots {
		if r.Slots[i].Fd >= 0 {
			if d, err := Drops(r.Slots[i].Fd); err == nil {
				drops += d
			}
		}
	}
	return append(dst,
		dgramio.Counter{Layer: layer, Name: "reply_sockets", Value: uint64(r.InUse), Gauge: true},
		dgramio.Counter{Layer: layer, Name: "reply_opened", Value: r.Opened},
		dgramio.Counter{Layer: layer, Name: "reply_closed", Value: r.Closed},
		dgramio.Counter{Layer: layer, Name: "reply_open_failed", Value: r.OpenFailed},
		dgramio.Counter{Layer: layer, Name: "reply_full", Value: r.Full},
		dgramio.Counter{Layer: layer, Name: "reply_rx", Value: r.Rx},
		dgramio.Counter{Layer: layer, Name: "reply_tx", Value: r.Tx},
		dgramio.Counter{Layer: layer, Name: "reply_socket_drops", Value: drops, Loss: true},
	)
}

// Mode is a few words for Stats.Mode.
func (r *Replies) Mode() string {
	if r == nil {
		return "no reply sockets"
	}
	return fmt.Sprintf("up to %d connected reply sockets", len(r.Slots))
}
