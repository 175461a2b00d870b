// Package pad pads short Ethernet frames to the 60-byte minimum (ETH_ZLEN,
// without FCS) before they leave on a raw path.
//
// The kernel pads what it sends; AF_XDP and DPDK send frames as they are
// given, and the card or peer on the other side may drop a runt. A pure
// ACK (54 bytes) and an ARP request or reply (42 bytes) are short, so
// without padding a TCP connection never opens and ARP never resolves, and
// from outside it looks like a dead link. Padding bytes are zero; receivers
// find the real length in the IPv4 total length or the ARP header.
//
// Code that builds a frame by appending to a buffer ends with Extend; code
// that copies a frame into a buffer of its own (a TX slot, an mbuf) pads it
// there with InPlace. Nothing here allocates unless a buffer lacks
// capacity.
//
// This package serves the raw paths; it is not a stable API of its own.
package pad

import "github.com/dgramio/dgramio/frameio"

// MinFrame is the shortest frame on the wire, without FCS (ETH_ZLEN).
const MinFrame = frameio.MinFrame

// InPlace returns frame extended to MinFrame bytes within its capacity,
// the added bytes zeroed, and true; frame itself and true when it is long
// enough already. When frame is short and its capacity is below MinFrame it
// returns frame unchanged and false (use Append). It writes only into
// frame's own backing array, between len and MinFrame.
func InPlace(frame []byte) ([]byte, bool) {
	n := len(frame)
	if n >= MinFrame {
		return frame, true
	}
	if cap(frame) < MinFrame {
		return frame, false
	}
	frame = frame[:MinFrame]
	clear(frame[n:])
	return frame, true
}

// Extend appends zeros to dst until the frame that starts at dst[start]
// is MinFrame bytes long, and returns the extended dst (dst itself when
// the frame is long enough). It is how a frame built by appending to dst
// from start ends. It allocates only when dst lacks capacity, as append
// does.
func Extend(dst []byte, start int) []byte {
	for len(dst)-start < MinFrame {
		dst = append(dst, 0)
	}
	return dst
}

// Append appends frame to dst followed by the zeros that bring the appended
// frame to MinFrame bytes, and returns the extended dst. It allocates only
// when dst lacks capacity, as append does.
func Append(dst, frame []byte) []byte {
	return Extend(append(dst, frame...), len(dst))
}
