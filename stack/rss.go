package stack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio/internal/core"
)

// RSS is how a NIC spreads the flows it receives over its queues (receive
// side scaling): the Toeplitz hash of a frame's IPv4 addresses and TCP or
// UDP ports under Key picks entry hash % len(Indir) of the indirection
// table, which names the queue.
type RSS struct {
	// Key is the hash key (40 bytes on most NICs).
	Key []byte
	// Indir is the indirection table: hash % len(Indir) → queue.
	Indir []uint32
}

// Toeplitz returns the Toeplitz hash of data under key, as RSS defines it:
// for every bit of data that is set, from the first byte's top bit on, the
// 32 bits of key starting at that bit's position are XORed into the
// result. Key bits past the end of key count as zero (a 40-byte key covers
// 36 bytes of data; an IPv4 4-tuple is 12).
func Toeplitz(key, data []byte) uint32 {
	bit := func(i int) uint32 { // bit i of key, from the top bit of key[0]
		if i/8 >= len(key) {
			return 0
		}
		return uint32(key[i/8]>>(7-i%8)) & 1
	}
	var window uint32
	for i := 0; i < 32; i++ {
		window = window<<1 | bit(i)
	}
	var h uint32
	for i := 0; i < 8*len(data); i++ {
		if data[i/8]>>(7-i%8)&1 != 0 {
			h ^= window
		}
		window = window<<1 | bit(i+32)
	}
	return h
}

// Tuple4 returns the RSS input of an IPv4 TCP or UDP frame from src to dst:
// source address, destination address, source port, destination port,
// each in network byte order.
func Tuple4(src, dst netip.AddrPort) [12]byte {
	var b [12]byte
	s, d := src.Addr().As4(), dst.Addr().As4()
	copy(b[0:4], s[:])
	copy(b[4:8], d[:])
	binary.BigEndian.PutUint16(b[8:], src.Port())
	binary.BigEndian.PutUint16(b[10:], dst.Port())
	return b
}

// Queue returns the queue the NIC puts an IPv4 TCP or UDP frame from src to
// dst on, and false when r has no indirection table.
func (r RSS) Queue(src, dst netip.AddrPort) (int, bool) {
	if len(r.Indir) == 0 || !src.Addr().Is4() || !dst.Addr().Is4() {
		return 0, false
	}
	t := Tuple4(src, dst)
	return int(r.Indir[Toeplitz(r.Key, t[:])%uint32(len(r.Indir))]), true
}

// Ephemeral ports SourcePorts draws from: Linux's default
// net.ipv4.ip_local_port_range.
const (
	EphemeralLow  = 32768
	EphemeralHigh = 60999
)

// SourcePorts returns the local TCP ports that queue q of a group of n
// queues may connect from to reach peer, in the order to try them, at most
// max of them: ports of the ephemeral range with port % n == q % n, so
// that no two queues (each its own netstack) ever pick the same 4-tuple,
// and, with rss (an indirection table), only those for which the NIC puts
// the peer's answers (peer → local:port) on device queue dev. Without rss
// every port of the partition qualifies: on a device without RSS (veth)
// the answers' queue does not depend on ports at all (see the package
// doc of dgramio's Group). The ports start at a point that depends on peer,
// so that connections to several peers spread over the range.
func SourcePorts(rss RSS, local netip.Addr, peer netip.AddrPort, q, n, dev, max int) []uint16 {
	if n < 1 || q < 0 || max < 1 {
		return nil
	}
	span := EphemeralHigh - EphemeralLow + 1
	h := peer.Addr().As4()
	start := int(binary.BigEndian.Uint32(h[:])^uint32(peer.Port())) % span
	var out []uint16
	for i := 0; i < span && len(out) < max; i++ {
		p := EphemeralLow + (start+i)%span
		if p%n != q%n {
			continue
		}
		if len(rss.Indir) > 0 {
			got, _ := rss.Queue(peer, netip.AddrPortFrom(local, uint16(p)))
			if got != dev {
				continue
			}
		}
		out = append(out, uint16(p))
	}
	return out
}

// ethtool_rxfh's header: cmd, rss_context, indir_size, key_size, hfunc,
// input_xfrm, two reserved bytes, a reserved u32; then the table and the
// key.
const (
	rxfhHeader   = 24
	hashToeplitz = 1 // ETH_RSS_HASH_TOP
)

// ifreqData is struct ifreq with a pointer in its union (ifr_data).
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte
}

// ReadRSS reads the RSS key and indirection table of iface (ETHTOOL_GRSSH,
// Linux >= 3.16), in the calling thread's network namespace. A device
// without RSS (veth, loopback), or whose hash function is not Toeplitz, is
// an error matching core.ErrNotSupported.
func ReadRSS(iface string) (RSS, error) {
	if len(iface) >= unix.IFNAMSIZ {
		return RSS{}, fmt.Errorf("stack: interface name %q too long", iface)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return RSS{}, fmt.Errorf("stack: socket for ethtool: %w", err)
	}
	defer unix.Close(fd)
	get := func(buf []byte) error {
		var ifr ifreqData
		copy(ifr.name[:], iface)
		ifr.data = unsafe.Pointer(&buf[0])
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
		runtime.KeepAlive(buf)
		if e != 0 {
			return e
		}
		return nil
	}
	hdr := make([]byte, rxfhHeader)
	binary.NativeEndian.PutUint32(hdr, unix.ETHTOOL_GRSSH)
	if err := get(hdr); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP) {
			return RSS{}, core.NotSupported("RSS key and indirection table (ETHTOOL_GRSSH) on "+iface, "3.16", "the device has no receive side scaling (veth has none)", err)
		}
		return RSS{}, fmt.Errorf("stack: ETHTOOL_GRSSH on %s: %w", iface, err)
	}
	nIndir := binary.NativeEndian.Uint32(hdr[8:])
	nKey := binary.NativeEndian.Uint32(hdr[12:])
	if nIndir == 0 || nKey == 0 || nIndir > 1<<16 || nKey > 1<<10 {
		return RSS{}, core.NotSupported("RSS on "+iface, "", fmt.Sprintf("the device reports an indirection table of %d entries and a %d-byte key", nIndir, nKey), nil)
	}
	buf := make([]byte, rxfhHeader+4*int(nIndir)+int(nKey))
	binary.NativeEndian.PutUint32(buf, unix.ETHTOOL_GRSSH)
	binary.NativeEndian.PutUint32(buf[8:], nIndir)
	binary.NativeEndian.PutUint32(buf[12:], nKey)
	if err := get(buf); err != nil {
		return RSS{}, fmt.Errorf("stack: ETHTOOL_GRSSH on %s: %w", iface, err)
	}
	if hf := buf[16]; hf != 0 && hf&hashToeplitz == 0 {
		return RSS{}, core.NotSupported("RSS port choice on "+iface, "", fmt.Sprintf("the device hashes with function %#x, not Toeplitz", hf), nil)
	}
	r := RSS{Indir: make([]uint32, nIndir), Key: make([]byte, nKey)}
	for i := range r.Indir {
		r.Indir[i] = binary.NativeEndian.Uint32(buf[rxfhHeader+4*i:])
	}
	copy(r.Key, buf[rxfhHeader+4*int(nIndir):])
	return r, nil
}
