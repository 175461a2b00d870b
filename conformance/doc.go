// Package conformance tests TCP/IP stacks packet by packet against the
// RFCs, with frames built and decoded by gopacket: our stack (stack/ and
// tcp/, gVisor netstack as the tcp-* kinds run it) side by side with the
// Linux kernel. It is modelled on gVisor's packetimpact (a test bench that
// crafts packets and a device under test), without docker: in memory, and
// over veth between network namespaces.
//
// # Pieces
//
// A Case is one requirement with its RFC section ("tcp-rst-in-window-
// challenge-ack", RFC 5961 §3.2). It runs against a DUT through an Env:
// the Bench sends frames (Send, Flow.Send) and expects what the DUT sends
// back (Expect, ExpectNothing, ExpectTimer, Flow.ExpectSYNACK, ...), and
// the DUT's socket side (Listen, Connect, Conn.Read, Write, Close) plays the
// application. Every frame the DUT sends is decoded and its checksums
// verified; the frames of a failed case are printed, tcpdump-like.
//
// DUTs (Factory, one fresh DUT per case):
//
//   - Ours ("ours-memio"): our stack on one port of a frameio/memio pair,
//     on a fake clock that only the bench moves (timer cases take
//     milliseconds). No privileges; always part of make test.
//   - Linux ("linux"): the kernel of namespace A of a testhost veth pair;
//     the bench is a packet socket on B, whose kernel has no address (so
//     it does not answer for the bench). Short kernel settings make timer
//     cases quick (a per-route rto_min, keepalive socket options). Root.
//   - OursXDP ("ours-xdp"): our stack over AF_XDP with the tcp-xdp XDP
//     program on A (tcp.OpenXDP). Only ARP and one TCP port reach our stack
//     there, so cases that need anything else do not run (Cap). Root.
//
// Waits are generous deadlines for something to happen, never assertions
// that something was fast; timers (RTO backoff, persist, keepalive,
// TIME-WAIT) are asserted by order and ratio.
//
// # Outcomes and differences
//
// go test ./conformance/ -run TestConformance -v names every subtest
// TestConformance/<dut>/<case>. A case that cannot apply to a DUT (it lacks
// a Cap) gets no subtest. An accepted difference (Accepted: the case, the
// outcome on each side, the RFC section, the reason) runs as an expected
// failure on the side that fails: its subtest passes with the reason
// logged, and fails if the case starts to pass. TestDifferences compares
// ours with Linux case by case and fails on a difference not in Accepted.
// TestMutants runs deliberately broken variants of our stack (Mutants) and
// asserts that the cases named for each defect fail. The command
// conformance/cmd/report prints the side-by-side table.
//
// # Pointing the suite at another stack
//
// Implement DUT (Info, Link, Clock, Listen, Connect, ListenUDP, Counters,
// Close; optionally Settler and AnswerWaiter) and a Factory that makes one
// per case, then call Run(t, factory) from a test, or RunAll(factory, nil)
// and WriteReport from a program. Link carries raw Ethernet frames between
// the bench and the stack; Info names the addresses (from 198.18.0.0/15)
// and the capabilities the stack lacks, with the reasons (a stack without
// IPv6 lacks CapIPv6: the IPv6 cases, which ask for it in their Setup and
// use the addresses Info gives from 2001:2::/48, are then n/a, with the
// reason in the report's IPv6 section); Counters maps
// its counters to the Counter* names. A stack with its own clock gives a
// Clock whose Fake is false and whose Advance sleeps.
//
// This package is API: its suite runs against any stack that implements
// its DUT interface.
package conformance
