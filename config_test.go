package dgramio

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func validClient(kind Kind) Config {
	c := Config{
		Kind:    kind,
		Iface:   "veth0",
		LocalIP: netip.MustParseAddr("198.18.0.1"),
		Dests:   []netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("198.18.0.2"), 5000)},
		Port:    5000,
	}
	return c.WithDefaults()
}

func TestValidateAcceptsEveryKind(t *testing.T) {
	for _, k := range Kinds() {
		if err := validClient(k).Validate(); err != nil {
			t.Errorf("kind %s: %v", k, err)
		}
	}
	srv := Config{Kind: KindUDP, Role: RoleServer, Port: 5000}.WithDefaults()
	if err := srv.Validate(); err != nil {
		t.Errorf("kernel server without LocalIP: %v", err)
	}
}

// ipv6 makes c an IPv6 client from 2001:2::1 to [2001:2::2]:5000.
func ipv6(c *Config) {
	c.LocalIP = netip.MustParseAddr("2001:2::1")
	c.Dests = []netip.AddrPort{netip.MustParseAddrPort("[2001:2::2]:5000")}
}

// TestIPv6Config: the kernel kinds take IPv6 addresses for a client and a
// server (LocalIP ::, or unset with IPv6 Dests), the Config's family is
// what IPv6 says, and a kind that serves IPv4 only says which kinds
// serve IPv6.
func TestIPv6Config(t *testing.T) {
	for _, k := range Kinds() {
		c := validClient(k)
		ipv6(&c)
		err := c.Validate()
		if k.ServesIPv6() != (err == nil) {
			t.Errorf("kind %s IPv6 client: %v (ServesIPv6 %v)", k, err, k.ServesIPv6())
		}
		if err != nil && !strings.Contains(err.Error(), enumList(IPv6Kinds)) {
			t.Errorf("kind %s: the refusal does not name the kinds that serve IPv6: %v", k, err)
		}
		if !c.IPv6() {
			t.Errorf("kind %s: IPv6() false for %v -> %v", k, c.LocalIP, c.Dests)
		}
	}
	for _, k := range IPv6Kinds {
		if k.IsRaw() {
			// A raw kind needs its own address and an interface.
			c := Config{Kind: k, Iface: "veth0", Port: 5000}
			ipv6(&c)
			c = c.WithDefaults()
			want := DefaultMaxDatagram6 // a datagram's IPv6 and UDP headers take 48 bytes
			if k.IsStream() {
				want = DefaultMaxDatagram // a record is not bound to a frame
			}
			if err := c.Validate(); err != nil || !c.IPv6() || c.WithDefaults().MaxDatagram != want {
				t.Errorf("kind %s IPv6 client: %v (IPv6 %v, MaxDatagram %d)", k, err, c.IPv6(), c.WithDefaults().MaxDatagram)
			}
			continue
		}
		srv := Config{Kind: k, Role: RoleServer, Port: 5000, LocalIP: netip.IPv6Unspecified()}.WithDefaults()
		if err := srv.Validate(); err != nil || !srv.IPv6() {
			t.Errorf("kind %s server on [::]: %v (IPv6 %v)", k, err, srv.IPv6())
		}
		cli := Config{Kind: k, Dests: []netip.AddrPort{netip.MustParseAddrPort("[::1]:5000")}}.WithDefaults()
		if err := cli.Validate(); err != nil || !cli.IPv6() {
			t.Errorf("kind %s client to [::1] without LocalIP: %v (IPv6 %v)", k, err, cli.IPv6())
		}
	}
	// The userspace TCP kinds serve IPv6 on either engine.
	for _, k := range []Kind{KindTCPXDP, KindTCPDPDK} {
		for _, e := range []TCPStack{TCPStackNetstack, TCPStackNative} {
			c := validClient(k)
			ipv6(&c)
			c.TCP = TCPTuning{Stack: e} // before the defaults, which depend on it
			if err := c.WithDefaults().Validate(); err != nil || !c.ServesIPv6() {
				t.Errorf("kind %s on %s over IPv6: %v", k, e, err)
			}
		}
	}
	// dpdk over IPv6 with an on-link prefix and a gateway on it.
	d := validClient(KindDPDK)
	ipv6(&d)
	d.DPDK.PrefixLen, d.DPDK.Gateway = 64, netip.MustParseAddr("2001:2::fe")
	if err := d.Validate(); err != nil {
		t.Errorf("dpdk over IPv6 with a /64 and a gateway: %v", err)
	}
	// IPv4-mapped addresses are IPv4, unset ones leave IPv4.
	mapped := Config{Kind: KindUDP, LocalIP: netip.MustParseAddr("::ffff:127.0.0.1"),
		Dests: []netip.AddrPort{netip.MustParseAddrPort("[::ffff:127.0.0.1]:5000")}}.WithDefaults()
	if err := mapped.Validate(); err != nil || mapped.IPv6() {
		t.Errorf("IPv4-mapped client: %v (IPv6 %v)", err, mapped.IPv6())
	}
	if (Config{Kind: KindUDP, Role: RoleServer, Port: 5000}).IPv6() {
		t.Error("a server without LocalIP is IPv6")
	}
}

