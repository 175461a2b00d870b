// Package tcp holds the userspace TCP kinds: the tuning of the userspace
// TCP (Tuning, mapped onto netstack), and the tcp-xdp and tcp-dpdk
// backends (Backend over a FrameIO). The record framing they share with
// kernel tcp is package tcp/record; its names are reachable from here too.
package tcp
