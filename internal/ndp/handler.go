package ndp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/neigh"
)

// Config configures a Handler.
type Config struct {
	// MAC and Addr are ours: the address we answer for and send from, an
	// IPv6 unicast address without zone. We also answer for our
	// link-local address, LinkLocal(MAC).
	MAC  net.HardwareAddr
	Addr netip.Addr
	// Iface names the interface in errors ("veth0", "0000:03:00.0").
	Iface string
	// Retries is how many multicast solicitations a resolution sends
	// before giving up (MAX_MULTICAST_SOLICIT). Default 3.
	Retries int
	// Interval is how long a resolution or a probe waits for an
	// advertisement after each solicitation (RETRANS_TIMER). Default 1 s.
	Interval time.Duration
	// Reachable is how long a neighbour stays REACHABLE after it confirmed
	// its address (REACHABLE_TIME). Default 30 s.
	Reachable time.Duration
	// DelayFirstProbe is how long a STALE neighbour that was used stays in
	// DELAY before it is probed (DELAY_FIRST_PROBE_TIME). Default 5 s.
	DelayFirstProbe time.Duration
	// Probes is how many unicast probes a neighbour in PROBE gets before it
	// is removed (MAX_UNICAST_SOLICIT). Default 3.
	Probes int
	// CacheSize bounds the neighbour cache. When it is full, a new entry
	// replaces the one used longest ago. Default 256.
	CacheSize int
	// Kernel, when set, looks addr up in the kernel's neighbour table of
	// the interface (a vdev on a kernel interface has one): a resolution
	// starts there, and sends no solicitation when the kernel knows addr.
	// It must not wait for the network.
	Kernel func(addr netip.Addr) ([6]byte, bool)
}

// State is a neighbour cache entry's state (RFC 4861 §7.3.2). An address
// being resolved is INCOMPLETE; it has no MAC yet.
type State = neigh.State

// The states.
const (
	Incomplete = neigh.Incomplete
	Reachable  = neigh.Reachable
	Stale      = neigh.Stale
	Delay      = neigh.Delay
	Probe      = neigh.Probe
)

// Handler speaks NDP for one address (and our link-local one) over a
// FrameIO. Its cache and resolutions are a neigh.Table with RFC 4861
// §7.3's neighbour unreachability detection, whose methods it has:
//
//   - Query returns a cached MAC (a REACHABLE entry past its time becomes
//     STALE, a STALE one used goes to DELAY) or starts resolving the
//     address (INCOMPLETE): from the kernel's table when Config.Kernel
//     knows it (STALE), else with multicast solicitations to its
//     solicited-node address (§7.2.2), Config.Retries of them
//     Config.Interval apart;
//   - Poll sends the solicitations that are due, reports the resolutions
//     that ended (with a *ResolveError when no advertisement, or
//     solicitation from the address, came through Handle), and runs the
//     timers: DELAY past its time goes to PROBE with a unicast
//     solicitation, PROBE solicits again each Interval and, after
//     Config.Probes unanswered, the entry is removed (probe_failed);
//   - Resolve blocks on the same, driving the FrameIO's receive side;
//     Lookup, State, Learn (STALE, as an unsolicited report, §7.3.3),
//     Pending and Flush.
//
// Threading: Handle, Resolve, Query and Poll use both sides of the
// FrameIO (they receive, answer and solicit), so they belong to the
// goroutine that drives it (the poll loop). Lookup, Learn, State and
// AppendLayers may be called from any goroutine.
type Handler struct {
	*neigh.Table
	cfg Config
	mac [6]byte
	ll  netip.Addr // our link-local address
	tx  [FrameLen]byte

	solicitsIn, solicitsOut, advertsIn, advertsOut atomic.Uint64
	probesOut, ignored, dupAddr                    atomic.Uint64
	malformed                                      [numReasons]atomic.Uint64
}

// link is the Handler as its Table's neigh.Link.
type link Handler

