package faulttest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// kernelPing sends one message from a kernel socket on from to kind's
// server at addr:port and waits for the same bytes back: a UDP datagram
// for a datagram kind, a record over a new TCP connection for a stream
// kind (or for kind "tcp", the kernel's own echo). It is the check that
// "something answers there".
func kernelPing(from *testhost.Host, stream bool, addr netip.Addr, msg string) error {
	return from.Do(func() error {
		to := netip.AddrPortFrom(addr, port).String()
		if !stream {
			c, err := net.Dial("udp4", to)
			if err != nil {
				return err
			}
			defer c.Close()
			buf := make([]byte, 2048)
			for try := 0; try < 20; try++ { // the first may wait for ARP
				if _, err := c.Write([]byte(msg)); err != nil {
					continue
				}
				c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
				n, err := c.Read(buf)
				if err == nil && string(buf[:n]) == msg {
					return nil
				}
			}
			return fmt.Errorf("no UDP answer from %s", to)
		}
		c, err := net.DialTimeout("tcp4", to, 10*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		rec := binary.BigEndian.AppendUint16(nil, uint16(len(msg)))
		if _, err := c.Write(append(rec, msg...)); err != nil {
			return err
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		back := make([]byte, len(rec)+len(msg))
		if _, err := io.ReadFull(c, back); err != nil {
			return fmt.Errorf("read the echo from %s: %w", to, err)
		}
		if string(back[2:]) != msg {
			return fmt.Errorf("echo %q, want %q", back[2:], msg)
		}
		return nil
	})
}

// hostState is what a kind may change on a host and must give back.
type hostState struct {
	xdp     bool
	progID  uint32
	promisc bool
}

func readHost(t testing.TB, h *testhost.Host) hostState {
	t.Helper()
	var s hostState
	s.xdp, s.progID = xdpAttached(t, h)
	var err error
	if s.promisc, err = h.Promisc(); err != nil {
		t.Fatal(err)
	}
	return s
}

// restored waits until h is back in state want (up to 10 s: a killed
// process's descriptors are released as it exits), and fails t otherwise.
func restored(t testing.TB, h *testhost.Host, want hostState, after string) {
	t.Helper()
	var got hostState
	ok := testutil.Eventually(10*time.Second, func() bool {
		got = readHost(t, h)
		return got.xdp == want.xdp && got.promisc == want.promisc
	})
	if !ok {
		t.Errorf("after %s: XDP attached %v (program %d), promiscuous %v; before: XDP %v, promiscuous %v",
			after, got.xdp, got.progID, got.promisc, want.xdp, want.promisc)
	}
}

// TestFaultCrashXDP: for each kind over AF_XDP, an echo process holding the
// XDP socket is killed with SIGKILL. The program goes with it (the bpf_link
// dies with the process's descriptors), promiscuous mode is as before, and
// the kernel answers on the interface again (ARP and a kernel UDP echo on
// the port the kind held). A new echo of the kind then takes the interface
// over cleanly and answers, and SIGTERM stops it with exit status 0,
// detaching its program. A DPDK echo leaves no run-time directory or
// hugepage file either way.
func TestFaultCrashXDP(t *testing.T) {
	forEachKind(t, xdpKinds, crashXDP)
}

func crashXDP(t *testing.T, kind string, p *testhost.Pair) {
	before := readHost(t, p.B)
	if before.xdp {
		t.Fatalf("an XDP program (%d) is on %s before the test", before.progID, p.B.Iface)
	}
	e1 := startEchoProc(t, p.B, kind)
	if on, _ := xdpAttached(t, p.B); !on && !strings.Contains(kind, "dpdk") {
		t.Fatalf("no XDP program on %s while the %s echo runs", p.B.Iface, kind)
	}
	if err := kernelPing(p.A, isStream(kind), addrFor(kind, p.B), "before the crash"); err != nil {
		t.Fatalf("the %s echo does not answer: %v; stderr:\n%s", kind, err, e1.stderr.String())
	}
	e1.signal(t, syscall.SIGKILL)
	if exited, _ := e1.wait(30 * time.Second); !exited {
		t.Fatal("the echo did not die of SIGKILL")
	}
	restored(t, p.B, before, "SIGKILL")
	if left := dpdkLeftovers(e1.cmd.Process.Pid); len(left) != 0 {
		t.Errorf("after SIGKILL, DPDK files of the echo remain: %v", left)
	}

	// The kernel answers on the interface: ARP (A forgets B first) and a
	// kernel UDP echo on the port the kind held.
	if err := p.A.DelNeigh(p.B.Addr); err != nil {
		t.Fatal(err)
	}
	kc, err := p.B.ListenUDP(port)
	if err != nil {
		t.Fatalf("bind the port the killed echo held: %v", err)
	}
	testutil.EchoUDP(kc)
	err = kernelPing(p.A, false, p.B.Addr, "kernel, are you there?")
	kc.Close()
	if err != nil {
		t.Fatalf("the kernel does not answer on %s after the crash: %v", p.B.Iface, err)
	}
	if _, state, err := p.A.Neigh(p.B.Addr); err != nil || state == 0 {
		t.Errorf("A did not resolve B by ARP after the crash: state %#x, %v", state, err)
	}

	// The next echo takes over.
	e2 := startEchoProc(t, p.B, kind)
	if err := kernelPing(p.A, isStream(kind), addrFor(kind, p.B), "after the crash"); err != nil {
		t.Fatalf("the new %s echo does not answer: %v; stderr:\n%s", kind, err, e2.stderr.String())
	}
	stopEchoProc(t, e2)
	restored(t, p.B, before, "SIGTERM")
	if left := dpdkLeftovers(e2.cmd.Process.Pid); len(left) != 0 {
		t.Errorf("after SIGTERM, DPDK files of the echo remain: %v", left)
	}
}

// dpdkLeftovers lists the files a DPDK process pid could leave behind: its
// EAL run-time directory and hugepage files (file prefix dgramio_<pid>,
// see frameio/dpdk). None for a process that ran no DPDK.
func dpdkLeftovers(pid int) []string {
	var out []string
	for _, pat := range []string{"/var/run/dpdk/dgramio_%d*", "/run/dpdk/dgramio_%d*", "/dev/hugepages/dgramio_%d*", "/tmp/dpdk/dgramio_%d*"} {
		m, _ := filepath.Glob(fmt.Sprintf(pat, pid))
		out = append(out, m...)
	}
	return out
}

// TestFaultSignalRestoresHost: the echo of each kind over AF_XDP stopped
// with SIGINT exits 0 and leaves its interface as it found it (no XDP
// program, promiscuous mode as before, also when it was on before); and a
// netbench run interrupted with SIGINT in the middle of a cell exits 0
// with a partial report, and leaves no process (its echo and loadgen) and
// no network namespace behind.
func TestFaultSignalRestoresHost(t *testing.T) {
	testutil.RequireRoot(t)
	for _, kind := range xdpKinds {
		for _, promisc := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/promisc=%v", kind, promisc), func(t *testing.T) {
				p := hosttest.New(t, testhost.Options{})
				if err := p.B.SetPromisc(promisc); err != nil {
					t.Fatal(err)
				}
				before := readHost(t, p.B)
				e := startEchoProc(t, p.B, kind)
				if err := kernelPing(p.A, isStream(kind), addrFor(kind, p.B), "hello"); err != nil {
					t.Fatalf("the %s echo does not answer: %v", kind, err)
				}
				e.signal(t, syscall.SIGINT)
				exited, err := e.wait(30 * time.Second)
				if !exited || err != nil {
					t.Fatalf("echo after SIGINT: exited %v, %v; stderr:\n%s", exited, err, e.stderr.String())
				}
				restored(t, p.B, before, "SIGINT")
			})
		}
	}
	t.Run("netbench", netbenchInterrupted)
}

