package wire

import (
	"fmt"
	"math"
	"time"
)

// Direction names one way across the wire.
type Direction int

const (
	// AtoB is the direction from host A to host B.
	AtoB Direction = iota
	// BtoA is the direction from host B to host A.
	BtoA
)

// String implements fmt.Stringer.
func (d Direction) String() string {
	switch d {
	case AtoB:
		return "A→B"
	case BtoA:
		return "B→A"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// Impairment is what the wire does to the frames of one direction. The
// zero value forwards every frame unchanged, at once, in order.
//
// The probabilities are drawn independently per frame: a frame may be both
// duplicated and corrupted (the copy carries the same corruption), or both
// duplicated and held back for reordering (the copy then overtakes the
// original).
type Impairment struct {
	// Loss is the probability that a frame is dropped, 0..1.
	Loss float64
	// Dup is the probability that a frame is sent twice, 0..1.
	Dup float64
	// Reorder is the probability that a frame is held back until the next
	// frame of the same direction has been queued (that frame overtakes
	// it), 0..1. A frame held longer than its own release time plus
	// HoldMax goes out alone and does not count as reordered.
	Reorder float64
	// Corrupt is the probability that one byte of an IPv4 frame is
	// flipped, 0..1. The byte lies after the Ethernet header (and VLAN
	// tags), inside the IPv4 packet's total length, so the IPv4 header
	// checksum or the TCP/UDP checksum covers it. A real wire's FCS would
	// drop such a frame; here it reaches the peer's stack, whose checksums
	// must catch it. Frames other than IPv4 (ARP above all, which has no
	// checksum and would poison neighbour caches) are never corrupted.
	Corrupt float64
	// Delay holds every frame that long before it leaves, in a timed
	// queue. Jitter adds a uniform offset in [-Jitter, +Jitter] to each
	// frame's delay (a negative total is zero). The queue stays first in,
	// first out: jitter never lets a frame overtake an earlier one (only
	// Reorder does), a frame leaves no earlier than the one before it.
	Delay, Jitter time.Duration
	// Rate limits the direction to that many bits per second, counting 24
	// bytes per frame on top of the frame (FCS, preamble, inter-frame
	// gap) as an Ethernet link does. 0: no limit. Frames wait in the same
	// queue as delayed ones; when the queue is full, the wire stops
	// reading and the kernel's socket buffer in front of it fills and
	// drops (Counters.SocketDrops).
	Rate uint64
}

// HoldMax bounds how long after its release time a frame held for
// reordering waits for a frame to overtake it.
const HoldMax = 5 * time.Millisecond

// Validate reports a probability outside 0..1 or a negative duration.
func (im Impairment) Validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"Loss", im.Loss}, {"Dup", im.Dup}, {"Reorder", im.Reorder}, {"Corrupt", im.Corrupt}} {
		if math.IsNaN(p.v) || p.v < 0 || p.v > 1 {
			return fmt.Errorf("wire: %s=%v: want a probability in 0..1", p.name, p.v)
		}
	}
	if im.Delay < 0 || im.Jitter < 0 {
		return fmt.Errorf("wire: Delay=%v Jitter=%v: want durations >= 0", im.Delay, im.Jitter)
	}
	return nil
}

// Decision is what the wire does to one frame.
type Decision struct {
	// Drop: the frame is lost. The other fields are still drawn.
	Drop bool
	// Dup: the frame is sent twice.
	Dup bool
	// Reorder: the frame is held back until a later frame overtakes it.
	Reorder bool
	// Corrupt: one byte of the frame is flipped: the byte at CorruptAt
	// modulo the length of the IPv4 packet, counted from the start of the
	// IPv4 header, is XORed with CorruptMask (never 0).
	Corrupt     bool
	CorruptAt   uint32
	CorruptMask byte
	// Jitter is the offset added to the frame's delay, in
	// [-Impairment.Jitter, +Impairment.Jitter].
	Jitter time.Duration
}

// drawsPerFrame is the number of random words each decision takes, whatever
// the impairment: so the words used for frame i depend only on the seed
// and i, and changing an impairment in the middle of a run changes the
// outcome of later frames but not the random words they see.
const drawsPerFrame = 6

// Decider draws the decisions of one direction. Its sequence depends only
// on the seed and the direction: the i-th call of Next sees the same random
// words for a given seed, whatever happened before. It is not safe for
// concurrent use.
type Decider struct {
	state uint64
	im    Impairment
	n     uint64
}

// dirSalt separates the two directions' streams.
var dirSalt = [2]uint64{0x5157_4952_4541_4231, 0x5157_4952_4542_4131}

// NewDecider returns the decider of direction d for seed and impairment im
// (which should have passed Validate).
func NewDecider(seed uint64, d Direction, im Impairment) *Decider {
	s := seed ^ dirSalt[int(d)&1]
	return &Decider{state: mix64(s), im: im}
}

// SetImpairment changes the impairment for the following decisions. The
// random words they draw do not change.
func (dc *Decider) SetImpairment(im Impairment) { dc.im = im }

// Impairment returns the impairment in force.
func (dc *Decider) Impairment() Impairment { return dc.im }

// Frames returns the number of decisions drawn so far.
func (dc *Decider) Frames() uint64 { return dc.n }

// Next draws the decision for the next frame. It allocates nothing.
func (dc *Decider) Next() Decision {
	var w [drawsPerFrame]uint64
	for i := range w {
		w[i] = dc.next64()
	}
	dc.n++
	im := &dc.im
	d := Decision{
		Drop:        chance(w[0], im.Loss),
		Dup:         chance(w[1], im.Dup),
		Reorder:     chance(w[2], im.Reorder),
		Corrupt:     chance(w[3], im.Corrupt),
		CorruptAt:   uint32(w[4]),
		CorruptMask: byte(1 + (w[4]>>32)%255),
	}
	if im.Jitter > 0 {
		span := uint64(2*im.Jitter) + 1
		d.Jitter = time.Duration(w[5]%span) - im.Jitter
	}
	return d
}

// next64 is splitmix64: a 64-bit counter through a fixed mixing function.
// It is fully specified here, so a seed replays the same way with any Go
// version.
func (dc *Decider) next64() uint64 {
	dc.state += 0x9e3779b97f4a7c15
	return mix64(dc.state)
}

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// chance reports whether the uniform word w falls below probability p.
// p <= 0 is never, p >= 1 always.
func chance(w uint64, p float64) bool {
	if p <= 0 {
		return false
	}
	if p >= 1 {
		return true
	}
	// The top 53 bits as a float in [0, 1), as exact as p itself.
	return float64(w>>11)*(1.0/(1<<53)) < p
}
