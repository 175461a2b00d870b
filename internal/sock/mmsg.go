package sock

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sendmmsg sends msgs with one sendmmsg(2) (Linux >= 3.0) and returns how
// many the kernel took; msgs[i].Len is then the bytes of message i sent.
// On an error, n is 0 and errno says why the first message failed
// (sendmmsg reports an error only when it sent nothing). It returns
// unix.Errno rather than error so that the data path does not allocate.
// len(msgs) must be at least 1.
//
// The pointers in each Hdr (Name, Iov and the Iovec's Base) must point
// into memory that stays where it is during the call: the Go heap, whose
// objects never move, or an mmap'ed region, never a goroutine stack
// (which moves when it grows). Allocate the arrays once, outside the data
// path; unix.Mmsghdr has the kernel's struct mmsghdr layout.
func Sendmmsg(fd int, msgs []unix.Mmsghdr, flags int) (n int, errno unix.Errno) {
	r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), uintptr(flags), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), 0
}

// Recvmmsg receives up to len(msgs) datagrams with one recvmmsg(2) (Linux
// >= 2.6.33), without a timeout, and returns how many arrived. For each,
// msgs[i].Len is its length and msgs[i].Hdr.Flags has MSG_TRUNC when it did
// not fit its buffer. On a non-blocking socket with nothing queued errno is
// EAGAIN. len(msgs) must be at least 1; msgs lives as Sendmmsg says.
func Recvmmsg(fd int, msgs []unix.Mmsghdr, flags int) (n int, errno unix.Errno) {
	r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), uintptr(flags), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), 0
}

// Send writes b to a connected socket with one send(2) and returns how many
// bytes the kernel took (possibly fewer than len(b)). flags usually hold
// MSG_DONTWAIT|MSG_NOSIGNAL (no SIGPIPE when the peer is gone: EPIPE
// instead). It returns unix.Errno, not error, so it does not allocate.
func Send(fd int, b []byte, flags int) (int, unix.Errno) {
	if len(b) == 0 {
		return 0, 0
	}
	r, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(flags), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), 0
}

// Recv reads into b from a connected socket with one recv(2) and returns
// how many bytes arrived; 0 with errno 0 is the peer's orderly close (FIN).
// An empty b makes no call and returns ENOBUFS (a 0 there would read as a
// close). It does not allocate.
func Recv(fd int, b []byte, flags int) (int, unix.Errno) {
	if len(b) == 0 {
		return 0, unix.ENOBUFS
	}
	r, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(flags), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), 0
}

// Drops returns the socket's drop counter, SK_MEMINFO_DROPS of
// getsockopt(SO_MEMINFO) (Linux >= 4.7 for the drops field): datagrams the
// kernel dropped for this socket because its receive buffer was full (or a
// filter refused them). It is the kernel's count, independent of ours.
func Drops(fd int) (uint64, error) {
	var mi [unix.SK_MEMINFO_VARS]uint32
	l := uint32(unsafe.Sizeof(mi))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&mi[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return 0, fmt.Errorf("getsockopt SO_MEMINFO: %w", e)
	}
	if l < (unix.SK_MEMINFO_DROPS+1)*4 {
		return 0, fmt.Errorf("getsockopt SO_MEMINFO: kernel returned %d bytes, no drops field (Linux >= 4.7)", l)
	}
	return uint64(mi[unix.SK_MEMINFO_DROPS]), nil
}

// NamePtr returns sa as the *byte that Msghdr.Name takes; set Namelen
// beside it (what PutRaw returned, or NameLen on receive).
func NamePtr(sa *Name) *byte { return (*byte)(unsafe.Pointer(sa)) }

// portBytes views the network-order port of a socket address as bytes.
func portBytes(p *uint16) unsafe.Pointer { return unsafe.Pointer(p) }

// DrainUnread reads and discards what fd's receive queue holds, without
// blocking, and returns how many datagrams that was: at Close, the
// datagrams the kernel accepted (and counted as received nowhere, since
// Linux counts InDatagrams when a datagram is read) that nobody read,
// which would otherwise vanish with the socket. It reads at most limit
// datagrams, so that a peer still sending cannot hold Close. It allocates;
// not for the data path.
func DrainUnread(fd int, limit int) uint64 {
	const batch = 64
	var buf [batch]byte // one byte each: MSG_TRUNC discards the rest
	iov := make([]unix.Iovec, batch)
	msgs := make([]unix.Mmsghdr, batch)
	for i := range msgs {
		iov[i].Base = &buf[i]
		iov[i].SetLen(1)
		msgs[i].Hdr.Iov = &iov[i]
		msgs[i].Hdr.SetIovlen(1)
	}
	var n uint64
	for n < uint64(limit) {
		got, errno := Recvmmsg(fd, msgs[:min(batch, limit-int(n))], unix.MSG_DONTWAIT|unix.MSG_TRUNC)
		switch errno {
		case 0:
		case unix.EINTR, unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH:
			continue // an ICMP error reported once, not a datagram
		default:
			return n // EAGAIN: empty
		}
		if got == 0 {
			return n
		}
		n += uint64(got)
	}
	return n
}
