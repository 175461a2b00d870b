package tcp

import (
	"context"
	"net"
	"time"

	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/frameio/memio"
)

// hub is a test FrameIO joining one host to several memio pairs, as a
// switch port that floods: TxFrame copies each frame to every pair (the
// endpoints drop unicast frames for another MAC), RxFrames takes from each
// in turn. Threading as frameio.FrameIO requires.
type hub struct {
	ports []*memio.Port
	next  int
}

var _ frameio.FrameIO = (*hub)(nil)
var _ frameio.Waiter = (*hub)(nil)

// newHub makes n pairs; the hub holds their A ends (all with the same MAC),
// and the B ends (MAC ...:b0+i) are returned for the n other hosts.
func newHub(n int, opts memio.Options) (*hub, []*memio.Port) {
	h := &hub{}
	var bs []*memio.Port
	for i := 0; i < n; i++ {
		o := opts
		o.MACB = net.HardwareAddr{0x02, 0, 0, 0, 0, byte(0xb0 + i)}
		o.Seed = opts.Seed + uint64(i)
		a, b := memio.NewPair(o)
		h.ports = append(h.ports, a)
		bs = append(bs, b)
	}
	return h, bs
}

func (h *hub) TxFrame(f []byte) bool {
	ok := true
	for _, p := range h.ports {
		ok = p.TxFrame(f) && ok
	}
	return ok
}

func (h *hub) Kick() error {
	for _, p := range h.ports {
		if err := p.Kick(); err != nil {
			return err
		}
	}
	return nil
}

func (h *hub) RxFrames(max int, deliver func([]byte)) int {
	n := 0
	for i := 0; i < len(h.ports) && n < max; i++ {
		p := h.ports[(h.next+i)%len(h.ports)]
		n += p.RxFrames(max-n, deliver)
	}
	h.next++
	return n
}

func (h *hub) Wait(ctx context.Context) error {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for {
		for _, p := range h.ports {
			if err := p.Wait(done); err == nil || err == net.ErrClosed {
				return err
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func (h *hub) MAC() net.HardwareAddr { return h.ports[0].MAC() }
func (h *hub) MTU() int              { return h.ports[0].MTU() }
func (h *hub) Stats() frameio.Stats  { return h.ports[0].Stats() }
func (h *hub) Close() error {
	for _, p := range h.ports {
		p.Close()
	}
	return nil
}
