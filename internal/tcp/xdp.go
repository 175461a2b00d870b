package tcp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/frameio/afxdp"
	"github.com/dgramio/dgramio/frameio/afxdp/xdpprog"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/framequeue"
	"github.com/dgramio/dgramio/internal/ifaddr"
	"github.com/dgramio/dgramio/internal/kindcfg"
	"github.com/dgramio/dgramio/internal/queues"
	"github.com/dgramio/dgramio/internal/stack"
)

// NewXDP opens the tcp-xdp kind: the userspace TCP (NewOverFrameIO: the
// native engine, or gVisor netstack with Config.TCP.Stack) over an AF_XDP socket on cfg.Iface, queue cfg.XDP.QueueID
// (package frameio/afxdp), with the TCP variant of the XDP program.
//
// What the kernel still sees. The program redirects into the socket every
// IPv4 frame to cfg.LocalIP (TCP to any port, ICMP, UDP, fragments and IP
// options alike) and every ARP frame; frames to other addresses go on to
// the kernel. So the engine answers for its address as a host does: a RST
// to a SYN for a closed port, ICMP echo replies, unreachables. SYNs to
// cfg.LocalIP pass a per-CPU token bucket in the program first
// (cfg.XDP.SYNRate and SYNBurst, by default dgramio.DefaultSYNRate per
// second for the native engine, DefaultNetstackSYNRate for netstack;
// xdp-prog dropped_syn counts the rest), so that a SYN flood
// cannot fill the socket's ring ahead of the established connections'
// segments; and a SYN+FIN is dropped and counted (netstack's link endpoint:
// link rx_syn_fin_dropped; the native engine: tcp_syn_fin_dropped). The
// engine answers ARP for cfg.LocalIP and resolves its peers itself, so
// while the socket is open the kernel on that interface sees no ARP at all: it neither answers for
// its own addresses nor resolves neighbours there (entries it has go stale
// and are not refreshed). Do not run tcp-xdp on an interface the host needs
// for anything else. Close detaches the program and the kernel gets ARP
// back.
//
// The address. cfg.LocalIP must not be an address of the kernel's
// interface: NewXDP refuses that with a *dgramio.ConfigError on LocalIP. The
// kernel owning it would answer with a RST any segment of our connections
// that reaches it instead of the socket, and kill the connection: a frame
// that arrives on another queue of a multi-queue NIC (the program redirects
// only to the socket of its own queue; others pass), or anything in the
// instants the program is attached without the socket in its map. An
// address the kernel does not have makes the kernel drop such frames
// silently, and TCP retransmits. Use an address of the same subnet that the
// kernel does not hold (the peer's kernel resolves it by ARP, which
// netstack answers), or take it off the kernel's interface first
// (ip addr del; testhost.Host.DelAddr).
//
// Queues: one (NewXDPGroup opens several). On a NIC with several receive
// queues, steer the flow to cfg.XDP.QueueID (ethtool -N ... action
// QueueID) or most segments miss the socket.
//
// The socket belongs to the network namespace of the calling thread
// (inside testhost.Host.Do for tests). Config.CPUs pins by engine: the
// native engine runs on the poller alone, so, as on the raw kinds, the
// calling goroutine is locked to its thread and the thread bound to
// CPUs[0] (call NewXDP on the goroutine that will poll; Close gives the
// thread its affinity back, and on that goroutine also unlocks it). Netstack's goroutines must run on the poller's
// CPU, where the poll loop hands over to them with a Gosched on the same
// P: with netstack every thread of the process is bound to CPUs[0] until
// Close (cpu.PinProcess; Close gives each thread its affinity back), one
// pinned netstack backend per process, and the calling goroutine is not
// locked (a locked one would pay for each such yield with two thread
// hand-offs). Errors: a
// *dgramio.ConfigError for a bad field, afxdp.Open's (privileges, kernel
// features, carrier), or NewOverFrameIO's (a connect that fails or times
// out); everything is undone on error.
func NewXDP(cfg dgramio.Config) (dgramio.Backend, error) {
	cfg, err := kindcfg.PrepareOne(cfg, dgramio.KindTCPXDP)
	if err != nil {
		return nil, err
	}
	unpin, err := claimCPU(cfg)
	if err != nil {
		return nil, err
	}
	fio, opts, err := OpenXDP(cfg)
	if err != nil {
		unpin()
		return nil, err
	}
	closeXSK := opts.Close
	opts.Close = func() error { return errors.Join(closeXSK(), unpin()) }
	// NewOverFrameIO releases the socket (opts.Close) itself on error.
	b, err := NewOverFrameIO(cfg, fio, opts)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// claimCPU prepares the poller's CPU, Config.CPUs[0], for cfg's engine;
// release undoes it (nothing is done without CPUs). The native engine has
// no goroutines: the calling goroutine is locked to its thread and the
// thread bound to the CPU (cpu.Claim, as the raw kinds and every group
// queue do), and release, from any goroutine, gives the thread its
// affinity back (on that goroutine it also unlocks it). Netstack's
// goroutines must run on the poller's CPU: every thread of the process is
// bound to it (cpu.PinProcess), and release gives each its affinity back.
func claimCPU(cfg dgramio.Config) (release func() error, err error) {
	if len(cfg.CPUs) == 0 {
		return func() error { return nil }, nil
	}
	if cfg.TCP.Stack == dgramio.TCPStackNative {
		th, err := cpu.Claim(cfg.CPUs, false)
		if err != nil {
			return nil, err
		}
		return th.Release, nil
	}
	return cpu.PinProcess(cfg.CPUs[0])
}

// OpenXDP opens what NewXDP runs the userspace TCP on, without the stack:
// the AF_XDP socket on cfg.Iface, queue cfg.XDP.QueueID, with the TCP
// variant of the XDP program redirecting cfg.LocalIP's frames and ARP. It
// checks, as NewXDP does, that the kernel does not hold cfg.LocalIP on
// cfg.Iface (a *dgramio.ConfigError otherwise), and pins nothing (cfg.CPUs is
// for whoever polls). cfg is prepared (dgramio.Config.Prepare) for kind
// tcp-xdp with one queue, as NewXDP's. Package tcp/netconn uses it to run
// netstack from a poller of its own.
//
// With cfg.Pcap set, the FrameIO is a pcapio capture around the socket
// that writes every frame to <Pcap>-tx.pcap and <Pcap>-rx.pcap, and Mode
// ends in " +pcap" (NewXDP and NewXDPGroup's queues too).
//
// The returned Options carry Mode and Close (which flushes the capture,
// closes the socket and detaches the program); the FrameIO is the
// caller's from then on: pass
// both to NewOverFrameIO, or call Options.Close. Like NewXDP, it must run on
// a thread inside the interface's network namespace.
func OpenXDP(cfg dgramio.Config) (frameio.FrameIO, Options, error) {
	cfg, err := kindcfg.PrepareOne(cfg, dgramio.KindTCPXDP)
	if err != nil {
		return nil, Options{}, err
	}
	if err := checkKernelAddr(cfg); err != nil {
		return nil, Options{}, err
	}
	return openXSK(cfg, nil)
}

// OpenXDPDual is OpenXDP for a stack that holds an IPv6 address, host6,
// beside cfg.LocalIP (IPv4): the XDP program hands it the frames to
// either (attachTCP). host6 must not be an address the kernel holds on
// the interface either. An invalid host6 is OpenXDP.
func OpenXDPDual(cfg dgramio.Config, host6 netip.Addr) (frameio.FrameIO, Options, error) {
	if !host6.IsValid() {
		return OpenXDP(cfg)
	}
	cfg, err := kindcfg.PrepareOne(cfg, dgramio.KindTCPXDP)
	if err != nil {
		return nil, Options{}, err
	}
	if err := checkKernelAddr(cfg); err != nil {
		return nil, Options{}, err
	}
	if err := checkKernelAddr6(cfg, host6); err != nil {
		return nil, Options{}, err
	}
	prog, err := attachTCP(cfg, cfg.XDP.QueueID, 1, host6)
	if err != nil {
		return nil, Options{}, err
	}
	fio, o, err := openXSK(cfg, prog)
	if err != nil {
		return nil, Options{}, errors.Join(err, prog.Close())
	}
	closeXSK := o.Close
	o.Close = func() error { return errors.Join(closeXSK(), prog.Close()) }
	return withProgram(fio, prog), o, nil
}

// checkKernelAddr6 refuses a host6 (the IPv6 address of a stack of both
// families) that the kernel holds on cfg.Iface; an invalid one passes.
func checkKernelAddr6(cfg dgramio.Config, host6 netip.Addr) error {
	if !host6.IsValid() {
		return nil
	}
	cfg.LocalIP = host6
	if err := checkKernelAddr(cfg); err != nil {
		var ce *dgramio.ConfigError
		if errors.As(err, &ce) {
			ce.Field, ce.Value = "netconn.Options.LocalIP6", host6
		}
		return err
	}
	return nil
}

// checkKernelAddr refuses a LocalIP the kernel holds on cfg.Iface.
func checkKernelAddr(cfg dgramio.Config) error {
	owns, err := ifaddr.KernelHas(cfg.Iface, cfg.LocalIP)
	if err != nil {
		return err
	}
	if owns {
		return &dgramio.ConfigError{Field: "LocalIP", Value: cfg.LocalIP, Reason: fmt.Sprintf(
			"the kernel holds %v on %s and would reset our connections with every segment that misses the AF_XDP socket: use an address the kernel does not have (same subnet is fine; the userspace stack answers ARP), or take it off %s",
			cfg.LocalIP, cfg.Iface, cfg.Iface)}
	}
	return nil
}

// openXSK opens the AF_XDP socket of cfg's queue, registered into prog
// when it is set, else into a TCP program of its own (attachTCP), which
// the returned Options.Close detaches after the socket is closed and
// whose counters the FrameIO's Stats carry. With cfg.Pcap set, the socket
// is wrapped in a pcapio capture of every frame (pcapio.Wrap): the
// returned FrameIO and Options.Close are the capture's, whose Close
// flushes the files and then closes the socket.
func openXSK(cfg dgramio.Config, prog *afxdp.Program) (frameio.FrameIO, Options, error) {
	own := prog == nil
	if own {
		var err error
		if prog, err = attachTCP(cfg, cfg.XDP.QueueID, 1, netip.Addr{}); err != nil {
			return nil, Options{}, err
		}
	}
	o := afxdp.OptionsFromConfig(cfg)
	o.Program = xdpprog.TCP
	o.Port = cfg.Port
	o.Shared = prog
	x, err := afxdp.Open(o)
	if err != nil {
		if own {
			prog.Close()
		}
		return nil, Options{}, err
	}
	fio, mode, err := framequeue.Capture(x, cfg.Pcap, engineName(cfg)+" over xdp "+x.Mode())
	if err != nil {
		x.Close()
		if own {
			prog.Close()
		}
		return nil, Options{}, err
	}
	closeFn := fio.Close
	if own {
		closeFn = func() error { return errors.Join(fio.Close(), prog.Close()) }
		fio = withProgram(fio, prog)
	}
	return fio, Options{Mode: mode, Close: closeFn}, nil
}

// engineName is the userspace TCP/IP engine of cfg as Mode names it.
func engineName(cfg dgramio.Config) string {
	if cfg.TCP.Stack == dgramio.TCPStackNative {
		return "native"
	}
	return "netstack"
}

// attachTCP attaches the TCP program for cfg's queues first..first+n-1:
// every frame to cfg.LocalIP, and ARP, goes to the sockets; SYNs to it
// are limited per CPU by cfg.XDP.SYNRate and SYNBurst. An IPv6 LocalIP
// (the native engine's) takes every IPv6 frame to it and the neighbour
// solicitations for it instead (xdpprog.Objects.SetHost6), and IPv4
// then passes to the kernel unless it is for cfg.Port.
//
// host6, valid with an IPv4 LocalIP, is an IPv6 address the stack answers
// for too: IPv6 frames to it, and the solicitations for it, go to the
// sockets as well (xdpprog.Objects.SetHost6).
func attachTCP(cfg dgramio.Config, first, n int, host6 netip.Addr) (*afxdp.Program, error) {
	rate, burst, err := synLimit(cfg)
	if err != nil {
		return nil, err
	}
	return afxdp.AttachProgram(afxdp.ProgramOptions{Iface: cfg.Iface, Program: xdpprog.TCP, Port: cfg.Port,
		FirstQueue: first, Queues: n, Mode: cfg.XDP.Mode,
		Host: cfg.LocalIP, Host6: host6, SYNRate: uint32(rate), SYNBurst: uint32(burst)})
}

// synLimit is the XDP program's SYN bucket for cfg: cfg.XDP.SYNRate and
// SYNBurst, their engine's defaults for 0 (dgramio.DefaultSYNRate and
// DefaultSYNBurst for the native engine, DefaultNetstackSYNRate and
// DefaultNetstackSYNBurst for netstack), 0 and 0 (no limit) for a
// negative rate.
func synLimit(cfg dgramio.Config) (rate, burst int, err error) {
	defRate, defBurst := dgramio.DefaultSYNRate, dgramio.DefaultSYNBurst
	if cfg.TCP.Stack != dgramio.TCPStackNative {
		defRate, defBurst = dgramio.DefaultNetstackSYNRate, dgramio.DefaultNetstackSYNBurst
	}
	rate, burst = cfg.XDP.SYNRate, cfg.XDP.SYNBurst
	switch {
	case rate < 0:
		return 0, 0, nil
	case rate == 0:
		rate = defRate
	}
	if burst == 0 {
		burst = defBurst
	}
	if burst < 0 || int64(rate) > 1<<31 || int64(burst) > 1<<31 {
		return 0, 0, &dgramio.ConfigError{Field: "XDP.SYNBurst", Value: cfg.XDP.SYNBurst,
			Reason: "SYNRate and SYNBurst must be 0 (defaults) to 2^31; a negative SYNRate turns the limit off"}
	}
	return rate, burst, nil
}

// withProgram returns fio with prog's counters (layer "xdp-prog") added to
// its Stats, as a socket with a program of its own reports them. fio keeps
// its Wait and Interrupt (an AF_XDP socket, captured or not, has both) and
// its transmit slots (frameio.SlotWriter) if it has them; a
// FrameIO without them is returned as it is.
func withProgram(fio frameio.FrameIO, prog *afxdp.Program) frameio.FrameIO {
	_, w := fio.(frameio.Waiter)
	_, i := fio.(stack.Interrupter)
	if !w || !i {
		return fio
	}
	if sw, ok := fio.(frameio.SlotWriter); ok {
		return &progSlotFIO{progFIO{FrameIO: fio, prog: prog}, sw}
	}
	return &progFIO{FrameIO: fio, prog: prog}
}

// progSlotFIO is progFIO over a FrameIO whose transmit slots the engine
// builds in (an AF_XDP socket not captured): it keeps that too.
type progSlotFIO struct {
	progFIO
	sw frameio.SlotWriter
}

// TxSlot implements frameio.SlotWriter.
func (p *progSlotFIO) TxSlot() []byte { return p.sw.TxSlot() }

// TxCommit implements frameio.SlotWriter.
func (p *progSlotFIO) TxCommit(n int) bool { return p.sw.TxCommit(n) }

type progFIO struct {
	frameio.FrameIO
	prog *afxdp.Program
}

// Stats implements frameio.FrameIO: the socket's, and the program's.
func (p *progFIO) Stats() frameio.Stats {
	s := p.FrameIO.Stats()
	if c, err := p.prog.Counters(); err == nil {
		s.Layers = append(s.Layers, c.Layers()...)
	}
	return s
}

// Wait implements frameio.Waiter.
func (p *progFIO) Wait(ctx context.Context) error { return p.FrameIO.(frameio.Waiter).Wait(ctx) }

// WaitUntil implements frameio.DeadlineWaiter: the socket's, or Wait
// with a context that ends at deadline.
func (p *progFIO) WaitUntil(ctx context.Context, deadline time.Time) error {
	if dw, ok := p.FrameIO.(frameio.DeadlineWaiter); ok {
		return dw.WaitUntil(ctx, deadline)
	}
	if deadline.IsZero() {
		return p.Wait(ctx)
	}
	c, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	err := p.FrameIO.(frameio.Waiter).Wait(c)
	if ctx.Err() == nil && c.Err() != nil {
		return nil
	}
	return err
}

// Interrupt implements stack.Interrupter.
func (p *progFIO) Interrupt() { p.FrameIO.(stack.Interrupter).Interrupt() }

// xdpGroup is kind tcp-xdp with several queues.
type xdpGroup struct {
	cfg    dgramio.Config
	prog   *afxdp.Program
	rss    stack.RSS // empty on a device without RSS
	rssErr error     // why rss is empty

	arp ARPShare // the queues' engines share ARP replies

	slots *queues.Slots
}

var _ dgramio.QueueGroup = (*xdpGroup)(nil)

// NewXDPGroup opens kind tcp-xdp with cfg.Queues queues, sharing nothing
// on the data path: one XDP program (TCP variant, cfg.Port and ARP) is
// attached to cfg.Iface once, and OpenQueue(q) binds an AF_XDP socket to
// interface queue XDP.QueueID+q, registers it in the program's socket map,
// and runs a netstack of its own over it (NewOverFrameIO), polled by the
// calling goroutine (pinned to CPUs[q] when set). Each queue's netstack
// holds cfg.LocalIP and answers ARP on its queue; a server's queues all
// listen on cfg.Port, and each accepts the connections whose SYN the device
// puts on its queue. Every later segment of a connection must reach the
// same queue: a segment that reaches another queue finds no connection
// there and is answered with a RST.
//
// How connections come back to their queue.
//
// On a NIC with RSS, the device hashes each frame's addresses and ports
// (Toeplitz, with the key and indirection table that NewXDPGroup reads
// with ETHTOOL_GRSSH) to a receive queue, so a connection's segments all
// land on one queue: a server queue owns what RSS gives it. A client queue
// q chooses the source port of each connection (stack.SourcePorts) among
// its own share of the ephemeral ports (port % Queues == q, so two queues
// never use the same 4-tuple) such that the hash of the peer's answers,
// peer:Port → LocalIP:port, names device queue XDP.QueueID+q: the answers
// come back to the netstack that opened the connection. A device whose
// hash is not Toeplitz, or that will not tell its table, needs a flow rule
// per queue instead (ethtool -N <iface> flow-type tcp4 dst-port <p> action
// <q>). ARP replies, which RSS cannot hash by port, reach one queue only:
// the queues' engines (netstack or native) pass each other the replies
// they receive (ARPShare), so a reply learnt on one queue is known to all.
//
// On veth there is no RSS: a frame arrives on the receive queue numbered
// like the transmit queue the sender used, which XPS picks by the
// sender's CPU (testhost maps CPU q to queue q), and the kernel processes
// it on the sender's CPU, which also sends the kernel's answers (ACKs,
// SYN-ACKs, ARP replies). So a connection stays on one queue when every
// poller of both ends is pinned (Config.CPUs): what queue q's poller sends
// from CPU q is answered on CPU q, through transmit queue q, into receive
// queue q. A kernel peer that is not pinned moves its connection's
// transmit queue with its thread (TCP picks it again whenever nothing is
// in flight), and a connection that moves to another queue is reset there.
// Source ports are still drawn from each queue's share of the range, so
// 4-tuples stay distinct.
func NewXDPGroup(cfg dgramio.Config) (dgramio.QueueGroup, error) {
	return newXDPGroup(cfg, netip.Addr{})
}

func newXDPGroup(cfg dgramio.Config, host6 netip.Addr) (*xdpGroup, error) {
	cfg, err := kindcfg.PrepareGroup(cfg, dgramio.KindTCPXDP)
	if err != nil {
		return nil, err
	}
	if err := checkKernelAddr(cfg); err != nil {
		return nil, err
	}
	if err := checkGroup6(cfg); err != nil {
		return nil, err
	}
	if err := checkKernelAddr6(cfg, host6); err != nil {
		return nil, err
	}
	prog, err := attachTCP(cfg, cfg.XDP.QueueID, cfg.Queues, host6)
	if err != nil {
		return nil, err
	}
	g := &xdpGroup{cfg: cfg, prog: prog, slots: queues.NewSlots(cfg.Queues)}
	g.rss, g.rssErr = stack.ReadRSS(cfg.Iface)
	return g, nil
}

// OpenQueue opens queue q. See dgramio.QueueGroup.
func (g *xdpGroup) OpenQueue(q int) (dgramio.Backend, error) {
	if err := g.slots.Take("tcp: xdp", q); err != nil {
		return nil, err
	}
	qc := kindcfg.ForQueue(g.cfg, q)
	if g.cfg.LocalPort != 0 {
		p := int(g.cfg.LocalPort) + q
		if p > 65535 {
			return nil, &dgramio.ConfigError{Field: "LocalPort", Value: g.cfg.LocalPort, Reason: fmt.Sprintf("queue %d would use port %d", q, p)}
		}
		qc.LocalPort = uint16(p)
	}
	th, err := cpu.Claim(qc.CPUs, false)
	if err != nil {
		return nil, err
	}
	fio, opts, err := openXSK(qc, g.prog)
	if err != nil {
		th.Release()
		return nil, err
	}
	closeXSK := opts.Close
	opts.Close = func() error { return errors.Join(closeXSK(), th.Release()) }
	base := opts.Mode
	opts.Mode += fmt.Sprintf(", queue %d of %d", q, g.cfg.Queues)
	opts.OwnerKicks = true
	opts.ARPShare = &g.arp
	if qc.LocalPort == 0 {
		n, dev, local := g.cfg.Queues, qc.XDP.QueueID, g.cfg.LocalIP
		opts.SourcePorts = func(peer netip.AddrPort) []uint16 {
			return stack.SourcePorts(g.rss, local, peer, q, n, dev, 64)
		}
	}
	// NewOverFrameIO releases the socket (opts.Close) itself on error.
	b, err := NewOverFrameIO(qc, fio, opts)
	if err != nil {
		return nil, err
	}
	g.slots.Opened(q, base)
	return b, nil
}

// XDPQueues is kind tcp-xdp over several interface queues for a caller
// that runs an engine of its own on each (tcp/netconn's multi-queue
// Service): NewXDPGroup's XDP program and AF_XDP sockets, without the
// backends.
type XDPQueues struct{ g *xdpGroup }

// OpenXDPQueues attaches the TCP program of cfg (as NewXDPGroup) to
// cfg.Queues interface queues from cfg.XDP.QueueID. Open each queue's
// socket with Open, close them, then Close.
func OpenXDPQueues(cfg dgramio.Config) (*XDPQueues, error) {
	return OpenXDPQueuesDual(cfg, netip.Addr{})
}

// OpenXDPQueuesDual is OpenXDPQueues for engines that hold an IPv6
// address, host6, beside cfg.LocalIP (IPv4): the program takes the frames
// to either (attachTCP). An invalid host6 is OpenXDPQueues.
func OpenXDPQueuesDual(cfg dgramio.Config, host6 netip.Addr) (*XDPQueues, error) {
	g, err := newXDPGroup(cfg, host6)
	if err != nil {
		return nil, err
	}
	return &XDPQueues{g: g}, nil
}

// Open opens queue q's AF_XDP socket (kindcfg.ForQueue(cfg, q): the CPU and
// interface queue of q), registered into the shared program. The returned
// Options carry its Mode and Close and, unless Config.LocalPort is set,
// SourcePorts: the ports a connection of queue q dials from so that the
// peer's answers come back on q (see NewXDPGroup). Pinning is the
// caller's.
func (x *XDPQueues) Open(q int) (frameio.FrameIO, Options, error) {
	g := x.g
	if err := g.slots.Take("tcp: xdp", q); err != nil {
		return nil, Options{}, err
	}
	qc := kindcfg.ForQueue(g.cfg, q)
	fio, opts, err := openXSK(qc, g.prog)
	if err != nil {
		return nil, Options{}, err
	}
	base := opts.Mode
	opts.Mode += fmt.Sprintf(", queue %d of %d", q, g.cfg.Queues)
	if g.cfg.LocalPort == 0 {
		n, dev, local := g.cfg.Queues, qc.XDP.QueueID, g.cfg.LocalIP
		opts.SourcePorts = func(peer netip.AddrPort) []uint16 {
			return stack.SourcePorts(g.rss, local, peer, q, n, dev, 1024)
		}
	}
	g.slots.Opened(q, base)
	return fio, opts, nil
}

// Mode says how frames reach the queues and how dials pick their ports.
func (x *XDPQueues) Mode() string { return x.g.Mode() }

// AppendCounters appends the shared program's counters ("xdp-prog").
func (x *XDPQueues) AppendCounters(dst []dgramio.Counter) []dgramio.Counter {
	return x.g.AppendCounters(dst)
}

// Close detaches the program. Close the queues' sockets first.
func (x *XDPQueues) Close() error { return x.g.Close() }

// BaseMode is queue 0's Stats.Mode without its note. See dgramio.QueueGroup.
func (g *xdpGroup) BaseMode() string { return g.slots.BaseMode() }

// Mode says how frames reach the queues and how clients pick ports.
func (g *xdpGroup) Mode() string {
	ports := "source ports by Toeplitz RSS"
	switch {
	case len(g.rss.Indir) > 0:
	case g.rssErr != nil && !errors.Is(g.rssErr, dgramio.ErrNotSupported):
		ports = fmt.Sprintf("RSS table unreadable (%v): source ports by share only", g.rssErr)
	default:
		ports = "no RSS table: queue by the sender's CPU"
	}
	return "xdp program " + g.prog.Mode() + " by rx_queue_index, one " + engineName(g.cfg) + " engine per queue, " + ports
}

// AppendCounters appends the shared program's counters ("xdp-prog").
func (g *xdpGroup) AppendCounters(dst []dgramio.Counter) []dgramio.Counter {
	c, err := g.prog.Counters()
	if err != nil {
		return dst
	}
	return append(dst, c.Layers()...)
}

// Close detaches the program. Close the queues first.
func (g *xdpGroup) Close() error { return g.prog.Close() }
