// Package tcp holds the userspace TCP kinds: the tuning of the userspace
// TCP (Tuning, mapped onto either engine), and the tcp-xdp and tcp-dpdk
// backends (Backend over a FrameIO) on the engine Config.TCP.Stack names:
// the native engine (package stack/native, the default) or gVisor netstack
// (package stack). Both are transports of the one stream layer
// (internal/stream). The record framing they share with
// kernel tcp is package tcp/record; its names are reachable from here too.
//
// This package is one of dgramio's backends, reached through dgramio.New
// and dgramio.NewGroup; its exported names serve the module's other
// packages and are not a stable API of their own.
package tcp
