package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// TestDemo: --demo serves over tcp-xdp on a test host and a kernel client
// gets the answer of the unchanged net/http handler.
func TestDemo(t *testing.T) {
	testutil.RequireRoot(t)
	var out, errOut bytes.Buffer
	if rc := run([]string{"--demo"}, &out, &errOut); rc != 0 {
		if strings.Contains(errOut.String(), "not supported") {
			testutil.Skip(t, errOut.String())
		}
		t.Fatalf("rc %d: %s", rc, errOut.String())
	}
	if !strings.Contains(out.String(), "200 OK") || !strings.Contains(out.String(), "from net/http") {
		t.Fatalf("demo output:\n%s", out.String())
	}
}

// TestBench: --bench with a few requests prints a row for each path and
// round, with Go's http.Client and with the echo, each in this process
// and in a process of its own (--client-process); a request that fails,
// or an echo that comes back changed, makes it exit non-zero.
func TestBench(t *testing.T) {
	testutil.RequireRoot(t)
	for _, client := range []string{"go", "echo", "go --client-process", "echo --client-process"} {
		t.Run(client, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"--bench", "--client"}, strings.Fields(client)...)
			if rc := run(append(args, "--requests", "200", "--conns", "2", "--rounds", "1", "--poll", "sleep", "--stack", "native,netstack"), &out, &errOut); rc != 0 {
				t.Fatalf("rc %d: %s", rc, errOut.String())
			}
			rows := 0
			for _, l := range strings.Split(out.String(), "\n") {
				for _, p := range []string{"| kernel tcp | 1 | 200 |", "| tcp-xdp native | 1 | 200 |", "| tcp-xdp netstack | 1 | 200 |"} {
					if strings.HasPrefix(l, p) {
						rows++
					}
				}
			}
			if rows != 3 {
				t.Fatalf("want a kernel, a native and a netstack row:\n%s", out.String())
			}
		})
	}
}

// TestBenchWrk: --client wrk runs wrk in B and reports a row for the
// kernel and one for the native engine.
func TestBenchWrk(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("wrk"); err != nil {
		testutil.Skip(t, "wrk is not installed")
	}
	var out, errOut bytes.Buffer
	if rc := run([]string{"--bench", "--client", "wrk", "--duration", "1s", "--conns", "2", "--rounds", "1"}, &out, &errOut); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errOut.String())
	}
	rows := 0
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "| kernel tcp | 1 |") || strings.HasPrefix(l, "| tcp-xdp native | 1 |") {
			rows++
		}
	}
	if rows != 2 {
		t.Fatalf("want a kernel and a native row:\n%s", out.String())
	}
}

// TestParseWrk reads wrk's --latency report, and refuses one with errors.
func TestParseWrk(t *testing.T) {
	const report = `Running 5s test @ http://198.18.0.3:8080/
  1 threads and 4 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   120.50us   80.10us   3.20ms   95.00%
    Req/Sec    33.10k     1.20k   35.00k    70.00%
  Latency Distribution
     50%  100.00us
     75%  130.00us
     90%  180.00us
     99%    1.10ms
  165000 requests in 5.00s, 20.00MB read
Requests/sec:  33000.12
Transfer/sec:      4.00MB
`
	r, err := parseWrk("x", report)
	if err != nil {
		t.Fatal(err)
	}
	if r.requests != 33000 || r.wall != time.Second || r.p50 != 100*time.Microsecond || r.p90 != 180*time.Microsecond ||
		r.p99 != 1100*time.Microsecond || r.mx != 3200*time.Microsecond {
		t.Errorf("parsed %+v", r)
	}
	if _, err := parseWrk("x", report+"  Socket errors: connect 0, read 1, write 0, timeout 0\n"); err == nil {
		t.Error("a report with socket errors was taken")
	}
	if _, err := parseWrk("x", "garbage"); err == nil {
		t.Error("a report without a rate was taken")
	}
}

// TestParseClientLine reads a client process's result line back as it
// was written, and refuses output without one or with no requests.
func TestParseClientLine(t *testing.T) {
	want := result{name: "x", requests: 2000, wall: 150 * time.Millisecond, p50: 13400 * time.Nanosecond,
		p90: 17 * time.Microsecond, p99: 68 * time.Microsecond, mx: 2 * time.Millisecond}
	got, err := parseClientLine("x", "noise\n"+clientLine(want)+"\n")
	if err != nil || got != want {
		t.Fatalf("parsed %+v, %v; want %+v", got, err, want)
	}
	for _, out := range []string{"", "httpxdp-client requests=0 wall_ns=0 p50_ns=0 p90_ns=0 p99_ns=0 max_ns=0", "httpxdp-client requests=x"} {
		if _, err := parseClientLine("x", out); err == nil {
			t.Errorf("%q was taken", out)
		}
	}
}

