package dgramio

import (
	"encoding/json"
	"flag"
	"strings"
	"testing"
)

// Every enum parses its own String back (Set, and UnmarshalText where it
// has one), refuses an unknown name with an error listing the valid ones,
// and encodes in JSON as its plain name; a Kind decodes from JSON whatever
// its name (records of kinds this build does not know read back).
func TestEnumsRoundTrip(t *testing.T) {
	type value interface {
		flag.Value
	}
	cases := []struct {
		name  string
		valid []string
		make  func() value
	}{
		{"Kind", []string{"udp", "uring", "xdp", "dpdk", "tcp", "tcp-xdp", "tcp-dpdk"}, func() value { return new(Kind) }},
		{"Poll", []string{"busy", "yield"}, func() value { return new(Poll) }},
		{"XDPMode", []string{"", "driver", "skb"}, func() value { return new(XDPMode) }},
		{"XDPCopy", []string{"", "copy", "zerocopy"}, func() value { return new(XDPCopy) }},
		{"Congestion", []string{"reno", "cubic", "bbr"}, func() value { return new(Congestion) }},
		{"Framing", []string{"u16", "raw", "u32"}, func() value { return new(Framing) }},
	}
	for _, c := range cases {
		for _, s := range c.valid {
			v := c.make()
			if err := v.Set(s); err != nil || v.String() != s {
				t.Errorf("%s.Set(%q): %v, String %q", c.name, s, err, v.String())
			}
			if w, ok := c.make().(interface{ UnmarshalText([]byte) error }); ok {
				if err := w.UnmarshalText([]byte(s)); err != nil || w.(value).String() != s {
					t.Errorf("%s.UnmarshalText(%q): %v", c.name, s, err)
				}
			}
		}
		err := c.make().Set("bogus")
		if err == nil || !strings.Contains(err.Error(), `"bogus"`) || !strings.Contains(err.Error(), `"`+c.valid[len(c.valid)-1]+`"`) {
			t.Errorf("%s.Set(bogus) = %v, want an error naming it and the valid values", c.name, err)
		}
	}
	b, err := json.Marshal(Stats{Kind: KindTCPXDP})
	if err != nil || !strings.Contains(string(b), `"kind":"tcp-xdp"`) {
		t.Errorf("Stats JSON = %s, %v; want the kind as its plain name", b, err)
	}
	var s Stats
	if err := json.Unmarshal([]byte(`{"kind":"fake"}`), &s); err != nil || s.Kind != "fake" {
		t.Errorf("Stats with kind fake from JSON: %v, Kind %q", err, s.Kind)
	}
}

// The kinds' properties, which Validate and the tools use.
func TestKindProperties(t *testing.T) {
	for _, k := range Kinds() {
		if !k.Known() {
			t.Errorf("%s: not Known", k)
		}
		stream := k == KindTCP || k == KindTCPXDP || k == KindTCPDPDK
		raw := k != KindUDP && k != KindURing && k != KindTCP
		dpdk := k == KindDPDK || k == KindTCPDPDK
		if k.IsStream() != stream || k.IsRaw() != raw || k.IsDPDK() != dpdk || k.IsXDP() != (k == KindXDP || k == KindTCPXDP) {
			t.Errorf("%s: IsStream %v IsRaw %v IsDPDK %v IsXDP %v", k, k.IsStream(), k.IsRaw(), k.IsDPDK(), k.IsXDP())
		}
	}
	if Kind("quic").Known() || Kind("").Known() {
		t.Error("an unknown kind is Known")
	}
	ks := Kinds()
	ks[0] = "changed"
	if Kinds()[0] != KindUDP {
		t.Error("Kinds returned the table itself")
	}
}
