package tcp

import (
	"fmt"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	nstack "gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"

	"github.com/dgramio/dgramio"
)

// Tuning is the tuning of the userspace TCP (either engine), resolved:
// every field has its value, none means "default". TuningFromConfig builds
// it from dgramio.Config (Nagle and the TCP field, whose defaults it applies);
// ValidateFor checks it for an engine; Apply and ApplyEndpoint set it on
// netstack and read every option back; the native engine takes it as its
// Options.
//
// Netstack's own defaults differ from ours where it matters: it delays
// small segments (Nagle) unless told not to, its minimum RTO is 200 ms, its
// buffers are 1 MiB with a 4 MiB ceiling, RACK is on.
type Tuning struct {
	// NoDelay sends small segments at once (TCP_NODELAY): !Config.Nagle.
	NoDelay bool
	// SendBuf is each connection's send buffer in bytes.
	SendBuf int
	// RecvBuf is each connection's receive buffer in bytes: from the start
	// when Moderate is off; the ceiling when Moderate is on (the buffer
	// starts at ModerateStart and grows with what the application reads
	// per round trip, as Linux's tcp_moderate_rcvbuf). The window scale in
	// the SYN covers RecvBuf either way.
	RecvBuf int
	// Congestion is dgramio.CongestionReno, CongestionCubic or
	// CongestionBBR (the native engine only); from a Config, its default
	// is the host's where the engine implements it
	// (dgramio.TCPTuning.Congestion).
	Congestion dgramio.Congestion
	// SACK offers and uses selective acknowledgements (RFC 2018).
	SACK bool
	// Moderate is receive-buffer moderation (auto-tuning).
	Moderate bool
	// RACK turns RACK-TLP loss detection on (RFC 8985): tail loss probes
	// and time-based loss marking instead of the duplicate-ACK threshold.
	RACK bool
	// MinRTO is the minimum retransmission timeout.
	MinRTO time.Duration
	// MaxRetries is the number of retransmissions of one segment after which
	// the connection is given up at the next timeout (ETIMEDOUT; netstack
	// sends no RST then). The backend counts it in Stats.Resets and, with
	// Config.Events, delivers an EventReset whose Err is a *dgramio.PeerError
	// with Reset true and Err syscall.ETIMEDOUT.
	MaxRetries int
	// DelayedACK delays the ACK of in-order data (RFC 1122 §4.2.3.2) up to
	// this long; 0 off. Native engine only (netstack has none): default
	// DefaultDelayedACK there, 0 with netstack.
	DelayedACK time.Duration
	// MaxConns bounds the native engine's connection table; 0 its
	// default (native.DefaultMaxConns). Native engine only.
	MaxConns int
}

// DefaultDelayedACK is the native engine's delayed ACK unless
// Config.TCP.DelayedACK says otherwise: short against the default MinRTO
// (25 ms), long enough for an answer to carry the ACK of its request.
const DefaultDelayedACK = 5 * time.Millisecond

// Which knob each engine takes. Both: NoDelay, SendBuf, RecvBuf,
// Congestion, SACK, MinRTO, MaxRetries, Moderate (on the native engine,
// off is native.Options.NoBufferTuning: the window starts at RecvBuf).
// Netstack only: RACK (the native engine recovers by SACK, RFC 6675, and
// NewReno: RACK on is an error there). Native only: DelayedACK and
// MaxConns (positive with netstack is an error). ValidateFor says so.

// ModerateStart is where a moderated receive buffer starts (or RecvBuf, if
// smaller): Linux's default tcp_rmem[1] of 128 KiB.
const ModerateStart = 128 << 10

// TuningFromConfig resolves cfg (defaults applied with WithDefaults first)
// into a Tuning.
func TuningFromConfig(cfg dgramio.Config) Tuning {
	cfg = cfg.WithDefaults()
	t := cfg.TCP
	return Tuning{
		NoDelay:    !cfg.Nagle,
		SendBuf:    t.SendBuf,
		RecvBuf:    t.RecvBuf,
		Congestion: t.Congestion,
		SACK:       !t.NoSACK,
		Moderate:   !t.NoModerate,
		RACK:       t.RACK,
		MinRTO:     t.MinRTO,
		MaxRetries: t.MaxRetries,
		DelayedACK: delayedACK(t),
		MaxConns:   t.MaxConns,
	}
}

// delayedACK resolves Config.TCP.DelayedACK for t.Stack.
func delayedACK(t dgramio.TCPTuning) time.Duration {
	switch {
	case t.DelayedACK < 0:
		return 0
	case t.DelayedACK > 0:
		return t.DelayedACK
	case t.Stack == dgramio.TCPStackNative:
		return min(DefaultDelayedACK, t.MinRTO/2)
	}
	return 0
}

// minBuf is the smallest buffer accepted (Config.Validate's bound).
const minBuf = 4096