func TestValidateNamesTheField(t *testing.T) {
	cpu0 := 0
	cases := []struct {
		name  string
		mod   func(*Config)
		field string
	}{
		{"unknown kind", func(c *Config) { c.Kind = "quic" }, "Kind"},
		{"bad role", func(c *Config) { c.Role = 7 }, "Role"},
		{"raw without iface", func(c *Config) { c.Kind = KindXDP; c.Iface = "" }, "Iface"},
		{"dpdk without device", func(c *Config) { c.Kind = KindDPDK; c.Iface = "" }, "Iface"},
		{"dpdk pci and vdev", func(c *Config) { c.Kind = KindDPDK; c.DPDK.PCI = "0000:03:00.0"; c.DPDK.VDev = "net_ring0" }, "DPDK.VDev"},
		{"dpdk gateway without prefix", func(c *Config) { c.Kind = KindDPDK; c.DPDK.Gateway = netip.MustParseAddr("198.18.0.254") }, "DPDK.PrefixLen"},
		{"dpdk prefix too long", func(c *Config) { c.Kind = KindDPDK; c.DPDK.PrefixLen = 33 }, "DPDK.PrefixLen"},
		{"dpdk IPv6 prefix too long", func(c *Config) { c.Kind = KindDPDK; ipv6(c); c.DPDK.PrefixLen = 129 }, "DPDK.PrefixLen"},
		{"dpdk IPv4 gateway on IPv6", func(c *Config) {
			c.Kind = KindDPDK
			ipv6(c)
			c.DPDK.PrefixLen, c.DPDK.Gateway = 64, netip.MustParseAddr("198.18.0.254")
		}, "DPDK.Gateway"},
		{"dpdk gateway off link", func(c *Config) {
			c.Kind, c.DPDK.PrefixLen, c.DPDK.Gateway = KindDPDK, 24, netip.MustParseAddr("198.18.1.1")
		}, "DPDK.Gateway"},
		{"dpdk gateway on tcp-dpdk netstack", func(c *Config) {
			c.Kind, c.TCP.Stack, c.DPDK.PrefixLen, c.DPDK.Gateway = KindTCPDPDK, TCPStackNetstack, 24, netip.MustParseAddr("198.18.0.254")
		}, "DPDK.Gateway"},
		{"ipv6 local, ipv4 dest", func(c *Config) { c.LocalIP = netip.MustParseAddr("2001:2::1") }, "Dests"},
		{"ipv6 dests mixed", func(c *Config) {
			c.LocalIP = netip.Addr{}
			c.Dests = []netip.AddrPort{netip.MustParseAddrPort("[2001:2::2]:5000"), netip.MustParseAddrPort("198.18.0.2:5000")}
		}, "Dests"},
		{"ipv6 local with zone", func(c *Config) {
			c.LocalIP = netip.MustParseAddr("fe80::1%veth0")
			c.Dests = []netip.AddrPort{netip.MustParseAddrPort("[2001:2::2]:5000")}
		}, "LocalIP"},
		{"ipv6 dest with zone", func(c *Config) {
			c.LocalIP = netip.Addr{}
			c.Dests = []netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("fe80::2%veth0"), 5000)}
		}, "Dests"},
		{"raw without local ip", func(c *Config) { c.Kind = KindXDP; c.LocalIP = netip.Addr{} }, "LocalIP"},
		{"raw on every address", func(c *Config) { c.Kind = KindTCPXDP; c.LocalIP = netip.IPv4Unspecified() }, "LocalIP"},
		{"raw on a multicast address", func(c *Config) { c.Kind = KindXDP; c.LocalIP = netip.MustParseAddr("224.0.0.9") }, "LocalIP"},
		{"ipv6 link-local local without zone", func(c *Config) {
			c.LocalIP = netip.MustParseAddr("fe80::1")
			c.Dests = []netip.AddrPort{netip.MustParseAddrPort("[2001:2::2]:5000")}
		}, "LocalIP"},
		{"ipv6 link-local dest without zone", func(c *Config) {
			c.LocalIP = netip.Addr{}
			c.Dests = []netip.AddrPort{netip.MustParseAddrPort("[fe80::2]:5000")}
		}, "Dests"},
		{"client without dests", func(c *Config) { c.Dests = nil }, "Dests"},
		{"ipv6 dest", func(c *Config) { c.Dests = []netip.AddrPort{netip.MustParseAddrPort("[::1]:5000")} }, "Dests"},
		{"dest twice", func(c *Config) { c.Dests = append(c.Dests, c.Dests[0]) }, "Dests"},
		{"raw to self", func(c *Config) { c.Kind = KindXDP; c.Dests = []netip.AddrPort{netip.AddrPortFrom(c.LocalIP, 5000)} }, "Dests"},
		{"dest without port", func(c *Config) { c.Port = 0; c.Dests = []netip.AddrPort{netip.AddrPortFrom(c.Dests[0].Addr(), 0)} }, "Port"},
		{"server without port", func(c *Config) { c.Role = RoleServer; c.Port = 0 }, "Port"},
		{"tcp-xdp dests on two ports", func(c *Config) {
			c.Kind = KindTCPXDP
			c.Dests = append(c.Dests, netip.AddrPortFrom(c.Dests[0].Addr(), 5001))
		}, "Dests"},
		{"short mac", func(c *Config) { c.DstMAC = net.HardwareAddr{1, 2, 3} }, "DstMAC"},
		{"datagram too big", func(c *Config) { c.MaxDatagram = 70000 }, "MaxDatagram"},
		{"record too big", func(c *Config) { c.Kind = KindTCP; c.MaxDatagram = 65536 }, "MaxDatagram"},
		{"negative datagram", func(c *Config) { c.MaxDatagram = -1 }, "MaxDatagram"},
		{"tx queue", func(c *Config) { c.TxQueue = -1 }, "TxQueue"},
		{"tx batch", func(c *Config) { c.TxBatch = 5000 }, "TxBatch"},
		{"rx batch", func(c *Config) { c.RxBatch = -3 }, "RxBatch"},
		{"peers below rx batch", func(c *Config) { c.RxBatch = 64; c.Peers = 63 }, "Peers"},
		{"too many peers", func(c *Config) { c.Peers = MaxPeers + 1 }, "Peers"},
		{"sockbuf", func(c *Config) { c.SockBuf = 100 }, "SockBuf"},
		{"connect timeout", func(c *Config) { c.ConnectTimeout = -1 }, "ConnectTimeout"},
		{"queues", func(c *Config) { c.Queues = -1 }, "Queues"},
		{"cpus per queue", func(c *Config) { c.CPUs = []int{0, 1} }, "CPUs"},
		{"too many queues", func(c *Config) { c.Queues = MaxQueues + 1 }, "Queues"},
		{"busy cpu twice", func(c *Config) { c.Queues = 2; c.CPUs = []int{0, 0} }, "CPUs"},
		{"poll mode", func(c *Config) { c.Poll = "spin" }, "Poll"},
		{"negative cpu", func(c *Config) { c.CPUs = []int{-2} }, "CPUs"},
		{"uring entries", func(c *Config) { c.Kind = KindURing; c.URing.Entries = 100 }, "URing.Entries"},
		{"uring buffers", func(c *Config) { c.Kind = KindURing; c.URing.RxBuffers = 3 }, "URing.RxBuffers"},
		{"sqpoll without cpu", func(c *Config) { c.Kind = KindURing; c.URing.SQPoll = true }, "URing.SQCPU"},
		{"sqpoll on poller cpu", func(c *Config) {
			c.Kind = KindURing
			c.URing.SQPoll = true
			c.URing.SQCPU = &cpu0
			c.CPUs = []int{0}
		}, "URing.SQCPU"},
		{"xdp mode", func(c *Config) { c.Kind = KindXDP; c.XDP.Mode = "native" }, "XDP.Mode"},
		{"xdp copy", func(c *Config) { c.Kind = KindXDP; c.XDP.Copy = "zc" }, "XDP.Copy"},
		{"xdp frame", func(c *Config) { c.Kind = KindXDP; c.XDP.FrameSize = 3000 }, "XDP.FrameSize"},
		{"xdp frames", func(c *Config) { c.Kind = KindXDP; c.XDP.Frames = 100 }, "XDP.Frames"},
		{"xdp ring", func(c *Config) { c.Kind = KindXDP; c.XDP.RingSize = 8192 }, "XDP.RingSize"},
		{"xdp queue", func(c *Config) { c.Kind = KindXDP; c.XDP.QueueID = -1 }, "XDP.QueueID"},
		{"congestion", func(c *Config) { c.Kind = KindTCPXDP; c.TCP.Congestion = "vegas" }, "TCP.Congestion"},
		{"congestion netstack", func(c *Config) {
			c.Kind = KindTCPXDP
			c.TCP.Stack = TCPStackNetstack
			c.TCP.Congestion = CongestionBBR
		}, "TCP.Congestion"},
		{"tcp buffers", func(c *Config) { c.Kind = KindTCPXDP; c.TCP.SendBuf = 10 }, "TCP.SendBuf"},
		{"min rto", func(c *Config) { c.Kind = KindTCPXDP; c.TCP.MinRTO = 1000 }, "TCP.MinRTO"},
		{"retries", func(c *Config) { c.Kind = KindTCPXDP; c.TCP.MaxRetries = -1 }, "TCP.MaxRetries"},
		{"max conns", func(c *Config) { c.Kind = KindTCPXDP; c.TCP.MaxConns = -1 }, "TCP.MaxConns"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validClient(KindUDP)
			tc.mod(&c)
			err := c.Validate()
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *ConfigError for %s", err, tc.field)
			}
			if ce.Field != tc.field {
				t.Fatalf("error names field %q, want %q: %v", ce.Field, tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.field) || ce.Reason == "" {
				t.Fatalf("message does not name the field or give a reason: %q", err)
			}
		})
	}
}

