//go:build dpdk

package dpdk

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/cleanup"
	"github.com/dgramio/dgramio/internal/poison"
	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Defaults of Options.
const (
	DefaultMTU      = 1500
	DefaultTxWait   = time.Millisecond
	DefaultLinkWait = 20 * time.Second
	// RxBurst is the most frames one RxFrames call takes.
	RxBurst = 512
	// txRefill is how many mbufs TxFrame takes from the pool at a time.
	txRefill = 32
	// xskBusyWait bounds how long Open retries a net_af_xdp queue set-up
	// that fails, as it does while the kernel still releases the queue of
	// an AF_XDP socket closed a moment ago.
	xskBusyWait = 2 * time.Second
)

// Options say which device a Port opens and how.
type Options struct {
	// PCI is a real device bound to vfio-pci ("0000:03:00.0"). Set one of
	// PCI, VDev or Iface.
	PCI string
	// VDev is a virtual device with its arguments, as the EAL's --vdev
	// takes it ("net_af_packet0,iface=veth0", "net_ring0"). Its name (up
	// to the first comma) must be unique among the vdevs open in the
	// process. An interface named by iface= is looked up in the network
	// namespace of the thread that calls Open.
	VDev string
	// Iface is the interface of the default device, net_af_xdp on Iface
	// (AF_XDP, Linux >= 4.18; Open attaches its XDP program through a BPF
	// link of the process, Linux >= 5.9, see the package documentation),
	// when neither PCI nor VDev is set.
	Iface string
	// MTU is the largest IP packet a frame carries. Default 1500.
	MTU int
	// RxDesc and TxDesc are the ring sizes asked for, clamped to the
	// device's limits (rte_eth_dev_adjust_nb_rx_tx_desc). Defaults 256
	// and 512: a small RX ring stays inside the cache share DDIO writes to.
	RxDesc, TxDesc int
	// Mbufs is the size of the port's mempool. Default 8191.
	Mbufs int
	// TxWait bounds how long Kick retries a TX ring that takes nothing
	// before it drops the rest of the batch (counted in TxDropped), so a
	// link that flaps cannot hang the sender. Default 1 ms.
	TxWait time.Duration
	// LinkWait bounds the wait for link up after the port starts. Default
	// 20 s.
	LinkWait time.Duration
	// Queues is the number of RX/TX queue pairs, each with a mempool of
	// Mbufs of its own. 0 means 1. With several, Open returns queue 0's
	// Port and Queue(q) the others; the device hashes flows over them
	// (RSS on IPv4/TCP/UDP) where it offers RSS. The default net_af_xdp
	// vdev gets queue_count=Queues (interface queues 0..Queues-1, fed by
	// the kernel's steering); a VDev of the caller's must allow as many
	// queues itself (net_af_xdp's queue_count).
	Queues int
	// Promiscuous leaves the port promiscuous. By default it is not (the
	// port receives frames to its own MAC, broadcast and multicast), and
	// the interface of a vdev gets back the flag it had before Open when
	// the Port is closed either way.
	Promiscuous bool
	// EAL are the EAL's settings, used if this Open starts the EAL.
	EAL EALOptions
}

// OptionsFrom maps a Config of the dpdk or tcp-dpdk kind onto Options: the
// device from DPDK.PCI, DPDK.VDev or Iface, ring and pool sizes, hugepages
// and extra EAL arguments, and an MTU large enough for MaxDatagram on the
// datagram kind (at least 1500).
func OptionsFrom(cfg dgramio.Config) Options {
	mtu := DefaultMTU
	hdr := 28 // IPv4 and UDP
	if cfg.IPv6() {
		hdr = 48 // the IPv6 fixed header and UDP
	}
	if !cfg.Kind.IsStream() && cfg.MaxDatagram+hdr > mtu {
		mtu = cfg.MaxDatagram + hdr
	}
	o := Options{
		PCI:    cfg.DPDK.PCI,
		VDev:   cfg.DPDK.VDev,
		Iface:  cfg.Iface,
		MTU:    mtu,
		RxDesc: cfg.DPDK.RxDesc,
		TxDesc: cfg.DPDK.TxDesc,
		Mbufs:  cfg.DPDK.Mbufs,
		EAL: EALOptions{
			HugePages: cfg.DPDK.HugePages,
			ExtraArgs: cfg.DPDK.ExtraArgs,
		},
	}
	if o.PCI != "" {
		o.EAL.PCI = []string{o.PCI}
	}
	return o
}

func (o Options) withDefaults() Options {
	if o.MTU == 0 {
		o.MTU = DefaultMTU
	}
	if o.RxDesc == 0 {
		o.RxDesc = 256
	}
	if o.TxDesc == 0 {
		o.TxDesc = 512
	}
	if o.Mbufs == 0 {
		o.Mbufs = 8191
	}
	if o.TxWait == 0 {
		o.TxWait = DefaultTxWait
	}
	if o.LinkWait == 0 {
		o.LinkWait = DefaultLinkWait
	}
	return o
}

func (o Options) validate() error {
	if err := (dgramio.DPDKOptions{PCI: o.PCI, VDev: o.VDev}).CheckDevice(o.Iface); err != nil {
		return err
	}
	if o.VDev != "" {
		if name, _ := splitDevargs(o.VDev); name == "" || strings.ContainsAny(name, " =") {
			return dgramio.BadField("DPDK.VDev", o.VDev, `a vdev is "name,key=value,...", like "net_af_packet0,iface=veth0"`)
		}
	}
	if o.MTU < 68 || o.MTU > 9000 {
		return dgramio.BadField("MTU", o.MTU, "must be between 68 and 9000")
	}
	if o.RxDesc < 1 || o.RxDesc > 32768 {
		return dgramio.BadField("DPDK.RxDesc", o.RxDesc, "must be between 1 and 32768")
	}
	if o.TxDesc < 1 || o.TxDesc > 32768 {
		return dgramio.BadField("DPDK.TxDesc", o.TxDesc, "must be between 1 and 32768")
	}
	if need := mbufsNeeded(o.RxDesc, o.TxDesc); o.Mbufs < need {
		return dgramio.BadField("DPDK.Mbufs", o.Mbufs, "must be at least %d for rings of %d and %d (both rings full, a full batch pending and a full burst held)", need, o.RxDesc, o.TxDesc)
	}
	if o.TxWait < 0 || o.LinkWait < 0 {
		return dgramio.BadField("TxWait", o.TxWait, "waits must not be negative")
	}
	if o.Queues < 0 || o.Queues > dgramio.MaxQueues {
		return dgramio.BadField("Queues", o.Queues, "must be between 1 and %d", dgramio.MaxQueues)
	}
	return nil
}

// mbufsNeeded is the least mempool that cannot run dry in steady state: the
// RX ring full, the TX ring full, a full batch pending in Go, a full burst
// held by the receiver, and the spare mbufs of TxFrame.
func mbufsNeeded(rxd, txd int) int { return rxd + 2*txd + RxBurst + txRefill }

// splitDevargs splits "name,k=v,..." into the name and the arguments.
func splitDevargs(s string) (name, args string) {
	name, args, _ = strings.Cut(strings.TrimSpace(s), ",")
	return strings.TrimSpace(name), args
}

