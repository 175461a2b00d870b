package cli

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"

	"github.com/dgramio/dgramio/internal/bench"
	"github.com/vishvananda/netlink"
)

// endpoint is one side of a run: a test host of internal/testhost (veth)
// or a real port of package ports, each in its network namespace.
type endpoint interface {
	// Start starts a command from Command inside the namespace.
	Command(name string, args ...string) *exec.Cmd
	Start(cmd *exec.Cmd) error
	// Do runs fn on a thread inside the namespace.
	Do(fn func() error) error
	// Link is the interface as netlink sees it now.
	Link() (netlink.Link, error)
	// Offloads are the interface's offload features.
	Offloads() (map[string]bool, error)
}

// side is an endpoint with its interface and address (and its IPv6
// address when the test hosts have IPv6 on; real ports have none).
type side struct {
	ep     endpoint
	iface  string
	addr   netip.Addr
	addr6  netip.Addr
	prefix netip.Prefix
	mac    net.HardwareAddr
}

// hostCounters reads the counters of both sides that lie outside the
// backends: each interface's link statistics and the kernel's SNMP
// counters (UDP and TCP) of each namespace, and each CPU's steal time.
// Keys are "a.link.tx_dropped", "b.snmp.udp.rcvbuf_errors",
// "cpu1.steal_ms". What cannot be read is left out.
func (nb *netbench) hostCounters() map[string]uint64 {
	m := map[string]uint64{}
	if nb.a == nil || nb.b == nil {
		return m
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		for cpu, ms := range parseSteal(string(b)) {
			m["cpu"+strconv.Itoa(cpu)+".steal_ms"] = ms
		}
	}
	for name, h := range map[string]*side{"a": nb.a, "b": nb.b} {
		if l, err := h.ep.Link(); err == nil && l.Attrs().Statistics != nil {
			s := l.Attrs().Statistics
			for k, v := range map[string]uint64{
				"rx_packets": s.RxPackets, "tx_packets": s.TxPackets,
				"rx_dropped": s.RxDropped, "tx_dropped": s.TxDropped,
				"rx_errors": s.RxErrors, "tx_errors": s.TxErrors,
			} {
				m[name+".link."+k] = v
			}
		}
		var snmp, snmp6 []byte
		// /proc/thread-self: the namespace of this thread, which Do put
		// into the side's namespace (/proc/self/net is the main thread's).
		if err := h.ep.Do(func() error {
			var err error
			snmp, err = os.ReadFile("/proc/thread-self/net/snmp")
			snmp6, _ = os.ReadFile("/proc/thread-self/net/snmp6") // none without IPv6
			return err
		}); err == nil {
			for k, v := range parseSNMP(string(snmp)) {
				m[name+".snmp."+k] = v
			}
			for k, v := range parseSNMP6(string(snmp6)) {
				m[name+".snmp."+k] = v
			}
		}
	}
	return m
}

// userHZ is the unit of /proc/stat's times: USER_HZ, 100 a second on
// every architecture this runs on.
const userHZ = 100

// parseSteal returns each CPU's steal time in /proc/stat (the eighth
// value of its "cpuN" line), in milliseconds: time the hypervisor ran
// something else while this virtual CPU had work, during which nothing
// on it ran. A kernel or a machine without it yields nothing.
func parseSteal(s string) map[int]uint64 {
	out := map[int]uint64{}
	for _, l := range strings.Split(s, "\n") {
		f := strings.Fields(l)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		cpu, err := strconv.Atoi(f[0][3:])
		if err != nil || cpu < 0 {
			continue
		}
		ticks, err := strconv.ParseUint(f[8], 10, 64)
		if err != nil {
			continue
		}
		out[cpu] = ticks * 1000 / userHZ
	}
	return out
}

// parseSNMP parses /proc/net/snmp's Udp and Tcp lines (a header line of
// names, then a line of values) into "udp.in_errors" style keys.
func parseSNMP(s string) map[string]uint64 {
	out := map[string]uint64{}
	lines := strings.Split(s, "\n")
	for i := 0; i+1 < len(lines); i++ {
		proto, names, ok := strings.Cut(lines[i], ":")
		if !ok || (proto != "Udp" && proto != "Tcp") {
			continue
		}
		proto2, vals, ok := strings.Cut(lines[i+1], ":")
		if !ok || proto2 != proto {
			continue
		}
		ns, vs := strings.Fields(names), strings.Fields(vals)
		if len(ns) != len(vs) || len(ns) == 0 || !isNumber(vs[0]) {
			continue
		}
		for j := range ns {
			v, err := strconv.ParseInt(vs[j], 10, 64)
			if err != nil || v < 0 {
				continue
			}
			out[strings.ToLower(proto)+"."+snake(ns[j])] = uint64(v)
		}
		i++
	}
	return out
}

// parseSNMP6 parses /proc/net/snmp6's Udp6 lines (a name and a value
// each: "Udp6RcvbufErrors 3") into "udp6.rcvbuf_errors" style keys: the
// UDP counters of IPv6, which /proc/net/snmp's Udp line leaves out (its
// Tcp line counts both families).
func parseSNMP6(s string) map[string]uint64 {
	out := map[string]uint64{}
	for _, l := range strings.Split(s, "\n") {
		f := strings.Fields(l)
		if len(f) != 2 || !strings.HasPrefix(f[0], "Udp6") || len(f[0]) == len("Udp6") {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		out["udp6."+snake(f[0][len("Udp6"):])] = v
	}
	return out
}

func isNumber(s string) bool {
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}

// snake turns "RcvbufErrors" into "rcvbuf_errors".
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// diffCounters returns after − before for each key in both (0 when a
// counter went backwards), leaving out the gauges of /proc/net/snmp.
func diffCounters(before, after map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, a := range after {
		b, ok := before[k]
		if !ok || strings.HasSuffix(k, ".curr_estab") || strings.HasSuffix(k, ".max_conn") ||
			strings.HasSuffix(k, ".rto_algorithm") || strings.HasSuffix(k, ".rto_min") || strings.HasSuffix(k, ".rto_max") {
			continue
		}
		if a >= b {
			out[k] = a - b
		}
	}
	return out
}

// movedDrops lists the nonzero drop and error counters among the host's.
func movedDrops(m map[string]uint64) string {
	var ks []string
	for k, v := range m {
		if v != 0 && (strings.Contains(k, "drop") || strings.Contains(k, "err") || strings.Contains(k, "retrans") || strings.Contains(k, "no_ports")) {
			ks = append(ks, k+"="+strconv.FormatUint(v, 10))
		}
	}
	if len(ks) == 0 {
		return "none"
	}
	sort.Strings(ks)
	return strings.Join(ks, " ")
}

// stolenMs is the steal time of every CPU summed over the cells of rep.
func stolenMs(rep *bench.Report) uint64 {
	var ms uint64
	for i := range rep.Cells {
		for k, v := range rep.Cells[i].Host {
			if strings.HasPrefix(k, "cpu") && strings.HasSuffix(k, ".steal_ms") {
				ms += v
			}
		}
	}
	return ms
}