// TestDPDKOffLinkNeedsGateway: a PCI port has no kernel routes to ask, so
// a Dest outside LocalIP/DPDK.PrefixLen without DPDK.Gateway is refused
// with an error that says what to set; with the gateway it is accepted.
func TestDPDKOffLinkNeedsGateway(t *testing.T) {
	c := validClient(KindDPDK)
	c.Iface, c.DPDK.PCI, c.DPDK.PrefixLen = "", "0000:03:00.0", 24
	c.Dests = []netip.AddrPort{netip.MustParseAddrPort("198.18.0.2:5000")}
	if err := c.Validate(); err != nil {
		t.Fatalf("on-link peer: %v", err)
	}
	c.Dests = append(c.Dests, netip.MustParseAddrPort("198.19.7.7:5000"))
	err := c.Validate()
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "DPDK.Gateway" || !strings.Contains(err.Error(), "198.19.7.7") || !strings.Contains(err.Error(), "PCI") {
		t.Fatalf("off-link peer without gateway: got %v, want a DPDK.Gateway error naming the peer and the PCI port", err)
	}
	c.DPDK.Gateway = netip.MustParseAddr("198.18.0.254")
	if err := c.Validate(); err != nil {
		t.Fatalf("off-link peer with gateway: %v", err)
	}
}

