//go:build linux

package conformance

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/core"
	"github.com/dgramio/dgramio/stack"
	"github.com/dgramio/dgramio/stack/native"
	"github.com/dgramio/dgramio/tcp"
)

// NativeXDP is the Factory of the native engine on the tcp-xdp path: a
// testhost pair as for ours-xdp, and on A an AF_XDP socket with the TCP
// variant of the XDP program (tcp.OpenXDP, as tcp-xdp opens it with
// TCP.Stack native) under native.New, on a memio.FakeClock that only the
// bench moves, driven by a poll loop as the backend drives it. A's kernel
// loses its address. What the program passes to the kernel (other ports,
// ICMP, UDP) does not reach the engine: those cases do not run here
// (CapIP), as for ours-xdp. Needs root and AF_XDP.
func NativeXDP() Factory { return nativeXDPFactory{} }

type nativeXDPFactory struct{}

// Name implements Factory.
func (nativeXDPFactory) Name() string { return "native-xdp" }

// New implements Factory.
func (nativeXDPFactory) New(tb TB, s Setup) (DUT, error) {
	v, err := newVeth(s)
	if err != nil {
		return nil, fmt.Errorf("native-xdp: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			v.close()
		}
	}()
	if err := v.dut.DelAddr(); err != nil {
		return nil, fmt.Errorf("native-xdp: address off A: %w", err)
	}
	cfg := core.Config{Kind: core.KindTCPXDP, Role: core.RoleServer, Iface: v.dut.Iface, LocalIP: v.dut.Addr, Port: dutPort}
	cfg.TCP.Stack = core.TCPStackNative
	cfg.XDP.Frames, cfg.XDP.RingSize = 512, 256
	var fio frameio.FrameIO
	var opts tcp.Options
	err = v.dut.Do(func() error {
		var err error
		fio, opts, err = tcp.OpenXDP(cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("native-xdp: %w", err)
	}
	w, okW := fio.(frameio.Waiter)
	irq, okI := fio.(stack.Interrupter)
	if !okW || !okI {
		opts.Close()
		return nil, fmt.Errorf("native-xdp: the AF_XDP FrameIO cannot Wait and Interrupt")
	}
	clk := memio.NewFakeClock(time.Unix(1_000_000, 0))
	e, err := native.New(fio, native.Options{Addr: v.dut.Addr, PrefixLen: v.dut.Prefix.Bits(), Clock: clk, MinRTO: s.RTOMin,
		MaxConns: 64, SendBuf: 64 << 10, RecvBuf: 64 << 10,
		Neighbors: map[netip.Addr]net.HardwareAddr{v.bench.Addr: v.bench.MAC}})
	if err != nil {
		opts.Close()
		return nil, fmt.Errorf("native-xdp: %w", err)
	}
	d := &nativeDUT{e: e, clk: clk, start: clk.Now(), wait: func(ctx context.Context) error { return w.Wait(ctx) },
		interrupt: irq.Interrupt, link: v.link}
	d.closeWire = func() error {
		err := opts.Close()
		if cerr := v.close(); err == nil {
			err = cerr
		}
		return err
	}
	d.info = Info{Name: "native-xdp", Kind: KindNative, MAC: v.dut.MAC, BenchMAC: v.bench.MAC,
		Addr: v.dut.Addr, BenchAddr: v.bench.Addr, Spare: v.spare, MTU: fio.MTU(),
		Lacks: map[Cap]string{CapIP: xdpLacks[CapIP], CapUDP: nativeNoUDP}}
	d.startLoop()
	tb.Logf("native-xdp: %s", fio.Stats().Mode)
	ok = true
	return d, nil
}
