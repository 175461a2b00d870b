// Package tcp holds the userspace TCP kinds: the tuning of the userspace
// TCP (Tuning, mapped onto netstack), and the tcp-xdp and tcp-dpdk
// backends (Backend over a FrameIO). The record framing they share with
// kernel tcp is package tcp/record; its names are reachable from here too.
//
// This package is one of dgramio's backends, reached through dgramio.New
// and dgramio.NewGroup; its exported names serve the module's other
// packages and are not a stable API of their own.
package tcp
