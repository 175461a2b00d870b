package cli

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench/load"
)

// ToolFile is the JSON file a tool writes: the flags it was given, and its
// result R or why it failed (one of the two).
type ToolFile[R any] struct {
	ToolHeader
	Result  *R       `json:"result,omitempty"`
	Failure *Failure `json:"failure,omitempty"`
	// Intervals are the interval reports of loadgen --interval.
	Intervals []load.IntervalReport `json:"intervals,omitempty"`
}

// ToolHeader is what echo's and loadgen's JSON record of the flags they
// share.
type ToolHeader struct {
	Kind string `json:"kind"`
	CPU  int    `json:"cpu"`
	Wait bool   `json:"wait"`
	// Queues, Poll and CPUs are --queues, --poll and --cpus (with one
	// queue, CPUs is the one CPU or empty).
	Queues int    `json:"queues,omitempty"`
	Poll   string `json:"poll,omitempty"`
	CPUs   []int  `json:"cpus,omitempty"`
	// SQPollCPU and NAPI are --sqpoll-cpu (when given) and --napi, the
	// options of kind uring.
	SQPollCPU *int `json:"sqpoll_cpu,omitempty"`
	NAPI      bool `json:"napi,omitempty"`
	// TCPStack is --tcp-stack, the engine of tcp-xdp and tcp-dpdk (empty:
	// the default).
	TCPStack string `json:"tcp_stack,omitempty"`
}

// toolFlags are the flags echo and loadgen share: the packet path and its
// options, the pollers and their CPUs.
type toolFlags struct {
	kind                                     dgramio.Kind
	tcpStack                                 dgramio.TCPStack
	local, iface, cpus, poll, pcap, dpdkVDev *string
	port                                     *uint
	cpu, queues, batch, maxDgram             *int
	xdpFrames, xdpRing, dpdkRxDesc           *int
	wait                                     *bool
	uring                                    *uringFlags
}

// toolUsage is the help text of the flags whose meaning differs between
// the tools.
type toolUsage struct {
	port, queues, poll, batch string
}

// addToolFlags defines the shared flags on fs. --kind and --tcp-stack
// parse into their types: fs.Parse refuses a name that is not one.
func addToolFlags(fs *flag.FlagSet, u toolUsage) *toolFlags {
	t := &toolFlags{
		kind:       dgramio.KindUDP,
		local:      fs.String("local", "", "our address, IPv4 or IPv6; required for raw kinds (tcp-xdp, tcp-dpdk: one the kernel does not hold on --iface)"),
		port:       fs.Uint("port", 5000, u.port),
		iface:      fs.String("iface", "", "network interface (raw kinds)"),
		cpu:        fs.Int("cpu", -1, "CPU to pin the poller to (-1: not pinned)"),
		queues:     fs.Int("queues", 1, u.queues),
		cpus:       fs.String("cpus", "", "CPUs of the queues' pollers, one per queue, in queue order (\"0,1\"; a CPU may repeat with --poll yield)"),
		poll:       fs.String("poll", "", u.poll),
		wait:       fs.Bool("wait", false, "the same as --poll yield"),
		batch:      fs.Int("batch", load.DefaultBatch, u.batch),
		maxDgram:   fs.Int("max-datagram", 0, "largest message accepted (0: the kind's default)"),
		pcap:       fs.String("pcap", "", "capture prefix: the raw kinds write every frame to <prefix>-tx.pcap and <prefix>-rx.pcap (Config.Pcap)"),
		xdpFrames:  fs.Int("xdp-frames", 0, "UMEM frames of the AF_XDP kinds (0: the default)"),
		xdpRing:    fs.Int("xdp-ring", 0, "ring size of the AF_XDP kinds (0: the default)"),
		dpdkRxDesc: fs.Int("dpdk-rx-desc", 0, "RX ring size of the DPDK kinds (Config.DPDK.RxDesc; 0: the default, 256)"),
		dpdkVDev:   fs.String("dpdk-vdev", "", "DPDK virtual device of the DPDK kinds (Config.DPDK.VDev; empty: net_af_xdp on --iface)"),
		uring:      addURingFlags(fs),
	}
	fs.Var(&t.kind, "kind", "packet path: "+strings.Join(kindNames(dgramio.Kinds()), ", "))
	fs.Var(&t.tcpStack, "tcp-stack", `kinds tcp-xdp and tcp-dpdk: the userspace TCP/IP engine, "native" (the default) or "netstack" (Config.TCP.Stack)`)
	return t
}

