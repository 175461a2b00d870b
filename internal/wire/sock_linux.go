//go:build linux

package wire

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/sock"
)

// sockBuf is the receive and send buffer asked for each packet socket
// (SO_RCVBUFFORCE, SO_SNDBUFFORCE), so bursts wait in the kernel instead
// of being dropped there.
const sockBuf = 4 << 20

// batch is the number of frames read or written per system call.
const batch = 64

// packetSock is a raw AF_PACKET socket bound to one veth end: it reads the
// frames that arrive there (not those it sends, PACKET_IGNORE_OUTGOING) and
// sends whole Ethernet frames out of it.
type packetSock struct {
	fd int
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// openPacket opens and binds the packet socket on interface ifindex. It must
// run on a thread inside the interface's namespace. The socket is made with
// protocol 0, so it sees no frame of any interface before it is bound to
// this one.
func openPacket(ifindex int) (*packetSock, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, &dgramio.PrivilegeError{Op: "open AF_PACKET socket", Capability: "CAP_NET_RAW", Err: err}
		}
		return nil, fmt.Errorf("socket(AF_PACKET): %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(fd)
		}
	}()
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		if errors.Is(err, unix.ENOPROTOOPT) || errors.Is(err, unix.EINVAL) {
			return nil, dgramio.NotSupported("PACKET_IGNORE_OUTGOING", "4.20", "the wire needs it not to read back what it sends", err)
		}
		return nil, fmt.Errorf("setsockopt PACKET_IGNORE_OUTGOING: %w", err)
	}
	// VLAN tags that the device moved into the packet's metadata come back
	// in a control message, to be put back into the frame.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
		return nil, fmt.Errorf("setsockopt PACKET_AUXDATA: %w", err)
	}
	var g sock.Granted // forced where privileged, else capped by rmem_max
	if err := sock.SetBuffers(fd, sockBuf, &g); err != nil {
		return nil, err
	}
	sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}
	if err := unix.Bind(fd, sa); err != nil {
		return nil, fmt.Errorf("bind AF_PACKET to ifindex %d: %w", ifindex, err)
	}
	ok = true
	return &packetSock{fd: fd}, nil
}