// TestTCPDPDKGateway: tcp-dpdk's native engine takes DPDK.PrefixLen and
// DPDK.Gateway as kind dpdk does (an off-link Dest without a gateway is
// refused); netstack, which has no gateway, refuses them.
func TestTCPDPDKGateway(t *testing.T) {
	c := validClient(KindTCPDPDK)
	c.Iface, c.DPDK.PCI, c.DPDK.PrefixLen = "", "0000:03:00.0", 24
	c.Dests = []netip.AddrPort{netip.MustParseAddrPort("198.19.7.7:5000")}
	var ce *ConfigError
	if err := c.Validate(); !errors.As(err, &ce) || ce.Field != "DPDK.Gateway" {
		t.Fatalf("native, off-link peer without gateway: got %v, want a DPDK.Gateway error", err)
	}
	c.DPDK.Gateway = netip.MustParseAddr("198.18.0.254")
	if err := c.Validate(); err != nil {
		t.Fatalf("native, off-link peer with gateway: %v", err)
	}
	c.TCP.Stack = TCPStackNetstack
	if err := c.Validate(); !errors.As(err, &ce) || ce.Field != "DPDK.Gateway" || !strings.Contains(err.Error(), "native") {
		t.Fatalf("netstack with a gateway: got %v, want a DPDK.Gateway error naming the native engine", err)
	}
}

