// Package udp builds and parses Ethernet/IPv4/UDP frames, and runs the raw
// datagram backend over any frameio.FrameIO (Raw), which the xdp and dpdk
// kinds are made of.
//
// # Frames
//
// A Template holds the 42 header bytes for one pair of endpoints and
// builds frames into the caller's buffer, checksums always computed in
// software (correct on any card and on veth, where a kernel sender would
// otherwise leave a partial checksum). Parse validates a received frame
// once, through byte-slice views (Ethernet, IPv4, Header), and returns its
// payload and sender without allocating, or the reason it was refused:
// not ours (filtered, not a loss), malformed, or a bad checksum. Counters
// count the reasons for Stats.
//
// Only IPv4 without options, unfragmented, untagged (no VLAN) is taken;
// everything else is either someone else's or malformed for us (see
// Reason).
//
// # The raw backend
//
// Raw implements dgramio.Backend over a frameio.FrameIO: Queue builds frames
// into preallocated slots, Flush hands them over TxBatch at a time with one
// Kick per batch, Rx parses and copies payloads into its own buffers. The
// peers' MAC addresses come from Config.DstMAC, the frames they sent, or,
// for an address never heard from, a resolution that runs beside the poll
// loop, never in it (the kernel's neighbour table towards the next hop
// for xdp, ARP for dpdk) while the answers to it wait in a small queue;
// with an arp.Handler, Raw answers ARP for our address itself. The peer
// table holds Config.Peers peers, about 330 bytes each, and replaces the
// least recently heard from or answered when full.
//
// This package is one of dgramio's backends, reached through dgramio.New
// and dgramio.NewGroup; its exported names serve the module's other
// packages and are not a stable API of their own.
package udp