// readDrops adds the kernel's drop count since the last call (reading
// PACKET_STATISTICS resets it) to c.
func (s *packetSock) readDrops(c *counters) {
	st, err := unix.GetsockoptTpacketStats(s.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err == nil {
		c.socketDrops.Add(uint64(st.Drops))
	}
}

func (s *packetSock) close() error {
	if err := unix.Close(s.fd); err != nil {
		return fmt.Errorf("close AF_PACKET socket: %w", err)
	}
	return nil
}

// auxLen is the control buffer of one received message: one
// struct tpacket_auxdata.
var auxLen = unix.CmsgSpace(int(unsafe.Sizeof(unix.TpacketAuxdata{})))

// forwarder moves the frames of one direction: it reads from in, passes
// them through its pipe and writes them to out when they are due. It runs on
// one goroutine (run) until the waker's descriptor becomes readable.
type forwarder struct {
	dir   Direction
	in    *packetSock
	out   *packetSock
	waker int
	p     *pipe
	c     *counters
	epoch time.Time
	want  atomic.Pointer[Impairment] // set by SetImpairment

	rxMsgs  []unix.Mmsghdr
	rxIov   []unix.Iovec
	rxCtl   []byte
	rxSlots []*slot
	txMsgs  []unix.Mmsghdr
	txIov   []unix.Iovec
	txSlots []*slot
}

func newForwarder(dir Direction, in, out *packetSock, waker int, p *pipe, c *counters, epoch time.Time) *forwarder {
	f := &forwarder{dir: dir, in: in, out: out, waker: waker, p: p, c: c, epoch: epoch,
		rxMsgs: make([]unix.Mmsghdr, batch), rxIov: make([]unix.Iovec, batch),
		rxCtl: make([]byte, batch*auxLen), rxSlots: make([]*slot, batch),
		txMsgs: make([]unix.Mmsghdr, batch), txIov: make([]unix.Iovec, batch),
		txSlots: make([]*slot, 0, batch)}
	for i := range f.rxMsgs {
		f.rxMsgs[i].Hdr.Iov = &f.rxIov[i]
		f.rxMsgs[i].Hdr.SetIovlen(1)
		f.txMsgs[i].Hdr.Iov = &f.txIov[i]
		f.txMsgs[i].Hdr.SetIovlen(1)
	}
	return f
}

// now is the time on the wire's clock, in nanoseconds (monotonic).
func (f *forwarder) now() int64 { return int64(time.Since(f.epoch)) }

// run is the forwarding loop. It sleeps in ppoll(2) until a frame can be
// read (when a buffer is free), the egress can take frames again (after
// EAGAIN), the next frame is due, or the waker says stop. It allocates
// nothing per frame.
func (f *forwarder) run() {
	fds := [3]unix.PollFd{{Fd: -1}, {Fd: -1}, {Fd: int32(f.waker), Events: unix.POLLIN}}
	var ts unix.Timespec
	for {
		f.apply()
		now := f.now()
		f.p.expire(now)
		blocked := f.send(now)
		f.p.publish()

		// A descriptor not waited for is left out (-1), so that an error
		// condition on it (POLLERR is always reported) cannot wake this
		// loop again and again: the ingress's is cleared by the next read,
		// the egress's by the other direction's loop.
		fds[0].Fd, fds[1].Fd = -1, -1
		if f.p.freeCount() > 0 {
			fds[0].Fd, fds[0].Events = int32(f.in.fd), unix.POLLIN
		}
		if blocked {
			fds[1].Fd, fds[1].Events = int32(f.out.fd), unix.POLLOUT
		}
		var timeout *unix.Timespec
		if next, ok := f.p.next(); ok && !blocked {
			wait := max(next-f.now(), 0)
			ts = unix.NsecToTimespec(wait)
			timeout = &ts
		}
		for i := range fds {
			fds[i].Revents = 0
		}
		_, err := unix.Ppoll(fds[:], timeout, nil)
		if err != nil && err != unix.EINTR {
			// Not expected with valid descriptors; do not spin on it.
			time.Sleep(time.Millisecond)
			continue
		}
		if fds[2].Revents != 0 {
			return
		}
		if fds[0].Revents != 0 {
			f.recv()
		}
	}
}

// apply takes a new impairment set by SetImpairment.
func (f *forwarder) apply() {
	if im := f.want.Swap(nil); im != nil {
		f.p.dec.SetImpairment(*im)
	}
}

// recv reads frames into free buffers, a batch at a time, until the socket
// is empty, the buffers run out, or a few batches were read (so that due
// frames are not kept waiting behind a flood).
func (f *forwarder) recv() {
	for round := 0; round < 4; round++ {
		n := min(batch, f.p.freeCount())
		if n == 0 {
			return
		}
		for i := 0; i < n; i++ {
			s := f.p.take()
			f.rxSlots[i] = s
			f.rxIov[i].Base = &s.buf[0]
			// Keep room to put a VLAN tag back.
			f.rxIov[i].SetLen(len(s.buf) - vlanTagLen)
			h := &f.rxMsgs[i].Hdr
			h.Control = &f.rxCtl[i*auxLen]
			h.SetControllen(auxLen)
			h.Flags = 0
			f.rxMsgs[i].Len = 0
		}
		got, errno := sock.Recvmmsg(f.in.fd, f.rxMsgs[:n], unix.MSG_TRUNC|unix.MSG_DONTWAIT)
		// After the read: a frame sent after SetImpairment returned gets
		// the new impairment.
		f.apply()
		now := f.now()
		for i := 0; i < n; i++ {
			s := f.rxSlots[i]
			f.rxSlots[i] = nil
			if i >= got {
				f.p.give(s)
				continue
			}
			m := &f.rxMsgs[i]
			size := int(m.Len)
			if m.Hdr.Flags&unix.MSG_TRUNC != 0 || size > len(s.buf)-vlanTagLen || size < etherHdr {
				f.p.discard(s)
				continue
			}
			s.n = size
			f.aux(s, f.rxCtl[i*auxLen:(i+1)*auxLen], int(m.Hdr.Controllen))
			f.p.push(s, now)
		}
		if errno != 0 || got < n {
			return
		}
	}
}

// aux reads the tpacket_auxdata control message of a received frame: puts
// back a VLAN tag the device took out, counts a partial checksum.
func (f *forwarder) aux(s *slot, ctl []byte, ctlLen int) {
	if ctlLen < unix.CmsgLen(int(unsafe.Sizeof(unix.TpacketAuxdata{}))) || ctlLen > len(ctl) {
		return
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
	if h.Level != unix.SOL_PACKET || h.Type != unix.PACKET_AUXDATA {
		return
	}
	a := (*unix.TpacketAuxdata)(unsafe.Pointer(&ctl[unix.CmsgLen(0)]))
	if a.Status&unix.TP_STATUS_CSUMNOTREADY != 0 {
		f.c.partial.Add(1)
	}
	if a.Status&unix.TP_STATUS_VLAN_VALID != 0 || a.Vlan_tci != 0 {
		tpid := uint16(etherVLAN)
		if a.Status&unix.TP_STATUS_VLAN_TPID_VALID != 0 && a.Vlan_tpid != 0 {
			tpid = a.Vlan_tpid
		}
		s.n = insertVLAN(s.buf, s.n, tpid, a.Vlan_tci)
	}
}

// send writes the due frames to the egress end, a batch per sendmmsg(2),
// until none is due. It reports whether the egress was full (EAGAIN):
// the caller then waits for POLLOUT. A frame the egress refuses for any
// other reason (link down, ENOBUFS, EMSGSIZE) is dropped and counted.
func (f *forwarder) send(now int64) (blocked bool) {
	for {
		f.txSlots = f.p.due(now, f.txSlots[:0])
		n := len(f.txSlots)
		if n == 0 {
			return false
		}
		for i, s := range f.txSlots {
			f.txIov[i].Base = &s.buf[0]
			f.txIov[i].SetLen(s.n)
			f.txMsgs[i].Len = 0
		}
		sent, errno := sock.Sendmmsg(f.out.fd, f.txMsgs[:n], unix.MSG_DONTWAIT)
		clear(f.txSlots)
		switch errno {
		case 0:
			f.p.pop(sent, true)
		case unix.EINTR:
		case unix.EAGAIN:
			return true
		default:
			f.p.pop(1, false)
		}
	}
}