func TestQueues(t *testing.T) {
	c := validClient(KindUDP)
	c.Queues = 2
	if err := c.Validate(); err != nil {
		t.Fatalf("Queues=2 refused by Validate: %v", err)
	}
	var ce *ConfigError
	c.Queues = MaxQueues + 1
	if err := c.Validate(); !errors.As(err, &ce) || ce.Field != "Queues" {
		t.Fatalf("Queues=%d: got %v, want a ConfigError on Queues", c.Queues, err)
	}

	// Busy pollers need a CPU each; yielding ones may share.
	c = validClient(KindXDP)
	c.Queues, c.CPUs = 2, []int{1, 1}
	if err := c.Validate(); !errors.As(err, &ce) || ce.Field != "CPUs" || !strings.Contains(ce.Reason, "yield") {
		t.Fatalf("busy, CPUs [1 1]: got %v, want a ConfigError on CPUs that suggests yield", err)
	}
	c.Poll = PollYield
	if err := c.Validate(); err != nil {
		t.Fatalf("yield, CPUs [1 1]: %v", err)
	}
	c.Poll = "spin"
	if err := c.Validate(); !errors.As(err, &ce) || ce.Field != "Poll" {
		t.Fatalf("Poll spin: got %v, want a ConfigError on Poll", err)
	}
	if d := (Config{}).WithDefaults(); d.Poll != PollBusy {
		t.Fatalf("default Poll %q, want %q", d.Poll, PollBusy)
	}

	// The SQ thread may not share a CPU with any poller.
	sq := 1
	c = validClient(KindURing)
	c.Queues, c.CPUs = 2, []int{0, 1}
	c.URing.SQPoll, c.URing.SQCPU = true, &sq
	if err := c.Validate(); !errors.As(err, &ce) || ce.Field != "URing.SQCPU" {
		t.Fatalf("SQCPU on queue 1's CPU: got %v, want a ConfigError on URing.SQCPU", err)
	}
}

func TestSumStats(t *testing.T) {
	qs := []Stats{
		{Kind: "xdp", Mode: "m0", TxSent: 3, RxDelivered: 5, Syscalls: 7, SockRcvBuf: 10,
			Layers: []Counter{{Layer: "xsk", Name: "rx_dropped", Value: 1, Loss: true}, {Layer: "tcp", Name: "rtt_us_max", Value: 9}}},
		{Kind: "xdp", Mode: "m1", TxSent: 4, RxDelivered: 6, Syscalls: 8, SockRcvBuf: 20,
			Layers: []Counter{{Layer: "tcp", Name: "rtt_us_max", Value: 4}, {Layer: "xsk", Name: "rx_dropped", Value: 2, Loss: true}, {Layer: "q1", Name: "only", Value: 11}}},
	}
	s := SumStats(qs)
	if s.Kind != "xdp" || s.Mode != "m0" || s.TxSent != 7 || s.RxDelivered != 11 || s.Syscalls != 15 || s.SockRcvBuf != 20 {
		t.Fatalf("sum: %+v", s)
	}
	want := []Counter{{Layer: "xsk", Name: "rx_dropped", Value: 3, Loss: true}, {Layer: "tcp", Name: "rtt_us_max", Value: 9}, {Layer: "q1", Name: "only", Value: 11}}
	if len(s.Layers) != len(want) {
		t.Fatalf("layers %+v, want %+v", s.Layers, want)
	}
	for i := range want {
		if s.Layers[i] != want[i] {
			t.Fatalf("layer %d: %+v, want %+v", i, s.Layers[i], want[i])
		}
	}
	if s.Lost() != 3 {
		t.Fatalf("Lost() of the sum = %d, want 3", s.Lost())
	}
	if z := SumStats(nil); z.Kind != "" || z.Layers != nil {
		t.Fatalf("SumStats(nil) = %+v", z)
	}
}