// netbenchInterrupted runs netbench (this test binary in netbench mode,
// re-executing itself as echo and loadgen) on the first AF_XDP kind with a
// long cell, interrupts it with SIGINT once the cell runs, and checks what
// is left.
func netbenchInterrupted(t *testing.T) {
	kind := xdpKinds[0]
	out := t.TempDir()
	cmd := execChild("netbench", "--kinds", kind, "--rates", "1k", "--duration", "60s",
		"--warmup", "100ms", "--drain", "1s", "--wait", "--port", "6400", "--out", out)
	var stdout, stderr testutil.LockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	pid := cmd.Process.Pid
	running := testutil.Eventually(60*time.Second, func() bool { return strings.Contains(stderr.String(), ": running") })
	if !running {
		t.Fatalf("netbench did not start its cell; stderr:\n%s", stderr.String())
	}
	if strings.Contains(stdout.String()+stderr.String(), "cannot run") {
		testutil.Skip(t, "netbench cannot run "+kind+": "+stderr.String())
	}
	// What it made: its processes (echo and loadgen, started one after the
	// other) and the namespaces they are in.
	var procs []int
	nss := map[string]bool{}
	own := threadNetns()
	testutil.Eventually(30*time.Second, func() bool {
		procs = descendants(pid)
		for _, q := range append([]int{pid}, procs...) {
			for _, ns := range netnsOf(q) {
				if ns != own {
					nss[ns] = true
				}
			}
		}
		return len(procs) >= 2 && len(nss) >= 2
	})
	if len(procs) < 2 || len(nss) < 2 {
		t.Fatalf("netbench runs %d processes (%v) in %d namespaces of its own: expected echo and loadgen in two; stderr:\n%s", len(procs), procs, len(nss), stderr.String())
	}
	time.Sleep(300 * time.Millisecond) // into the measured part of the cell
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	sigAt := time.Now()
	select {
	case <-done:
		t.Logf("netbench exited %v after SIGINT", time.Since(sigAt).Round(time.Millisecond))
		if waitErr != nil {
			t.Errorf("netbench after SIGINT: %v; stderr:\n%s", waitErr, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("netbench did not stop within 60 s of SIGINT; stderr:\n%s", stderr.String())
	}
	t.Logf("netbench said:\n%s", stdout.String())
	var rep bench.Report
	if b, err := os.ReadFile(filepath.Join(out, "results.json")); err != nil {
		t.Errorf("no report after SIGINT: %v", err)
	} else if err := json.Unmarshal(b, &rep); err != nil {
		t.Errorf("results.json: %v", err)
	} else if !strings.Contains(strings.Join(rep.Env.Notes, "; "), "interrupted") {
		t.Errorf("the report does not say it was interrupted: notes %q", rep.Env.Notes)
	}
	var left []int
	testutil.Eventually(10*time.Second, func() bool {
		left = left[:0]
		for _, q := range procs {
			if alive(q) {
				left = append(left, q)
			}
		}
		return len(left) == 0
	})
	if len(left) != 0 {
		t.Errorf("processes of netbench still run: %v", left)
	}
	t.Logf("processes gone %v after SIGINT", time.Since(sigAt).Round(time.Millisecond))
	var held []string
	testutil.Eventually(10*time.Second, func() bool {
		held = held[:0]
		for ns, who := range netnsHolders() {
			if nss[ns] {
				held = append(held, ns+" by "+who)
			}
		}
		return len(held) == 0
	})
	if len(held) != 0 {
		t.Errorf("network namespaces of netbench are still held: %v", held)
	}
	t.Logf("namespaces gone %v after SIGINT", time.Since(sigAt).Round(time.Millisecond))
}

// execChild is an exec.Cmd for this test binary in a child mode, in the
// root namespace, killed if this process dies.
func execChild(mode string, args ...string) *exec.Cmd {
	c := exec.Command(os.Args[0], append([]string{mode}, args...)...)
	c.Env = append(os.Environ(), childEnv+"=1")
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return c
}

// descendants returns the processes below pid, read from
// /proc/<pid>/task/<tid>/children.
func descendants(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, s := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(s); err == nil {
				out = append(out, c)
				out = append(out, descendants(c)...)
			}
		}
	}
	return out
}

