package preflight

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Check is one finding of the preflight: something known to move results
// by microseconds on real ports, looked at on this host.
type Check struct {
	// Name says what was looked at ("isolated CPUs", "coalescing eth1").
	Name string `json:"name"`
	// Status is StatusOK, StatusWarn or StatusNA (does not apply here, and
	// why).
	Status string `json:"status"`
	// Detail is what was found.
	Detail string `json:"detail"`
}

// The statuses of a Check.
const (
	StatusOK   = "ok"
	StatusWarn = "warn"
	StatusNA   = "n/a"
)

// System reads the kernel's view of CPUs, interrupts and devices under
// two roots, "/sys" and "/proc" on a live host (a test points them at a
// fake tree). Sysfs is the root namespace's: a device moved into another
// network namespace is no longer under class/net, so read what a port
// needs (NICNode, FindIRQs) before moving it.
type System struct {
	Sys, Proc string
}

// Host is the live system.
var Host = System{Sys: "/sys", Proc: "/proc"}

func (s System) read(root, rel string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, rel))
	return strings.TrimSpace(string(b)), err
}

// ParseCPUList parses a Linux CPU list ("0-3,6,8-9"; empty is none) into
// its CPUs, ascending, each once.
func ParseCPUList(s string) ([]int, error) {
	out, err := ParseCPUs(s, 1<<16)
	if err != nil {
		return nil, fmt.Errorf("CPU list %q: %w", s, err)
	}
	sort.Ints(out)
	return slices.Compact(out), nil
}

// ParseCPUs parses CPU numbers and ranges separated by commas ("0,1",
// "2-5") into the CPUs in the order written, repeats kept; empty is none.
// A range may span at most maxSpan CPUs after its first. The error names
// the part that is wrong; the caller says which list it was.
func ParseCPUs(s string, maxSpan int) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(f), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%q is not a CPU number", f)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > maxSpan {
				return nil, fmt.Errorf("bad range %q", f)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// Isolated returns the isolated CPUs (isolcpus= at boot).
func (s System) Isolated() ([]int, error) {
	v, err := s.read(s.Sys, "devices/system/cpu/isolated")
	if err != nil {
		return nil, err
	}
	return ParseCPUList(v)
}

// Siblings returns the hyperthreads of cpu's physical core, cpu included.
func (s System) Siblings(cpu int) ([]int, error) {
	v, err := s.read(s.Sys, fmt.Sprintf("devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu))
	if err != nil {
		return nil, err
	}
	return ParseCPUList(v)
}

// CPUNode returns the NUMA node of cpu, or -1 when the kernel shows none.
func (s System) CPUNode(cpu int) int {
	m, _ := filepath.Glob(filepath.Join(s.Sys, fmt.Sprintf("devices/system/cpu/cpu%d/node[0-9]*", cpu)))
	for _, p := range m {
		if n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), "node")); err == nil {
			return n
		}
	}
	return -1
}

// ErrNoDevice says that an interface has no device behind it (veth, a
// bridge): no NUMA node, no interrupts.
var ErrNoDevice = errors.New("no device behind the interface (virtual)")

// NICNode returns the NUMA node of iface's device (-1: the device reports
// none, as on a machine with one node), or ErrNoDevice.
func (s System) NICNode(iface string) (int, error) {
	if _, err := os.Stat(filepath.Join(s.Sys, "class/net", iface, "device")); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return -1, ErrNoDevice
		}
		return -1, err
	}
	v, err := s.read(s.Sys, filepath.Join("class/net", iface, "device/numa_node"))
	if err != nil {
		return -1, err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return -1, fmt.Errorf("numa_node of %s: %q", iface, v)
	}
	return n, nil
}

// IRQ is one interrupt of a device.
type IRQ struct {
	N    int    `json:"n"`
	Name string `json:"name"`
}

