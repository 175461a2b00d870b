// Package memio is an in-memory frameio.FrameIO: two Ports joined by a
// virtual wire, for tests that need no privileges and no kernel.
//
// NewPair returns ports A and B. A frame given to A.TxFrame sits in A's
// bounded transmit ring until A.Kick puts it on the wire towards B, where
// B.RxFrames takes it. Each direction may be impaired (loss, duplication,
// reordering, corruption, delay) by a pseudo-random stream seeded from
// Options.Seed, so a failing run repeats exactly with the same seed and the
// same sequence of calls: Seed picks a seed for a test, logs it, and reads it
// back from MEMIO_SEED to rerun.
//
// # Rings and bounds
//
// Each port has a transmit ring of Options.TxSlots frames (TxFrame returns
// false when it is full, counted in Stats.TxRingFull) and each direction a
// wire of Options.RxSlots frames: a frame that finds the wire full at Kick is
// dropped and counted as rx_ring_full at the receiver, as a NIC drops what
// its receive ring cannot hold. RxSlots tells the wire's size, as an AF_XDP
// socket tells its receive ring, so that a TCP engine over the port bounds
// the receive windows it opens by it. Buffers are allocated once, in NewPair; the
// data path allocates nothing.
//
// # Buffer lifetime
//
// A frame passed to deliver is valid only inside the call. memio overwrites
// it with 0xDB as soon as deliver returns and reuses the buffer for a later
// frame, so code that keeps a delivered frame reads garbage in tests
// instead of working by luck.
//
// # Threading
//
// As frameio.FrameIO says: a port's transmit side (TxFrame, Kick) and its
// receive side (RxFrames, Wait) may run in two goroutines at once; each side
// is driven by one goroutine at a time. Both ports of a pair may be driven
// concurrently. MAC, MTU, Stats, SetImpairment and Interrupt (which ends
// a Wait, as package stack's Interrupter) may be called from any
// goroutine. Each direction of the wire has one mutex, so memio is a
// correct model of a device, not a fast one.
//
// This package is API: any FrameIO user may test over it.
package memio
