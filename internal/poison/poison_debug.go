//go:build dgramio_debug

package poison

// Debug is true in builds with the dgramio_debug tag: buffers handed out by
// Rx are overwritten at the next Rx, so code that keeps Packet.Data past its
// lifetime reads garbage in tests instead of working by luck.
const Debug = true

// Fill overwrites b with 0xDB in debug builds.
func Fill(b []byte) {
	for i := range b {
		b[i] = 0xDB
	}
}
