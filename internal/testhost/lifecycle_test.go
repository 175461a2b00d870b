//go:build linux

package testhost

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio/internal/testutil"
)

// helperEnv selects what the test binary does when a test re-executes it.
const helperEnv = "TESTHOST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "ifaces":
		ifs, err := net.Interfaces()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, i := range ifs {
			fmt.Println(i.Name)
		}
		os.Exit(0)
	case "sleep":
		time.Sleep(time.Hour)
		os.Exit(3)
	case "pair":
		helperPair()
	default:
		fmt.Fprintln(os.Stderr, "unknown helper", os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// helperPair makes a Pair, registers ids for its namespaces in the root
// namespace (so the parent can watch them disappear), prints them, and then
// waits: for a signal, or for "panic" on stdin.
func helperPair() {
	p, err := New(Options{Queues: 2})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	var ids []int
	for _, h := range []*Host{p.A, p.B} {
		id, err := assignNSID(h)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		ids = append(ids, id)
	}
	fmt.Printf("ready %d %d %s %s\n", ids[0], ids[1], p.A.Iface, p.B.Iface)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if strings.TrimSpace(line) == "panic" {
		panic("helper panics while holding a Pair")
	}
	time.Sleep(time.Hour)
}

// assignNSID gives h's namespace an id in the root namespace and returns it.
// The kernel removes that id when the namespace is destroyed.
func assignNSID(h *Host) (int, error) {
	if err := netlink.SetNetNsIdByFd(int(h.NS), -1); err != nil {
		return 0, fmt.Errorf("set nsid: %w", err)
	}
	id, err := netlink.GetNetNsIdByFd(int(h.NS))
	if err != nil {
		return 0, fmt.Errorf("get nsid: %w", err)
	}
	if id < 0 {
		return 0, fmt.Errorf("nsid not assigned (%d)", id)
	}
	return id, nil
}

// rootNSIDs dumps the ids the root namespace holds for other namespaces.
func rootNSIDs() (map[int]bool, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETNSID, unix.NLM_F_DUMP)
	req.AddData(nl.NewRtGenMsg())
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWNSID)
	if err != nil {
		return nil, fmt.Errorf("dump nsids: %w", err)
	}
	ids := map[int]bool{}
	for _, m := range msgs {
		if len(m) < 4 {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[4:])
		if err != nil {
			return nil, err
		}
		for _, a := range attrs {
			if a.Attr.Type == 1 /* NETNSA_NSID */ && len(a.Value) >= 4 {
				ids[int(int32(binary.NativeEndian.Uint32(a.Value)))] = true
			}
		}
	}
	return ids, nil
}

// waitNSGone polls until none of ids is held by the root namespace.
func waitNSGone(t *testing.T, ids ...int) {
	t.Helper()
	var left []int
	ok := testutil.Eventually(60*time.Second, func() bool {
		now, err := rootNSIDs()
		if err != nil {
			t.Fatal(err)
		}
		left = left[:0]
		for _, id := range ids {
			if now[id] {
				left = append(left, id)
			}
		}
		return len(left) == 0
	})
	if !ok {
		t.Errorf("namespaces with nsid %v still exist 60 s later", left)
	}
}

// noRootLinks checks that no link of the root namespace has one of names or
// starts with this process's interface prefix.
func noRootLinks(t *testing.T, names ...string) {
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	mine := fmt.Sprintf("%s%x-", IfacePrefix, os.Getpid())
	for _, l := range links {
		n := l.Attrs().Name
		for _, want := range names {
			if n == want {
				t.Errorf("link %s exists in the root namespace", n)
			}
		}
		if strings.HasPrefix(n, mine) {
			t.Errorf("link %s of this process exists in the root namespace", n)
		}
	}
}

