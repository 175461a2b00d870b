// Package pad pads short Ethernet frames to the 60-byte minimum (ETH_ZLEN,
// without FCS) before they leave on a raw path.
//
// The kernel pads what it sends; AF_XDP and DPDK send frames as they are
// given, and the card or peer on the other side may drop a runt. A pure
// ACK (54 bytes) and an ARP request or reply (42 bytes) are short, so
// without padding a TCP connection never opens and ARP never resolves, and
// from outside it looks like a dead link. Padding bytes are zero; receivers
// find the real length in the IPv4 total length or the ARP header.
package pad

import "github.com/dgramio/dgramio/frameio"

// MinFrame is the shortest frame on the wire, without FCS (ETH_ZLEN).
const MinFrame = frameio.MinFrame

// Needed reports how many zero bytes frame needs to reach MinFrame.
func Needed(frame []byte) int {
	if len(frame) >= MinFrame {
		return 0
	}
	return MinFrame - len(frame)
}

// InPlace returns frame extended to MinFrame bytes within its capacity,
// the added bytes zeroed, and true; frame itself and true when it is long
// enough already. When frame is short and its capacity is below MinFrame it
// returns frame unchanged and false (use Append or Padder). It writes only
// into frame's own backing array, between len and MinFrame.
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

// Append appends frame to dst followed by the zeros that bring the appended
// frame to MinFrame bytes, and returns the extended dst. It allocates only
// when dst lacks capacity, as append does.
func Append(dst, frame []byte) []byte {
	dst = append(dst, frame...)
	for i := len(frame); i < MinFrame; i++ {
		dst = append(dst, 0)
	}
	return dst
}

// Padder transmits frames through a FrameIO, padding short ones in its own
// 60-byte scratch buffer, so that neither the caller's buffer nor its
// capacity matters and nothing is allocated. A Padder is used by one
// goroutine at a time (the FrameIO's transmit side).
type Padder struct {
	scratch [MinFrame]byte
	// Padded counts frames that were short and padded.
	Padded uint64
}

// TxFrame gives frame to fio.TxFrame, padded to MinFrame when short, and
// returns what fio.TxFrame returned. fio copies the frame, so the scratch
// buffer is free again when TxFrame returns; the caller keeps frame.
func (p *Padder) TxFrame(fio frameio.FrameIO, frame []byte) bool {
	if len(frame) >= MinFrame {
		return fio.TxFrame(frame)
	}
	n := copy(p.scratch[:], frame)
	clear(p.scratch[n:])
	ok := fio.TxFrame(p.scratch[:])
	if ok {
		p.Padded++
	}
	return ok
}
