package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testutil"
)

// toolCase is one command line of a tool and what it must answer: the
// exit status and a piece of its output (stdout and stderr together).
type toolCase struct {
	name string
	args []string
	rc   int
	want string
}

// runTool runs echo, loadgen or netbench's option parsing with args and
// returns the status and everything it printed.
func runTool(t *testing.T, tool string, args []string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	var rc int
	// A case that runs instead of being refused ends here, and fails.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	switch tool {
	case "echo":
		rc = RunEcho(ctx, args, &out, &errOut)
	case "loadgen":
		rc = RunLoadgen(ctx, args, &out, &errOut)
	case "netbench":
		_, rc = netbenchOptions(args, &out, &errOut)
		if rc < 0 {
			rc = ExitOK
		}
	}
	return rc, out.String(), errOut.String()
}

func checkToolCases(t *testing.T, tool string, cases []toolCase) {
	t.Helper()
	for _, c := range cases {
		rc, out, errOut := runTool(t, tool, c.args)
		all := out + errOut
		if rc != c.rc || !strings.Contains(all, c.want) {
			t.Errorf("%s %s %q: exit %d, output %q; want exit %d and %q", tool, c.name, c.args, rc, all, c.rc, c.want)
		}
		if c.rc == ExitUsage && strings.Count(all, "\n") > 4 {
			t.Errorf("%s %s: a usage error printed %d lines (the whole flag list?): %q", tool, c.name, strings.Count(all, "\n"), all)
		}
	}
}

// Bad input to the echo: every flag's bad value is a usage error (exit
// 2) said before anything opens, with a message that names the flag and
// what it wants; --help prints the flags on stdout and exits 0.
func TestEchoBadInput(t *testing.T) {
	lo := []string{"--local", "127.0.0.1", "--port", fmt.Sprint(freeUDPPort(t))}
	with := func(a ...string) []string { return append(append([]string{}, lo...), a...) }
	checkToolCases(t, "echo", []toolCase{
		{"help", []string{"--help"}, ExitOK, "-max-time"},
		{"unknown kind", with("--kind", "UDP"), ExitUsage, `"tcp-xdp"`},
		{"unknown flag", with("--colour", "red"), ExitUsage, "run 'dgramio-echo --help'"},
		{"duration", with("--max-time", "5"), ExitUsage, `"5" is not a duration: write it like 5s`},
		{"negative duration", with("--max-time", "-1s"), ExitUsage, "not negative"},
		{"local", []string{"--local", "10.0.0.300"}, ExitUsage, "--local \"10.0.0.300\": not an IP address"},
		{"local v6 with a zone", []string{"--local", "fe80::1%lo"}, ExitUsage, "--local fe80::1%lo: a link-local address"},
		{"local v6 link-local", []string{"--local", "fe80::1"}, ExitUsage, "--local fe80::1: a link-local address"},
		{"local v6 multicast", []string{"--local", "ff02::1"}, ExitUsage, "want the address of one host"},
		{"port", with("--port", "70000"), ExitUsage, "--port 70000: must be 1..65535"},
		{"poll", with("--poll", "turbo"), ExitUsage, `--poll "turbo": want "busy"`},
		{"queues", with("--queues", "0"), ExitUsage, "--queues 0"},
		{"cpus", with("--queues", "2", "--cpus", "x"), ExitUsage, "--cpus"},
		{"batch", with("--batch", "0"), ExitUsage, "--batch 0: must be at least 1"},
		{"xdp-ring", with("--xdp-ring", "-2"), ExitUsage, "--xdp-ring -2: must not be negative"},
		{"max-datagram", with("--max-datagram", "100000"), ExitUsage, "--max-datagram"},
		{"tcp-stack on udp", with("--tcp-stack", "native"), ExitUsage, "--tcp-stack is an option of kinds tcp-xdp and tcp-dpdk"},
		{"napi on udp", with("--napi"), ExitUsage, "options of kind uring"},
		{"iface lo for tcp-xdp", with("--kind", "tcp-xdp", "--iface", "lo"), ExitUsage, "--iface lo: kind tcp-xdp sends Ethernet frames and it is the loopback interface"},
		{"no such iface", with("--kind", "xdp", "--iface", "dgnone0"), ExitUsage, "--iface dgnone0"},
		{"arguments", with("stray"), ExitUsage, "unexpected arguments"},
	})
}

