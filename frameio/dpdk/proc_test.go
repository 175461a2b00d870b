//go:build dpdk

package dpdk

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
	"golang.org/x/sys/unix"
)

// childModes are the modes of the test binary run as a child process
// (DGRAMIO_DPDK_CHILD=mode), besides those of childMain.
var childModes = map[string]func() int{
	"priv": privChild,
	"hold": holdChild,
}

// Environment of the child modes.
const (
	envVDev  = "DGRAMIO_DPDK_VDEV"  // the device: a vdev, or "iface=NAME" for the default one
	envLocal = "DGRAMIO_DPDK_LOCAL" // our address, for the ARP request of privChild
	envPeer  = "DGRAMIO_DPDK_PEER"  // the address whose ARP reply privChild waits for
)

// childOptions are the Options of envVDev.
func childOptions() Options {
	v := os.Getenv(envVDev)
	if iface, ok := strings.CutPrefix(v, "iface="); ok {
		return Options{Iface: iface}
	}
	return Options{VDev: v}
}

// privChild opens the device of envVDev and, if that works, sends an ARP
// request for envPeer through it and waits for the answer (5 s). It prints
// one line: "priv: ok", "priv: open: <class> cap=<capability>: <error>"
// or "priv: <what failed>".
func privChild() int {
	if err := StartEAL(EALOptions{Quiet: true}); err != nil {
		fmt.Printf("priv: EAL: %v\n", err)
		return 0
	}
	p, err := Open(childOptions())
	if err != nil {
		class := "other"
		capName := ""
		var pe *dgramio.PrivilegeError
		if errors.As(err, &pe) {
			class, capName = "privilege", pe.Capability
		}
		fmt.Printf("priv: open: %s cap=%q: %v\n", class, capName, err)
		return 0
	}
	defer p.Close()
	local, peer := netip.MustParseAddr(os.Getenv(envLocal)), netip.MustParseAddr(os.Getenv(envPeer))
	req := arpRequest(p.MAC(), local, peer)
	deadline := time.Now().Add(5 * time.Second)
	for next := time.Now(); time.Now().Before(deadline); {
		if time.Now().After(next) {
			p.TxFrame(req)
			p.Kick()
			next = time.Now().Add(500 * time.Millisecond)
		}
		got := false
		p.RxFrames(32, func(f []byte) { got = got || isARPReply(f, p.MAC(), peer) })
		if got {
			fmt.Println("priv: ok")
			return 0
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Printf("priv: no ARP reply from %v through %s (stats %+v)\n", peer, p.Info().Driver, p.Stats())
	return 0
}

// holdChild opens the device of envVDev, prints "ready <XDPProg>", and
// holds it until it is killed.
func holdChild() int {
	if err := StartEAL(EALOptions{Quiet: true}); err != nil {
		fmt.Printf("hold: EAL: %v\n", err)
		return 1
	}
	p, err := Open(childOptions())
	if err != nil {
		fmt.Printf("hold: open: %v\n", err)
		return 1
	}
	fmt.Printf("ready %d\n", p.Info().XDPProg)
	for {
		p.RxFrames(32, func([]byte) {})
		time.Sleep(time.Millisecond)
	}
}

// arpRequest is an ARP request for peer from mac and local.
func arpRequest(mac net.HardwareAddr, local, peer netip.Addr) []byte {
	f := make([]byte, 42)
	copy(f[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(f[6:12], mac)
	binary.BigEndian.PutUint16(f[12:], 0x0806)
	binary.BigEndian.PutUint16(f[14:], 1)      // Ethernet
	binary.BigEndian.PutUint16(f[16:], 0x0800) // IPv4
	f[18], f[19] = 6, 4
	binary.BigEndian.PutUint16(f[20:], 1) // request
	copy(f[22:28], mac)
	l, r := local.As4(), peer.As4()
	copy(f[28:32], l[:])
	copy(f[38:42], r[:])
	return f
}

// isARPReply reports whether f is an ARP reply to mac from peer.
func isARPReply(f []byte, mac net.HardwareAddr, peer netip.Addr) bool {
	return len(f) >= 42 && bytes.Equal(f[0:6], mac) && binary.BigEndian.Uint16(f[12:]) == 0x0806 &&
		binary.BigEndian.Uint16(f[20:]) == 2 && netip.AddrFrom4([4]byte(f[28:32])) == peer
}

var capByName = map[string]capability{
	"CAP_NET_ADMIN": capNetAdmin, "CAP_NET_RAW": capNetRaw, "CAP_SYS_ADMIN": capSysAdmin,
	"CAP_IPC_LOCK": capIPCLock, "CAP_BPF": {unix.CAP_BPF, "CAP_BPF"},
}

// runPriv runs privChild for vdev as user nobody with only the
// capabilities caps (as ambient capabilities), inside h's namespace, and
// returns the line it printed.
func runPriv(t *testing.T, h, peer *testhost.Host, bin, vdev string, caps []capability) string {
	t.Helper()
	cmd := h.Command(bin)
	cmd.Env = append(os.Environ(), "DGRAMIO_DPDK_CHILD=priv", envVDev+"="+vdev,
		envLocal+"="+h.Addr.String(), envPeer+"="+peer.Addr.String())
	cmd.Dir = filepath.Dir(bin)
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
	for _, c := range caps {
		cmd.SysProcAttr.AmbientCaps = append(cmd.SysProcAttr.AmbientCaps, uintptr(c.bit))
	}
	out, err := h.Output(cmd)
	if err != nil {
		t.Fatalf("priv child for %s: %v\n%s", vdev, err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "priv: ") {
			return l
		}
	}
	t.Fatalf("priv child for %s printed no result:\n%s", vdev, out)
	return ""
}

// TestPrivileges finds out what each vdev driver needs, as user nobody in
// a child process that keeps only some capabilities: with exactly those
// of driverCaps, the port opens and carries an ARP request and its reply;
// with any one of them missing (and, for net_af_xdp, with CAP_BPF in place
// of CAP_SYS_ADMIN), Open fails with a *dgramio.PrivilegeError that names the
// missing one. Either way the interface is left as it was.
func TestPrivileges(t *testing.T) {
	needEAL(t)
	pair := hosttest.New(t, testhost.Options{})
	a, b := pair.A, pair.B
	bin := testutil.BinaryForNobody(t, "dpdk.test")
	for _, driver := range []string{"net_af_xdp", "net_af_packet"} {
		t.Run(driver, func(t *testing.T) {
			need := driverCaps[driver]
			type set struct {
				name    string
				caps    []capability
				missing []capability
			}
			sets := []set{{"none", nil, need}}
			for i, skip := range need {
				cs := append(append([]capability(nil), need[:i]...), need[i+1:]...)
				sets = append(sets, set{"without " + skip.name, cs, []capability{skip}})
				if skip == capSysAdmin {
					sets = append(sets, set{"CAP_BPF for CAP_SYS_ADMIN", append(cs, capByName["CAP_BPF"]), []capability{skip}})
				}
			}
			sets = append(sets, set{"exactly " + capList(need), need, nil})
			for _, s := range sets {
				vdev := fmt.Sprintf("%s_p%d,iface=%s", driver, vethSeq.Add(1), a.Iface)
				got := runPriv(t, a, b, bin, vdev, s.caps)
				t.Logf("%s {%s}: %s", driver, s.name, got)
				if len(s.missing) == 0 {
					if got != "priv: ok" {
						t.Errorf("%s with %s does not work: %s", driver, capList(need), got)
					}
				} else if !strings.HasPrefix(got, "priv: open: privilege ") {
					t.Errorf("%s {%s}: want a PrivilegeError, got: %s", driver, s.name, got)
				} else {
					named := false
					for _, m := range s.missing {
						named = named || strings.Contains(got[:strings.Index(got, "\": ")], m.name)
					}
					if !named {
						t.Errorf("%s {%s}: the PrivilegeError names none of %s: %s", driver, s.name, capList(s.missing), got)
					}
				}
				checkClean(t, a, false)
			}
		})
	}
}

// startHold starts holdChild on vdev inside h's namespace and waits for it
// to be ready; it returns the process and the XDPProg it reported.
func startHold(t *testing.T, h *testhost.Host, vdev string) (*exec.Cmd, uint32) {
	t.Helper()
	cmd := h.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DGRAMIO_DPDK_CHILD=hold", envVDev+"="+vdev)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := h.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	lines := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			if strings.HasPrefix(s.Text(), "ready ") || strings.HasPrefix(s.Text(), "hold: ") {
				lines <- s.Text()
			}
		}
		close(lines)
	}()
	select {
	case l, ok := <-lines:
		id, err := strconv.ParseUint(strings.TrimPrefix(l, "ready "), 10, 32)
		if !ok || err != nil {
			t.Fatalf("hold child on %s: %q; stderr:\n%s", vdev, l, stderr.String())
		}
		return cmd, uint32(id)
	case <-time.After(60 * time.Second):
		t.Fatalf("hold child on %s not ready in 60 s; stderr:\n%s", vdev, stderr.String())
	}
	return nil, 0
}

// xdpProgOf returns the XDP program attached to h's interface (0: none).
func xdpProgOf(t *testing.T, h *testhost.Host) uint32 {
	t.Helper()
	l, err := h.Link()
	if err != nil {
		t.Fatal(err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached {
		return x.ProgId
	}
	return 0
}

// waitDetached waits up to 10 s for h's XDP program prog to go, as it
// must once the process that held its BPF link is gone (after what).
func waitDetached(t *testing.T, h *testhost.Host, prog uint32, after string) {
	t.Helper()
	left := prog
	for end := time.Now().Add(10 * time.Second); left != 0 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
		left = xdpProgOf(t, h)
	}
	if left != 0 {
		t.Fatalf("XDP program %d still on %s 10 s after %s", left, h.Iface, after)
	}
}

// TestVethCrashDetaches: a process holding a net_af_xdp port (the default
// device on an interface) is killed with SIGKILL. The XDP program it
// attached through its BPF link goes with it, so the kernel has its
// interface back, and the next port on the interface opens and works.
func TestVethCrashDetaches(t *testing.T) {
	needEAL(t)
	pair := hosttest.New(t, testhost.Options{})
	a, b := pair.A, pair.B
	cmd, prog := startHold(t, a, "iface="+a.Iface)
	if prog == 0 {
		t.Fatal("the port attached no XDP program of its own (Info.XDPProg 0)")
	}
	if on := xdpProgOf(t, a); on != prog {
		t.Fatalf("XDP program on %s: %d, the port's: %d", a.Iface, on, prog)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waitDetached(t, a, prog, "the process was killed")
	// The kernel answers ARP on the interface again.
	if _, err := pair.UDPRoundTrip("after the crash", 5*time.Second); err != nil {
		t.Fatalf("kernel to kernel after the crash: %v", err)
	}
	p := openOn(t, a, "net_af_xdp", Options{})
	if err := b.AddNeigh(a.Addr, p.MAC()); err != nil {
		t.Fatal(err)
	}
	c := listenB(t, b)
	startEcho(t, p, a, b)
	pingPong(t, c, netip.AddrPortFrom(a.Addr, portA), 100, 8, p)
}

// TestVethChildInheritsNothing: a process started while a port is open
// inherits none of its descriptors (DPDK and libxdp open them without
// close-on-exec; Open sets it). A child holding the port's AF_XDP socket
// would keep the interface's queue bound after Close, so that the next
// port on it could not bind.
func TestVethChildInheritsNothing(t *testing.T) {
	eachDriver(t, func(t *testing.T, driver string, pair *testhost.Pair) {
		a := pair.A
		p := openOn(t, a, driver, Options{})
		ours := append(append([]sockFile(nil), p.xsks...), p.pkts...)
		if len(ours) == 0 {
			t.Fatalf("no socket of the PMD recorded")
		}
		child := exec.Command("sleep", "60")
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			child.Process.Kill()
			child.Wait()
		}()
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", child.Process.Pid))
		for _, f := range fds {
			link, _ := os.Readlink(f)
			for _, s := range ours {
				if link == fmt.Sprintf("socket:[%d]", s.ino) {
					t.Errorf("the child inherited the PMD's socket %s as %s", link, f)
				}
			}
		}
		for fd, what := range inheritableFDs() {
			if startFDs[fd] != what {
				t.Errorf("descriptor %d (%s) has no close-on-exec while the port is open", fd, what)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		// The child still runs: the interface's queue must be free.
		p2 := openOn(t, a, driver, Options{})
		if err := p2.Close(); err != nil {
			t.Fatal(err)
		}
		checkClean(t, a, false)
	})
}

// TestVethSharedProgram: two processes with net_af_xdp ports on two queues
// of one interface. The first attaches libxdp's program through its link;
// the second finds it there, shares it (its PMD puts its socket into the
// program's XSKMAP) and says so; its Close leaves the first's program in
// place, and the program goes when the first process dies.
func TestVethSharedProgram(t *testing.T) {
	needEAL(t)
	pair := hosttest.New(t, testhost.Options{Queues: 2})
	a := pair.A
	cmd, prog := startHold(t, a, fmt.Sprintf("net_af_xdp_h%d,iface=%s,start_queue=0", vethSeq.Add(1), a.Iface))
	if prog == 0 || xdpProgOf(t, a) != prog {
		t.Fatalf("the first port's program %d, on the interface %d", prog, xdpProgOf(t, a))
	}
	var p *Port
	err := a.Do(func() error {
		var err error
		p, err = Open(Options{VDev: fmt.Sprintf("net_af_xdp_s%d,iface=%s,start_queue=1", vethSeq.Add(1), a.Iface)})
		return err
	})
	if err != nil {
		t.Fatalf("second port on queue 1: %v", err)
	}
	info := p.Info()
	t.Logf("second port: XDPProg %d, notes %q", info.XDPProg, info.Notes)
	if info.XDPProg != 0 || !strings.Contains(strings.Join(info.Notes, "; "), "shares it") {
		t.Errorf("the second port does not say it shares program %d: %+v", prog, info)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("close the second port: %v", err)
	}
	if on := xdpProgOf(t, a); on != prog {
		t.Fatalf("after the second port's Close, the program on %s is %d, want the first's %d", a.Iface, on, prog)
	}
	cmd.Process.Kill()
	cmd.Wait()
	waitDetached(t, a, prog, "the first process died")
}

// TestVethForeignProgram: an XDP program other than libxdp's on the
// interface (here a pass-all program on a link of this test) makes Open
// fail saying so, and leaves the program alone.
func TestVethForeignProgram(t *testing.T) {
	needEAL(t)
	pair := hosttest.New(t, testhost.Options{})
	a := pair.A
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:    "foreign",
		Type:    ebpf.XDP,
		License: "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 2), // XDP_PASS
			asm.Return(),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	var l link.Link
	if err := a.Do(func() error {
		var err error
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: a.Index})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	id := xdpProgOf(t, a)
	err = openRefused(t, a, Options{Iface: a.Iface}, "already attached", "say a program is already attached")
	if !strings.Contains(err.Error(), `"foreign"`) {
		t.Fatalf("Open beside a foreign program: %v does not name it", err)
	}
	if on := xdpProgOf(t, a); on != id {
		t.Fatalf("XDP program on %s after the failed Open: %d, want %d", a.Iface, on, id)
	}
}