func TestDefaults(t *testing.T) {
	c := Config{Kind: KindXDP}.WithDefaults()
	if c.MaxDatagram != DefaultMaxDatagram || c.TxBatch != 16 || c.RxBatch != 32 ||
		c.BusyPollUs != 50 || c.SockBuf != 16<<20 || c.Queues != 1 || c.Peers != 65536 {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if c.LocalPort != c.Port {
		t.Fatalf("raw datagram LocalPort default: got %d want Port %d", c.LocalPort, c.Port)
	}
	if c.TCP.SendBuf != 1<<20 || c.TCP.MinRTO.Milliseconds() != 25 {
		t.Fatalf("tcp tuning defaults: %+v", c.TCP)
	}
	// The native engine's buffers are ceilings its pooled rings and
	// auto-tuned window reach only with use: Linux's tcp_wmem and
	// tcp_rmem maxima, room for a 10 ms path's bandwidth-delay product.
	n := Config{Kind: KindTCPXDP}.WithDefaults()
	if n.TCP.Stack != TCPStackNative || n.TCP.SendBuf != 4<<20 || n.TCP.RecvBuf != 6<<20 {
		t.Fatalf("native engine buffer defaults: %+v", n.TCP)
	}
	ns := Config{Kind: KindTCPXDP, TCP: TCPTuning{Stack: TCPStackNetstack}}.WithDefaults()
	if ns.TCP.SendBuf != 1<<20 || ns.TCP.RecvBuf != 1<<20 {
		t.Fatalf("netstack buffer defaults: %+v", ns.TCP)
	}
}

// setHostCongestion makes hostCongestion answer name and err for the rest
// of t.
func setHostCongestion(t *testing.T, name string, err error) {
	saved := hostCongestion
	hostCongestion = func() (string, error) { return name, err }
	t.Cleanup(func() { hostCongestion = saved })
}

// TestCongestionFollowsHost: TCP.Congestion's default is the host's
// net.ipv4.tcp_congestion_control where the engine implements it, reno
// otherwise, and Validate accepts it on either engine; a value given is
// kept.
func TestCongestionFollowsHost(t *testing.T) {
	cases := []struct {
		host             string
		err              error
		native, netstack Congestion
	}{
		{host: "bbr", native: CongestionBBR, netstack: CongestionReno},
		{host: "cubic", native: CongestionCubic, netstack: CongestionCubic},
		{host: "reno", native: CongestionReno, netstack: CongestionReno},
		{host: "dctcp", native: CongestionReno, netstack: CongestionReno},
		{host: "htcp", native: CongestionReno, netstack: CongestionReno},
		{host: "", native: CongestionReno, netstack: CongestionReno},
		{err: errors.New("no /proc"), native: CongestionReno, netstack: CongestionReno},
	}
	for _, tc := range cases {
		setHostCongestion(t, tc.host, tc.err)
		for _, k := range []Kind{KindTCPXDP, KindTCPDPDK} {
			for _, e := range []struct {
				stack TCPStack
				want  Congestion
			}{{"", tc.native}, {TCPStackNative, tc.native}, {TCPStackNetstack, tc.netstack}} {
				c := Config{Kind: k, Iface: "veth0", LocalIP: netip.MustParseAddr("198.18.0.1"), Port: 5000,
					Dests: []netip.AddrPort{netip.MustParseAddrPort("198.18.0.2:5000")}, TCP: TCPTuning{Stack: e.stack}}
				c, err := c.Prepare() // WithDefaults and Validate
				if err != nil {
					t.Fatalf("host %q (%v), %s on %q: %v", tc.host, tc.err, k, e.stack, err)
				}
				if c.TCP.Congestion != e.want {
					t.Errorf("host %q (%v), %s on %q: TCP.Congestion %q, want %q", tc.host, tc.err, k, e.stack, c.TCP.Congestion, e.want)
				}
			}
		}
		// A value given is kept, whatever the host's.
		for _, cc := range congestions {
			c := Config{Kind: KindTCPXDP, TCP: TCPTuning{Congestion: cc}}.WithDefaults()
			if c.TCP.Congestion != cc {
				t.Errorf("host %q: given %q, got %q", tc.host, cc, c.TCP.Congestion)
			}
		}
		c := Config{Kind: KindTCPXDP, TCP: TCPTuning{Stack: TCPStackNetstack, Congestion: CongestionCubic}}.WithDefaults()
		if c.TCP.Congestion != CongestionCubic {
			t.Errorf("host %q: netstack given cubic, got %q", tc.host, c.TCP.Congestion)
		}
	}
}

// TestHostCongestion: this machine's net.ipv4.tcp_congestion_control
// reads as one name, or not at all (not Linux, no /proc); either way the
// default is one the native engine implements.
func TestHostCongestion(t *testing.T) {
	name, err := readHostCongestion()
	if err != nil {
		t.Logf("host congestion control unreadable (default reno): %v", err)
	} else if name == "" || strings.ContainsAny(name, " \t\n") {
		t.Fatalf("host congestion control %q: want one name", name)
	} else {
		t.Logf("host congestion control %q", name)
	}
	got := Config{Kind: KindTCPXDP}.WithDefaults().TCP.Congestion
	if !slices.Contains(congestions, got) {
		t.Fatalf("default TCP.Congestion %q, not one of %v", got, congestions)
	}
	if err == nil && slices.Contains(congestions, Congestion(name)) && got != Congestion(name) {
		t.Fatalf("default TCP.Congestion %q, want the host's %q", got, name)
	}
}

func TestUnsupportedError(t *testing.T) {
	base := errors.New("EINVAL")
	err := NotSupported("io_uring multishot RECVMSG", "6.0", "upgrade the kernel", base)
	if !errors.Is(err, ErrNotSupported) || !errors.Is(err, base) {
		t.Fatalf("errors.Is chain broken: %v", err)
	}
	for _, want := range []string{"multishot", "6.0", "upgrade", "EINVAL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
}

func TestStatsLost(t *testing.T) {
	s := Stats{TxDropped: 1, RxTruncated: 2, RxBadChecksum: 3, RxMalformed: 4, RxFiltered: 100,
		Layers: []Counter{{Layer: "socket", Name: "drops", Value: 5, Loss: true}, {Layer: "x", Name: "info", Value: 1000}}}
	if got := s.Lost(); got != 15 {
		t.Fatalf("Lost()=%d want 15 (filtered frames and info counters are not losses)", got)
	}
	if v, ok := s.Counter("socket", "drops"); !ok || v != 5 {
		t.Fatalf("Counter lookup: %d %v", v, ok)
	}
}

func TestTCPStack(t *testing.T) {
	var s TCPStack
	if err := s.Set("native"); err != nil || s != TCPStackNative {
		t.Fatalf("Set native: %v %q", err, s)
	}
	if err := s.Set("lwip"); err == nil || s != TCPStackNative {
		t.Fatalf("Set lwip: %v %q", err, s)
	}
	// Each engine chosen before the defaults, which depend on it
	// (TCP.Congestion, the buffers).
	for _, s := range []TCPStack{TCPStackNetstack, TCPStackNative} {
		c := validClient(KindTCPXDP)
		c.TCP = TCPTuning{Stack: s}
		if err := c.WithDefaults().Validate(); err != nil {
			t.Fatalf("Validate %s: %v", s, err)
		}
	}
	c := validClient(KindTCPXDP)
	c.TCP.Stack = "lwip"
	var ce *ConfigError
	if err := c.Validate(); !errors.As(err, &ce) || ce.Field != "TCP.Stack" {
		t.Fatalf("Validate lwip: %v", err)
	}
	// The native engine is the default of the userspace TCP kinds only.
	for _, k := range []Kind{KindTCPXDP, KindTCPDPDK} {
		if got := (Config{Kind: k}).WithDefaults().TCP.Stack; got != TCPStackNative {
			t.Errorf("%s: default TCP.Stack %q, want native", k, got)
		}
	}
	if got := (Config{Kind: KindTCP}).WithDefaults().TCP.Stack; got != "" {
		t.Errorf("tcp: default TCP.Stack %q, want none", got)
	}
}

// TestDests: a destination is an address and port; port 0 is Config.Port,
// an IPv4-mapped address is taken as IPv4, the caller's slice is never
// written, and a client that names every port needs no Port.
func TestDests(t *testing.T) {
	given := []netip.AddrPort{
		netip.MustParseAddrPort("[::ffff:198.18.0.2]:6000"),
		netip.AddrPortFrom(netip.MustParseAddr("198.18.0.2"), 0),
		netip.MustParseAddrPort("198.18.0.3:7000"),
	}
	keep := slices.Clone(given)
	c, err := Config{Kind: KindXDP, Iface: "veth0", LocalIP: netip.MustParseAddr("::ffff:198.18.0.1"),
		Dests: given, Port: 5000}.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.AddrPort{
		netip.MustParseAddrPort("198.18.0.2:6000"),
		netip.MustParseAddrPort("198.18.0.2:5000"),
		netip.MustParseAddrPort("198.18.0.3:7000"),
	}
	if !slices.Equal(c.Dests, want) || c.LocalIP != netip.MustParseAddr("198.18.0.1") {
		t.Errorf("prepared Dests %v, LocalIP %v; want %v, 198.18.0.1", c.Dests, c.LocalIP, want)
	}
	if !slices.Equal(given, keep) {
		t.Errorf("Prepare wrote the caller's Dests: %v", given)
	}

	// Every destination names its port: Port may be 0, and becomes the
	// first one's (the raw kinds' source port by default).
	c, err = Config{Kind: KindXDP, Iface: "veth0", LocalIP: netip.MustParseAddr("198.18.0.1"),
		Dests: []netip.AddrPort{netip.MustParseAddrPort("198.18.0.2:6000"), netip.MustParseAddrPort("198.18.0.2:6001")}}.Prepare()
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != 6000 || c.LocalPort != 6000 {
		t.Errorf("Port %d, LocalPort %d; want 6000 (the first destination's)", c.Port, c.LocalPort)
	}

	// A destination without a port on a client without Port: the error
	// says what to do.
	_, err = Config{Kind: KindUDP, Dests: []netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("198.18.0.2"), 0)}}.Prepare()
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "Port" || !strings.Contains(err.Error(), "198.18.0.2:5000") {
		t.Errorf("no port anywhere: %v, want a ConfigError on Port that shows address:port", err)
	}
	// The same address and port twice is refused (even one written as
	// IPv4-mapped).
	_, err = Config{Kind: KindUDP, Dests: []netip.AddrPort{netip.MustParseAddrPort("198.18.0.2:6000"),
		netip.MustParseAddrPort("[::ffff:198.18.0.2]:6000")}}.Prepare()
	if !errors.As(err, &ce) || ce.Field != "Dests" {
		t.Errorf("a destination twice: %v, want a ConfigError on Dests", err)
	}
}