// Bad input to the load generator, as TestEchoBadInput, and the runs that
// could not measure: exit 1 with the cause.
func TestLoadgenBadInput(t *testing.T) {
	port := fmt.Sprint(freeUDPPort(t))
	lo := []string{"--dst", "127.0.0.1", "--port", port}
	with := func(a ...string) []string { return append(append([]string{}, lo...), a...) }
	checkToolCases(t, "loadgen", []toolCase{
		{"help", []string{"--help"}, ExitOK, "-interval"},
		{"unknown kind", with("--kind", "foo"), ExitUsage, `"udp"`},
		{"no dst", nil, ExitUsage, "--dst: the echo's address is required"},
		{"dst", []string{"--dst", "127.0.0"}, ExitUsage, "not an IP address"},
		{"rate", with("--rate", "fast"), ExitUsage, "--rate"},
		{"duration", with("--duration", "5"), ExitUsage, `"5" is not a duration: write it like 5s`},
		{"zero duration", with("--duration", "0s"), ExitUsage, "--duration 0s: the measured time must be positive"},
		{"warmup", with("--warmup", "1 s"), ExitUsage, "write it like 5s"},
		{"drain", with("--drain", "-1s"), ExitUsage, "not negative"},
		{"interval", with("--interval", "x"), ExitUsage, "write it like 5s"},
		{"size too small", with("--size", "3"), ExitUsage, "--size 3: must be at least"},
		{"size udp", with("--size", "100000"), ExitUsage, "--size 100000: larger than the largest message of kind udp here, 1472 bytes: raise --max-datagram"},
		{"size tcp", with("--kind", "tcp", "--size", "100000"), ExitUsage, "--size 100000: larger than the largest message of kind tcp"},
		{"dst-mac", with("--dst-mac", "zz"), ExitUsage, "--dst-mac \"zz\": not an Ethernet MAC address"},
		{"poll", with("--poll", "adaptive"), ExitUsage, `want "busy"`},
		{"iface lo for xdp", with("--kind", "xdp", "--iface", "lo", "--local", "127.0.0.1"), ExitUsage, "use an Ethernet port or a veth, or --kind udp on loopback"},
		{"arguments", with("x"), ExitUsage, "unexpected arguments"},
	})
}

// A load generator whose peer does not answer measured nothing: exit 1,
// with the cause. UDP to a loopback port nothing listens on (the kernel
// answers ICMP port unreachable), TCP to one (the connection is refused).
func TestLoadgenUnreachablePeer(t *testing.T) {
	udpPort := fmt.Sprint(freeUDPPort(t))
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcpPort := fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // nothing listens there now: connect is refused
	short := []string{"--rate", "1k", "--warmup", "0s", "--duration", "200ms", "--drain", "200ms", "--wait"}
	checkToolCases(t, "loadgen", []toolCase{
		{"udp, no echo", append([]string{"--kind", "udp", "--dst", "127.0.0.1", "--port", udpPort}, short...), ExitFailed, "came back from 127.0.0.1 port " + udpPort + ": is an echo listening there"},
		{"tcp, refused", append([]string{"--kind", "tcp", "--dst", "127.0.0.1", "--port", tcpPort}, short...), ExitFailed, "connection refused"},
	})
}

