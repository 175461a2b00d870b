//go:build linux

package testhost

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/dgramio/dgramio/internal/testutil"
)

// TestDriverXDPAttaches attaches an XDP_PASS program in driver (native)
// mode to both ends, with one and with several queues: veth accepts it only
// when its RX queues are at least its peer's TX queues, which New
// guarantees by giving both ends the same count. The attach runs inside
// Do, because the interface index is resolved in the caller's namespace.
func TestDriverXDPAttaches(t *testing.T) {
	testutil.RequireRoot(t)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.XDP,
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2 /* XDP_PASS */), asm.Return()},
		License:      "GPL",
	})
	testutil.SkipIfNotSupported(t, err)
	defer prog.Close()
	for _, queues := range []int{1, 2, 4} {
		p := newT(t, Options{Queues: queues})
		for _, h := range []*Host{p.A, p.B} {
			var l link.Link
			err := h.Do(func() error {
				var err error
				l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: h.Index, Flags: link.XDPDriverMode})
				return err
			})
			testutil.SkipIfNotSupported(t, err)
			t.Cleanup(func() { l.Close() })
			nl, err := h.Link()
			if err != nil {
				t.Fatal(err)
			}
			if x := nl.Attrs().Xdp; x == nil || !x.Attached || x.AttachMode != 1 /* XDP_ATTACHED_DRV */ {
				t.Errorf("queues=%d %s: XDP state %+v, want attached in driver mode", queues, h.Iface, x)
			}
		}
		roundTrip(t, p, "through XDP_PASS")
	}
}
