package cli

import (
	"context"
	"strings"
	"testing"
)

// echo --framing: a datagram kind refuses raw framing as a config
// failure, and an unknown framing is refused by the flag with the valid
// names. (A stream echo in raw framing: load.TestEchoRawFraming.)
func TestEchoFramingFlag(t *testing.T) {
	var out, errOut strings.Builder
	st := RunEcho(context.Background(), []string{"--kind", "udp", "--local", "198.18.0.1", "--framing", "raw"}, &out, &errOut)
	if st != 2 || !strings.HasPrefix(out.String(), "failed config: --framing raw") {
		t.Errorf("udp --framing raw: exit %d, output %q", st, out.String())
	}
	out.Reset()
	errOut.Reset()
	st = RunEcho(context.Background(), []string{"--kind", "tcp", "--framing", "u64"}, &out, &errOut)
	if st != 2 || !strings.Contains(errOut.String(), `"u16", "raw" or "u32"`) {
		t.Errorf("--framing u64: exit %d, stderr %q", st, errOut.String())
	}
}