// devargValue returns the value of key in "k=v,k2=v2" devargs.
func devargValue(args, key string) string {
	for _, kv := range strings.Split(args, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Info describes an open Port.
type Info struct {
	// Name is the DPDK device name (the vdev's name or the PCI address);
	// Devargs its arguments.
	Name, Devargs string
	// Driver is the PMD ("net_af_xdp", "net_af_packet", "net_ring", ...).
	Driver string
	// PortID is DPDK's port number; Socket the NUMA node of the port and
	// its mempool (-1: any).
	PortID uint16
	Socket int
	// Iface is the kernel interface under a vdev, or "".
	Iface string
	// RxDesc and TxDesc are the ring sizes after clamping to the device's
	// limits; MTU the port's MTU and MaxMTU the device's limit.
	RxDesc, TxDesc, MTU, MaxMTU int
	// LinkSpeed is the link speed in Mbit/s as the PMD reports it.
	LinkSpeed uint32
	// XDPProg is the id of the XDP program (libxdp's xsk_def_prog) a
	// net_af_xdp port attached to its interface through a BPF link of its
	// own, which detaches it at Close or when the process dies; 0 when the
	// port did not (another driver, an xdp_prog devarg, a program that was
	// there already, a kernel without XDP links: see Notes).
	XDPProg uint32
	// RSS is the set of RTE_ETH_RSS_* hash types the device spreads
	// flows over its queues with (several queues only); 0 when it offers
	// none (a vdev: whatever feeds its queues decides, for net_af_xdp the
	// kernel's steering of the interface's queues).
	RSS uint64
	// Notes are what Open and Close did that the user should know
	// (a refused set_mtu, promiscuous mode restored, an XDP program left by
	// the PMD and removed).
	Notes []string
}

// Port is one queue of one DPDK port as a frameio.FrameIO. See the package
// documentation for its threading rules and buffer lifetimes.
//
// A port opened with several queues (Options.Queues) is one Port per queue:
// Open returns queue 0's, which also owns the device, and Queue(q) the
// others. Each queue has its own mempool, rings and counters, and is
// driven by its own poller; the device is stopped and released when the
// last of its queues is closed.
type Port struct {
	c       *C.struct_dg_port
	pool    *C.struct_rte_mempool
	queue   int     // the queue's index on the device
	dev     *Port   // the Port that owns the device: queue 0's (itself)
	queues  []*Port // on dev, with several queues: every queue's Port
	pools   []*C.struct_rte_mempool
	open    int            // on dev: queues not closed yet (under control)
	devDone *frameio.Stats // on dev: the device's counters at teardown
	portID  C.uint16_t
	mac     net.HardwareAddr
	mtu     int
	room    int // bytes one TX mbuf holds
	maxTx   int // longest frame TxFrame takes: MTU + 14, within room
	devName string
	vdev    bool
	iface   string
	nsfd    int // the network namespace Open ran in

	promiscBefore bool
	xdpBefore     uint32          // XDP program on the interface before Open (0: none)
	mtuBefore     int             // the interface's MTU before Open (0: unknown)
	nl            *netlink.Handle // netlink in the interface's namespace, for its counters
	ifTxDropBase  uint64          // the interface's tx_dropped when Open read it first
	xsks          []sockFile      // the AF_XDP sockets net_af_xdp made (see closeXSKs)
	xskLink       bool            // attach net_af_xdp's program through a BPF link (see xsklink.go)
	xdpLink       int             // that link's descriptor, -1 when none
	xdpProg       uint32          // the program's id
	pkts          []sockFile      // the packet sockets net_af_packet made (for their drops)
	pktDrops      uint64          // their PACKET_STATISTICS drops, summed (reading resets them)
	pktQueued     uint64

	// Views of the shim's C arrays.
	rxData    []*C.uint8_t
	rxLen     []C.uint16_t
	txPend    []*C.struct_rte_mbuf
	txLen     []C.uint16_t
	spare     []*C.struct_rte_mbuf
	spareData []*C.uint8_t

	xstatNames []string
	xstats     *C.struct_rte_eth_xstat

	closed atomic.Bool
	// Our own counters.
	rxFrames, rxBytes, txFrames, txBytes atomic.Uint64
	txRingFull, txDropped, txOversize    atomic.Uint64

	mu    sync.Mutex // Stats and Info against Close
	info  Info
	final *frameio.Stats // the device's counters, read at Close

	// The padding keeps the fields of the next object on the heap (another
	// queue's, written by another core) off this one's last cache line.
	_ [64]byte
}

var _ frameio.FrameIO = (*Port)(nil)

// control serializes DPDK's control path (probe, configure, close), which
// is not safe for concurrent use; seq numbers names unique in the process.
var control struct {
	sync.Mutex
	seq int
}

// Open starts the EAL if it is not running (with o.EAL), attaches the device
// o names, configures one RX and one TX queue on a mempool on the port's
// NUMA node, starts the port and waits for its link, and for a vdev for the
// kernel interface's carrier (o.LinkWait, 20 s by default). A vdev on an
// interface must be opened from a thread inside the interface's network
// namespace (testhost's Host.Do, or a thread that called setns(2)); Close
// goes back into that namespace by itself. Open locks the calling goroutine
// to its thread while it runs.
//
// Errors: a *dgramio.ConfigError for bad Options, a *dgramio.PrivilegeError when
// the device is refused for want of privileges, an error matching
// dgramio.ErrNotSupported when the EAL or the PMD is missing, and otherwise an
// error that names the DPDK call that failed with the reason DPDK logged.
// Every step done before an error is undone.
func Open(o Options) (*Port, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := StartEAL(o.EAL); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	control.Lock()
	defer control.Unlock()
	control.seq++
	seq := control.seq
	takeLog() // forget older messages: errors quote what this Open logged

	p := &Port{nsfd: -1, xdpLink: -1}
	var undo cleanup.Stack
	ok := false
	defer func() {
		if !ok {
			_ = undo.Undo()
		}
	}()
	bus, devargs, err := p.device(o, seq)
	if err != nil {
		return nil, err
	}
	if err := p.saveIface(&undo); err != nil {
		return nil, err
	}
	res, err := p.start(o, bus, devargs, seq, &undo)
	if err != nil {
		return nil, err
	}
	p.takeResult(o, res)
	p.setPromiscuous(o)
	if err := p.readMAC(); err != nil {
		return nil, err
	}
	if err := p.waitLink(o.LinkWait, devargs); err != nil {
		return nil, err
	}
	if err := p.initQueues(o, res, &undo); err != nil {
		return nil, err
	}
	p.initXstats()
	ok = true
	return p, nil
}

// device says what Open attaches: the bus ("pci" or "vdev"), the device's
// name and arguments (for the default, a net_af_xdp vdev on o.Iface with
// queue_count=o.Queues), and the kernel interface under a vdev.
func (p *Port) device(o Options, seq int) (bus, devargs string, err error) {
	switch {
	case o.PCI != "":
		bus, p.devName = "pci", o.PCI
	case o.VDev != "":
		bus, p.vdev = "vdev", true
		p.devName, devargs = splitDevargs(o.VDev)
		p.iface = devargValue(devargs, "iface")
	default:
		bus, p.vdev = "vdev", true
		p.devName, devargs = "net_af_xdp"+strconv.Itoa(seq), "iface="+o.Iface
		if o.Queues > 1 {
			if err := checkCombined(o.Iface, o.Queues); err != nil {
				return "", "", err
			}
			devargs += ",queue_count=" + strconv.Itoa(o.Queues)
		}
		p.iface = o.Iface
	}
	p.info.Name, p.info.Devargs, p.info.Iface = p.devName, devargs, p.iface
	p.xskLink = wantXSKLink(p.devName, devargs, p.iface)
	return bus, devargs, nil
}

// saveIface keeps the calling thread's network namespace (Close goes back
// into it) and, under a vdev, what Close restores of the interface (its
// promiscuous flag, XDP program and MTU) and a netlink handle for its
// counters.
func (p *Port) saveIface(undo *cleanup.Stack) error {
	fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("dpdk: open network namespace: %w", err)
	}
	p.nsfd = fd
	undo.Add(func() error { return unix.Close(fd) })
	if p.iface == "" {
		return nil
	}
	flags, err := ifFlags(p.iface)
	if err != nil {
		return fmt.Errorf("dpdk: interface %q (of %s) in this thread's network namespace: %w", p.iface, p.devName, err)
	}
	p.promiscBefore = flags&unix.IFF_PROMISC != 0
	p.xdpBefore, _ = xdpProgID(p.iface)
	p.mtuBefore, _ = ifMTU(p.iface)
	undo.Add(p.restoreIface)
	if h, err := netlink.NewHandle(unix.NETLINK_ROUTE); err == nil {
		p.nl = h
		undo.Do(h.Close)
		if l, err := h.LinkByName(p.iface); err == nil && l.Attrs().Statistics != nil {
			p.ifTxDropBase = l.Attrs().Statistics.TxDropped
		}
	}
	return nil
}

// start attaches, configures and starts the device (attempt), and pushes
// the undoing of it all. On net_af_xdp a queue set-up that fails is tried
// again from scratch for up to xskBusyWait: the kernel releases the queue
// of an AF_XDP socket closed a moment ago (ours of a port just closed, or
// anyone's) from a work queue, and until then the PMD's bind fails, which
// it reports only as a failed socket.
//
// DPDK and libxdp open their descriptors without close-on-exec: each
// attempt holds off fork (syscall.ForkLock) and sets it on those it
// opened before it lets a fork happen (see closeOnExec).
func (p *Port) start(o Options, bus, devargs string, seq int, undo *cleanup.Stack) (C.struct_dg_result, error) {
	for busy := time.Now().Add(xskBusyWait); ; {
		syscall.ForkLock.RLock()
		before := inheritableFDs()
		res, steps, retry, err := p.attempt(o, bus, devargs, seq)
		closeOnExec(before)
		syscall.ForkLock.RUnlock()
		if err == nil {
			undo.Add(steps.Undo)
			return res, nil
		}
		if !retry || time.Now().After(busy) {
			return res, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// takeResult records the MTU and ring sizes the configuration got.
func (p *Port) takeResult(o Options, res C.struct_dg_result) {
	if res.mtu_refused != 0 {
		p.note("rte_eth_dev_set_mtu(%d) refused (%v); relying on the MTU given to rte_eth_dev_configure", o.MTU, rteError(int(res.mtu_errno)))
	}
	p.mtu = int(res.mtu)
	if p.mtu == 0 || p.mtu > o.MTU {
		p.mtu = o.MTU
	}
	p.info.MTU, p.info.MaxMTU = p.mtu, int(res.max_mtu)
	p.info.RxDesc, p.info.TxDesc = int(res.rx_desc), int(res.tx_desc)
}

// setPromiscuous turns promiscuous mode on when asked, or when the
// interface already was (someone else wants it), and off otherwise. A PMD
// that cannot is noted, not an error.
func (p *Port) setPromiscuous(o Options) {
	if o.Promiscuous || p.promiscBefore {
		if r := C.rte_eth_promiscuous_enable(p.portID); r != 0 {
			p.note("rte_eth_promiscuous_enable: %v", rteError(int(r)))
		}
	} else if r := C.rte_eth_promiscuous_disable(p.portID); r != 0 && r != -C.ENOTSUP {
		p.note("rte_eth_promiscuous_disable: %v", rteError(int(r)))
	}
}

// readMAC reads the port's MAC address.
func (p *Port) readMAC() error {
	var addr C.struct_rte_ether_addr
	if r := C.rte_eth_macaddr_get(p.portID, &addr); r != 0 {
		return p.dpdkError("rte_eth_macaddr_get", int(r))
	}
	p.mac = make(net.HardwareAddr, 6)
	for i := range p.mac {
		p.mac[i] = byte(addr.addr_bytes[i])
	}
	return nil
}

// waitLink waits up to wait for the PMD's link, and for a vdev the kernel
// interface's carrier too (net_af_xdp and net_af_packet report their link
// up whatever the interface's state).
func (p *Port) waitLink(wait time.Duration, devargs string) error {
	deadline := time.Now().Add(wait)
	for {
		var speed C.uint32_t
		up := C.dg_link(p.portID, &speed)
		if up < 0 {
			return p.dpdkError("rte_eth_link_get_nowait", int(up))
		}
		what := "link"
		if up == 1 && p.iface != "" {
			flags, err := ifFlags(p.iface)
			if err != nil {
				return fmt.Errorf("dpdk: interface %s: %w", p.iface, err)
			}
			if flags&(unix.IFF_UP|unix.IFF_RUNNING) != unix.IFF_UP|unix.IFF_RUNNING {
				up, what = 0, "carrier of "+p.iface
			}
		}
		if up == 1 {
			p.info.LinkSpeed = uint32(speed)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dpdk: %s: %s still down after %v (is the interface, its peer or the cable up?)", describe(p.devName, devargs), what, wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// initQueues makes the shim's buffers of every queue (p is queue 0 and
// owns the device) and, with several queues, the Ports of the others.
func (p *Port) initQueues(o Options, res C.struct_dg_result, undo *cleanup.Stack) error {
	p.dev = p
	if err := p.initShim(o, res); err != nil {
		return err
	}
	c := p.c
	undo.Do(func() { C.dg_port_free(c) })
	if len(p.pools) < 2 {
		return nil
	}
	p.queues = []*Port{p}
	for q := 1; q < len(p.pools); q++ {
		qp := &Port{dev: p, queue: q, pool: p.pools[q], portID: p.portID, mac: p.mac, mtu: p.mtu,
			devName: p.devName, vdev: p.vdev, iface: p.iface, nsfd: -1, info: p.info}
		if err := qp.initShim(o, res); err != nil {
			return err
		}
		qc := qp.c
		undo.Do(func() { C.dg_port_free(qc) })
		p.queues = append(p.queues, qp)
	}
	p.open = len(p.queues)
	return nil
}

// initXstats reads the names of the device's extended statistics and
// allocates the array Stats reads their values into.
func (p *Port) initXstats() {
	n := C.rte_eth_xstats_get_names(p.portID, nil, 0)
	if n <= 0 {
		return
	}
	names := (*C.struct_rte_eth_xstat_name)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.struct_rte_eth_xstat_name{}))))
	if names == nil {
		return // no extended statistics rather than no port
	}
	got := C.rte_eth_xstats_get_names(p.portID, names, C.uint(n))
	for _, nm := range unsafe.Slice(names, max(0, min(int(got), int(n)))) {
		p.xstatNames = append(p.xstatNames, C.GoString(&nm.name[0]))
	}
	C.free(unsafe.Pointer(names))
	p.xstats = (*C.struct_rte_eth_xstat)(C.calloc(C.size_t(len(p.xstatNames)+1), C.size_t(unsafe.Sizeof(C.struct_rte_eth_xstat{}))))
}

// checkCombined refuses Queues net_af_xdp queues on an interface with fewer
// combined channels: DPDK 22.11's net_af_xdp counts only combined channels
// (ETHTOOL_GCHANNELS), and takes an interface without any (veth) for one
// queue, failing the probe with a bare "Failed to init internals".
func checkCombined(iface string, queues int) error {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return fmt.Errorf("dpdk: ethtool: %w", err)
	}
	defer e.Close()
	ch, err := e.GetChannels(iface)
	combined := int(ch.CombinedCount)
	if err != nil || ch.MaxCombined == 0 {
		combined = 1
	}
	if combined < queues {
		return dgramio.NotSupported(fmt.Sprintf("%d net_af_xdp queues on %s", queues, iface), "",
			fmt.Sprintf("net_af_xdp uses combined channels only, and %s has %d (ethtool -L %s combined %d; veth has none: use DPDK.VDev \"net_af_packet0,iface=%s,qpairs=%d,framecnt=4096\", whose queues a PACKET_FANOUT hash feeds; it moves a flow to another queue while its own ring is short of room, so give framecnt room for every frame in flight)",
				iface, combined, iface, queues, iface, queues), err)
	}
	return nil
}

// initShim makes the C side of p's queue (dg_port_new) on its pool and the
// Go views of it.
func (p *Port) initShim(o Options, res C.struct_dg_result) error {
	c := C.dg_port_new(p.portID, C.uint16_t(p.queue), p.pool, RxBurst, C.uint16_t(res.tx_desc), txRefill, C.uint64_t(o.TxWait/time.Microsecond))
	if c == nil {
		return fmt.Errorf("dpdk: %s: out of memory for the arrays of queue %d", p.devName, p.queue)
	}
	p.c = c
	if p.info.Driver == "net_af_packet" {
		// A packet socket also sees what we send; drop our own frames.
		c.filter_own = 1
		for i := range p.mac {
			c.own_mac[i] = C.uint8_t(p.mac[i])
		}
	}
	p.room = int(c.room)
	p.maxTx = min(p.mtu+14, p.room)
	p.rxData = unsafe.Slice(c.rx_data, RxBurst)
	p.rxLen = unsafe.Slice(c.rx_len, RxBurst)
	p.txPend = unsafe.Slice(c.tx_pend, int(c.tx_cap))
	p.txLen = unsafe.Slice(c.tx_len, int(c.tx_cap))
	p.spare = unsafe.Slice(c.spare, txRefill)
	p.spareData = unsafe.Slice(c.spare_data, txRefill)
	return nil
}

// Queues returns the number of queues of the port (Options.Queues).
func (p *Port) Queues() int { return max(len(p.dev.queues), 1) }

// QueueIndex returns the queue's index on the device.
func (p *Port) QueueIndex() int { return p.queue }

// Queue returns the Port of queue q of a port opened with several queues
// (queue 0 is the Port Open returned), or nil when there is no such queue.
// Each is a frameio.FrameIO of its own, for its own poller.
func (p *Port) Queue(q int) *Port {
	d := p.dev
	if q == 0 && len(d.queues) == 0 {
		return d
	}
	if q < 0 || q >= len(d.queues) {
		return nil
	}
	return d.queues[q]
}

// attempt attaches the device (probe), makes its mempools on the port's
// NUMA node (makePools), and configures and starts it (configure). On
// success it returns the configuration's result and the stack that undoes
// it all; on error it has undone it itself, and retry says whether the
// failure was a net_af_xdp queue set-up (see xskBusyWait).
func (p *Port) attempt(o Options, bus, devargs string, seq int) (res C.struct_dg_result, undo *cleanup.Stack, retry bool, err error) {
	st := new(cleanup.Stack)
	defer func() {
		if err != nil {
			_ = st.Undo()
		}
	}()
	takeLog() // errors quote what this attempt logged
	if err := p.probe(bus, devargs, st); err != nil {
		return res, nil, false, err
	}
	// The mempools, on the port's NUMA node.
	socket := C.rte_eth_dev_socket_id(p.portID)
	if socket < 0 {
		socket = C.SOCKET_ID_ANY
	}
	p.info.Socket = int(socket)
	pools, err := p.makePools(o, seq, socket)
	if err != nil {
		return res, nil, false, err
	}
	if retry, err = p.configure(o, devargs, pools, socket, &res, st); err != nil {
		return res, nil, retry, err
	}
	return res, st, false, nil
}

// probe attaches the device (hotplug), unless it is a PCI device the EAL
// already probed at start, finds its ethdev port and driver, attaches
// net_af_xdp's program through our BPF link (see xsklink.go) and notes the
// packet sockets net_af_packet opened.
func (p *Port) probe(bus, devargs string, undo *cleanup.Stack) error {
	var port C.uint16_t
	var pktBefore []sockFile
	afpacket := strings.HasPrefix(p.devName, "net_af_packet")
	if afpacket {
		pktBefore = pmdSockets(unix.AF_PACKET)
	}
	if bus == "vdev" || !portByName(p.devName, &port) {
		C.dg_clear_errno()
		ret := withCStrings(func(s []*C.char) C.int { return C.rte_eal_hotplug_add(s[0], s[1], s[2]) }, bus, p.devName, devargs)
		if ret != 0 {
			return p.dpdkError("attach "+bus+" device "+describe(p.devName, devargs), int(ret))
		}
		undo.Do(func() {
			withCStrings(func(s []*C.char) C.int { return C.rte_eal_hotplug_remove(s[0], s[1]) }, bus, p.devName)
		})
		if !portByName(p.devName, &port) {
			return fmt.Errorf("dpdk: %s attached, but no ethdev port appeared for it (is it a network device?)%s", describe(p.devName, devargs), logHint())
		}
	}
	p.portID = port
	p.info.PortID = uint16(port)

	var devInfo C.struct_rte_eth_dev_info
	if ret := C.rte_eth_dev_info_get(port, &devInfo); ret != 0 {
		return p.dpdkError("rte_eth_dev_info_get", int(ret))
	}
	p.info.Driver = C.GoString(devInfo.driver_name)
	if p.xskLink && p.info.Driver == "net_af_xdp" {
		// Before the PMD sets its sockets up: it adopts the program.
		if err := p.attachXSKLink(devargs); err != nil {
			return err
		}
		undo.Do(p.detachXSKLink)
		p.info.XDPProg = p.xdpProg
	}
	p.pkts = nil
	if p.info.Driver == "net_af_packet" && afpacket {
		// The PMD opened its packet sockets in the probe.
		p.pkts = newSockets(pktBefore, pmdSockets(unix.AF_PACKET))
	}
	return nil
}

// makePools makes the mempools, one per queue, on socket: a queue's
// poller is not an EAL lcore, so a shared pool would have no per-core
// cache and every alloc and free would contend on its ring with the other
// queues. On error it frees those it made.
func (p *Port) makePools(o Options, seq int, socket C.int) ([]*C.struct_rte_mempool, error) {
	dataRoom := int(C.RTE_MBUF_DEFAULT_DATAROOM)
	if need := o.MTU + 14 + 4; need > dataRoom {
		dataRoom = (need + 1023) &^ 1023
	}
	var flags C.uint
	if p.vdev {
		// No device DMAs into a vdev's pool: let objects lie back to back
		// (see dg_pool_create).
		flags = C.RTE_MEMPOOL_F_NO_IOVA_CONTIG
	}
	nq := max(o.Queues, 1)
	pools := make([]*C.struct_rte_mempool, 0, nq)
	for q := 0; q < nq; q++ {
		name := "dgramio_" + strconv.Itoa(seq)
		if nq > 1 {
			name += "_" + strconv.Itoa(q)
		}
		pname := C.CString(name)
		C.dg_clear_errno()
		mp := C.dg_pool_create(pname, C.uint(o.Mbufs), C.uint16_t(dataRoom+C.RTE_PKTMBUF_HEADROOM), socket, flags)
		C.free(unsafe.Pointer(pname))
		if mp == nil {
			err := p.dpdkError(fmt.Sprintf("mempool of %d mbufs of %d bytes on socket %d", o.Mbufs, dataRoom, socket), -int(C.dg_rte_errno()))
			if errors.Is(err, syscall.ENOMEM) {
				err = fmt.Errorf("%w (lower DPDK.Mbufs, or give the EAL more memory: EALOptions.MemoryMB or -m in ExtraArgs)", err)
			}
			freePools(pools)
			return nil, err
		}
		pools = append(pools, mp)
		if p.info.Driver == "net_af_xdp" && C.dg_pool_chunks(mp) != 1 {
			freePools(pools)
			return nil, fmt.Errorf("dpdk: %s: the mempool of %d mbufs is in %d pieces, and net_af_xdp needs one piece for its UMEM (lower DPDK.Mbufs or give the EAL more memory)",
				p.devName, o.Mbufs, C.dg_pool_chunks(mp))
		}
	}
	return pools, nil
}

func freePools(pools []*C.struct_rte_mempool) {
	for _, mp := range pools {
		C.rte_mempool_free(mp)
	}
}

// configure configures and starts the port on pools (dg_port_configure),
// which it owns from then on: the undo it pushes stops and closes the port
// and then frees them (the PMD refers to them until closed), with our XDP
// link detached between stop and close, as in teardown. retry says
// whether the failure was a net_af_xdp queue set-up (see xskBusyWait).
func (p *Port) configure(o Options, devargs string, pools []*C.struct_rte_mempool, socket C.int, res *C.struct_dg_result, undo *cleanup.Stack) (retry bool, err error) {
	p.pool, p.pools = pools[0], pools
	port, nq := p.portID, len(pools)
	conf := C.struct_dg_conf{
		mtu:     C.uint16_t(o.MTU),
		rx_desc: C.uint16_t(o.RxDesc),
		tx_desc: C.uint16_t(o.TxDesc),
		socket:  socket,
		pool:    p.pool,
		queues:  C.uint16_t(nq),
		rss_hf:  C.RTE_ETH_RSS_IP | C.RTE_ETH_RSS_TCP | C.RTE_ETH_RSS_UDP,
	}
	if nq > 1 {
		arr := (**C.struct_rte_mempool)(C.calloc(C.size_t(nq), C.size_t(unsafe.Sizeof(p.pool))))
		if arr == nil {
			freePools(pools)
			return false, fmt.Errorf("dpdk: %s: out of memory", p.devName)
		}
		defer C.free(unsafe.Pointer(arr))
		copy(unsafe.Slice(arr, nq), pools)
		conf.pools = arr
	}
	afxdp := p.info.Driver == "net_af_xdp"
	var before []sockFile
	if afxdp {
		before = dpdkXSKs()
	}
	ret := C.dg_port_configure(port, &conf, res)
	if afxdp {
		// What the PMD opened now, kept open or not (see closeXSKs).
		p.xsks = newSockets(before, dpdkXSKs())
	}
	undo.Do(func() {
		C.rte_eth_dev_stop(port)
		p.detachXSKLink()
		C.rte_eth_dev_close(port)
		p.closeXSKs()
		freePools(pools)
	})
	if ret != 0 {
		step := C.GoString(res.step)
		err := p.dpdkError(step+" of "+describe(p.devName, devargs), int(ret))
		switch {
		case step == "rte_eth_dev_configure" && o.MTU > int(res.max_mtu) && res.max_mtu != 0:
			err = fmt.Errorf("%w (MTU %d is above the device's limit %d)", err, o.MTU, res.max_mtu)
		case step == "queue count":
			err = &dgramio.ConfigError{Field: "Queues", Value: nq, Reason: fmt.Sprintf(
				"%s offers %d RX and %d TX queues (a net_af_xdp vdev as many as its queue_count devarg, an interface's channels at most)",
				describe(p.devName, devargs), res.max_rx_queues, res.max_tx_queues)}
		}
		return afxdp && step == "rte_eth_rx_queue_setup", err
	}
	if nq > 1 {
		p.info.RSS = uint64(res.rss_hf)
	}
	return false, nil
}

// withCStrings calls fn with C copies of ss, freed afterwards.
func withCStrings(fn func([]*C.char) C.int, ss ...string) C.int {
	cs := make([]*C.char, len(ss))
	for i, s := range ss {
		cs[i] = C.CString(s)
	}
	defer func() {
		for _, c := range cs {
			C.free(unsafe.Pointer(c))
		}
	}()
	return fn(cs)
}

// portByName finds the ethdev port of a device.
func portByName(name string, port *C.uint16_t) bool {
	return withCStrings(func(s []*C.char) C.int { return C.rte_eth_dev_get_port_by_name(s[0], port) }, name) == 0
}

// describe names a device with its arguments.
func describe(name, args string) string {
	if args == "" {
		return name
	}
	return name + "," + args
}

func (p *Port) note(format string, args ...any) {
	p.info.Notes = append(p.info.Notes, fmt.Sprintf(format, args...))
}

// logHint returns what DPDK logged during the operation, for an error.
func logHint() string {
	if l := lastLines(takeLog(), 3); l != "" {
		return "; DPDK says: " + l
	}
	return ""
}

// dpdkError wraps a DPDK failure with the operation and what DPDK logged.
// ret is the call's negative return value; DPDK returns a negative errno
// from most calls but a bare -1 from some, which is then read as rte_errno
// (cleared before each call that can return it) or, when that is not set,
// as errMinusOne (which is also -EPERM). A failure for want of privileges becomes a
// *dgramio.PrivilegeError naming the capabilities the driver needs that the
// process lacks (see privilegeError); a device no loaded PMD takes becomes
// dgramio.ErrNotSupported.
func (p *Port) dpdkError(op string, ret int) error {
	var err error
	if ret == -1 {
		if e := int(C.dg_rte_errno()); e > 1 {
			err = rteError(e)
		} else {
			err = errMinusOne
		}
	} else {
		err = rteError(ret)
	}
	log := takeLog()
	says := ""
	if l := lastLines(log, 3); l != "" {
		says = "; DPDK says: " + l
	}
	msg := "dpdk: " + op + ": " + err.Error() + says
	if pe := p.privilegeError("dpdk: "+op+says, err); pe != nil {
		return pe
	}
	switch {
	case strings.HasPrefix(op, "attach") && (errors.Is(err, syscall.ENOTSUP) || strings.Contains(log, "failed to parse device")):
		return dgramio.NotSupported("DPDK device "+p.devName, "",
			"no PMD loaded from "+pmdDir()+" takes that name (a vdev's name starts with its driver's: net_af_xdp, net_af_packet, net_ring; is the PMD's package installed?)"+says, err)
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// errMinusOne is a DPDK call's -1 without an rte_errno: -EPERM from an
// ethdev call (rte_eth_dev_start passes on the PMD's), or a failure DPDK
// gives no reason for.
var errMinusOne = errors.New("failed with -1 (EPERM, or no reason given)")

// pmdDir is where the EAL loads PMDs from.
func pmdDir() string { return C.GoString(C.dg_pmd_dir()) }

// mbufsInUse is how many mbufs of the port's mempool are out of it (in
// rings, held, pending or spare), for tests.
func (p *Port) mbufsInUse() int { return int(C.rte_mempool_in_use_count(p.pool)) }

// spareMbufs is how many fresh mbufs TxFrame holds in reserve.
func (p *Port) spareMbufs() int { return int(p.c.spare_n) }

// MAC returns the port's hardware address (the interface's for a vdev).
func (p *Port) MAC() net.HardwareAddr { return p.mac }

// MTU returns the largest IP packet a frame carries.
func (p *Port) MTU() int { return p.mtu }

// Info describes the port: device, driver, ring sizes, notes.
func (p *Port) Info() Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.info
	i.Notes = append([]string(nil), p.info.Notes...)
	return i
}

// TxFrame copies frame into a fresh mbuf, padded with zeros to 60 bytes
// (frameio.MinFrame), and holds it until Kick. It returns false, copying
// nothing, when a full batch (the TX ring's size) is already pending, when
// the mempool has no mbuf left (both counted in TxRingFull), or when frame
// is longer than MTU+14 bytes (counted as tx_oversize), and after Close.
// The caller keeps frame.
func (p *Port) TxFrame(frame []byte) bool {
	if p.closed.Load() {
		return false
	}
	if len(frame) > p.maxTx {
		p.txOversize.Add(1)
		return false
	}
	c := p.c
	if c.tx_n == c.tx_cap {
		p.txRingFull.Add(1)
		return false
	}
	if c.spare_n == 0 && C.dg_tx_refill(c) == 0 {
		p.txRingFull.Add(1)
		return false
	}
	c.spare_n--
	i := int(c.spare_n)
	buf := unsafe.Slice((*byte)(unsafe.Pointer(p.spareData[i])), p.room)
	n := copy(buf, frame)
	if n < frameio.MinFrame {
		clear(buf[n:frameio.MinFrame])
		n = frameio.MinFrame
	}
	k := int(c.tx_n)
	p.txPend[k] = p.spare[i]
	p.txLen[k] = C.uint16_t(n)
	c.tx_n++
	p.txFrames.Add(1)
	p.txBytes.Add(uint64(len(frame)))
	return true
}

// Kick hands the pending frames to the device with rte_eth_tx_burst, in one
// cgo call. When the TX ring takes nothing for TxWait, the rest of the
// batch is freed and counted in TxDropped: a link that is down loses what
// is sent to it, as a wire would, and Kick does not hang. It returns
// net.ErrClosed after Close, and otherwise nil.
func (p *Port) Kick() error {
	if p.closed.Load() {
		return net.ErrClosed
	}
	n := p.c.tx_n
	if n == 0 {
		return nil
	}
	sent := C.dg_tx_flush(p.c)
	if sent < n {
		p.txDropped.Add(uint64(n - sent))
	}
	return nil
}

// RxFrames takes up to max frames (at most RxBurst) from the RX queue in one
// cgo call and calls deliver for each. A frame points into its mbuf and is
// valid only during deliver; the mbufs go back to the pool at the next
// RxFrames (or Close). Frames that span several mbufs are dropped and
// counted (rx_multiseg); on net_af_packet, frames with our own source MAC
// (our own transmissions, which a packet socket sees too) are dropped and
// counted (rx_own). It never blocks and returns 0 after Close.
func (p *Port) RxFrames(max int, deliver func(frame []byte)) int {
	if p.closed.Load() {
		return 0
	}
	if max <= 0 {
		if p.c.rx_n != 0 {
			C.dg_rx(p.c, 0) // gives the last burst back
		}
		return 0
	}
	if max > RxBurst {
		max = RxBurst
	}
	n := int(C.dg_rx(p.c, C.uint16_t(max)))
	if n == 0 {
		return 0
	}
	var bytes uint64
	for i := 0; i < n; i++ {
		f := unsafe.Slice((*byte)(unsafe.Pointer(p.rxData[i])), int(p.rxLen[i]))
		bytes += uint64(len(f))
		deliver(f)
		poison.Fill(f)
	}
	p.rxFrames.Add(uint64(n))
	p.rxBytes.Add(bytes)
	return n
}

// Close stops and closes the port, detaches the device, frees the mempool
// and every mbuf, and gives the interface under a vdev back its
// promiscuous flag and MTU (and removes an XDP program a PMD left on it). It runs
// the teardown inside the network namespace Open ran in, from whatever
// goroutine it is called. It must not race with TxFrame, Kick or RxFrames;
// it is safe to call more than once. Stats stay readable afterwards (the
// device's counters as they were at Close).
//
// A queue of a port with several queues gives its mbufs back and stops
// being usable; the device goes (as above) when the last queue is closed.
func (p *Port) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	d := p.dev
	if len(d.queues) == 0 {
		p.mu.Lock()
		defer p.mu.Unlock()
		s := p.stats()
		p.final = &s
		control.Lock()
		defer control.Unlock()
		return p.teardown()
	}
	p.mu.Lock()
	s := p.stats()
	p.final = &s
	p.mu.Unlock()
	control.Lock()
	defer control.Unlock()
	C.dg_port_release(p.c)
	d.open--
	if d.open > 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ds := d.deviceStats()
	d.devDone = &ds
	return d.teardown()
}

// teardown stops and releases the device; control and p.mu are held, and
// every queue is closed.
func (p *Port) teardown() error {
	takeLog()
	qs := p.queues
	if len(qs) == 0 {
		qs = []*Port{p}
	}
	var errs []error
	err := inNetns(p.nsfd, func() error {
		C.dg_port_release(p.c)
		if r := C.rte_eth_dev_stop(p.portID); r != 0 {
			errs = append(errs, p.dpdkError("rte_eth_dev_stop", int(r)))
		}
		// Our XDP link goes before the PMD closes: the PMD then finds no
		// program to remove (it would try through netlink, which a link
		// refuses), and its sockets are not redirected to any more.
		p.detachXSKLink()
		if r := C.rte_eth_dev_close(p.portID); r != 0 {
			errs = append(errs, p.dpdkError("rte_eth_dev_close", int(r)))
		}
		p.closeXSKs()
		bus := "vdev"
		if !p.vdev {
			bus = "pci"
		}
		if r := withCStrings(func(s []*C.char) C.int { return C.rte_eal_hotplug_remove(s[0], s[1]) }, bus, p.devName); r != 0 {
			errs = append(errs, p.dpdkError("detach "+p.devName, int(r)))
		}
		for _, mp := range p.pools {
			C.rte_mempool_free(mp)
		}
		for _, q := range qs {
			C.dg_port_free(q.c)
		}
		if p.iface != "" {
			if err := p.restoreIface(); err != nil {
				errs = append(errs, err)
			}
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	if p.xstats != nil {
		C.free(unsafe.Pointer(p.xstats))
		p.xstats = nil
	}
	if p.nl != nil {
		p.nl.Close()
	}
	unix.Close(p.nsfd)
	return errors.Join(errs...)
}

// closeXSKs closes the AF_XDP sockets net_af_xdp opened for this port and
// left open after rte_eth_dev_close. DPDK 22.11's net_af_xdp does not close
// the socket that owns its UMEM (libxdp keeps a reference that never drops),
// so the queue stays taken: the next net_af_xdp port on it fails to bind
// (EBUSY), and the socket keeps the freed mempool's pages pinned. Open
// noted which sockets the PMD made while it set up the queues (AF_XDP, new,
// without close-on-exec, as libxdp opens them); one that is still open, the
// same socket on the same descriptor, is closed here, before the mempool is
// freed.
func (p *Port) closeXSKs() {
	n := 0
	for _, x := range p.xsks {
		if ino, ok := socketInode(x.fd); ok && ino == x.ino && unix.Close(x.fd) == nil {
			n++
		}
	}
	p.xsks = nil
	if n > 0 {
		p.note("closed %d AF_XDP socket(s) net_af_xdp left open", n)
	}
}

// restoreIface puts back the interface's promiscuous flag as it was before
// Open, and removes an XDP program that appeared on it while we had it and
// is still there after the PMD closed. It runs in the interface's namespace.
func (p *Port) restoreIface() error {
	var errs []error
	flags, err := ifFlags(p.iface)
	if err != nil {
		// The interface is gone (its namespace or peer went first).
		p.note("interface %s gone at close: %v", p.iface, err)
		return nil
	}
	if now := flags&unix.IFF_PROMISC != 0; now != p.promiscBefore {
		if err := setPromisc(p.iface, p.promiscBefore); err != nil {
			errs = append(errs, fmt.Errorf("dpdk: restore promiscuous mode of %s: %w", p.iface, err))
		} else {
			p.note("promiscuous mode of %s restored to %v", p.iface, p.promiscBefore)
		}
	}
	// net_af_packet's set_mtu sets the kernel interface's MTU (a jumbo MTU
	// in Options); put it back.
	if now, err := ifMTU(p.iface); err == nil && p.mtuBefore != 0 && now != p.mtuBefore {
		if err := setIfMTU(p.iface, p.mtuBefore); err != nil {
			errs = append(errs, fmt.Errorf("dpdk: restore the MTU of %s to %d: %w", p.iface, p.mtuBefore, err))
		} else {
			p.note("MTU of %s restored to %d", p.iface, p.mtuBefore)
		}
	}
	if id, err := xdpProgID(p.iface); err == nil && id != 0 && id != p.xdpBefore {
		if err := detachXDP(p.iface); err != nil {
			errs = append(errs, fmt.Errorf("dpdk: remove the XDP program %d the PMD left on %s: %w", id, p.iface, err))
		} else {
			p.note("removed XDP program %d the PMD left on %s", id, p.iface)
		}
	}
	return errors.Join(errs...)
}

// Stats returns the port's counters: ours (frames and bytes delivered and
// accepted, TxRingFull, TxDropped) and the device's, in Layers. Layer
// "dpdk" holds rte_eth_stats (ipackets, opackets, ibytes, obytes; imissed,
// ierrors, rx_nombuf and oerrors with Loss set) and our own rx_multiseg
// (Loss), rx_own and tx_oversize; RxDropped is the sum of the rx-side Loss
// counters, not a further loss. Layer "dpdk-xstats" holds the PMD's
// extended statistics by the names the PMD gives them (never Loss: they
// repeat rte_eth_stats or name PMD-specific events). On net_af_xdp, layer
// "xsk" holds the socket's XDP_STATISTICS: rx_ring_full (frames the kernel
// dropped because the RX ring was full: the poller fell behind) and
// tx_invalid_descs are losses that DPDK counts nowhere, and are added to
// RxDropped and TxDropped; rx_dropped is already in imissed. On
// net_af_packet, layer "packet" holds the packet socket's
// PACKET_STATISTICS (tp_packets, and tp_drops, a loss: frames the kernel
// dropped because the packet ring was full), summed over the reads, and,
// with several queues, the fanout's PACKET_ROLLOVER_STATS: tp_rollover
// counts frames the kernel's hash chose a queue for and then handed to
// another queue's socket, because the first one's ring was short of room
// (tp_rollover_huge: of those, frames of a flow that filled most of that
// ring; tp_rollover_failed: frames no socket had room for, which tp_drops
// counts). A frame that rolled over arrived, but on a queue its flow does
// not belong to: out of order with the rest of its flow, and for a stream
// kind on a queue whose engine does not hold its connection. For a
// vdev on an
// interface, layer "iface" holds the kernel interface's own counters
// (rx_packets, tx_packets, rx_dropped, tx_dropped, rx_errors, tx_errors),
// which include the kernel's own traffic on that interface. Its tx_dropped
// counts from Open on: what the interface had dropped before (the
// kernel's own frames, such as the MLD report or router solicitation an
// interface sends when IPv6 comes up, dropped while a veth's other end was
// still down) is tx_dropped_before_open, not a loss of the port's. On
// net_af_xdp tx_dropped has Loss set: a frame the PMD handed to the kernel
// that the interface then dropped (a link that is down) is counted by DPDK
// as sent and nowhere else, once. On net_af_packet it has not: the kernel
// retries the frames of the packet ring at every send and counts each
// failed try.
// Safe from any goroutine, also after Close.
func (p *Port) Stats() frameio.Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.final != nil {
		return snapshot(*p.final)
	}
	return p.stats()
}

// snapshot returns s with a copy of its Layers, for a caller of Stats to
// keep.
func snapshot(s frameio.Stats) frameio.Stats {
	s.Layers = append([]dgramio.Counter(nil), s.Layers...)
	return s
}

// stats reads the counters; p.mu is held. A queue of a port with several
// queues has only its own counters and the device's per-queue ones
// (DeviceStats has the rest); a single-queue port has everything.
func (p *Port) stats() frameio.Stats {
	s := frameio.Stats{
		Mode:       "dpdk " + p.info.Driver,
		RxFrames:   p.rxFrames.Load(),
		RxBytes:    p.rxBytes.Load(),
		TxFrames:   p.txFrames.Load(),
		TxBytes:    p.txBytes.Load(),
		TxRingFull: p.txRingFull.Load(),
		TxDropped:  p.txDropped.Load(),
	}
	// The receiver adds to these in C (__atomic_fetch_add); load them
	// atomically here.
	multi := atomic.LoadUint64((*uint64)(unsafe.Pointer(&p.c.rx_multiseg)))
	own := atomic.LoadUint64((*uint64)(unsafe.Pointer(&p.c.rx_own)))
	s.Layers = append(s.Layers,
		dgramio.Counter{Layer: "dpdk", Name: "rx_multiseg", Value: multi, Loss: true},
		dgramio.Counter{Layer: "dpdk", Name: "rx_own", Value: own},
		dgramio.Counter{Layer: "dpdk", Name: "tx_oversize", Value: p.txOversize.Load()},
	)
	s.RxDropped = multi
	if len(p.dev.queues) == 0 {
		p.appendDevice(&s)
		return s
	}
	s.Mode += fmt.Sprintf(" queue %d of %d", p.queue, len(p.dev.queues))
	var es C.struct_rte_eth_stats
	if p.queue < C.RTE_ETHDEV_QUEUE_STAT_CNTRS && C.rte_eth_stats_get(p.portID, &es) == 0 {
		s.Layers = append(s.Layers,
			dgramio.Counter{Layer: "dpdk-queue", Name: "q_ipackets", Value: uint64(es.q_ipackets[p.queue])},
			dgramio.Counter{Layer: "dpdk-queue", Name: "q_opackets", Value: uint64(es.q_opackets[p.queue])},
			dgramio.Counter{Layer: "dpdk-queue", Name: "q_errors", Value: uint64(es.q_errors[p.queue])},
		)
	}
	return s
}

// DeviceStats returns the counters of the whole device of a port with
// several queues: what Stats of a single-queue port has besides its own
// frames (rte_eth_stats, XDP_STATISTICS, packet socket drops, the kernel
// interface's counters, xstats), as layers and in RxDropped and
// TxDropped. A group reports them once, beside its queues' own. Safe from
// any goroutine; after the last queue is closed it returns the counters as
// they were then.
func (p *Port) DeviceStats() frameio.Stats {
	d := p.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.devDone != nil {
		return snapshot(*d.devDone)
	}
	return d.deviceStats()
}

// deviceStats reads the device's counters; d.mu is held and the device
// is up.
func (d *Port) deviceStats() frameio.Stats {
	s := frameio.Stats{Mode: "dpdk " + d.info.Driver}
	d.appendDevice(&s)
	return s
}

// appendDevice adds the device's counters to s: layers, and its receive
// and transmit drops to RxDropped and TxDropped.
func (p *Port) appendDevice(s *frameio.Stats) {
	var es C.struct_rte_eth_stats
	C.rte_eth_stats_get(p.portID, &es)
	l := "dpdk"
	s.Layers = append(s.Layers,
		dgramio.Counter{Layer: l, Name: "ipackets", Value: uint64(es.ipackets)},
		dgramio.Counter{Layer: l, Name: "opackets", Value: uint64(es.opackets)},
		dgramio.Counter{Layer: l, Name: "ibytes", Value: uint64(es.ibytes)},
		dgramio.Counter{Layer: l, Name: "obytes", Value: uint64(es.obytes)},
		dgramio.Counter{Layer: l, Name: "imissed", Value: uint64(es.imissed), Loss: true},
		dgramio.Counter{Layer: l, Name: "ierrors", Value: uint64(es.ierrors), Loss: true},
		dgramio.Counter{Layer: l, Name: "rx_nombuf", Value: uint64(es.rx_nombuf), Loss: true},
		dgramio.Counter{Layer: l, Name: "oerrors", Value: uint64(es.oerrors), Loss: true},
	)
	s.RxDropped += uint64(es.imissed) + uint64(es.ierrors) + uint64(es.rx_nombuf)
	if len(p.pkts) > 0 {
		// net_af_packet in DPDK 22.11 reports nothing of the frames its
		// packet ring dropped when full; the kernel counts them in the
		// socket's PACKET_STATISTICS, which reading resets. Its fanout
		// also moves frames between the queues' sockets (see
		// rolloverStatistics).
		var roll rollover
		for _, f := range p.pkts {
			if ino, ok := socketInode(f.fd); !ok || ino != f.ino {
				continue
			}
			if q, d, err := packetStatistics(f.fd); err == nil {
				p.pktQueued += uint64(q)
				p.pktDrops += uint64(d)
			}
			if r, err := rolloverStatistics(f.fd); err == nil {
				roll.All += r.All
				roll.Huge += r.Huge
				roll.Failed += r.Failed
			}
		}
		s.Layers = append(s.Layers,
			dgramio.Counter{Layer: "packet", Name: "tp_packets", Value: p.pktQueued},
			dgramio.Counter{Layer: "packet", Name: "tp_drops", Value: p.pktDrops, Loss: true},
			dgramio.Counter{Layer: "packet", Name: "tp_rollover", Value: roll.All},
			dgramio.Counter{Layer: "packet", Name: "tp_rollover_huge", Value: roll.Huge},
			dgramio.Counter{Layer: "packet", Name: "tp_rollover_failed", Value: roll.Failed},
		)
		s.RxDropped += p.pktDrops
	}
	if len(p.xsks) > 0 {
		// net_af_xdp's imissed is XDP_STATISTICS rx_dropped only; a full RX
		// ring (the poller fell behind) and descriptors the kernel refused
		// are counted nowhere else.
		var x unix.XDPStatistics
		for _, f := range p.xsks {
			if st, err := xdpStatistics(f.fd); err == nil {
				x.Rx_dropped += st.Rx_dropped
				x.Rx_invalid_descs += st.Rx_invalid_descs
				x.Tx_invalid_descs += st.Tx_invalid_descs
				x.Rx_ring_full += st.Rx_ring_full
				x.Rx_fill_ring_empty_descs += st.Rx_fill_ring_empty_descs
				x.Tx_ring_empty_descs += st.Tx_ring_empty_descs
			}
		}
		s.Layers = append(s.Layers,
			dgramio.Counter{Layer: "xsk", Name: "rx_dropped", Value: x.Rx_dropped}, // in imissed
			dgramio.Counter{Layer: "xsk", Name: "rx_ring_full", Value: x.Rx_ring_full, Loss: true},
			dgramio.Counter{Layer: "xsk", Name: "rx_invalid_descs", Value: x.Rx_invalid_descs},
			dgramio.Counter{Layer: "xsk", Name: "tx_invalid_descs", Value: x.Tx_invalid_descs, Loss: true},
			dgramio.Counter{Layer: "xsk", Name: "rx_fill_ring_empty_descs", Value: x.Rx_fill_ring_empty_descs},
			dgramio.Counter{Layer: "xsk", Name: "tx_ring_empty_descs", Value: x.Tx_ring_empty_descs},
		)
		s.RxDropped += x.Rx_ring_full
		s.TxDropped += x.Tx_invalid_descs
	}
	if p.nl != nil {
		if l, err := p.nl.LinkByName(p.iface); err == nil && l.Attrs().Statistics != nil {
			st := l.Attrs().Statistics
			s.Layers = append(s.Layers,
				dgramio.Counter{Layer: "iface", Name: "rx_packets", Value: st.RxPackets},
				dgramio.Counter{Layer: "iface", Name: "tx_packets", Value: st.TxPackets},
				dgramio.Counter{Layer: "iface", Name: "rx_dropped", Value: st.RxDropped},
				dgramio.Counter{Layer: "iface", Name: "tx_dropped", Value: st.TxDropped - min(st.TxDropped, p.ifTxDropBase), Loss: p.info.Driver == "net_af_xdp"},
				dgramio.Counter{Layer: "iface", Name: "tx_dropped_before_open", Value: min(st.TxDropped, p.ifTxDropBase)},
				dgramio.Counter{Layer: "iface", Name: "rx_errors", Value: st.RxErrors},
				dgramio.Counter{Layer: "iface", Name: "tx_errors", Value: st.TxErrors},
			)
		}
	}
	if n := len(p.xstatNames); n > 0 && p.xstats != nil {
		got := int(C.rte_eth_xstats_get(p.portID, p.xstats, C.uint(n)))
		vals := unsafe.Slice(p.xstats, n)
		for i := 0; i < min(got, n); i++ {
			id := int(vals[i].id)
			if id < n {
				s.Layers = append(s.Layers, dgramio.Counter{Layer: "dpdk-xstats", Name: p.xstatNames[id], Value: uint64(vals[i].value)})
			}
		}
	}
}