// Validate checks t without touching netstack; each problem is a
// *dgramio.ConfigError naming the Config field.
func (t Tuning) Validate() error {
	switch t.Congestion {
	case "reno", "cubic", "bbr":
	default:
		return &dgramio.ConfigError{Field: "TCP.Congestion", Value: t.Congestion, Reason: `use "reno", "cubic" or "bbr"`}
	}
	if t.SendBuf < minBuf {
		return &dgramio.ConfigError{Field: "TCP.SendBuf", Value: t.SendBuf, Reason: "must be at least 4096"}
	}
	if t.RecvBuf < minBuf {
		return &dgramio.ConfigError{Field: "TCP.RecvBuf", Value: t.RecvBuf, Reason: "must be at least 4096"}
	}
	if t.MinRTO < time.Millisecond {
		return &dgramio.ConfigError{Field: "TCP.MinRTO", Value: t.MinRTO, Reason: "must be at least 1ms"}
	}
	if t.MaxRetries < 1 {
		return &dgramio.ConfigError{Field: "TCP.MaxRetries", Value: t.MaxRetries, Reason: "must be at least 1"}
	}
	return nil
}

// ValidateFor checks t for the engine stack: Validate, and the knobs that
// engine cannot honour (see Tuning).
func (t Tuning) ValidateFor(s dgramio.TCPStack) error {
	if err := t.Validate(); err != nil {
		return err
	}
	if s == dgramio.TCPStackNative {
		if t.RACK {
			return &dgramio.ConfigError{Field: "TCP.RACK", Value: true, Reason: `the native engine has no RACK-TLP (it recovers by SACK, RFC 6675, and NewReno): turn RACK off, or use TCP.Stack "netstack"`}
		}
		if t.DelayedACK >= t.MinRTO {
			return &dgramio.ConfigError{Field: "TCP.DelayedACK", Value: t.DelayedACK, Reason: fmt.Sprintf("must stay below TCP.MinRTO (%v), or the peer's retransmission beats the delayed ACK", t.MinRTO)}
		}
		return nil
	}
	if t.DelayedACK > 0 {
		return &dgramio.ConfigError{Field: "TCP.DelayedACK", Value: t.DelayedACK, Reason: `netstack has no delayed ACK: leave it 0, or use TCP.Stack "native"`}
	}
	if t.Congestion == dgramio.CongestionBBR {
		return &dgramio.ConfigError{Field: "TCP.Congestion", Value: t.Congestion, Reason: `netstack has no BBR: use "reno" or "cubic", or TCP.Stack "native"`}
	}
	if t.MaxConns > 0 {
		return &dgramio.ConfigError{Field: "TCP.MaxConns", Value: t.MaxConns, Reason: `netstack has no connection table to bound: leave it 0, or use TCP.Stack "native"`}
	}
	return nil
}

func (t Tuning) recvRange() tcpip.TCPReceiveBufferSizeRangeOption {
	def := t.RecvBuf
	if t.Moderate && def > ModerateStart {
		def = ModerateStart
	}
	return tcpip.TCPReceiveBufferSizeRangeOption{Min: minBuf, Default: def, Max: t.RecvBuf}
}

func (t Tuning) sendRange() tcpip.TCPSendBufferSizeRangeOption {
	return tcpip.TCPSendBufferSizeRangeOption{Min: minBuf, Default: t.SendBuf, Max: t.SendBuf}
}

func (t Tuning) recovery() tcpip.TCPRecovery {
	if t.RACK {
		return tcpip.TCPRACKLossDetection
	}
	return 0
}

// ErrIgnored reports a netstack option that was set without error but reads
// back different: netstack ignored it. An ignored knob is an error, never
// a silent default.
type ErrIgnored struct {
	Option    string
	Set, Read any
}

// Error implements error.
func (e *ErrIgnored) Error() string {
	return fmt.Sprintf("tcp: netstack ignored %s: set %v, reads back %v", e.Option, e.Set, e.Read)
}

// Apply sets the stack-wide options of t on ns (every endpoint created
// afterwards starts with them) and reads each back. A setting netstack
// refuses is reported with its error; one it accepts but does not keep is
// an *ErrIgnored.
func (t Tuning) Apply(ns *nstack.Stack) error {
	if err := t.Validate(); err != nil {
		return err
	}
	set := func(name string, opt tcpip.SettableTransportProtocolOption) error {
		if err := ns.SetTransportProtocolOption(tcp.ProtocolNumber, opt); err != nil {
			return fmt.Errorf("tcp: netstack option %s=%v: %s", name, opt, err)
		}
		return nil
	}
	sack := tcpip.TCPSACKEnabled(t.SACK)
	rec := t.recovery()
	delay := tcpip.TCPDelayEnabled(!t.NoDelay)
	snd, rcv := t.sendRange(), t.recvRange()
	cc := tcpip.CongestionControlOption(t.Congestion)
	mod := tcpip.TCPModerateReceiveBufferOption(t.Moderate)
	rto := tcpip.TCPMinRTOOption(t.MinRTO)
	retries := tcpip.TCPMaxRetriesOption(t.MaxRetries)
	for _, o := range []struct {
		name string
		opt  tcpip.SettableTransportProtocolOption
	}{
		{"SACK", &sack}, {"RACK", &rec}, {"delay (Nagle)", &delay},
		{"send buffer", &snd}, {"receive buffer", &rcv}, {"congestion control", &cc},
		{"receive-buffer moderation", &mod}, {"minimum RTO", &rto}, {"max retries", &retries},
	} {
		if err := set(o.name, o.opt); err != nil {
			return err
		}
	}
	got, err := ReadStackTuning(ns)
	if err != nil {
		return err
	}
	return t.compare(got, true)
}