// TestFlags: --help exits 0 with the flags on stdout; every bad flag is
// a usage error (exit status 2) said before anything starts, with a
// message that names the flag and what it wants.
func TestFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		rc   int
		want string
	}{
		{[]string{"--help"}, 0, "-poll"},
		{[]string{"--poll", "turbo"}, 2, `want "busy", "yield" or "adaptive"`},
		{nil, 2, "serve mode needs --iface and --addr"},
		{[]string{"--iface", "dg0", "--addr", "198.18.0.3"}, 2, "want address:port"},
		{[]string{"--iface", "dgramio-no-such-if", "--addr", "198.18.0.3:8080"}, 2, "--iface dgramio-no-such-if"},
		{[]string{"--iface", "lo", "--addr", "127.0.0.9:8080"}, 2, "loopback interface, which has no Ethernet MAC address"},
		{[]string{"--iface", "dg0", "--addr", "2001:2::3:8080"}, 2, "an IPv6 address goes in brackets"},
		{[]string{"--iface", "dg0", "--addr", "198.18.0.3:70000"}, 2, `port "70000": want 1..65535`},
		{[]string{"--iface", "dg0", "--addr", "198.18.0.3:0"}, 2, "port 0: want 1..65535"},
		{[]string{"--iface", "dg0", "--addr", "localhost:8080"}, 2, "a host name is not looked up"},
		{[]string{"--iface", "dg0", "--addr", "[fe80::3%dg0]:8080"}, 2, "zone"},
		{[]string{"--bench", "--conns", "0"}, 2, "--conns 0: must be at least 1"},
		{[]string{"--bench", "--client", "curl"}, 2, `use "go", "wrk" or "echo"`},
		{[]string{"--bench", "--client", "wrk", "--client-process"}, 2, "wrk runs in a process of its own already"},
		{[]string{"--demo", "--size", "-1"}, 2, "--size -1"},
		{[]string{"--kind", "carrier-pigeon"}, 2, "tcp-xdp"},
		{[]string{"--demo", "extra"}, 2, "unexpected arguments"},
	} {
		var out, errOut bytes.Buffer
		rc := run(c.args, &out, &errOut)
		if rc != c.rc || !strings.Contains(out.String()+errOut.String(), c.want) {
			t.Errorf("%q: rc %d, output %q %q; want rc %d and %q", c.args, rc, out.String(), errOut.String(), c.rc, c.want)
		}
	}
	// An IPv4-mapped address is served as IPv4 (RFC 4291 §2.5.5.2).
	if ap, err := parseServeAddr("[::ffff:198.18.0.3]:8080"); err != nil || ap != netip.MustParseAddrPort("198.18.0.3:8080") {
		t.Errorf("--addr [::ffff:198.18.0.3]:8080: %v, %v; want 198.18.0.3:8080", ap, err)
	}
	for p, name := range map[string]string{"busy": "busy", "yield": "yield", "adaptive": "adaptive", "spin": "busy", "sleep": "yield"} {
		m, err := pollMode(p)
		if err != nil {
			t.Errorf("--poll %s: %v", p, err)
		}
		if got := pollName(m); got != name {
			t.Errorf("--poll %s is printed as %q, want %q (the flag's words)", p, got, name)
		}
	}
}

