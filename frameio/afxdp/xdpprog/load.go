package xdpprog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
)

// Objects are a loaded program and its maps. They hold file descriptors:
// keep Objects referenced while the program is attached, and Close them
// when done (the garbage collector would otherwise close them for you, at
// an unknown time).
type Objects struct {
	// Variant is what the program redirects.
	Variant Variant
	// Program is the XDP program; attach it with link.AttachXDP.
	Program *ebpf.Program
	// Sockets is the XSKMAP: queue index → AF_XDP socket.
	Sockets *ebpf.Map
	// Config holds our port (EncodeConfig).
	Config *ebpf.Map
	// Counters is the per-CPU counter array (Counter indexes).
	Counters *ebpf.Map
	// SYN is the per-CPU SYN token bucket (variant TCP; nil otherwise).
	SYN *ebpf.Map

	cfg [ConfigSize]byte // what Config holds
}

// Load creates the maps and loads the program. The port starts at 0, which
// matches nothing: call SetPort. Errors: a *dgramio.PrivilegeError without
// CAP_BPF/CAP_NET_ADMIN, an error matching dgramio.ErrNotSupported when the
// kernel lacks BPF, XDP or XSKMAP (Linux >= 4.18).
func Load(s Spec) (*Objects, error) {
	cs, err := s.CollectionSpec()
	if err != nil {
		return nil, err
	}
	coll, err := ebpf.NewCollection(cs)
	if err != nil {
		return nil, loadError(err)
	}
	o := &Objects{
		Variant:  s.Variant,
		Program:  coll.Programs[ProgramName(s.Variant)],
		Sockets:  coll.Maps[MapSockets],
		Config:   coll.Maps[MapConfig],
		Counters: coll.Maps[MapCounters],
		SYN:      coll.Maps[MapSYN],
	}
	if o.Program == nil || o.Sockets == nil || o.Config == nil || o.Counters == nil || o.SYN == nil {
		coll.Close()
		return nil, errors.New("xdpprog: collection is missing a program or map")
	}
	return o, nil
}

func loadError(err error) error {
	switch {
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		if lacksBPFCaps() {
			// cilium/ebpf guesses at RLIMIT_MEMLOCK for every EPERM;
			// here the capabilities are certainly missing, so the guess
			// only misleads.
			err = dropMemlockHint(err)
		}
		return &dgramio.PrivilegeError{Op: "load XDP program", Capability: "CAP_BPF and CAP_NET_ADMIN", Err: err}
	case errors.Is(err, ebpf.ErrNotSupported):
		return dgramio.NotSupported("XDP program with XSKMAP", "4.18", "a kernel built with CONFIG_BPF_SYSCALL and CONFIG_XDP_SOCKETS", err)
	}
	return fmt.Errorf("load XDP program: %w", err)
}

// SetPort stores the port the program matches (host byte order here; it is
// kept in network byte order in the map). 0 matches nothing.
func (o *Objects) SetPort(port uint16) error { return o.SetPorts(port, 1) }

// SetPorts makes the program match the n destination ports from port on
// (port+n-1 at most 65535): the ports of a datagram client's queues. n 0
// or 1 is port alone; port 0 matches nothing.
func (o *Objects) SetPorts(port, n uint16) error {
	if int(port)+int(n) > 65536 {
		return fmt.Errorf("set XDP ports: %d ports from %d run past 65535", n, port)
	}
	v := EncodePorts(port, n)
	copy(v[4:], o.cfg[4:])
	return o.putConfig(v, "port")
}

// SetHost makes the TCP variant redirect every IPv4 frame to addr (and
// ARP), and pass frames to other addresses to the kernel; an invalid addr
// (netip.Addr{}) goes back to matching the port. The port must still be
// set (port 0 matches nothing). Variant UDPARP takes it as the address
// whose ARP it redirects (the rest of ARP goes to the kernel); UDP
// refuses.
func (o *Objects) SetHost(addr netip.Addr) error {
	if o.Variant == UDP {
		return fmt.Errorf("set XDP host address: variant %v matches ports only", o.Variant)
	}
	if addr.IsValid() && (!addr.Is4() || addr.IsUnspecified()) {
		return fmt.Errorf("set XDP host address %v: want a unicast IPv4 address", addr)
	}
	v := o.cfg
	clear(v[cfgHost : cfgHost+4])
	if addr.IsValid() {
		a := addr.As4()
		copy(v[cfgHost:], a[:])
	}
	return o.putConfig(v, "host address")
}

// SetIPv6 turns IPv6 steering on or off (it starts off, and IPv6 frames
// then go to the kernel as PassNotIPv4). On, the program redirects IPv6 as
// its Variant says: UDP to our port; for TCP, segments from or to our port
// and the neighbour discovery frames, or everything for the IPv6 host
// address (SetHost6).
func (o *Objects) SetIPv6(on bool) error {
	v := o.cfg
	f := binary.NativeEndian.Uint32(v[cfgFlags:]) &^ cfgFlagIPv6
	if on {
		f |= cfgFlagIPv6
	}
	binary.NativeEndian.PutUint32(v[cfgFlags:], f)
	return o.putConfig(v, "IPv6 steering")
}

