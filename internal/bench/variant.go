package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dgramio/dgramio"
)

// The variants of a kind: the same backend with an option turned on,
// measured as a row of its own ("uring+sqpoll"). The report keeps the
// kind as it is (Cell.Kind "uring") and names the variant beside it
// (Cell.Variant "sqpoll").
const (
	// VariantSQPoll is kind uring with a kernel thread taking the
	// submissions (Config.URing.SQPoll), pinned to a CPU of its own
	// (Config.URing.SQCPU) on each end.
	VariantSQPoll = "sqpoll"
	// VariantNAPI is kind uring with NAPI busy polling registered on the
	// ring (Config.URing.NAPI, Linux 6.9).
	VariantNAPI = "napi"
	// VariantNative and VariantNetstack are kinds tcp-xdp and tcp-dpdk on
	// one userspace TCP/IP engine (Config.TCP.Stack): the plain row is the
	// default engine (native).
	VariantNative   = "native"
	VariantNetstack = "netstack"
	// VariantRaw is a stream kind whose echo reads and writes raw bytes
	// (Config.Framing raw): it reflects each connection's bytes as they
	// came instead of decoding and re-staging u16 records. The loadgen
	// sends and reads records either way, so the row measures what raw
	// framing costs against the plain row.
	VariantRaw = "raw"
	// VariantIPv6 is a kind over IPv6 (every kind serves it; tcp-xdp and
	// tcp-dpdk on their default engine, native): the test hosts'
	// addresses from 2001:2::/48 (RFC 5180) instead of 198.18.0.0/15.
	// netbench --family 6 (or 4,6) makes these rows.
	VariantIPv6 = "ipv6"
	// VariantNetstackIPv6 is kinds tcp-xdp and tcp-dpdk on netstack over
	// IPv6: VariantNetstack and VariantIPv6 at once
	// ("tcp-xdp+netstack+ipv6").
	VariantNetstackIPv6 = VariantNetstack + "+" + VariantIPv6
)

// Variants lists the variants each kind has, in the order tools show
// them.
var Variants = map[string][]string{
	string(dgramio.KindUDP):     {VariantIPv6},
	string(dgramio.KindURing):   {VariantSQPoll, VariantNAPI, VariantIPv6},
	string(dgramio.KindTCP):     {VariantRaw, VariantIPv6},
	string(dgramio.KindXDP):     {VariantIPv6},
	string(dgramio.KindDPDK):    {VariantIPv6},
	string(dgramio.KindTCPXDP):  {VariantNative, VariantNetstack, VariantRaw, VariantIPv6, VariantNetstackIPv6},
	string(dgramio.KindTCPDPDK): {VariantNative, VariantNetstack, VariantRaw, VariantIPv6, VariantNetstackIPv6},
}

// IsIPv6 reports whether variant runs over IPv6: VariantIPv6, or a
// variant joined with it ("netstack+ipv6").
func IsIPv6(variant string) bool {
	return variant == VariantIPv6 || strings.HasSuffix(variant, "+"+VariantIPv6)
}

// BaseVariant is variant without its IPv6 part: "" for VariantIPv6,
// "netstack" for "netstack+ipv6", variant itself for the others.
func BaseVariant(variant string) string {
	if variant == VariantIPv6 {
		return ""
	}
	return strings.TrimSuffix(variant, "+"+VariantIPv6)
}

// IPv6Row is the name of the IPv6 row of kind's variant ("" for the plain
// row): "udp+ipv6", "tcp-xdp+netstack+ipv6"; false when the kind has no
// such variant.
func IPv6Row(kind, variant string) (string, bool) {
	v := VariantIPv6
	switch {
	case IsIPv6(variant):
		v = variant
	case variant != "":
		v = variant + "+" + VariantIPv6
	}
	if !slices.Contains(Variants[kind], v) {
		return "", false
	}
	return RowName(kind, v), true
}

// RowName is the name of a row as --kinds takes it and the tables show
// it: the kind, or kind+"+"+variant.
func RowName(kind, variant string) string {
	if variant == "" {
		return kind
	}
	return kind + "+" + variant
}

// SplitRow splits a row name into its kind and its variant ("" for none),
// without checking either.
func SplitRow(name string) (kind, variant string) {
	kind, variant, _ = strings.Cut(name, "+")
	return kind, variant
}

// ParseRow splits a row name and checks its variant: a name with "+" must
// name a variant the kind has (Variants). The kind itself is not checked
// (a tool refuses an unknown kind).
func ParseRow(name string) (kind, variant string, err error) {
	kind, variant = SplitRow(name)
	if !strings.Contains(name, "+") {
		return kind, "", nil
	}
	if slices.Contains(Variants[kind], variant) {
		return kind, variant, nil
	}
	var known []string
	for _, k := range dgramio.Kinds() {
		for _, v := range Variants[string(k)] {
			known = append(known, RowName(string(k), v))
		}
	}
	return "", "", fmt.Errorf("%q: not a variant of a kind; the variants are %s", name, strings.Join(known, ", "))
}

// Name is the row's name: RowName of its kind and variant.
func (k *KindRow) Name() string { return RowName(k.Kind, k.Variant) }

// Name is the name of the cell's row: RowName of its kind and variant.
func (c *Cell) Name() string { return RowName(c.Kind, c.Variant) }
