package cli

import (
	"runtime"
	"slices"
	"testing"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/cpu"
)

// pin binds the tool's poller to its CPU for the kinds that need it (the
// userspace TCP kinds on the native engine too), and leaves the thread
// alone (unlocked, on every allowed CPU) for the userspace TCP kinds on
// netstack, whose backend pins the whole process; each gets the CPU in
// Config.CPUs.
func TestPinLeavesNetstackToItsBackend(t *testing.T) {
	allowed := allowedCPUs(t)
	c := allowed[len(allowed)-1]
	var cfgs []dgramio.Config
	for _, kind := range []dgramio.Kind{dgramio.KindUDP, dgramio.KindURing, dgramio.KindXDP, dgramio.KindDPDK, dgramio.KindTCP} {
		cfgs = append(cfgs, dgramio.Config{Kind: kind})
	}
	for _, kind := range []dgramio.Kind{dgramio.KindTCPXDP, dgramio.KindTCPDPDK} {
		for _, st := range []dgramio.TCPStack{"", dgramio.TCPStackNative, dgramio.TCPStackNetstack} {
			cfg := dgramio.Config{Kind: kind}
			cfg.TCP.Stack = st
			cfgs = append(cfgs, cfg)
		}
	}
	for _, cfg := range cfgs {
		kind := string(cfg.Kind) + "+" + string(cfg.TCP.Stack)
		done := make(chan struct{})
		go func() {
			// A goroutine of its own: a pin left behind ends with it.
			defer close(done)
			cpus, err := pin(cfg, c)
			if err != nil || !slices.Equal(cpus, []int{c}) {
				t.Errorf("%s: pin = %v, %v; want [%d]", kind, cpus, err, c)
				return
			}
			cur, err := cpu.Current()
			if err != nil {
				t.Error(err)
				return
			}
			if cfg.TCP.Stack == dgramio.TCPStackNetstack {
				if !pinsProcess(cfg) || !slices.Equal(cur, allowed) {
					t.Errorf("%s: the tool's thread runs on %v, want it left on %v", kind, cur, allowed)
				}
				return
			}
			if pinsProcess(cfg) || !slices.Equal(cur, []int{c}) {
				t.Errorf("%s: the tool's thread runs on %v, want [%d]", kind, cur, c)
			}
			if err := cpu.Unpin(); err != nil {
				t.Error(err)
				runtime.LockOSThread() // the narrowed thread ends with us
			}
		}()
		<-done
	}
	if cpus, err := pin(dgramio.Config{Kind: dgramio.KindTCPXDP}, -1); err != nil || cpus != nil {
		t.Errorf("no CPU: %v, %v", cpus, err)
	}
}
