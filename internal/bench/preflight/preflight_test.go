package preflight

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseCPUListAndInterrupts(t *testing.T) {
	for in, want := range map[string][]int{"": nil, "0": {0}, "0-3,6,8-9\n": {0, 1, 2, 3, 6, 8, 9}, "2,1,2": {1, 2}} {
		got, err := ParseCPUList(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ParseCPUList(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"a", "3-1", "-1", "1-"} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) accepted", bad)
		}
	}
	irqs := ParseInterrupts(`            CPU0       CPU1
  24:          0     123456  PCI-MSIX-0000:03:00.0   0-edge      enp3s0f0-TxRx-0
  25:          1          0  PCI-MSIX-0000:03:00.0   1-edge      enp3s0f0
 NMI:          0          0   Non-maskable interrupts
  30:          5          6  IO-APIC   9-fasteoi   acpi
`)
	if !reflect.DeepEqual(irqs, map[int]string{24: "enp3s0f0-TxRx-0", 25: "enp3s0f0", 30: "acpi"}) {
		t.Fatalf("interrupts %v", irqs)
	}
}

// fakeSys builds a /sys and /proc with what Preflight reads.
func fakeSys(t *testing.T, files map[string]string) System {
	t.Helper()
	root := t.TempDir()
	for p, v := range files {
		f := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return System{Sys: filepath.Join(root, "sys"), Proc: filepath.Join(root, "proc")}
}

func findCheck(t *testing.T, cs []Check, name string) Check {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q in %+v", name, cs)
	return Check{}
}

// The preflight on a machine with two NIC ports and 4 CPUs in two
// hyperthread pairs: each finding it is built for.
func TestPreflightRealPorts(t *testing.T) {
	files := map[string]string{
		"sys/devices/system/cpu/isolated":                           "\n",
		"sys/devices/system/cpu/cpu0/topology/thread_siblings_list": "0,2\n",
		"sys/devices/system/cpu/cpu2/topology/thread_siblings_list": "0,2\n",
		"sys/devices/system/cpu/cpu1/topology/thread_siblings_list": "1,3\n",
		"sys/devices/system/cpu/cpu3/topology/thread_siblings_list": "1,3\n",
		"sys/devices/system/cpu/cpu0/node0/x":                       "",
		"sys/devices/system/cpu/cpu1/node1/x":                       "",
		"sys/class/net/eth1/device/numa_node":                       "0\n",
		"sys/class/net/eth1/device/msi_irqs/40":                     "msix",
		"sys/class/net/eth2/device/numa_node":                       "-1\n",
		"proc/interrupts": "           CPU0 CPU1 CPU2 CPU3\n" +
			"  40: 1 2 3 4 PCI-MSIX 0-edge eth1-TxRx-0\n" +
			"  41: 1 2 3 4 PCI-MSIX 0-edge eth2-TxRx-0\n" +
			"  42: 1 2 3 4 PCI-MSIX 0-edge eth9-TxRx-0\n",
		"proc/irq/40/effective_affinity_list": "2\n", // the sibling of loadgen's CPU 0
		"proc/irq/41/smp_affinity_list":       "1\n", // the echo's own CPU
	}
	sys := fakeSys(t, files)
	irq1, err := sys.FindIRQs("eth1")
	if err != nil || !reflect.DeepEqual(irq1, []IRQ{{40, "eth1-TxRx-0"}}) {
		t.Fatalf("IRQs of eth1: %v %v", irq1, err)
	}
	irq2, _ := sys.FindIRQs("eth2")
	n1, err := sys.NICNode("eth1")
	if err != nil || n1 != 0 {
		t.Fatalf("node of eth1: %d %v", n1, err)
	}
	n2, _ := sys.NICNode("eth2")
	if _, err := sys.NICNode("veth0"); err != ErrNoDevice {
		t.Fatalf("a virtual interface: %v", err)
	}
	cs := Preflight(sys, []PreflightPort{
		{Iface: "eth1", Role: "loadgen", NUMANode: n1, IRQs: irq1, RxUsecs: func() (uint32, error) { return 50, nil }},
		{Iface: "eth2", Role: "echo", NUMANode: n2, IRQs: irq2, RxUsecs: func() (uint32, error) { return 0, nil }},
	}, 0, 1)
	for name, want := range map[string]string{
		"isolated CPUs": StatusWarn, "poller cores": StatusOK,
		"coalescing eth1": StatusWarn, "coalescing eth2": StatusOK,
		"IRQs eth1": StatusWarn, "IRQs eth2": StatusWarn,
		"NUMA eth1": StatusWarn, "NUMA eth2": StatusNA,
	} {
		c := findCheck(t, cs, name)
		if c.Status != want {
			t.Errorf("%s: %s (%s), want %s", name, c.Status, c.Detail, want)
		}
	}
	if d := findCheck(t, cs, "IRQs eth1").Detail; !strings.Contains(d, "hyperthread sibling of the loadgen poller's CPU 0") {
		t.Errorf("IRQs eth1: %s", d)
	}
	if d := findCheck(t, cs, "IRQs eth2").Detail; !strings.Contains(d, "the echo poller's own CPU") {
		t.Errorf("IRQs eth2: %s", d)
	}
	if d := findCheck(t, cs, "NUMA eth1").Detail; !strings.Contains(d, "echo poller's CPU 1 is on node 1") {
		t.Errorf("NUMA eth1: %s", d)
	}

	// Isolated pollers on one physical core.
	files["sys/devices/system/cpu/isolated"] = "0,2\n"
	sys = fakeSys(t, files)
	cs = Preflight(sys, nil, 0, 2)
	if c := findCheck(t, cs, "isolated CPUs"); c.Status != StatusOK {
		t.Errorf("isolated: %+v", c)
	}
	if c := findCheck(t, cs, "poller cores"); c.Status != StatusWarn || !strings.Contains(c.Detail, "hyperthreads of one physical core") {
		t.Errorf("poller cores: %+v", c)
	}
}

func TestPreflightVeth(t *testing.T) {
	sys := fakeSys(t, map[string]string{"sys/devices/system/cpu/isolated": ""})
	cs := Preflight(sys, []PreflightPort{{Iface: "dg1a", Role: "loadgen", Veth: true}}, 0, 1)
	for _, n := range []string{"coalescing dg1a", "IRQs dg1a", "NUMA dg1a"} {
		if c := findCheck(t, cs, n); c.Status != StatusNA || c.Detail == "" {
			t.Errorf("%s: %+v", n, c)
		}
	}
}