// New returns a Handler for cfg.Addr at cfg.MAC over fio. It sends
// nothing.
func New(fio frameio.FrameIO, cfg Config) (*Handler, error) {
	if len(cfg.MAC) != 6 {
		return nil, fmt.Errorf("ndp: MAC %v is not an Ethernet address", cfg.MAC)
	}
	a := cfg.Addr
	if !a.Is6() || a.Is4In6() || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() {
		return nil, fmt.Errorf("ndp: address %v is not an IPv6 unicast address without zone", a)
	}
	h := &Handler{cfg: cfg, mac: [6]byte(cfg.MAC)}
	h.cfg.MAC = net.HardwareAddr(h.mac[:])
	h.ll = LinkLocal(h.mac)
	h.Table = neigh.New(fio, neigh.Config{Proto: "ndp", Iface: cfg.Iface, IPv6: true,
		Retries: cfg.Retries, Interval: cfg.Interval, CacheSize: cfg.CacheSize,
		NUD: true, Reachable: cfg.Reachable, DelayFirstProbe: cfg.DelayFirstProbe, Probes: cfg.Probes,
		Kernel: cfg.Kernel}, (*link)(h))
	return h, nil
}

// LinkLocal returns our link-local address, which the Handler answers
// solicitations for besides Config.Addr.
func (h *Handler) LinkLocal() netip.Addr { return h.ll }

// ours says whether a is one of our addresses.
func (h *Handler) ours(a netip.Addr) bool { return a == h.cfg.Addr || a == h.ll }

// Handle takes one received frame. It returns false, doing nothing, when
// the frame is not a solicitation or an advertisement (ParseFrame's
// NotNDP). Otherwise it counts the frame (malformed ones by reason), and:
//
//   - a solicitation for one of our addresses (RFC 4861 §7.2.3): the
//     solicitor is learnt from its source link-layer address option
//     (STALE when new or changed), and answered with an advertisement,
//     Solicited and Override set, to its address and MAC (§7.2.4), or to
//     all-nodes with Solicited clear when it came from the unspecified
//     address (duplicate address detection);
//   - an advertisement (§7.2.5): for an address being resolved, its MAC,
//     REACHABLE when Solicited, else STALE; for a cached one, the rules of
//     §7.2.5 on the Override and Solicited flags; for one we know nothing
//     of, nothing; for our own address, counted as dup_addr.
//
// Every NDP frame is counted once: solicits_in, adverts_in, ignored,
// dup_addr or malformed_*. Frames to another unicast MAC are ignored. An answer leaves at the next
// Kick: call Flush after the frames of a poll round (Raw does).
func (h *Handler) Handle(frame []byte) bool {
	m, why := ParseFrame(frame)
	if why == NotNDP {
		return false
	}
	if why != OK {
		h.malformed[why].Add(1)
		return true
	}
	if m.EthDst != h.mac && m.EthDst[0]&1 == 0 {
		h.ignored.Add(1)
		return true
	}
	now := time.Now()
	if m.Type == TypeNS {
		h.solicitation(&m)
		return true
	}
	h.advertisement(&m, now)
	return true
}

func (h *Handler) solicitation(m *Message) {
	if !h.ours(m.Target) {
		h.ignored.Add(1)
		return
	}
	h.solicitsIn.Add(1)
	to, ethTo, flags := m.Src, m.EthSrc, uint8(FlagSolicited|FlagOverride)
	if m.Src.IsUnspecified() {
		to, ethTo, flags = AllNodes, MulticastMAC(AllNodes), FlagOverride
	} else if m.HasLL {
		ethTo = m.LL
		h.Merge(m.Src, m.LL, true) // STALE when new or changed
	}
	h.Send(AppendNA(h.tx[:0], h.mac, m.Target, to, ethTo, flags), &h.advertsOut)
}

func (h *Handler) advertisement(m *Message, now time.Time) {
	if h.ours(m.Target) {
		h.dupAddr.Add(1) // someone else claims our address
		return
	}
	solicited, override := m.Flags&FlagSolicited != 0, m.Flags&FlagOverride != 0
	if h.Advertised(m.Target, m.LL, m.HasLL, solicited, override, now) {
		h.advertsIn.Add(1)
	} else {
		h.ignored.Add(1) // §7.2.5: no entry, nothing to create
	}
}

// Handle implements neigh.Link.
func (l *link) Handle(frame []byte) bool { return (*Handler)(l).Handle(frame) }

