//go:build !dgramio_debug

// Package poison overwrites buffers whose lifetime has ended, in builds
// with the tag dgramio_debug, so that code keeping a Packet.Data past its
// lifetime fails in tests instead of working by luck.
package poison

// Debug is true in builds with the dgramio_debug tag: buffers handed out by
// Rx are overwritten at the next Rx, so code that keeps Packet.Data past its
// lifetime reads garbage in tests instead of working by luck.
const Debug = false

// Fill overwrites b with 0xDB in debug builds; here it does nothing.
func Fill(b []byte) {}