// header records the flags as given, before they are checked, so that a
// tool that fails on them still writes what it was asked to do.
func (t *toolFlags) header() ToolHeader {
	h := ToolHeader{Kind: t.kind.String(), CPU: *t.cpu, Wait: *t.wait, Queues: *t.queues}
	t.uring.record(&h.SQPollCPU, &h.NAPI)
	h.TCPStack = t.tcpStack.String()
	return h
}

// config checks the shared flags and returns the Config of role with
// them: the kind, address, port, batch sizes, poll mode and the kinds'
// options. The queues' CPUs go into h.CPUs (and, with one queue, h.CPU),
// not into the Config: the tools pin their pollers themselves. Every
// error is a configuration error naming its flag.
func (t *toolFlags) config(role dgramio.Role, h *ToolHeader) (dgramio.Config, error) {
	localIP, err := parseAddr("local", *t.local)
	if err != nil {
		return dgramio.Config{}, err
	}
	if *t.port == 0 || *t.port > 65535 {
		return dgramio.Config{}, fmt.Errorf("--port %d: must be 1..65535", *t.port)
	}
	if err := checkIface(t.kind, *t.iface); err != nil {
		return dgramio.Config{}, err
	}
	if *t.batch < 1 {
		return dgramio.Config{}, fmt.Errorf("--batch %d: must be at least 1", *t.batch)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"max-datagram", *t.maxDgram}, {"xdp-frames", *t.xdpFrames}, {"xdp-ring", *t.xdpRing}, {"dpdk-rx-desc", *t.dpdkRxDesc}} {
		if f.v < 0 {
			return dgramio.Config{}, fmt.Errorf("--%s %d: must not be negative (0: the default)", f.name, f.v)
		}
	}
	mode, err := parsePoll(*t.poll, *t.wait)
	if err != nil {
		return dgramio.Config{}, err
	}
	qcpus, err := queueCPUs(*t.queues, *t.cpu, *t.cpus)
	if err != nil {
		return dgramio.Config{}, err
	}
	h.Poll, h.CPUs, h.Wait = string(mode), qcpus, mode == dgramio.PollYield
	if *t.queues == 1 && h.CPU < 0 && len(qcpus) == 1 {
		h.CPU = qcpus[0]
	}
	cfg := dgramio.Config{
		Kind:        t.kind,
		Role:        role,
		Iface:       *t.iface,
		LocalIP:     localIP,
		Port:        uint16(*t.port),
		MaxDatagram: *t.maxDgram,
		TxBatch:     *t.batch,
		RxBatch:     *t.batch,
		Pcap:        *t.pcap,
		Poll:        mode,
	}
	cfg.XDP.Frames, cfg.XDP.RingSize = *t.xdpFrames, *t.xdpRing
	cfg.DPDK.VDev, cfg.DPDK.RxDesc = *t.dpdkVDev, *t.dpdkRxDesc
	if err := t.uring.apply(&cfg); err != nil {
		return dgramio.Config{}, err
	}
	if t.tcpStack != "" {
		if cfg.Kind != dgramio.KindTCPXDP && cfg.Kind != dgramio.KindTCPDPDK {
			return dgramio.Config{}, fmt.Errorf("--tcp-stack is an option of kinds tcp-xdp and tcp-dpdk, not of %s", cfg.Kind)
		}
		cfg.TCP.Stack = t.tcpStack
	}
	return cfg, nil
}

// validate checks cfg as dgramio.New will (defaults applied), so that a
// setting the library refuses is a usage error said before anything
// starts (before the poller is pinned), naming the flag where it can.
func validate(cfg dgramio.Config) error {
	err := cfg.WithDefaults().Validate()
	var ce *dgramio.ConfigError
	if errors.As(err, &ce) {
		if f, ok := flagOfField[ce.Field]; ok {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return err
}

// flagOfField names the flag that sets a Config field, for validate.
var flagOfField = map[string]string{
	"LocalIP": "--local", "Dests": "--dst", "Port": "--port", "Iface": "--iface", "MaxDatagram": "--max-datagram",
	"TxBatch": "--batch", "RxBatch": "--batch", "Queues": "--queues", "CPUs": "--cpus", "DstMAC": "--dst-mac",
	"XDP.Frames": "--xdp-frames", "XDP.RingSize": "--xdp-ring", "DPDK.RxDesc": "--dpdk-rx-desc", "DPDK.VDev": "--dpdk-vdev",
	"URing.SQCPU": "--sqpoll-cpu", "URing.NAPI": "--napi", "TCP.Stack": "--tcp-stack",
}