// FindIRQs returns the interrupts of iface: its device's MSI vectors
// (class/net/<iface>/device/msi_irqs) and the lines of /proc/interrupts
// whose name contains the interface's name ("eth1-TxRx-0"), ascending.
func (s System) FindIRQs(iface string) ([]IRQ, error) {
	names := map[int]string{}
	if es, err := os.ReadDir(filepath.Join(s.Sys, "class/net", iface, "device/msi_irqs")); err == nil {
		for _, e := range es {
			if n, err := strconv.Atoi(e.Name()); err == nil {
				names[n] = ""
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(s.Proc, "interrupts"))
	if err != nil {
		return nil, err
	}
	for n, name := range ParseInterrupts(string(b)) {
		if _, ours := names[n]; ours || strings.Contains(name, iface) {
			names[n] = name
		}
	}
	out := make([]IRQ, 0, len(names))
	for n, name := range names {
		out = append(out, IRQ{N: n, Name: name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].N < out[j].N })
	return out, nil
}

// ParseInterrupts parses /proc/interrupts into IRQ number → name (the last
// field of the line: the device's name for the vector). Lines of named
// interrupts (NMI, LOC) are left out.
func ParseInterrupts(s string) map[int]string {
	out := map[int]string{}
	lines := strings.Split(s, "\n")
	if len(lines) == 0 {
		return out
	}
	ncpu := len(strings.Fields(lines[0]))
	for _, l := range lines[1:] {
		num, rest, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(num))
		if err != nil {
			continue
		}
		f := strings.Fields(rest)
		// per-CPU counts, then the chip, the hardware IRQ and type, then
		// the name(s).
		name := ""
		if len(f) > ncpu {
			name = f[len(f)-1]
		}
		out[n] = name
	}
	return out
}

// IRQAffinity returns the CPUs irq is delivered to: the effective affinity
// where the kernel shows it, else the affinity list.
func (s System) IRQAffinity(irq int) ([]int, error) {
	v, err := s.read(s.Proc, fmt.Sprintf("irq/%d/effective_affinity_list", irq))
	if err != nil || v == "" {
		if v, err = s.read(s.Proc, fmt.Sprintf("irq/%d/smp_affinity_list", irq)); err != nil {
			return nil, err
		}
	}
	return ParseCPUList(v)
}

// PreflightPort is one interface the preflight looks at.
type PreflightPort struct {
	// Iface is its name; Role "loadgen" or "echo" (whose port it is).
	Iface, Role string
	// Veth is true for a virtual pair: nothing of a NIC applies.
	Veth bool
	// NUMANode is the device's node from NICNode (-1: none reported).
	NUMANode int
	// IRQs are the device's interrupts, from FindIRQs.
	IRQs []IRQ
	// RxUsecs reads the interrupt coalescing (ethtool rx-usecs) now, in
	// the port's namespace; nil when it cannot be read.
	RxUsecs func() (uint32, error)
}

// Preflight looks at what moves results by microseconds: CPUs isolated for
// the pollers, the pollers sharing a physical core, each port's interrupt
// coalescing, its IRQs landing on a poller's CPU or on that CPU's
// hyperthread sibling, and the port on another NUMA node than the pollers.
// loadCPU and echoCPU are the pollers' CPUs (-1: not pinned). It never
// fails: what cannot be read is a finding.
func Preflight(s System, ports []PreflightPort, loadCPU, echoCPU int) []Check {
	c := &checker{s: s, loadCPU: loadCPU, echoCPU: echoCPU, pollers: map[string]int{"loadgen": loadCPU, "echo": echoCPU}, sib: map[int][]int{}}
	for _, cpu := range []int{loadCPU, echoCPU} {
		if cpu >= 0 {
			c.pinned = append(c.pinned, cpu)
		}
	}
	c.isolated()
	for _, cpu := range c.pinned {
		if l, err := s.Siblings(cpu); err == nil {
			c.sib[cpu] = l
		}
	}
	c.cores()
	for _, p := range ports {
		if p.Veth {
			c.add("coalescing "+p.Iface, StatusNA, "veth: no NIC, no interrupt moderation")
			c.add("IRQs "+p.Iface, StatusNA, "veth has no interrupts: its receive work runs as softirq on the sending CPU, inside the sender's system call")
			c.add("NUMA "+p.Iface, StatusNA, "veth has no device and no NUMA node")
			continue
		}
		c.coalescing(p)
		c.irqs(p)
		c.numa(p)
	}
	return c.out
}

// checker collects the checks of one Preflight.
type checker struct {
	s                System
	out              []Check
	loadCPU, echoCPU int
	pollers          map[string]int // CPU of each poller by role, -1: unpinned
	pinned           []int          // the pollers' CPUs
	sib              map[int][]int  // hyperthread siblings of each pinned CPU
}

func (c *checker) add(name, status, format string, a ...any) {
	c.out = append(c.out, Check{Name: name, Status: status, Detail: fmt.Sprintf(format, a...)})
}

// isolated checks that the pollers run on isolated CPUs.
func (c *checker) isolated() {
	s, pinned := c.s, c.pinned
	iso, err := s.Isolated()
	switch {
	case err != nil:
		c.add("isolated CPUs", StatusWarn, "cannot read the isolated CPUs: %v", err)
	case len(iso) == 0:
		c.add("isolated CPUs", StatusWarn, "none (devices/system/cpu/isolated is empty): the pollers share CPUs %s with every other task; isolate them (isolcpus=, nohz_full=, rcu_nocbs= at boot, or a cpuset) for stable numbers", formatCPUs(pinned))
	default:
		var not []int
		for _, c := range pinned {
			if !slices.Contains(iso, c) {
				not = append(not, c)
			}
		}
		if len(not) > 0 {
			c.add("isolated CPUs", StatusWarn, "isolated: %s, but the pollers' CPU(s) %s are not among them", formatCPUs(iso), formatCPUs(not))
		} else {
			c.add("isolated CPUs", StatusOK, "isolated: %s; the pollers run on %s", formatCPUs(iso), formatCPUs(pinned))
		}
	}
}

// cores checks that the pollers run on separate physical cores.
func (c *checker) cores() {
	loadCPU, echoCPU, sib := c.loadCPU, c.echoCPU, c.sib
	switch {
	case loadCPU < 0 || echoCPU < 0:
		c.add("poller cores", StatusWarn, "the pollers are not pinned")
	case loadCPU == echoCPU:
		c.add("poller cores", StatusWarn, "loadgen and echo share CPU %d", loadCPU)
	case slices.Contains(sib[loadCPU], echoCPU):
		c.add("poller cores", StatusWarn, "loadgen (CPU %d) and echo (CPU %d) are hyperthreads of one physical core", loadCPU, echoCPU)
	case sib[loadCPU] == nil || sib[echoCPU] == nil:
		c.add("poller cores", StatusWarn, "cannot read the hyperthread siblings of CPUs %d and %d", loadCPU, echoCPU)
	default:
		c.add("poller cores", StatusOK, "loadgen on CPU %d (its core's hyperthreads: %s), echo on CPU %d (its core's hyperthreads: %s): separate physical cores",
			loadCPU, formatCPUs(sib[loadCPU]), echoCPU, formatCPUs(sib[echoCPU]))
	}
}

// coalescing checks a port's interrupt moderation.
func (c *checker) coalescing(p PreflightPort) {
	switch {
	case p.RxUsecs == nil:
		c.add("coalescing "+p.Iface, StatusNA, "not readable here")
	default:
		us, err := p.RxUsecs()
		switch {
		case err != nil:
			c.add("coalescing "+p.Iface, StatusNA, "the driver does not report coalescing: %v", err)
		case us > 0:
			c.add("coalescing "+p.Iface, StatusWarn, "rx-usecs %d: the NIC holds received frames up to %d µs before it interrupts; 0 for latency (ethtool -C %s rx-usecs 0, or --coalesce 0)", us, us, p.Iface)
		default:
			c.add("coalescing "+p.Iface, StatusOK, "rx-usecs 0")
		}
	}
}

// irqs checks that a port's interrupts are away from the pollers and
// their hyperthread siblings.
func (c *checker) irqs(p PreflightPort) {
	s, pollers, sib := c.s, c.pollers, c.sib
	if len(p.IRQs) == 0 {
		c.add("IRQs "+p.Iface, StatusNA, "no interrupts found for %s (msi_irqs, /proc/interrupts)", p.Iface)
	} else {
		var warns, oks []string
		for _, q := range p.IRQs {
			cpus, err := s.IRQAffinity(q.N)
			if err != nil {
				warns = append(warns, fmt.Sprintf("IRQ %d: affinity unreadable (%v)", q.N, err))
				continue
			}
			bad := ""
			for _, role := range []string{"loadgen", "echo"} {
				pc := pollers[role]
				if pc < 0 {
					continue
				}
				for _, c := range cpus {
					switch {
					case c == pc:
						bad = fmt.Sprintf("on CPU %d, the %s poller's own CPU", c, role)
					case slices.Contains(sib[pc], c) && bad == "":
						bad = fmt.Sprintf("on CPU %d, the hyperthread sibling of the %s poller's CPU %d", c, role, pc)
					}
				}
			}
			desc := fmt.Sprintf("IRQ %d %s → CPUs %s", q.N, q.Name, formatCPUs(cpus))
			if bad != "" {
				warns = append(warns, desc+": "+bad)
			} else {
				oks = append(oks, desc)
			}
		}
		if len(warns) > 0 {
			c.add("IRQs "+p.Iface, StatusWarn, "%s", strings.Join(append(warns, oks...), "; "))
		} else {
			c.add("IRQs "+p.Iface, StatusOK, "%s: away from the pollers and their siblings", strings.Join(oks, "; "))
		}
	}
}

// numa checks that the pollers run on the port's NUMA node.
func (c *checker) numa(p PreflightPort) {
	s, pollers := c.s, c.pollers
	switch {
	case p.NUMANode < 0:
		c.add("NUMA "+p.Iface, StatusNA, "the device reports no NUMA node (one node)")
	default:
		var far []string
		for _, role := range []string{"loadgen", "echo"} {
			if c := pollers[role]; c >= 0 {
				if n := s.CPUNode(c); n >= 0 && n != p.NUMANode {
					far = append(far, fmt.Sprintf("the %s poller's CPU %d is on node %d", role, c, n))
				}
			}
		}
		if len(far) > 0 {
			c.add("NUMA "+p.Iface, StatusWarn, "%s is on node %d, but %s: DDIO and local memory are lost", p.Iface, p.NUMANode, strings.Join(far, ", "))
		} else {
			c.add("NUMA "+p.Iface, StatusOK, "node %d, as the pollers' CPUs", p.NUMANode)
		}
	}
}

func formatCPUs(c []int) string {
	if len(c) == 0 {
		return "none"
	}
	s := make([]string, len(c))
	for i, v := range c {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}
