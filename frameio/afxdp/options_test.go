package afxdp

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/afxdp/xdpprog"
)

func TestMaxFrame(t *testing.T) {
	for _, c := range []struct{ frame, want int }{
		{4096, 3072}, // 3840 rounded down to whole KiB
		{2048, 1024}, // 1792 → 1024: the ixgbe zero-copy trap
		{1280, 1024},
		{1279, 0},
		{256, 0},
		{8192, 7168},
	} {
		if got := MaxFrame(c.frame); got != c.want {
			t.Errorf("MaxFrame(%d) = %d, want %d", c.frame, got, c.want)
		}
	}
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{Iface: "veth0", Port: 5000}.WithDefaults()
	if o.FrameSize != 4096 || o.Frames != 4096 || o.RingSize != 2048 || o.MaxFrame != 1514 || o.CarrierWait != 5*time.Second {
		t.Errorf("defaults: %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	small := Options{Iface: "veth0", Port: 1, Frames: 64}.WithDefaults()
	if small.RingSize != 64 {
		t.Errorf("RingSize default with 64 frames = %d, want 64", small.RingSize)
	}
	// The defaults are dgramio.Config's.
	c := dgramio.Config{Kind: dgramio.KindXDP, Iface: "veth0", Port: 5000}.WithDefaults()
	if c.XDP.FrameSize != DefaultFrameSize || c.XDP.Frames != DefaultFrames || c.XDP.RingSize != DefaultRingSize || c.XDP.CarrierWait != DefaultCarrierWait {
		t.Errorf("dgramio.Config XDP defaults %+v differ from ours", c.XDP)
	}
}

func TestOptionsValidate(t *testing.T) {
	good := Options{Iface: "veth0", Port: 5000}.WithDefaults()
	cases := []struct {
		field string
		mod   func(*Options)
	}{
		{"Iface", func(o *Options) { o.Iface = "" }},
		{"QueueID", func(o *Options) { o.QueueID = -1 }},
		{"FrameSize", func(o *Options) { o.FrameSize = 3000 }},
		{"Frames", func(o *Options) { o.Frames = 100 }},
		{"Frames", func(o *Options) { o.Frames = 32 }},
		{"RingSize", func(o *Options) { o.RingSize = 8192 }},
		{"RingSize", func(o *Options) { o.RingSize = 1000 }},
		{"Mode", func(o *Options) { o.Mode = "native" }},
		{"Copy", func(o *Options) { o.Copy = "zc" }},
		{"Copy", func(o *Options) { o.Mode, o.Copy = "skb", "zerocopy" }},
		{"Program", func(o *Options) { o.Program = xdpprog.Variant(7) }},
		{"Port", func(o *Options) { o.Port = 0 }},
		{"MaxFrame", func(o *Options) { o.MaxFrame = 10 }},
		{"MaxFrame", func(o *Options) { o.MaxFrame = 3073 }},
		{"MaxFrame", func(o *Options) { o.FrameSize, o.MaxFrame = 2048, 1514 }},
	}
	for _, c := range cases {
		o := good
		c.mod(&o)
		err := o.Validate()
		var ce *dgramio.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%+v: error %v, want a ConfigError on %s", o, err, c.field)
		}
	}
	ok := good
	ok.FrameSize, ok.MaxFrame = 2048, 1024
	if err := ok.Validate(); err != nil {
		t.Errorf("a 1024-byte frame in 2048-byte UMEM frames refused: %v", err)
	}
}

func TestOpenRefusesOversizeBeforeSyscalls(t *testing.T) {
	// No such interface exists: the refusal must come from validation.
	_, err := Open(Options{Iface: "no-such-if0", Port: 5000, FrameSize: 2048, MaxFrame: 1514})
	var ce *dgramio.ConfigError
	if !errors.As(err, &ce) || ce.Field != "MaxFrame" {
		t.Fatalf("Open: %v, want a ConfigError on MaxFrame", err)
	}
	for _, want := range []string{"1024", "982", "ixgbe"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestOptionsFromConfig(t *testing.T) {
	c := dgramio.Config{Kind: dgramio.KindXDP, Iface: "veth0", Port: 5000, MaxDatagram: 1000,
		XDP: dgramio.XDPOptions{Mode: "skb", Copy: "copy", QueueID: 2}}.WithDefaults()
	o := OptionsFromConfig(c)
	if o.Iface != "veth0" || o.Port != 5000 || o.Program != xdpprog.UDP || o.MaxFrame != 1042 ||
		o.Mode != "skb" || o.Copy != "copy" || o.QueueID != 2 || o.FrameSize != 4096 {
		t.Errorf("xdp server: %+v", o)
	}
	c.Role, c.LocalPort = dgramio.RoleClient, 6000
	if o := OptionsFromConfig(c); o.Port != 6000 {
		t.Errorf("xdp client receives on LocalPort 6000, got %d", o.Port)
	}
	c.XDP.OwnARP = true
	if o := OptionsFromConfig(c); o.Program != xdpprog.UDPARP {
		t.Errorf("OwnARP: program %v, want udp+arp", o.Program)
	}
	// An IPv6 Config: IPv6 steering on, 62 bytes of headers, and the
	// default MaxDatagram (1452) fills a 1514-byte frame.
	c6 := dgramio.Config{Kind: dgramio.KindXDP, Iface: "veth0", Role: dgramio.RoleServer, Port: 5000,
		LocalIP: netip.MustParseAddr("2001:2::1")}.WithDefaults()
	if o := OptionsFromConfig(c6); !o.IPv6 || o.MaxFrame != 1514 {
		t.Errorf("xdp over IPv6: IPv6 %v MaxFrame %d", o.IPv6, o.MaxFrame)
	}
	if OptionsFromConfig(c).IPv6 {
		t.Error("IPv6 steering on for an IPv4 Config")
	}
	tc := dgramio.Config{Kind: dgramio.KindTCPXDP, Role: dgramio.RoleClient, Iface: "veth0", Port: 7000}.WithDefaults()
	if o := OptionsFromConfig(tc); o.Program != xdpprog.TCP || o.Port != 7000 || o.MaxFrame != 1514 {
		t.Errorf("tcp-xdp: %+v", o)
	}
	// The default Config gives options that validate; FrameSize 2048 with
	// the default MaxDatagram does not fit.
	if err := OptionsFromConfig(dgramio.Config{Kind: dgramio.KindXDP, Iface: "v", Port: 1}.WithDefaults()).Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
	c2 := dgramio.Config{Kind: dgramio.KindXDP, Iface: "v", Port: 1, XDP: dgramio.XDPOptions{FrameSize: 2048}}.WithDefaults()
	if err := OptionsFromConfig(c2).Validate(); err == nil {
		t.Error("MaxDatagram 1472 in 2048-byte frames accepted")
	}
}
