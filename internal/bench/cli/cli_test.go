package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/testutil"
)

func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// echo and loadgen over the kernel's UDP on loopback: both tools' files
// make a cell whose counters add up. No root needed.
func TestEchoLoadgenLoopbackUDP(t *testing.T) {
	port := fmt.Sprint(freeUDPPort(t))
	lf, ef, out := echoAndLoad(t,
		[]string{"--kind", "udp", "--local", "127.0.0.1", "--port", port, "--wait"},
		[]string{"--kind", "udp", "--dst", "127.0.0.1", "--port", port,
			"--rate", "2k", "--warmup", "100ms", "--duration", "400ms", "--drain", "5s", "--wait"}, nil)
	c := bench.NewCell("udp", lf.Result, ef.Result)
	t.Logf("cell %s; counters %v", c.Display, c.Counters)
	if lf.Result.Total.Sent != 1000 {
		t.Fatalf("sent %d, want 1000", lf.Result.Total.Sent)
	}
	// Loopback with 16 MiB buffers at 2000/s: a loss would be counted by
	// the socket layer; either way the counters must add up.
	if c.Unaccounted != 0 {
		t.Fatalf("unaccounted %d: %+v", c.Unaccounted, c.Conservation)
	}
	if c.Counters["echo.dgramio.rx_delivered"] != ef.Result.Received || c.Counters["loadgen.dgramio.tx_queued"] != lf.Result.Total.Sent {
		t.Fatalf("counters %v", c.Counters)
	}
	if !strings.Contains(out, "udp 2k: ") {
		t.Fatalf("loadgen printed %q", out)
	}
}

// echoAndLoad runs the echo tool (RunEcho with echoArgs and --stats) until
// its first line, which ready must accept (it must start with "ready" in
// any case), then the loadgen (RunLoadgen with loadArgs and --json), then
// stops the echo and waits for it. It returns both tools' files and what
// the loadgen printed; any tool that fails fails the test.
func echoAndLoad(t *testing.T, echoArgs, loadArgs []string, ready func(line string) bool) (LoadFile, EchoFile, string) {
	t.Helper()
	return echoAndLoadWith(t, defaultOpeners(), echoArgs, loadArgs, ready)
}

// echoAndLoadWith is echoAndLoad with both tools opening their backends
// with op.
func echoAndLoadWith(t *testing.T, op openers, echoArgs, loadArgs []string, ready func(line string) bool) (LoadFile, EchoFile, string) {
	t.Helper()
	dir := t.TempDir()
	echoJSON, loadJSON := filepath.Join(dir, "echo.json"), filepath.Join(dir, "load.json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var echoErr testutil.LockedBuffer
	status := make(chan int, 1)
	go func() {
		status <- runEcho(ctx, append(append([]string{}, echoArgs...), "--stats", echoJSON), pw, &echoErr, op)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready") || (ready != nil && !ready(line)) {
		t.Fatalf("echo said %q, %v (stderr %s)", line, err, echoErr.String())
	}
	go io.Copy(io.Discard, pr)

	var out, errOut strings.Builder
	if st := runLoadgen(context.Background(), append(append([]string{}, loadArgs...), "--json", loadJSON), &out, &errOut, op); st != 0 {
		t.Fatalf("loadgen exit %d: %s %s", st, out.String(), errOut.String())
	}
	cancel()
	select {
	case s := <-status:
		if s != 0 {
			t.Fatalf("echo exit %d: %s", s, echoErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("echo did not stop after its context ended")
	}
	var lf LoadFile
	var ef EchoFile
	readJSON(t, loadJSON, &lf)
	readJSON(t, echoJSON, &ef)
	if lf.Result == nil || ef.Result == nil {
		t.Fatalf("missing results: %+v %+v", lf, ef)
	}
	return lf, ef, out.String()
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestTypedFlagsRefuseUnknownNames: --kind and --tcp-stack parse into
// dgramio.Kind and dgramio.TCPStack, so a name that is neither is refused while
// the flags are parsed (exit status 2), with the names that would do.
func TestTypedFlagsRefuseUnknownNames(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--kind", "udp6"}, `"tcp-xdp"`},
		{[]string{"--kind", "tcp-xdp", "--tcp-stack", "lwip"}, `"netstack"`},
	} {
		for name, run := range map[string]func(context.Context, []string, io.Writer, io.Writer) int{"echo": RunEcho, "loadgen": RunLoadgen} {
			var out, errOut strings.Builder
			if st := run(context.Background(), c.args, &out, &errOut); st != 2 || !strings.Contains(errOut.String(), c.want) {
				t.Errorf("%s %q: exit %d, stderr %q; want 2 and the valid names (%s)", name, c.args, st, errOut.String(), c.want)
			}
		}
	}
}

func TestFailuresAreClassified(t *testing.T) {
	var out, errOut strings.Builder
	dir := t.TempDir()
	// A message the kind cannot send is refused before anything.
	st := RunLoadgen(context.Background(), []string{"--kind", "udp", "--dst", "127.0.0.1", "--size", "100000", "--json", filepath.Join(dir, "l.json")}, &out, &errOut)
	if st != 2 || !strings.HasPrefix(out.String(), "failed config: ") {
		t.Fatalf("exit %d, output %q", st, out.String())
	}
	var lf LoadFile
	readJSON(t, filepath.Join(dir, "l.json"), &lf)
	if lf.Failure == nil || lf.Failure.Class != ClassConfig {
		t.Fatalf("failure %+v", lf.Failure)
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{dgramio.NotSupported("kind dpdk", "", "not built", nil), ClassNotBuilt},
		{dgramio.NotSupported("AF_XDP", "4.18", "", nil), ClassNotSupported},
		{&dgramio.PrivilegeError{Op: "attach", Capability: "CAP_NET_ADMIN", Err: os.ErrPermission}, ClassPrivilege},
		{&dgramio.ConfigError{Field: "Port"}, ClassConfig},
		{errors.New("boom"), ClassOther},
	} {
		if got := Classify("dpdk", c.err); got != c.want {
			t.Errorf("Classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

// The echo as its own process: SIGTERM makes it stop, print its counters
// and write them as JSON, exiting 0.
func TestEchoProcessSIGTERM(t *testing.T) {
	dir := t.TempDir()
	stats := filepath.Join(dir, "echo.json")
	port := fmt.Sprint(freeUDPPort(t))
	cmd := exec.Command(os.Args[0], "echo", "--kind", "udp", "--local", "127.0.0.1", "--port", port, "--wait", "--stats", stats)
	cmd.Env = append(os.Environ(), childEnv)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready") {
		t.Fatalf("echo said %q, %v; stderr %s", line, err, errOut.String())
	}
	// Three datagrams from a plain socket, answered.
	c, err := net.Dial("udp4", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64)
	for i := 0; i < 3; i++ {
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != "ping" {
			t.Fatalf("answer %q, %v", buf[:n], err)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("echo exit: %v; stderr %s", err, errOut.String())
	}
	var ef EchoFile
	readJSON(t, stats, &ef)
	if ef.Result == nil || ef.Result.Received != 3 || ef.Result.Reflected != 3 || ef.Result.Stats.RxDelivered != 3 {
		t.Fatalf("echo result %+v", ef.Result)
	}
	if !strings.Contains(errOut.String(), "echo.app.reflected") {
		t.Fatalf("echo did not print its counters: %s", errOut.String())
	}
}
