package stack

import (
	"encoding/binary"
	"net/netip"
)

// RSS is how a NIC spreads the flows it receives over its queues (receive
// side scaling): the Toeplitz hash of a frame's IP addresses and TCP or
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

// Tuple6 returns the RSS input of an IPv6 TCP or UDP frame from src to
// dst: source address, destination address (16 bytes each), source port,
// destination port, in network byte order (36 bytes: all a 40-byte key
// covers).
func Tuple6(src, dst netip.AddrPort) [36]byte {
	var b [36]byte
	s, d := src.Addr().As16(), dst.Addr().As16()
	copy(b[0:16], s[:])
	copy(b[16:32], d[:])
	binary.BigEndian.PutUint16(b[32:], src.Port())
	binary.BigEndian.PutUint16(b[34:], dst.Port())
	return b
}

// Queue returns the queue the NIC puts a TCP or UDP frame from src to dst
// on, IPv4 (Tuple4) or IPv6 (Tuple6; an IPv4-mapped address is IPv4), and
// false when r has no indirection table or the two addresses are of
// different families.
func (r RSS) Queue(src, dst netip.AddrPort) (int, bool) {
	sa, da := src.Addr().Unmap(), dst.Addr().Unmap()
	if len(r.Indir) == 0 || !sa.IsValid() || sa.Is4() != da.Is4() {
		return 0, false
	}
	src, dst = netip.AddrPortFrom(sa, src.Port()), netip.AddrPortFrom(da, dst.Port())
	var h uint32
	if sa.Is4() {
		t := Tuple4(src, dst)
		h = Toeplitz(r.Key, t[:])
	} else {
		t := Tuple6(src, dst)
		h = Toeplitz(r.Key, t[:])
	}
	return int(r.Indir[h%uint32(len(r.Indir))]), true
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
	h := peer.Addr().As16() // an IPv4 address's 4 bytes are the last ones
	start := int(binary.BigEndian.Uint32(h[12:])^uint32(peer.Port())) % span
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