// ReadStackTuning reads the stack-wide TCP options of ns back into a
// Tuning. RecvBuf is the ceiling of the receive range, SendBuf the default
// of the send range.
func ReadStackTuning(ns *nstack.Stack) (Tuning, error) {
	var (
		sack    tcpip.TCPSACKEnabled
		rec     tcpip.TCPRecovery
		delay   tcpip.TCPDelayEnabled
		snd     tcpip.TCPSendBufferSizeRangeOption
		rcv     tcpip.TCPReceiveBufferSizeRangeOption
		cc      tcpip.CongestionControlOption
		mod     tcpip.TCPModerateReceiveBufferOption
		rto     tcpip.TCPMinRTOOption
		retries tcpip.TCPMaxRetriesOption
	)
	for _, o := range []struct {
		name string
		opt  tcpip.GettableTransportProtocolOption
	}{
		{"SACK", &sack}, {"RACK", &rec}, {"delay (Nagle)", &delay},
		{"send buffer", &snd}, {"receive buffer", &rcv}, {"congestion control", &cc},
		{"receive-buffer moderation", &mod}, {"minimum RTO", &rto}, {"max retries", &retries},
	} {
		if err := ns.TransportProtocolOption(tcp.ProtocolNumber, o.opt); err != nil {
			return Tuning{}, fmt.Errorf("tcp: read netstack option %s: %s", o.name, err)
		}
	}
	return Tuning{
		NoDelay:    !bool(delay),
		SendBuf:    snd.Default,
		RecvBuf:    rcv.Max,
		Congestion: dgramio.Congestion(cc),
		SACK:       bool(sack),
		Moderate:   bool(mod),
		RACK:       rec&tcpip.TCPRACKLossDetection != 0,
		MinRTO:     time.Duration(rto),
		MaxRetries: int(retries),
	}, nil
}

// compare returns an *ErrIgnored for the first field of got that differs
// from t. stackWide compares every field; otherwise only those a single
// endpoint carries (NoDelay, SendBuf, Congestion).
func (t Tuning) compare(got Tuning, stackWide bool) error {
	type field struct {
		name      string
		set, read any
	}
	fs := []field{
		{"NoDelay", t.NoDelay, got.NoDelay},
		{"SendBuf", t.SendBuf, got.SendBuf},
		{"Congestion", t.Congestion, got.Congestion},
	}
	if stackWide {
		fs = append(fs,
			field{"RecvBuf", t.RecvBuf, got.RecvBuf},
			field{"SACK", t.SACK, got.SACK},
			field{"Moderate", t.Moderate, got.Moderate},
			field{"RACK", t.RACK, got.RACK},
			field{"MinRTO", t.MinRTO, got.MinRTO},
			field{"MaxRetries", t.MaxRetries, got.MaxRetries})
	}
	for _, f := range fs {
		if f.set != f.read {
			return &ErrIgnored{Option: f.name, Set: f.set, Read: f.read}
		}
	}
	return nil
}

// ApplyEndpoint sets the per-connection options of t on ep (netstack copies
// the stack-wide ones into each new endpoint, but an accepted endpoint and
// an explicit setting are checked here alike) and reads them back: NoDelay,
// the send buffer, the congestion control. The receive buffer is left to
// the stack-wide range: setting it on the endpoint would turn moderation
// off. Netstack's per-endpoint SetSockOpt returns nil for options it
// ignores, so only the read-back counts.
func (t Tuning) ApplyEndpoint(ep tcpip.Endpoint) error {
	ops := ep.SocketOptions()
	ops.SetDelayOption(!t.NoDelay)
	ops.SetSendBufferSize(int64(t.SendBuf), true)
	cc := tcpip.CongestionControlOption(t.Congestion)
	if err := ep.SetSockOpt(&cc); err != nil {
		return fmt.Errorf("tcp: endpoint congestion control %s: %s", t.Congestion, err)
	}
	got, err := ReadEndpointTuning(ep)
	if err != nil {
		return err
	}
	return t.compare(got, false)
}

// ReadEndpointTuning reads what one endpoint carries: NoDelay, SendBuf,
// RecvBuf (its current receive buffer, which moderation changes) and
// Congestion. The other fields are left zero.
func ReadEndpointTuning(ep tcpip.Endpoint) (Tuning, error) {
	ops := ep.SocketOptions()
	var cc tcpip.CongestionControlOption
	if err := ep.GetSockOpt(&cc); err != nil {
		return Tuning{}, fmt.Errorf("tcp: read endpoint congestion control: %s", err)
	}
	return Tuning{
		NoDelay:    !ops.GetDelayOption(),
		SendBuf:    int(ops.GetSendBufferSize()),
		RecvBuf:    int(ops.GetReceiveBufferSize()),
		Congestion: dgramio.Congestion(cc),
	}, nil
}