// Solicit implements neigh.Link: a multicast solicitation for addr. Its
// source is our link-local address for a link-local target, else
// Config.Addr (§7.2.2).
func (l *link) Solicit(addr netip.Addr) {
	src := l.cfg.Addr
	if addr.IsLinkLocalUnicast() {
		src = l.ll
	}
	l.Send(AppendNS(l.tx[:0], l.mac, src, addr, nil), &l.solicitsOut)
}

// Probe implements neigh.Link: a unicast solicitation to mac (§7.3.3's
// PROBE).
func (l *link) Probe(addr netip.Addr, mac [6]byte) {
	l.Send(AppendNS(l.tx[:0], l.mac, l.cfg.Addr, addr, &mac), &l.probesOut)
}

// NoReply implements neigh.Link.
func (l *link) NoReply(addr netip.Addr, requests int, waited time.Duration) error {
	return &ResolveError{Addr: addr, Iface: l.cfg.Iface, Requests: requests, Waited: waited}
}

// Counter names, as AppendLayers reports them under layer "ndp" (the
// malformed frames are counted by Reason, "malformed_" and its name).
const (
	CounterSolicitsIn  = "solicits_in"            // solicitations for our addresses, answered
	CounterSolicitsOut = "solicits_out"           // our multicast solicitations (resolutions)
	CounterProbesOut   = "probes_out"             // our unicast solicitations (PROBE)
	CounterAdvertsIn   = "adverts_in"             // advertisements about neighbours we resolve or hold
	CounterAdvertsOut  = "adverts_out"            // our advertisements sent
	CounterIgnored     = "ignored"                // for other addresses or MACs, or about unknown neighbours
	CounterTxFull      = neigh.CounterTxFull      // frames the TX ring refused
	CounterLearned     = neigh.CounterLearned     // cache entries added
	CounterEvicted     = neigh.CounterEvicted     // entries replaced in the full cache
	CounterTimeouts    = neigh.CounterTimeouts    // resolutions that got no advertisement
	CounterProbeFailed = neigh.CounterProbeFailed // entries removed after unanswered probes
	CounterDupAddr     = "dup_addr"               // advertisements of our own address from elsewhere
	CounterKernelHits  = neigh.CounterKernelHits  // resolutions answered by the kernel's table
	CounterDropped     = neigh.CounterDropped
)

// AppendLayers appends the handler's counters, layer "ndp", to dst.
// dropped_while_resolving counts frames (datagrams, perhaps) that arrived
// while Resolve had the receive side and no one to give them to: Loss is
// true on it alone.
func (h *Handler) AppendLayers(dst []dgramio.Counter) []dgramio.Counter {
	c := func(name string, v *atomic.Uint64) dgramio.Counter {
		return dgramio.Counter{Layer: "ndp", Name: name, Value: v.Load()}
	}
	dst = append(dst,
		c(CounterSolicitsIn, &h.solicitsIn), c(CounterSolicitsOut, &h.solicitsOut),
		c(CounterProbesOut, &h.probesOut), c(CounterAdvertsIn, &h.advertsIn),
		c(CounterAdvertsOut, &h.advertsOut), c(CounterIgnored, &h.ignored),
	)
	t := func(name string) dgramio.Counter { return h.Counter("ndp", name) }
	dst = append(dst,
		t(CounterTxFull), t(CounterLearned), t(CounterEvicted), t(CounterTimeouts), t(CounterProbeFailed),
		c(CounterDupAddr, &h.dupAddr), t(CounterKernelHits),
	)
	for r := Short; r < numReasons; r++ {
		dst = append(dst, c("malformed_"+r.String(), &h.malformed[r]))
	}
	return append(dst, t(CounterDropped))
}

// ErrNoReply is matched (errors.Is) by the *ResolveError of a resolution
// that got no advertisement.
var ErrNoReply = errors.New("no neighbor advertisement")

// ResolveError says that nobody answered our solicitations for Addr (on
// Iface, Requests of them, in Waited).
type ResolveError = neigh.ResolveError[words]

// words are NDP's for a ResolveError.
type words struct{}

func (words) Words() (error, string) {
	return ErrNoReply, "ndp: no neighbor advertisement from %s on %s after %d solicitations in %v; check that the peer is up and on the same link, or set Config.DstMAC"
}
