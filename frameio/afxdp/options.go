package afxdp

import (
	"net/netip"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/afxdp/xdpprog"
)

// Headroom is XDP_PACKET_HEADROOM, the space the kernel keeps in front of a
// received frame.
const Headroom = 256

// Defaults, the same as dgramio.Config's XDP defaults.
const (
	DefaultFrameSize   = 4096
	DefaultFrames      = 4096
	DefaultRingSize    = 2048
	DefaultCarrierWait = 5 * time.Second
	// DefaultMaxFrame is a 1500-byte IP packet in an Ethernet frame.
	DefaultMaxFrame = 1514
)

// ethHeader is the Ethernet header's length; udpHeaders is Ethernet, IPv4
// without options and UDP; udpHeaders6 Ethernet, the IPv6 fixed header and
// UDP.
const (
	ethHeader   = 14
	udpHeaders  = ethHeader + 20 + 8
	udpHeaders6 = ethHeader + 40 + 8
)

// MaxFrame returns the longest frame (Ethernet header included, no FCS) that
// one RX buffer holds for a UMEM frame of frameSize bytes: frameSize minus
// the 256-byte headroom, rounded down to whole KiB, as ixgbe computes it in
// zero-copy mode (3072 for 4096, 1024 for 2048). It returns 0 when nothing
// fits.
func MaxFrame(frameSize int) int {
	n := frameSize - Headroom
	if n < 1024 {
		return 0
	}
	return n / 1024 * 1024
}

// Options configure one AF_XDP socket. The zero value of a field means its
// default; Validate checks them before any system call.
type Options struct {
	// Iface is the network interface. Required.
	Iface string
	// QueueID is the interface queue the socket binds to (and its index in
	// the program's socket map). Default 0.
	QueueID int
	// FrameSize is the UMEM frame size, 2048 or 4096. Default 4096.
	FrameSize int
	// Frames is the number of UMEM frames, a power of two, at least 64:
	// half receive, half transmit. Default 4096.
	Frames int
	// RingSize is the size of each of the four rings, a power of two no
	// larger than Frames. Default 2048.
	RingSize int
	// Mode is "" (driver mode, then SKB mode as a reported fallback),
	// "driver" or "skb".
	Mode dgramio.XDPMode
	// Copy is "" (zero-copy where the driver offers it, else copy), "copy"
	// or "zerocopy" (an error where the driver does not offer it).
	Copy dgramio.XDPCopy
	// Program selects the XDP program: xdpprog.UDP (the default),
	// xdpprog.UDPARP or xdpprog.TCP.
	Program xdpprog.Variant
	// Port is our UDP or TCP port, the one the program matches. Required.
	Port uint16
	// MaxFrame is the longest frame the caller will receive or send
	// (Ethernet header included). Open refuses it when it exceeds
	// MaxFrame(FrameSize). Default 1514.
	MaxFrame int
	// CarrierWait bounds the wait for carrier after bind (a bind can reset
	// the link). Default 5 s; negative: do not wait.
	CarrierWait time.Duration
	// IPv6 turns the program's IPv6 steering on (xdpprog.Objects.SetIPv6):
	// IPv6 UDP (or TCP) to Port is redirected as IPv4 is, and with
	// variants UDPARP and TCP the neighbour solicitations and
	// advertisements too. Off, every IPv6 frame goes to the kernel.
	IPv6 bool
	// NeighHost, with Program xdpprog.UDPARP, is the address whose
	// neighbour discovery the socket's own program redirects (ARP for an
	// IPv4 address, solicitations and advertisements for an IPv6 one;
	// xdpprog.Objects.SetHost, SetHost6): the kernel keeps the rest, and
	// its own addresses on the interface keep resolving. Unset: every
	// ARP (and, with IPv6, neighbour discovery) frame. With Shared, the
	// shared program's ProgramOptions.Host decides.
	NeighHost netip.Addr
	// MLock locks the UMEM in memory with mlock(2) (it needs CAP_IPC_LOCK or
	// a large enough RLIMIT_MEMLOCK). The kernel pins the pages it uses
	// anyway; this also keeps the rest of the mapping resident.
	MLock bool
	// Shared, when set, is the program the socket registers into
	// (AttachProgram: one program and socket map for the queues of a
	// group), at index QueueID, instead of loading and attaching one of its
	// own; Program, Port, Mode and IPv6 are then the shared program's. Close
	// takes the socket out of the map and leaves the program attached.
	Shared *Program
}