func TestCloseRemovesEverything(t *testing.T) {
	testutil.RequireRoot(t)
	p, err := New(Options{})
	if err != nil {
		requireRootOrFatal(t, err, 0)
	}
	ino := []uint64{testutil.NetnsInode(t, int(p.A.NS)), testutil.NetnsInode(t, int(p.B.NS))}
	var ids []int
	for _, h := range []*Host{p.A, p.B} {
		id, err := assignNSID(h)
		if err != nil {
			p.Close()
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if refs := testutil.NetnsRefs(ino[0]); len(refs) == 0 {
		t.Errorf("before Close nothing refers to A's namespace: the check below would prove nothing")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if p.A.NS.IsOpen() || p.B.NS.IsOpen() {
		t.Error("namespace handles still open after Close")
	}
	for i, n := range ino {
		var refs []string
		if !testutil.Eventually(30*time.Second, func() bool { refs = testutil.NetnsRefs(n); return len(refs) == 0 }) {
			t.Errorf("namespace %d still referred to by %v", i, refs)
		}
	}
	waitNSGone(t, ids...)
	noRootLinks(t, p.A.Iface, p.B.Iface)
	for _, err := range []error{
		p.A.Do(func() error { return nil }),
		p.B.Start(p.B.Command("true")),
		p.A.SetLinkUp(true),
		func() error { _, err := p.B.Link(); return err }(),
		func() error { _, err := p.B.ReadSys("class/net"); return err }(),
	} {
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("after Close: %v, want os.ErrClosed", err)
		}
	}
}

// TestHelperDeathLeavesNothing starts a helper process that makes a Pair,
// ends it in each way a tool may end (SIGKILL, SIGTERM, SIGINT, a panic),
// and checks that its namespaces and links are gone, without any handler
// having run.
func TestHelperDeathLeavesNothing(t *testing.T) {
	testutil.RequireRoot(t)
	for _, end := range []string{"SIGKILL", "SIGTERM", "SIGINT", "panic"} {
		t.Run(end, func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), helperEnv+"=pair")
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			cmd.Stderr = io.Discard
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				cmd.Process.Kill()
				cmd.Wait()
			}()
			lines := make(chan string, 1)
			go func() {
				l, _ := bufio.NewReader(stdout).ReadString('\n')
				lines <- l
			}()
			var line string
			select {
			case line = <-lines:
			case <-time.After(60 * time.Second):
				t.Fatal("helper did not make its Pair within 60 s")
			}
			f := strings.Fields(line)
			if len(f) != 5 || f[0] != "ready" {
				t.Fatalf("helper: %q", line)
			}
			idA, _ := strconv.Atoi(f[1])
			idB, _ := strconv.Atoi(f[2])
			now, err := rootNSIDs()
			if err != nil {
				t.Fatal(err)
			}
			if !now[idA] || !now[idB] {
				t.Fatalf("helper's namespaces %d %d not seen in the root namespace (%v)", idA, idB, now)
			}
			noRootLinks(t, f[3], f[4])
			switch end {
			case "SIGKILL":
				err = cmd.Process.Signal(syscall.SIGKILL)
			case "SIGTERM":
				err = cmd.Process.Signal(syscall.SIGTERM)
			case "SIGINT":
				err = cmd.Process.Signal(syscall.SIGINT)
			case "panic":
				_, err = io.WriteString(stdin, "panic\n")
			}
			if err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			select {
			case err = <-waited:
			case <-time.After(60 * time.Second):
				t.Fatal("helper still running 60 s after being told to end")
			}
			if err == nil {
				t.Fatal("helper exited 0")
			}
			t.Logf("helper ended: %v", err)
			waitNSGone(t, idA, idB)
			noRootLinks(t, f[3], f[4])
		})
	}
}

func TestCommandRunsInNamespace(t *testing.T) {
	p := newT(t, Options{})
	cmd := p.B.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=ifaces")
	var nsErr *notStarted
	if err := cmd.Start(); !errors.As(err, &nsErr) {
		t.Fatalf("plain cmd.Start() = %v, want it refused", err)
	}
	cmd = p.B.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=ifaces")
	out, err := p.B.Output(cmd)
	if err != nil {
		t.Fatalf("Output: %v", err)
	}
	got := strings.Fields(string(out))
	if len(got) != 2 || !contains(got, "lo") || !contains(got, p.B.Iface) {
		t.Errorf("process in B sees interfaces %v, want lo and %s", got, p.B.Iface)
	}
	// A missing program reports the lookup error through Start.
	if err := p.B.Run(p.B.Command("dgramio-no-such-program")); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Run of a missing program: %v, want exec.ErrNotFound", err)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestCloseKillsStartedProcesses(t *testing.T) {
	testutil.RequireRoot(t)
	p, err := New(Options{})
	if err != nil {
		requireRootOrFatal(t, err, 0)
	}
	defer p.Close()
	cmd := p.A.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=sleep")
	if err := p.A.Start(cmd); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("process ended with %v, want killed by SIGKILL", err)
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("process still running 60 s after Close")
	}
}

func TestDo(t *testing.T) {
	p := newT(t, Options{})
	want := testutil.NetnsInode(t, int(p.A.NS))
	var tid int
	err := p.A.Do(func() error {
		tid = unix.Gettid()
		l, err := os.Readlink("/proc/thread-self/ns/net")
		if err != nil {
			return err
		}
		if l != fmt.Sprintf("net:[%d]", want) {
			return fmt.Errorf("Do runs in %s, want net:[%d]", l, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := os.Readlink("/proc/thread-self/ns/net"); l == fmt.Sprintf("net:[%d]", want) {
		t.Error("the test goroutine is inside the namespace")
	}
	// The thread that joined the namespace is ended, never reused.
	if !testutil.Eventually(30*time.Second, func() bool {
		_, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid))
		return errors.Is(err, os.ErrNotExist)
	}) {
		t.Errorf("thread %d of Do still exists", tid)
	}

	sentinel := errors.New("from fn")
	if err := p.A.Do(func() error { return sentinel }); err != sentinel {
		t.Errorf("Do returned %v, want fn's error", err)
	}
	if err := p.A.Do(func() error { runtime.Goexit(); return nil }); err != errGoexit {
		t.Errorf("Do of a Goexit: %v", err)
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the panic of fn", r)
			}
		}()
		p.A.Do(func() error { panic("boom") })
		t.Error("Do did not re-panic")
	}()

	// The main thread never joins the namespace, however often Do runs
	// (the runtime could not end it, so it would stay there).
	mainNS := func() string {
		l, _ := os.Readlink(fmt.Sprintf("/proc/self/task/%d/ns/net", os.Getpid()))
		return l
	}
	before := mainNS()
	for range 64 {
		if err := p.A.Do(func() error {
			if unix.Gettid() == unix.Getpid() {
				return errors.New("Do ran on the main thread")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if after := mainNS(); after != before {
		t.Errorf("main thread's namespace changed from %s to %s", before, after)
	}

	// Several at once.
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			errs <- p.B.Do(func() error {
				_, err := net.InterfaceByName(p.B.Iface)
				return err
			})
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