// SetHost6 makes the TCP variant redirect every IPv6 frame to addr and the
// neighbour solicitations whose target is addr, and pass other IPv6 frames
// to the kernel; a valid addr also turns IPv6 steering on (SetIPv6). An
// invalid addr (netip.Addr{}) goes back to matching the port for IPv6.
// addr must be an IPv6 unicast address (not IPv4-mapped, unspecified or
// multicast). Variant UDPARP takes it as the address whose neighbour
// discovery it redirects (Variant UDPARP); UDP refuses.
func (o *Objects) SetHost6(addr netip.Addr) error {
	if o.Variant == UDP {
		return fmt.Errorf("set XDP IPv6 host address: variant %v matches ports only", o.Variant)
	}
	if addr.IsValid() && (!addr.Is6() || addr.Is4In6() || addr.IsUnspecified() || addr.IsMulticast()) {
		return fmt.Errorf("set XDP IPv6 host address %v: want a unicast IPv6 address", addr)
	}
	v := o.cfg
	clear(v[cfgHost6 : cfgHost6+16])
	if addr.IsValid() {
		a := addr.As16()
		copy(v[cfgHost6:], a[:])
		binary.NativeEndian.PutUint32(v[cfgFlags:], binary.NativeEndian.Uint32(v[cfgFlags:])|cfgFlagIPv6)
	}
	return o.putConfig(v, "IPv6 host address")
}

// SetSYNLimit bounds the SYNs (SYN without ACK) to the host address
// (SetHost) that each CPU hands on to rate per second, with bursts of
// burst; the rest are dropped and counted (DroppedSYN). rate 0 is no
// limit. The TCP variant only; burst must be at least 1 when rate is set.
func (o *Objects) SetSYNLimit(rate, burst uint32) error {
	if o.Variant != TCP {
		return fmt.Errorf("set XDP SYN limit: variant %v has none", o.Variant)
	}
	if rate != 0 && burst == 0 {
		return fmt.Errorf("set XDP SYN limit: a rate of %d/s needs a burst of at least 1", rate)
	}
	v := o.cfg
	binary.NativeEndian.PutUint32(v[cfgSYNRate:], rate)
	binary.NativeEndian.PutUint32(v[cfgSYNBurst:], burst)
	return o.putConfig(v, "SYN limit")
}

func (o *Objects) putConfig(v [ConfigSize]byte, what string) error {
	if err := o.Config.Put(uint32(0), v[:]); err != nil {
		return fmt.Errorf("set XDP %s: %w", what, err)
	}
	o.cfg = v
	return nil
}

// SetSocket puts the AF_XDP socket fd at queue in the XSKMAP, so frames
// received on that queue are redirected to it. The map keeps its own
// reference to the socket until ClearSocket or Close.
func (o *Objects) SetSocket(queue int, fd int) error {
	if err := o.Sockets.Put(uint32(queue), uint32(fd)); err != nil {
		return fmt.Errorf("put socket in XSKMAP at queue %d: %w", queue, err)
	}
	return nil
}

// ClearSocket removes the socket at queue, if any.
func (o *Objects) ClearSocket(queue int) error {
	err := o.Sockets.Delete(uint32(queue))
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("remove socket from XSKMAP at queue %d: %w", queue, err)
	}
	return nil
}

// Counts are the program's counters summed over CPUs, indexed by Counter.
type Counts [NumCounters]uint64

// ReadCounters reads the counters, summed over every CPU. It allocates; it
// is meant for Stats, not for the data path.
func (o *Objects) ReadCounters() (Counts, error) {
	var c Counts
	var per []uint64
	for i := Counter(0); i < NumCounters; i++ {
		if err := o.Counters.Lookup(uint32(i), &per); err != nil {
			return c, fmt.Errorf("read XDP counter %s: %w", i, err)
		}
		for _, v := range per {
			c[i] += v
		}
	}
	return c, nil
}

// Layers returns the counters as Stats layer counters ("xdp-prog", name),
// with Loss set on the counters of frames the socket lost.
func (c Counts) Layers() []dgramio.Counter {
	out := make([]dgramio.Counter, 0, NumCounters)
	for i := Counter(0); i < NumCounters; i++ {
		out = append(out, dgramio.Counter{Layer: "xdp-prog", Name: i.String(), Value: c[i], Loss: i.Loss()})
	}
	return out
}

// Close closes the program and the maps. A program attached through a
// bpf_link stays attached until the link is closed too.
func (o *Objects) Close() error {
	return errors.Join(o.Program.Close(), o.Sockets.Close(), o.Config.Close(), o.Counters.Close(), o.SYN.Close())
}

// memlockHint is what cilium/ebpf appends to every EPERM from creating a
// map or loading a program.
const memlockHint = " (MEMLOCK may be too low, consider rlimit.RemoveMemlock)"

// dropMemlockHint returns err with cilium/ebpf's RLIMIT_MEMLOCK hint taken
// out of its message; it still matches what err matched (errors.Is, As).
func dropMemlockHint(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, memlockHint) {
		return err
	}
	return &hintless{msg: strings.ReplaceAll(msg, memlockHint, ""), err: err}
}

// hintless is an error with another message that unwraps to the original.
type hintless struct {
	msg string
	err error
}

func (h *hintless) Error() string { return h.msg }
func (h *hintless) Unwrap() error { return h.err }
