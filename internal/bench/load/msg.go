package load

import (
	"encoding/binary"
	"fmt"
)

// The message layout, in network byte order:
//
//	offset  size  field
//	0       4     magic "dgb1"
//	4       4     run id: random per load generator run, so answers to an
//	              earlier run are not mistaken for this one's
//	8       8     sequence number, from 0
//	16      8     scheduled send time: nanoseconds of the load generator's
//	              monotonic clock
//	24      ...   padding up to the message size (zeros)
const (
	// HeaderLen is the smallest message: the fields above, no padding.
	HeaderLen = 24
	// Magic marks a message of this format.
	Magic uint32 = 0x64676231 // "dgb1"
)

// Msg is a view of a message's bytes. Call IsValid before any other method.
type Msg []byte

// IsValid reports whether m is long enough and carries the magic.
func (m Msg) IsValid() bool {
	return len(m) >= HeaderLen && binary.BigEndian.Uint32(m[0:4]) == Magic
}

// RunID returns the run id.
func (m Msg) RunID() uint32 { return binary.BigEndian.Uint32(m[4:8]) }

// Seq returns the sequence number.
func (m Msg) Seq() uint64 { return binary.BigEndian.Uint64(m[8:16]) }

// Sched returns the scheduled send time in nanoseconds of the sender's
// clock.
func (m Msg) Sched() int64 { return int64(binary.BigEndian.Uint64(m[16:24])) }

// NewMsg returns a message buffer of size bytes (at least HeaderLen) with
// the magic and run id set and zero padding; Stamp fills in the rest for
// each send, so the buffer is reused without allocation.
func NewMsg(size int, run uint32) (Msg, error) {
	if size < HeaderLen {
		return nil, fmt.Errorf("message size %d: must be at least %d bytes (sequence number and send time)", size, HeaderLen)
	}
	m := make(Msg, size)
	binary.BigEndian.PutUint32(m[0:4], Magic)
	binary.BigEndian.PutUint32(m[4:8], run)
	return m, nil
}

// Stamp writes the sequence number and scheduled send time into m, which
// must come from NewMsg.
func (m Msg) Stamp(seq uint64, sched int64) {
	binary.BigEndian.PutUint64(m[8:16], seq)
	binary.BigEndian.PutUint64(m[16:24], uint64(sched))
}