// TestMain runs the command itself when the test binary is started as
// httpxdp (TestServe starts it inside a namespace), or as the client
// process of --client-process.
func TestMain(m *testing.M) {
	if os.Getenv("HTTPXDP_RUN_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	if os.Getenv(clientEnv) == "1" {
		os.Exit(runClient(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestServe: the serve mode, as a process inside namespace A on its veth
// end, answers a kernel client in B, and on SIGTERM shuts down and detaches
// its XDP program.
func TestServe(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	addr := xdpAddr(p.A, 3)
	cmd := p.A.Command(os.Args[0], "--iface", p.A.Iface, "--addr", fmt.Sprintf("%s:8080", addr), "--poll", "sleep")
	cmd.Env = append(os.Environ(), "HTTPXDP_RUN_MAIN=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := p.A.Start(cmd); err != nil {
		t.Fatal(err)
	}
	client := kernelClient(p.B, 1)
	defer client.CloseIdleConnections()
	var body []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := client.Get(fmt.Sprintf("http://%s:8080/serve", addr))
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no answer: %v; output:\n%s", err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(string(body), "from net/http") {
		t.Errorf("body %q", body)
	}
	client.CloseIdleConnections()
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit: %v; output:\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running 30s after SIGTERM; output:\n%s", out.String())
	}
	l, err := p.A.Link()
	if err != nil {
		t.Fatal(err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached {
		t.Errorf("XDP program left on %s after the server exited", p.A.Iface)
	}
	t.Logf("output: %s", strings.TrimSpace(out.String()))
}

// TestHandlerReadsBody: the handler reads a request's body whole (RFC 9112
// §6: Content-Length or chunked) before it answers and says how much it
// read, so that an upload from a real client (curl --data-binary, -T,
// chunked, Expect: 100-continue) crosses the connection; a GET's answer is
// the plain greeting.
func TestHandlerReadsBody(t *testing.T) {
	h := handler(0)
	body := strings.Repeat("y", 1<<20)
	for _, chunked := range []bool{false, true} {
		req := httptest.NewRequest("POST", "/", strings.NewReader(body))
		if chunked {
			req.ContentLength = -1
			req.TransferEncoding = []string{"chunked"}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Body.String(); rec.Code != 200 || !strings.Contains(got, fmt.Sprintf("read %d bytes", len(body))) {
			t.Errorf("POST of %d bytes (chunked %v): %d %q", len(body), chunked, rec.Code, got)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if got := rec.Body.String(); !strings.HasSuffix(got, "from net/http\n") {
		t.Errorf("GET: %q", got)
	}
}

// syncBuffer is a bytes.Buffer the tool's process writes to (through
// exec's copying goroutine) while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeShutdown: on SIGTERM the serve mode lets a request in flight
// finish, as http.Server.Shutdown does: an upload whose handler is still
// reading the body when the signal comes gets its 200 with the whole
// length, and the tool exits 0 with its XDP program detached. With a
// request that does not finish within --shutdown-timeout, or at a second
// signal, it says so, closes the connection, and still exits 0 and
// detaches.
func TestServeShutdown(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	addr := xdpAddr(p.A, 3)
	url := fmt.Sprintf("http://%s:8080/upload", addr)
	const half = 64 << 10
	for _, c := range []struct {
		name   string
		grace  string
		finish bool
		again  bool // a second SIGTERM while it waits
	}{{"finishes", "60s", true, false}, {"bound", "200ms", false, false}, {"second signal", "60s", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			cmd := p.A.Command(os.Args[0], "--iface", p.A.Iface, "--addr", fmt.Sprintf("%s:8080", addr), "--poll", "sleep", "--shutdown-timeout", c.grace)
			cmd.Env = append(os.Environ(), "HTTPXDP_RUN_MAIN=1")
			var out syncBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := p.A.Start(cmd); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			defer func() {
				select {
				case <-done:
				default:
					cmd.Process.Kill()
					<-done
				}
			}()
			// Until the server answers (its ARP, its listener).
			get := kernelClient(p.B, 1)
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				resp, err := get.Get(url)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no answer: %v; output:\n%s", err, out.String())
				}
			}
			get.CloseIdleConnections()

			// An upload after Expect: 100-continue (RFC 9110 §10.1.1):
			// the client sends the body only once the server's handler
			// has begun to read it, so when the first half has gone into
			// the pipe the request is in flight.
			pr, pw := io.Pipe()
			req, err := http.NewRequest("POST", url, pr)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = 2 * half
			req.Header.Set("Expect", "100-continue")
			client := &http.Client{Transport: &http.Transport{DialContext: p.B.DialContext, ExpectContinueTimeout: time.Minute, DisableKeepAlives: true}}
			type result struct {
				code int
				body string
				err  error
			}
			got := make(chan result, 1)
			go func() {
				resp, err := client.Do(req)
				if err != nil {
					got <- result{err: err}
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				got <- result{resp.StatusCode, string(b), err}
			}()
			if _, err := pw.Write(make([]byte, half)); err != nil {
				t.Fatalf("first half: %v; output:\n%s", err, out.String())
			}
			cmd.Process.Signal(syscall.SIGTERM)
			for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "shutting down"); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("no shutdown line; output:\n%s", out.String())
				}
			}
			if !strings.Contains(out.String(), "requests in flight: 1,") {
				t.Errorf("the shutdown line does not count the upload; output:\n%s", out.String())
			}
			if c.again {
				cmd.Process.Signal(syscall.SIGTERM)
			}
			if c.finish {
				if _, err := pw.Write(make([]byte, half)); err != nil {
					t.Fatalf("second half: %v; output:\n%s", err, out.String())
				}
				pw.Close()
				r := <-got
				if r.err != nil || r.code != 200 || !strings.Contains(r.body, fmt.Sprintf("read %d bytes", 2*half)) {
					t.Errorf("upload across the shutdown: %d %q %v; output:\n%s", r.code, r.body, r.err, out.String())
				}
			}
			select {
			case err := <-done:
				done <- err // for the deferred check
				if err != nil {
					t.Errorf("exit: %v; output:\n%s", err, out.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("still running 30s after SIGTERM; output:\n%s", out.String())
			}
			want := "every request finished"
			if !c.finish {
				want = "requests still in flight at the bound: 1;"
				if c.again {
					want = "terminated again: not waiting any longer\n" + want
				}
				pw.CloseWithError(errors.New("test done"))
				<-got
			}
			if !strings.Contains(out.String(), want) {
				t.Errorf("want %q in the output:\n%s", want, out.String())
			}
			l, err := p.A.Link()
			if err != nil {
				t.Fatal(err)
			}
			if x := l.Attrs().Xdp; x != nil && x.Attached {
				t.Errorf("XDP program left on %s after the server exited", p.A.Iface)
			}
			t.Logf("output: %s", strings.TrimSpace(out.String()))
		})
	}
}