// --json - writes the JSON alone on stdout (the other lines go to
// stderr), and --interval adds a line per interval and the intervals to
// the JSON, as iperf3 -J and -i do. The echo's --max-time ends a run that
// measured: exit 0, every time (its Wait returns ctx.Err()).
func TestLoadgenJSONStdoutAndIntervals(t *testing.T) {
	port := fmt.Sprint(freeUDPPort(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var echoErr bytes.Buffer
	go func() {
		done <- RunEcho(ctx, []string{"--kind", "udp", "--local", "127.0.0.1", "--port", port, "--wait", "--max-time", "30s"}, pw, &echoErr)
		pw.Close()
	}()
	line := make([]byte, 256)
	if n, err := pr.Read(line); err != nil || !strings.HasPrefix(string(line[:n]), "ready") {
		t.Fatalf("echo said %q, %v", line[:n], err)
	}
	go io.Copy(io.Discard, pr)
	var out, errOut bytes.Buffer
	rc := RunLoadgen(context.Background(), []string{"--kind", "udp", "--dst", "127.0.0.1", "--port", port, "--rate", "1k",
		"--warmup", "0s", "--duration", "600ms", "--interval", "200ms", "--wait", "--json", "-"}, &out, &errOut)
	cancel()
	if rc != ExitOK {
		t.Fatalf("loadgen exit %d: %s", rc, errOut.String())
	}
	var lf LoadFile
	if err := json.Unmarshal(out.Bytes(), &lf); err != nil {
		t.Fatalf("stdout is not the JSON alone: %v: %q", err, out.String())
	}
	if lf.Result == nil || lf.Result.Total.Received == 0 || len(lf.Intervals) < 3 {
		t.Fatalf("result %+v, %d intervals", lf.Result, len(lf.Intervals))
	}
	var sent uint64
	for _, iv := range lf.Intervals {
		sent += iv.Sent
	}
	if sent != lf.Result.Total.Sent {
		t.Errorf("the intervals sent %d in all, the run %d", sent, lf.Result.Total.Sent)
	}
	if !strings.Contains(errOut.String(), "[q0]   0.00-0.20") {
		t.Errorf("no interval line on stderr: %q", errOut.String())
	}
	if st := <-done; st != ExitOK {
		t.Fatalf("echo exit %d: %s", st, echoErr.String())
	}
	for i := range 5 {
		var eo, ee bytes.Buffer
		if st := RunEcho(context.Background(), []string{"--kind", "udp", "--local", "127.0.0.1", "--port", port, "--wait", "--max-time", "30ms"}, &eo, &ee); st != ExitOK {
			t.Fatalf("echo --max-time 30ms, run %d: exit %d: %s", i, st, ee.String())
		}
	}
}

// netbench refuses bad input while it parses its flags, before it makes
// test hosts: unknown and upper-case kinds, sizes a kind cannot send, bad
// durations; --help exits 0.
func TestNetbenchBadInput(t *testing.T) {
	checkToolCases(t, "netbench", []toolCase{
		{"help", []string{"--help"}, ExitOK, "netbench compare"},
		{"upper case", []string{"--kinds", "UDP"}, ExitUsage, `"UDP": kinds are written in lower case: udp`},
		{"unknown", []string{"--kinds", "udp,foo"}, ExitUsage, `"foo": not a kind`},
		{"variant", []string{"--kinds", "udp+napi"}, ExitUsage, "not a variant"},
		{"duration", []string{"--duration", "5"}, ExitUsage, "write it like 5s"},
		{"size", []string{"--kinds", "udp", "--size", "100000"}, ExitUsage, "--size 100000: larger than the largest message of kind udp"},
		{"size tcp", []string{"--kinds", "tcp", "--size", "70000"}, ExitUsage, "kind tcp"},
		{"rates", []string{"--rates", "1k,x"}, ExitUsage, "x"},
		{"poll", []string{"--poll", "turbo"}, ExitUsage, "--poll"},
		{"arguments", []string{"udp"}, ExitUsage, "unexpected arguments"},
		{"port 0", []string{"--port", "0"}, ExitUsage, "--port 0: must be 1..55535"},
		{"port too high", []string{"--port", "70000"}, ExitUsage, "--port 70000: must be 1..55535"},
	})
	if rc, out, errOut := runTool(t, "netbench", []string{"--kinds", "udp,tcp", "--size", "8000", "--out", "none"}); rc != 0 {
		t.Errorf("--size 8000 on udp and tcp refused: %s %s", out, errOut)
	}
}

// The report names the setting that limits a DPDK row while its RX ring
// is smaller than the AF_XDP kinds' ring (dpdk's 256 against xdp's 2048),
// and nothing once they are alike.
func TestLimitOfDPDKRing(t *testing.T) {
	nb := &netbench{}
	if l := nb.limitOf("dpdk"); !strings.Contains(l, "RX ring of 256 descriptors") || !strings.Contains(l, "--dpdk-rx-desc 2048") {
		t.Errorf("dpdk by default: %q", l)
	}
	if l := nb.limitOf("xdp"); l != "" {
		t.Errorf("xdp: %q", l)
	}
	nb.o.DPDKRxDesc = 2048
	if l := nb.limitOf("tcp-dpdk"); l != "" {
		t.Errorf("tcp-dpdk with a ring like xdp's: %q", l)
	}
}

// A userspace TCP kind whose peer's segments arrive with the checksum
// left to the hardware (a kernel on a veth with TX offload on) only
// counts tcp_checksum_errors; the tools name the cause and the fix: the
// echo when the counter rises before any connection, the load generator
// on a connect that got no answer.
func TestChecksumOffloadHint(t *testing.T) {
	var mu sync.Mutex
	s := dgramio.Stats{Kind: dgramio.KindTCPXDP}
	stats := func() dgramio.Stats { mu.Lock(); defer mu.Unlock(); return s }
	var out testutil.LockedBuffer
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { watchChecksums("echo", stats, time.Millisecond, &out, stop); close(done) }()
	time.Sleep(20 * time.Millisecond)
	if out.String() != "" {
		t.Fatalf("a hint with no checksum error: %q", out.String())
	}
	mu.Lock()
	s.Layers = []dgramio.Counter{{Layer: "native", Name: "tcp_checksum_errors", Value: 3}}
	mu.Unlock()
	select {
	case <-done: // it printed once and stopped watching
	case <-time.After(20 * time.Second):
		t.Fatal("the watcher did not notice tcp_checksum_errors")
	}
	close(stop)
	if got := out.String(); !strings.Contains(got, "3 TCP segments dropped for a bad checksum") || !strings.Contains(got, "ethtool -K <its interface> tx off") {
		t.Errorf("hint %q", got)
	}
	timeout := fmt.Errorf("tcp: connect 198.18.0.2:5000: no answer: %w", syscall.ETIMEDOUT)
	if h := fixHint(dgramio.KindTCPXDP, timeout); !strings.Contains(h, "tx off") {
		t.Errorf("tcp-xdp connect timeout: hint %q", h)
	}
	if h := fixHint(dgramio.KindUDP, fmt.Errorf("bind 192.0.2.99:5000: %w", syscall.EADDRNOTAVAIL)); !strings.Contains(h, "--local") {
		t.Errorf("an address the host does not hold: hint %q", h)
	}
	if h := fixHint(dgramio.KindTCP, fmt.Errorf("bind: %w", syscall.EADDRINUSE)); !strings.Contains(h, "--port") {
		t.Errorf("a port in use: hint %q", h)
	}
	if h := fixHint(dgramio.KindTCP, timeout); h != "" {
		t.Errorf("kernel tcp: hint %q (the kernel checks its own checksums)", h)
	}
}