// netnsOf returns the network namespaces ("net:[inode]") of pid's threads.
func netnsOf(pid int) []string {
	var out []string
	links, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/ns/net", pid))
	for _, l := range links {
		if ns, err := os.Readlink(l); err == nil {
			out = append(out, ns)
		}
	}
	return out
}

// threadNetns is the network namespace of the calling goroutine's
// thread: the namespace this test and the processes it starts run in.
// Not /proc/self's: that is the main thread's, which may be inside a test
// host's namespace at that moment, lent to a goroutine that entered it
// (testhost's Do locks the goroutine to the thread while it is there).
func threadNetns() string {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ns, _ := os.Readlink("/proc/thread-self/ns/net")
	return ns
}

// netnsHolders maps every network namespace some thread is in or some
// process holds a descriptor of to one holder ("pid 123").
func netnsHolders() map[string]string {
	out := map[string]string{}
	threads, _ := filepath.Glob("/proc/[0-9]*/task/*/ns/net")
	for _, l := range threads {
		if ns, err := os.Readlink(l); err == nil {
			out[ns] = "thread " + l
		}
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, l := range fds {
		if ns, err := os.Readlink(l); err == nil && strings.HasPrefix(ns, "net:[") {
			out[ns] = "descriptor " + l
		}
	}
	return out
}

// alive reports whether pid runs (and is not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}