// TestUnmap: what every QueueTo does to its address first.
func TestUnmap(t *testing.T) {
	for in, want := range map[string]string{
		"[::ffff:198.18.0.2]:9": "198.18.0.2:9",
		"198.18.0.2:9":          "198.18.0.2:9",
		"[2001:2::2]:9":         "[2001:2::2]:9",
		"[::ffff:0.0.0.0]:0":    "0.0.0.0:0",
	} {
		if got := Unmap(netip.MustParseAddrPort(in)); got != netip.MustParseAddrPort(want) {
			t.Errorf("Unmap(%s) = %v, want %s", in, got, want)
		}
	}
	if got := Unmap(netip.AddrPort{}); got.IsValid() || got.Addr().IsValid() {
		t.Errorf("Unmap(zero) = %v", got)
	}
}

// TestUnicast: the addresses every QueueTo refuses whatever the family.
func TestUnicast(t *testing.T) {
	for _, c := range []struct {
		ap   netip.AddrPort
		want bool
	}{
		{netip.MustParseAddrPort("198.18.0.2:9"), true},
		{netip.MustParseAddrPort("[2001:2::2]:9"), true},
		{netip.MustParseAddrPort("169.254.0.1:9"), true}, // IPv4 link-local needs no zone
		{netip.AddrPort{}, false},
		{netip.MustParseAddrPort("198.18.0.2:0"), false},
		{netip.MustParseAddrPort("0.0.0.0:9"), false},
		{netip.MustParseAddrPort("[::]:9"), false},
		{netip.MustParseAddrPort("224.0.0.1:9"), false},
		{netip.MustParseAddrPort("[ff02::1]:9"), false},
		{netip.MustParseAddrPort("[fe80::1]:9"), false},
		{netip.AddrPortFrom(netip.MustParseAddr("fe80::1%eth0"), 9), false},
	} {
		if got := Unicast(c.ap); got != c.want {
			t.Errorf("Unicast(%v) = %v, want %v", c.ap, got, c.want)
		}
	}
}
