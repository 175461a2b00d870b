package native

import (
	"encoding/binary"
	"math/bits"
)

// siphash is SipHash-2-4 of a 16-byte message under key k: the keyed hash
// F of RFC 6528's ISN and of the SYN cookies (RFC 4987).
func siphash(k *[16]byte, m [16]byte) uint64 {
	k0, k1 := binary.LittleEndian.Uint64(k[:]), binary.LittleEndian.Uint64(k[8:])
	v0, v1, v2, v3 := k0^0x736f6d6570736575, k1^0x646f72616e646f6d, k0^0x6c7967656e657261, k1^0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13) ^ v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16) ^ v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21) ^ v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17) ^ v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	for i := 0; i < 16; i += 8 {
		w := binary.LittleEndian.Uint64(m[i:])
		v3 ^= w
		round()
		round()
		v0 ^= w
	}
	b := uint64(16) << 56
	v3 ^= b
	round()
	round()
	v0 ^= b
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}

// flowKey is the 16-byte message of a connection's addresses and ports,
// with extra (a salt and a value) in the last four bytes.
func (e *Engine) flowKey(raddr [4]byte, lport, rport uint16, salt byte, extra uint32) [16]byte {
	if raddr[0] == 0 && e.six != nil {
		return e.flowKey6(raddr, lport, rport, salt, extra)
	}
	var m [16]byte
	copy(m[0:4], e.addr[:])
	copy(m[4:8], raddr[:])
	binary.BigEndian.PutUint16(m[8:], lport)
	binary.BigEndian.PutUint16(m[10:], rport)
	binary.BigEndian.PutUint32(m[12:], extra^uint32(salt)<<24)
	return m
}

// isn returns the initial sequence number of a connection (RFC 6528 §3):
// ISN = M + F(localip, localport, remoteip, remoteport, secretkey), M a
// timer ticking every 4 µs.
func (e *Engine) isn(raddr [4]byte, lport, rport uint16) uint32 {
	f := siphash(&e.secret, e.flowKey(raddr, lport, rport, 1, 0))
	return uint32(f) + uint32(e.wall()/4000)
}

// tsOffset is a connection's timestamp offset (RFC 7323 §5.4: a
// per-connection random offset keeps TSval from telling uptime).
func (e *Engine) tsOffset(raddr [4]byte, lport, rport uint16) uint32 {
	return uint32(siphash(&e.secret, e.flowKey(raddr, lport, rport, 2, 0)))
}

// wall is the engine clock in ns, never negative.
func (e *Engine) wall() int64 { return e.now + int64(1<<40) }

// SYN cookies (RFC 4987 §3.6): the ISN of a SYN-ACK sent without state
// carries the low 5 bits of a time counter (64 s steps), a 3-bit index of
// the peer's MSS and a 24-bit keyed hash of the flow, the peer's ISN, the
// whole counter and the MSS index. The counter and the index are inside
// the hash, apart from the peer's ISN: a cookie seen once is good for
// two counter steps and no longer (its counter bits rewritten, or the
// ACK's number shifted to match, change the hash), and its MSS cannot be
// raised (Linux's syncookies check the same, with a maximum age).
var cookieMSS = [8]uint16{536, 1220, 1300, 1400, 1440, 1452, 1460, 8960}

const cookieStep = int64(64e9)

func (e *Engine) cookieHash(s *segment, count, idx, peerISN uint32) uint32 {
	var m [16]byte
	binary.LittleEndian.PutUint64(m[0:], siphash(&e.secret, e.flowKey(s.src, s.dport, s.sport, 3, peerISN)))
	binary.BigEndian.PutUint32(m[8:], count)
	m[12], m[13] = byte(idx), 5
	return uint32(siphash(&e.secret, m)) & 0xffffff
}

// cookie returns the ISN for a SYN-ACK answering SYN s statelessly.
func (e *Engine) cookie(s *segment, mss uint16) uint32 {
	idx := uint32(0)
	for i, m := range cookieMSS {
		if m <= mss {
			idx = uint32(i)
		}
	}
	count := uint32(e.wall() / cookieStep)
	return count&31<<27 | idx<<24 | e.cookieHash(s, count, idx, s.seq)
}

// checkCookie checks the ACK s of a cookie handshake and returns the MSS
// the cookie holds; false when it is not a cookie of ours from the last
// two counter steps.
func (e *Engine) checkCookie(s *segment) (uint16, bool) {
	c := s.ack - 1
	now := uint32(e.wall() / cookieStep)
	age := (now - c>>27) & 31
	if age > 1 {
		return 0, false
	}
	idx := (c >> 24) & 7
	if c&0xffffff != e.cookieHash(s, now-age, idx, s.seq-1) {
		return 0, false
	}
	return cookieMSS[idx], true
}
