// Package wire puts a lossy cable between two test hosts: a seeded wire
// emulator in Go, for kernels without netem (nor flower, nor gact).
//
// A Wire is host A and host B, each in its own anonymous network namespace,
// in one IPv4 subnet of 198.18.0.0/15, joined through a middle that forwards
// every Ethernet frame (ARP included) from one side to the other:
//
//	A ── veth ── MA ═══ forwarder ═══ MB ── veth ── B
//
// In each direction the forwarder applies an Impairment: loss, duplication,
// reordering, corruption of one byte of the IPv4 packet, a fixed delay plus
// jitter in a timed queue, and a rate limit. The decisions come from a
// seeded generator (Decider): the i-th frame of a direction gets the same
// decision for a given seed, in every run, so a failure replays with
// WIRE_SEED=<seed>. Counters per direction say what the wire did.
//
// # How frames cross the middle
//
// The middle is two namespaces, one holding MA (the peer of A's veth) and
// one holding MB (the peer of B's veth), made by two testhost pairs: so A
// and B are *testhost.Host values, and code written for a testhost.Pair
// runs unchanged over a Wire. MA and MB have no address: their kernels
// neither answer nor route; they only pass frames to one raw AF_PACKET
// socket per end (bound to the end, PACKET_IGNORE_OUTGOING so it never
// reads back what it sends, Linux >= 4.20). AF_PACKET rather than AF_XDP:
// it needs no XDP program, no UMEM and no driver support, it sees every
// frame the veth end receives, and batches of recvmmsg/sendmmsg are fast
// enough for a test wire. A socket belongs to the namespace it was made in
// for its whole life, so the two forwarding goroutines (one per direction)
// need not run on threads inside the middle namespaces; they sleep in
// ppoll(2) until a frame arrives or a delayed one is due, and never spin.
//
// Offloads (TX checksum, TSO, GSO) are off and IPv6 is disabled on all four
// veth ends, as testhost does for its pairs; GRO is off on the middle ends.
// So the wire carries frames as a cable would: complete checksums, no
// super-frames. A frame whose VLAN tag the receiving device moved into the
// packet's metadata gets it back before it is forwarded.
//
// Everything needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_NET_RAW) and
// Linux; the decision engine and the queue are pure Go and tested without.
package wire