// WithDefaults returns o with every zero field set to its default.
func (o Options) WithDefaults() Options {
	if o.FrameSize == 0 {
		o.FrameSize = DefaultFrameSize
	}
	if o.Frames == 0 {
		o.Frames = DefaultFrames
	}
	if o.RingSize == 0 {
		o.RingSize = DefaultRingSize
		if o.RingSize > o.Frames {
			o.RingSize = o.Frames
		}
	}
	if o.MaxFrame == 0 {
		o.MaxFrame = DefaultMaxFrame
	}
	if o.CarrierWait == 0 {
		o.CarrierWait = DefaultCarrierWait
	}
	return o
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// Validate checks o (after WithDefaults) without making any system call.
// Each problem is a *dgramio.ConfigError naming the field.
func (o Options) Validate() error {
	if o.Iface == "" {
		return dgramio.BadField("Iface", o.Iface, "the network interface to bind is required")
	}
	if o.QueueID < 0 || o.QueueID > 1<<16 {
		return dgramio.BadField("QueueID", o.QueueID, "must be a queue index, 0..65536")
	}
	if o.FrameSize != 2048 && o.FrameSize != 4096 {
		return dgramio.BadField("FrameSize", o.FrameSize, "must be 2048 or 4096")
	}
	if !isPow2(o.Frames) || o.Frames < 64 || o.Frames > 1<<20 {
		return dgramio.BadField("Frames", o.Frames, "must be a power of two, 64..1048576")
	}
	if !isPow2(o.RingSize) || o.RingSize > o.Frames {
		return dgramio.BadField("RingSize", o.RingSize, "must be a power of two no larger than Frames (%d)", o.Frames)
	}
	switch o.Mode {
	case "", "driver", "skb":
	default:
		return dgramio.BadField("Mode", o.Mode, `use "", "driver" or "skb"`)
	}
	switch o.Copy {
	case "", "copy", "zerocopy":
	default:
		return dgramio.BadField("Copy", o.Copy, `use "", "copy" or "zerocopy"`)
	}
	if o.Mode == "skb" && o.Copy == "zerocopy" {
		return dgramio.BadField("Copy", o.Copy, `zero-copy needs driver-mode XDP; SKB mode copies by nature (use Mode "driver" or Copy "")`)
	}
	if !o.Program.Valid() {
		return dgramio.BadField("Program", o.Program, "use xdpprog.UDP, xdpprog.UDPARP or xdpprog.TCP")
	}
	if o.Port == 0 && o.Shared == nil {
		return dgramio.BadField("Port", o.Port, "the port the XDP program matches is required")
	}
	if o.MaxFrame < ethHeader {
		return dgramio.BadField("MaxFrame", o.MaxFrame, "must be at least %d (an Ethernet header)", ethHeader)
	}
	if m := MaxFrame(o.FrameSize); o.MaxFrame > m {
		hdr := udpHeaders
		if o.IPv6 {
			hdr = udpHeaders6
		}
		return dgramio.BadField("MaxFrame", o.MaxFrame,
			"a %d-byte frame does not fit one RX buffer of a %d-byte UMEM frame: %d minus %d headroom, rounded down to whole KiB, is %d "+
				"(ixgbe zero-copy drops longer frames without counting them); the largest UDP payload that fits is %d bytes: "+
				"lower the maximum datagram, or use FrameSize 4096",
			o.MaxFrame, o.FrameSize, o.FrameSize, Headroom, m, m-hdr)
	}
	return nil
}

// OptionsFromConfig returns the options of an AF_XDP kind's Config (after
// dgramio.Config.WithDefaults): kind xdp takes the UDP program (UDP+ARP with
// XDP.OwnARP, for LocalIP's neighbour discovery) on the port it receives on (Port for a server, LocalPort for
// a client) and frames of up to MaxDatagram of payload; kind tcp-xdp takes
// the TCP program on Port (which the server listens on and the client's
// answers come from) and 1514-byte frames.
func OptionsFromConfig(c dgramio.Config) Options {
	o := Options{
		Iface:       c.Iface,
		QueueID:     c.XDP.QueueID,
		FrameSize:   c.XDP.FrameSize,
		Frames:      c.XDP.Frames,
		RingSize:    c.XDP.RingSize,
		Mode:        c.XDP.Mode,
		Copy:        c.XDP.Copy,
		CarrierWait: c.XDP.CarrierWait,
		IPv6:        c.IPv6(),
	}
	switch c.Kind {
	case dgramio.KindTCPXDP:
		o.Program = xdpprog.TCP
		o.Port = c.Port
		o.MaxFrame = DefaultMaxFrame
	default:
		o.Program = xdpprog.UDP
		if c.XDP.OwnARP {
			o.Program = xdpprog.UDPARP
			o.NeighHost = c.LocalIP
		}
		o.Port = c.Port
		if c.Role == dgramio.RoleClient && c.LocalPort != 0 {
			o.Port = c.LocalPort
		}
		o.MaxFrame = udpHeaders + c.MaxDatagram
		if c.IPv6() {
			o.MaxFrame = udpHeaders6 + c.MaxDatagram
		}
	}
	return o
}

// ProgramOptions describe an XDP program that the sockets of several queues
// share (AttachProgram). The zero value of a field means its default.
type ProgramOptions struct {
	// Iface is the network interface. Required.
	Iface string
	// Program selects the XDP program: xdpprog.UDP (the default),
	// xdpprog.UDPARP or xdpprog.TCP.
	Program xdpprog.Variant
	// Port is the port the program matches. Required.
	Port uint16
	// Ports is how many destination ports from Port on the program
	// matches: the ports of a datagram client's queues (queue q sends
	// from Port+q). 0 or 1: Port alone.
	Ports int
	// FirstQueue and Queues are the interface queues whose sockets will
	// register: FirstQueue .. FirstQueue+Queues-1. Queues 0 means 1.
	FirstQueue, Queues int
	// Mode is "" (driver mode, then SKB mode as a reported fallback),
	// "driver" or "skb", as Options.Mode.
	Mode dgramio.XDPMode
	// IPv6 turns the program's IPv6 steering on, as Options.IPv6.
	IPv6 bool
	// Host, with Program xdpprog.TCP, is the address the userspace stack
	// answers for: every IPv4 frame to it goes to the sockets, frames to
	// other addresses to the kernel (xdpprog.Objects.SetHost). An IPv6
	// Host does the same for IPv6 (xdpprog.Objects.SetHost6, which turns
	// IPv6 steering on), with the solicitations for it. Unset: the
	// program matches Port. With Program xdpprog.UDPARP it is
	// Options.NeighHost: only its neighbour discovery goes to the
	// sockets.
	Host netip.Addr
	// Host6, with an IPv4 Host, is an IPv6 address the userspace stack
	// answers for too (a stack of both families): IPv4 frames to Host
	// and IPv6 frames to Host6 (with the solicitations for it) go to the
	// sockets. Unset: IPv6 as Host says.
	Host6 netip.Addr
	// SYNRate and SYNBurst, with Host, limit the SYNs to Host each CPU
	// hands on (xdpprog.Objects.SetSYNLimit). SYNRate 0: no limit.
	SYNRate, SYNBurst uint32
}
