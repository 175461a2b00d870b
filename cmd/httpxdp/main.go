// Command httpxdp serves an unchanged net/http server over the userspace TCP
// (tcp-xdp, or tcp-dpdk in builds with the dpdk tag) through package
// tcp/netconn, and measures it against the kernel's TCP.
//
// Serve on an interface, at an address the kernel does not hold there
// (the userspace TCP answers ARP for it; the kernel keeps its own
// address), on the native engine (the default) or netstack:
//
//	httpxdp --iface eth1 --addr 198.18.0.3:8080 [--stack native|netstack] [--cpu 2] [--poll adaptive|spin|sleep]
//
// Demonstrate on a test host (two network namespaces joined by a veth pair,
// made and removed by the command; root): the server runs over tcp-xdp in
// A, Go's http.Client, a kernel TCP client, asks from B:
//
//	httpxdp --demo
//
// Benchmark on a test host: the same server on A's kernel TCP and on
// tcp-xdp on the same veth, on each engine of --stack (a comma list:
// native, netstack), side by side (alternating, --rounds times). With
// --client go, Go's http.Client in B sends --requests requests over
// --conns keep-alive connections; with --client wrk, wrk runs in B for
// --duration with --conns connections (one thread). Each reports requests
// per second and latency percentiles:
//
//	httpxdp --bench --requests 20000 --conns 4 [--rounds 3] [--stack native,netstack] [--poll spin] [--cpu 1]
//	httpxdp --bench --client wrk --conns 16 --duration 5s
//
// With --client-process the go or echo client runs in a process of its
// own in B, as wrk does, instead of goroutines of this one: a client in
// the servers' process shares their Go scheduler, which favours the
// kernel listener (a client and a server goroutine hand each other the
// CPU through the netpoller with no wake-up) and measures neither as a
// separate client sees it.
//
// The server reads each request's body whole and answers with --size bytes
// ("hello" by default, with the body's length when there was one).
// On SIGINT or SIGTERM the serve mode shuts down as net/http's
// Server.Shutdown does: it accepts no more connections and lets the
// requests in flight finish, for up to --shutdown-timeout (5s); at that
// bound, or at a second signal, it says how many were still in flight and
// closes their connections. Then it closes the Service (which detaches
// the XDP program), whichever way the requests ended.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/tcp/netconn"
)

func main() {
	if os.Getenv(clientEnv) == "1" {
		os.Exit(runClient(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	iface, addr, poll       string
	kind                    dgramio.Kind
	cpu                     int
	demo, bench             bool
	requests, conns, rounds int
	size                    int
	stacks                  []dgramio.TCPStack
	client                  string
	clientProc              bool
	duration                time.Duration
	grace                   time.Duration
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("httpxdp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.iface, "iface", "", "interface to serve on (serve mode)")
	fs.StringVar(&o.addr, "addr", "", "address:port netstack takes on --iface; not an address the kernel holds there")
	o.kind = dgramio.KindTCPXDP
	fs.Var(&o.kind, "kind", "tcp-xdp, or tcp-dpdk in builds with the dpdk tag")
	fs.StringVar(&o.poll, "poll", "adaptive", "the poller when idle: busy (spin, a CPU at 100%), yield (sleep at once) or adaptive (busy for a while, then yield); the tools' vocabulary (spin and sleep are accepted too)")
	fs.IntVar(&o.cpu, "cpu", -1, "pin the poller to this CPU (-1: no pinning)")
	fs.BoolVar(&o.demo, "demo", false, "serve on a veth test host and GET from a kernel client in the other namespace")
	fs.BoolVar(&o.bench, "bench", false, "kernel TCP and tcp-xdp side by side on a veth test host")
	fs.IntVar(&o.requests, "requests", 20000, "requests per measurement (--bench)")
	fs.IntVar(&o.conns, "conns", 4, "client keep-alive connections, one goroutine each (--bench)")
	fs.IntVar(&o.rounds, "rounds", 3, "measurements of each path, alternating (--bench)")
	fs.IntVar(&o.size, "size", 0, "response body size in bytes (0: a short greeting)")
	stacks := fs.String("stack", "native", "the userspace TCP engine: native or netstack (--bench: a comma list)")
	fs.StringVar(&o.client, "client", "go", "the benchmark's client in B: go (http.Client), wrk, or echo (a 100-byte message echoed over a net.Conn, one in flight per connection; no HTTP)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "each wrk measurement's length (--client wrk)")
	fs.DurationVar(&o.grace, "shutdown-timeout", 5*time.Second, "serve mode: after SIGINT or SIGTERM, how long requests in flight get to finish before their connections are closed (0: none; a second signal stops waiting)")
	fs.BoolVar(&o.clientProc, "client-process", false, "run the go or echo client in a process of its own in B, as wrk runs, sharing no Go scheduler with the servers (--bench)")
	fs.Usage = func() {}
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run (the servers, and the Go client unless --client-process) to this file")
	traceFile := fs.String("trace", "", "write a runtime execution trace of the whole run to this file (go tool trace)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprintln(stdout, "usage: httpxdp [flags]\n\nflags:")
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintln(stderr, "run 'httpxdp --help' for the flags")
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "httpxdp: unexpected arguments %q (every setting is a --flag)\n", fs.Args())
		return 2
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(stderr, "httpxdp: --cpuprofile:", err)
			return 1
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err == nil {
			err = trace.Start(f)
		}
		if err != nil {
			fmt.Fprintln(stderr, "httpxdp: --trace:", err)
			return 1
		}
		defer func() { trace.Stop(); f.Close() }()
	}
	for _, name := range strings.Split(*stacks, ",") {
		var st dgramio.TCPStack
		if err := st.Set(strings.TrimSpace(name)); err != nil {
			fmt.Fprintln(stderr, "httpxdp: --stack:", err)
			return 2
		}
		o.stacks = append(o.stacks, st)
	}
	if o.client != "go" && o.client != "wrk" && o.client != "echo" {
		fmt.Fprintln(stderr, `httpxdp: --client: use "go", "wrk" or "echo"`)
		return 2
	}
	if o.clientProc && o.client == "wrk" {
		fmt.Fprintln(stderr, "httpxdp: --client-process: wrk runs in a process of its own already; use it with --client go or echo")
		return 2
	}
	mode, err := pollMode(o.poll)
	if err != nil {
		fmt.Fprintln(stderr, "httpxdp:", err)
		return 2
	}
	if !o.demo && !o.bench {
		if o.iface == "" || o.addr == "" {
			fmt.Fprintln(stderr, "httpxdp: serve mode needs --iface and --addr (or --demo, --bench)")
			return 2
		}
		if _, err := parseServeAddr(o.addr); err != nil {
			fmt.Fprintf(stderr, "httpxdp: %v\n", err)
			return 2
		}
		if err := checkServeIface(o.iface); err != nil && !o.kind.IsDPDK() {
			fmt.Fprintf(stderr, "httpxdp: %v\n", err)
			return 2
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"requests", o.requests}, {"conns", o.conns}, {"rounds", o.rounds}} {
		if n.v < 1 {
			fmt.Fprintf(stderr, "httpxdp: --%s %d: must be at least 1\n", n.name, n.v)
			return 2
		}
	}
	if o.grace < 0 {
		fmt.Fprintf(stderr, "httpxdp: --shutdown-timeout %v: must not be negative\n", o.grace)
		return 2
	}
	if o.size < 0 {
		fmt.Fprintf(stderr, "httpxdp: --size %d: must not be negative\n", o.size)
		return 2
	}
	nopts := netconn.Options{Poll: mode}
	switch {
	case o.demo:
		err = demo(o, nopts, stdout)
	case o.bench:
		err = bench(o, nopts, stdout)
	default:
		err = serve(o, nopts, stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "httpxdp:", err)
		return 1
	}
	return 0
}

// pollMode maps --poll onto the Service's poll mode: busy and yield, the
// tools' names, are netconn's spin and sleep.
func pollMode(s string) (netconn.PollMode, error) {
	switch s {
	case "busy":
		s = "spin"
	case "yield":
		s = "sleep"
	}
	var m netconn.PollMode
	if err := m.Set(s); err != nil {
		return 0, fmt.Errorf(`--poll %q: want "busy", "yield" or "adaptive"`, s)
	}
	return m, nil
}

// pollName is m in --poll's words (busy, yield, adaptive), as the flag
// was given, not netconn's (spin, sleep).
func pollName(m netconn.PollMode) string {
	switch s := m.String(); s {
	case "spin":
		return "busy"
	case "sleep":
		return "yield"
	default:
		return s
	}
}

// handler is the server: plain net/http, nothing of dgramio in it.
func handler(size int) http.Handler {
	body := []byte(strings.Repeat("x", size))
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Read the request's body whole (a POST, a chunked upload, one
		// after Expect: 100-continue), so that an upload crosses the
		// connection and its length can be checked.
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, fmt.Sprintf("reading the body: %v after %d bytes", err, n), http.StatusBadRequest)
			return
		}
		if size == 0 {
			if n > 0 {
				fmt.Fprintf(w, "hello %s, from net/http: read %d bytes\n", r.RemoteAddr, n)
				return
			}
			fmt.Fprintf(w, "hello %s, from net/http\n", r.RemoteAddr)
			return
		}
		w.Write(body)
	})
	return mux
}

// config is the Service's Config for the flags.
func config(o options, iface string, ap netip.AddrPort) dgramio.Config {
	cfg := dgramio.Config{Kind: o.kind, Iface: iface, LocalIP: ap.Addr(), Port: ap.Port()}
	cfg.TCP.Stack = o.stacks[0]
	if o.cpu >= 0 {
		cfg.CPUs = []int{o.cpu}
	}
	return cfg
}

// serve runs the server on --iface until a signal.
func serve(o options, nopts netconn.Options, stdout io.Writer) error {
	if o.iface == "" || o.addr == "" {
		return errors.New("serve mode needs --iface and --addr (or --demo, --bench)")
	}
	ap, err := parseServeAddr(o.addr)
	if err != nil {
		return err
	}
	// Signals are caught from here on, every one of them, until after the
	// deferred Close has detached the XDP program: none ends the process
	// before.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	s, err := netconn.New(config(o, o.iface, ap), nopts)
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := s.Listen(ap.Port())
	if err != nil {
		return err
	}
	var inflight atomic.Int64
	h := handler(o.size)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inflight.Add(1)
		defer inflight.Add(-1)
		h.ServeHTTP(w, r)
	})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "serving http://%s over %s (%s), poller %s\n", ap, o.kind, s.Stats().Mode, pollName(nopts.Poll))
	var first os.Signal
	select {
	case err := <-served:
		return err // not ErrServerClosed: Shutdown was not called
	case first = <-sig:
	}
	return shutdown(srv, served, sig, first, &inflight, o.grace, stdout)
}

// shutdown stops srv as a signal asked: no new connections, requests in
// flight get up to grace to finish (http.Server.Shutdown); at the bound,
// or at a second signal, it says how many were still in flight and closes
// their connections. It returns once Serve has; the caller then closes
// the Service.
func shutdown(srv *http.Server, served <-chan error, sig <-chan os.Signal, first os.Signal, inflight *atomic.Int64, grace time.Duration, stdout io.Writer) error {
	fmt.Fprintf(stdout, "%v: shutting down: no new connections; requests in flight: %d, given up to %v (--shutdown-timeout) to finish\n", first, inflight.Load(), grace)
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(stdout, "%v again: not waiting any longer\n", s)
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := srv.Shutdown(ctx); err != nil {
		fmt.Fprintf(stdout, "requests still in flight at the bound: %d; closing their connections\n", inflight.Load())
		srv.Close()
	} else {
		fmt.Fprintln(stdout, "every request finished")
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	fmt.Fprintln(stdout, "closing the service (and detaching its XDP program)")
	return nil
}

// parseServeAddr parses --addr: address:port, an IPv6 address in
// brackets ([2001:db8::3]:8080, RFC 3986 §3.2.2), an IPv4-mapped one
// taken as IPv4. What it refuses it names with the fix.
func parseServeAddr(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		hint := "want address:port, like 192.0.2.3:8080 or [2001:db8::3]:8080"
		host, port, serr := net.SplitHostPort(s)
		switch {
		case serr != nil && strings.Count(s, ":") > 1 && !strings.HasPrefix(s, "["):
			hint = "an IPv6 address goes in brackets before the port, like [2001:db8::3]:8080"
		case serr != nil:
		case port == "":
			hint = "no port after the colon: " + hint
		case func() bool { _, perr := strconv.ParseUint(port, 10, 16); return perr != nil }():
			hint = fmt.Sprintf("port %q: want 1..65535", port)
		case func() bool { _, aerr := netip.ParseAddr(host); return aerr != nil }():
			hint = fmt.Sprintf("%q is not an IP address (a host name is not looked up): give the address the server takes", host)
		}
		return netip.AddrPort{}, fmt.Errorf("--addr %q: %s", s, hint)
	}
	if ap.Port() == 0 {
		return netip.AddrPort{}, fmt.Errorf("--addr %q: port 0: want 1..65535", s)
	}
	if ap.Addr().Zone() != "" {
		return netip.AddrPort{}, fmt.Errorf("--addr %q: an address with a zone (link-local) is not supported: use a global one", s)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}

// checkServeIface checks --iface before anything opens: it must exist
// and carry Ethernet frames (tcp-xdp builds them; loopback has no MAC).
func checkServeIface(name string) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return fmt.Errorf("--iface %s: %w (ip link lists the interfaces)", name, err)
	}
	if len(ifi.HardwareAddr) != 6 {
		why := "it has no Ethernet MAC address"
		if ifi.Flags&net.FlagLoopback != 0 {
			why = "it is the loopback interface, which has no Ethernet MAC address"
		}
		return fmt.Errorf("--iface %s: tcp-xdp sends Ethernet frames and %s; use an Ethernet port or a veth", name, why)
	}
	return nil
}

// xdpAddr is h's address with the last byte changed: one the kernel does
// not hold.
func xdpAddr(h *testhost.Host, last byte) netip.Addr {
	a := h.Addr.As4()
	a[3] = last
	return netip.AddrFrom4(a)
}

// kernelClient is an http.Client whose connections are kernel TCP
// sockets made inside h's namespace, keeping up to conns alive.
func kernelClient(h *testhost.Host, conns int) *http.Client { return httpClient(h.DialContext, conns) }

// dialFunc dials a kernel TCP connection (in the client's namespace).
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// httpClient is an http.Client whose connections dial makes, keeping up
// to conns alive.
func httpClient(dial dialFunc, conns int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: dial, MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
		DisableCompression: true,
	}}
}

// server is one server of the demo or the benchmark: net/http, or the
// echo of --client echo.
type server struct {
	name  string
	addr  netip.AddrPort
	url   string
	stop  func() // ends Serve; done then reports its end
	done  chan error
	svc   *netconn.Service // nil on kernel TCP
	close func()
}

// startXDP serves on tcp-xdp in A at .3:port.
func startXDP(o options, nopts netconn.Options, p *testhost.Pair, port uint16) (*server, error) {
	ap := netip.AddrPortFrom(xdpAddr(p.A, 3), port)
	var s *netconn.Service
	if err := p.A.Do(func() error {
		var err error
		s, err = netconn.New(config(o, p.A.Iface, ap), nopts)
		return err
	}); err != nil {
		return nil, err
	}
	ln, err := s.Listen(port)
	if err != nil {
		s.Close()
		return nil, err
	}
	sv := startServer(fmt.Sprintf("%s %s", o.kind, o.stacks[0]), ap, ln, o)
	sv.svc = s
	sv.close = func() { sv.shutdown(); s.Close() }
	return sv, nil
}

// startKernel serves on A's kernel TCP at A's own address.
func startKernel(o options, p *testhost.Pair, port uint16) (*server, error) {
	ap := netip.AddrPortFrom(p.A.Addr, port)
	ln, err := p.A.ListenTCP(port)
	if err != nil {
		return nil, err
	}
	sv := startServer("kernel tcp", ap, ln, o)
	sv.close = sv.shutdown
	return sv, nil
}

// startServer serves net/http on ln, or the echo with --client echo.
func startServer(name string, ap netip.AddrPort, ln net.Listener, o options) *server {
	sv := &server{name: name, addr: ap, url: "http://" + ap.String() + "/", done: make(chan error, 1)}
	if o.client == "echo" {
		e := &echoServer{ln: ln, conns: map[net.Conn]struct{}{}}
		sv.stop = e.close
		go func() { sv.done <- e.serve() }()
		return sv
	}
	srv := &http.Server{Handler: handler(o.size)}
	sv.stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}
	go func() { sv.done <- srv.Serve(ln) }()
	return sv
}

func (sv *server) shutdown() {
	sv.stop()
	<-sv.done
}

// echoServer writes back what each connection reads, until close.
type echoServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// serve accepts until the listener closes; it returns once every
// connection's echo has ended.
func (e *echoServer) serve() error {
	defer e.wg.Wait()
	for {
		c, err := e.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		e.mu.Lock()
		e.conns[c] = struct{}{}
		e.mu.Unlock()
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			buf := make([]byte, 4096)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			c.Close()
			e.mu.Lock()
			delete(e.conns, c)
			e.mu.Unlock()
		}()
	}
}

// close stops accepting and closes the connections being echoed.
func (e *echoServer) close() {
	e.ln.Close()
	e.mu.Lock()
	for c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
}

// demo serves over tcp-xdp on a test host and prints one answer to a
// kernel client.
func demo(o options, nopts netconn.Options, stdout io.Writer) error {
	p, err := testhost.New(testhost.Options{})
	if err != nil {
		return err
	}
	defer p.Close()
	sv, err := startXDP(o, nopts, p, 8080)
	if err != nil {
		return err
	}
	defer sv.close()
	client := kernelClient(p.B, 1)
	defer client.CloseIdleConnections()
	resp, err := client.Get(sv.url + "demo")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "server: net/http over %s (%s) at %s in namespace A (%s)\n", o.kind, sv.svc.Stats().Mode, sv.url, p.A.Iface)
	fmt.Fprintf(stdout, "client: Go's http.Client on kernel TCP in namespace B (%s, %s)\n", p.B.Iface, p.B.Addr)
	fmt.Fprintf(stdout, "GET %sdemo: %s\n%s", sv.url, resp.Status, body)
	return nil
}

// result is one measurement.
type result struct {
	name              string
	requests          int
	wall              time.Duration
	p50, p90, p99, mx time.Duration
}

// bench measures kernel TCP and tcp-xdp on one test host, alternating.
func bench(o options, nopts netconn.Options, stdout io.Writer) error {
	if o.requests < 1 || o.conns < 1 || o.rounds < 1 {
		return errors.New("--requests, --conns and --rounds must be positive")
	}
	p, err := testhost.New(testhost.Options{})
	if err != nil {
		return err
	}
	defer p.Close()
	switch o.client {
	case "wrk":
		fmt.Fprintf(stdout, "# httpxdp --bench: wrk, 1 thread, %d connections, %v per measurement", o.conns, o.duration)
	case "echo":
		fmt.Fprintf(stdout, "# httpxdp --bench: a %d-byte message echoed over net.Conn, one in flight on each of %d kernel TCP connections, %d round trips per measurement (requests: round trips)", echoSize, o.conns, o.requests)
	default:
		fmt.Fprintf(stdout, "# httpxdp --bench: Go's http.Client, %d requests over %d keep-alive connections per measurement", o.requests, o.conns)
	}
	if o.clientProc {
		fmt.Fprint(stdout, ", the client in a process of its own")
	}
	fmt.Fprintf(stdout, ", %d-byte bodies, GOMAXPROCS %d, %d CPUs, poller %s",
		o.size, runtime.GOMAXPROCS(0), runtime.NumCPU(), pollName(nopts.Poll))
	if o.cpu >= 0 {
		fmt.Fprintf(stdout, " pinned to CPU %d", o.cpu)
	}
	fmt.Fprintf(stdout, "\n# server in namespace A (%s), the client on kernel TCP in B (%s)\n\n", p.A.Iface, p.B.Iface)
	fmt.Fprintln(stdout, "| server path | round | requests | req/s | p50 µs | p90 µs | p99 µs | max µs |")
	fmt.Fprintln(stdout, "|---|---|---|---|---|---|---|---|")
	for round := 1; round <= o.rounds; round++ {
		paths := append([]dgramio.TCPStack{""}, o.stacks...) // "": the kernel's
		for i, path := range paths {
			var sv *server
			if path == "" {
				sv, err = startKernel(o, p, 8080)
			} else {
				po := o
				po.stacks = []dgramio.TCPStack{path}
				sv, err = startXDP(po, nopts, p, 8080+uint16(i))
			}
			if err != nil {
				return fmt.Errorf("%s server: %w", path, err)
			}
			var r result
			switch {
			case o.client == "wrk":
				r, err = measureWrk(sv, p.B, o)
			case o.clientProc:
				r, err = measureProcess(sv, p.B, o)
			case o.client == "echo":
				r, err = measureEcho(sv.name, sv.addr.String(), p.B.DialContext, o)
			default:
				r, err = measure(sv.name, sv.url, p.B.DialContext, o)
			}
			var counters string
			if sv.svc != nil {
				st := sv.svc.Stats()
				counters = layerSummary(st)
			}
			sv.close()
			if err != nil {
				return fmt.Errorf("%s: %w", sv.name, err)
			}
			fmt.Fprintf(stdout, "| %s | %d | %d | %.0f | %.1f | %.1f | %.1f | %.1f |\n", r.name, round, r.requests,
				float64(r.requests)/r.wall.Seconds(), us(r.p50), us(r.p90), us(r.p99), us(r.mx))
			if counters != "" {
				fmt.Fprintf(stdout, "<!-- %s -->\n", counters)
			}
		}
	}
	return nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// layerSummary picks the counters that tell a slow path from a lossy one.
func layerSummary(st dgramio.Stats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:", st.Mode)
	for _, c := range st.Layers {
		switch c.Layer + "/" + c.Name {
		case "netstack/tcp_retransmits", "netstack/tcp_timeouts", "netstack/tcp_resets_sent",
			"native/tcp_retransmits", "native/tcp_timeouts",
			"netconn/accepts", "netconn/poll_rounds", "netconn/poll_frames", "netconn/sleeps",
			"netconn/inline_sends", "netconn/poller_defers", "netconn/deferred_rounds", "netconn/spins", "netconn/spin_rounds", "netconn/spins_skipped", "netconn/spin_trials", "netconn/spin_trials_lost",
			"link/tx_ring_full", "link/kicks", "link/writer_kicks", "link/rx_frames", "link/tx_frames":
			fmt.Fprintf(&b, " %s/%s=%d", c.Layer, c.Name, c.Value)
		case "native/tcp_spurious_rtos", "native/tcp_dsacks_received":
			// A timeout the timestamps proved spurious was a pause
			// of this host, not a loss.
			if c.Value > 0 {
				fmt.Fprintf(&b, " %s/%s=%d", c.Layer, c.Name, c.Value)
			}
		default:
			if c.Loss && c.Value > 0 {
				fmt.Fprintf(&b, " %s/%s=%d", c.Layer, c.Name, c.Value)
			}
		}
	}
	fmt.Fprintf(&b, " syscalls=%d", st.Syscalls)
	return b.String()
}

// measure sends o.requests GETs to url from o.conns goroutines sharing one
// keep-alive client whose connections dial makes, after a warm-up of one
// request per connection and 10% more, and returns the wall time and
// latency percentiles. A request that fails ends the measurement with its
// error.
func measure(name, url string, dial dialFunc, o options) (result, error) {
	client := httpClient(dial, o.conns)
	defer client.CloseIdleConnections()
	get := func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %s", resp.Status)
		}
		return err
	}
	warm := o.conns + o.requests/10
	if err := spread(o.conns, warm, func(int) error { return get() }); err != nil {
		return result{}, fmt.Errorf("warm-up: %w", err)
	}
	lat := make([]time.Duration, o.requests)
	start := time.Now()
	err := spread(o.conns, o.requests, func(i int) error {
		t0 := time.Now()
		if err := get(); err != nil {
			return err
		}
		lat[i] = time.Since(t0)
		return nil
	})
	wall := time.Since(start)
	if err != nil {
		return result{}, err
	}
	return quantiles(name, lat, wall), nil
}

// echoSize is the message of --client echo: the 100 bytes of netbench's
// messages.
const echoSize = 100

// quantiles is the result of requests whose latencies are lat (sorted
// here), done in wall.
func quantiles(name string, lat []time.Duration, wall time.Duration) result {
	slices.Sort(lat)
	q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))] }
	return result{name: name, requests: len(lat), wall: wall, p50: q(0.5), p90: q(0.9), p99: q(0.99), mx: lat[len(lat)-1]}
}

// measureEcho opens o.conns kernel TCP connections (dial) to the echo at
// addr and sends echoSize bytes on each, one message in flight per
// connection, waiting for each to come back whole and unchanged before
// the next: o.requests round trips after a warm-up of 10% more, their
// wall time and latency percentiles.
func measureEcho(name, addr string, dial dialFunc, o options) (result, error) {
	conns := make([]net.Conn, o.conns)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range conns {
		c, err := dial(context.Background(), "tcp", addr)
		if err != nil {
			return result{}, err
		}
		conns[i] = c
	}
	roundTrips := func(n int, lat []time.Duration) error {
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make([]error, len(conns))
		for w, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, in := make([]byte, echoSize), make([]byte, echoSize)
				c.SetDeadline(time.Now().Add(time.Minute))
				for {
					i := int(next.Add(1)) - 1
					if i >= n {
						return
					}
					for j := range out {
						out[j] = byte(i + j)
					}
					t0 := time.Now()
					if _, err := c.Write(out); err != nil {
						errs[w] = err
						return
					}
					if _, err := io.ReadFull(c, in); err != nil {
						errs[w] = err
						return
					}
					if lat != nil {
						lat[i] = time.Since(t0)
					}
					if !bytes.Equal(in, out) {
						errs[w] = fmt.Errorf("round trip %d came back changed", i)
						return
					}
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	if err := roundTrips(o.conns+o.requests/10, nil); err != nil {
		return result{}, fmt.Errorf("warm-up: %w", err)
	}
	lat := make([]time.Duration, o.requests)
	start := time.Now()
	if err := roundTrips(o.requests, lat); err != nil {
		return result{}, err
	}
	wall := time.Since(start)
	return quantiles(name, lat, wall), nil
}

// spread runs fn(i) for i in [0, n) on workers goroutines and returns the
// first error.
func spread(workers, n int, fn func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// measureWrk runs wrk in h for o.duration against sv, with o.conns
// connections on one thread, and reads its requests per second and
// latency percentiles (--latency).
func measureWrk(sv *server, h *testhost.Host, o options) (result, error) {
	// A warm-up of a second, then the measurement.
	for i, d := range []time.Duration{time.Second, o.duration} {
		cmd := h.Command("wrk", "-t1", fmt.Sprintf("-c%d", o.conns), fmt.Sprintf("-d%ds", max(1, int(d.Seconds()))), "--latency", sv.url)
		out, err := h.Output(cmd)
		if err != nil {
			return result{}, fmt.Errorf("wrk: %w", err)
		}
		if i == 0 {
			continue
		}
		return parseWrk(sv.name, string(out))
	}
	return result{}, nil
}

// parseWrk reads wrk's report: "Requests/sec:" and the 50%, 90% and 99%
// lines of its latency distribution; errors (non-2xx, socket errors) fail
// the measurement.
func parseWrk(name, out string) (result, error) {
	r := result{name: name}
	var rps float64
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "Requests/sec:":
			fmt.Sscan(f[1], &rps)
		case len(f) == 2 && f[0] == "50%":
			r.p50 = wrkDuration(f[1])
		case len(f) == 2 && f[0] == "90%":
			r.p90 = wrkDuration(f[1])
		case len(f) == 2 && f[0] == "99%":
			r.p99 = wrkDuration(f[1])
		case len(f) >= 3 && f[0] == "Latency" && len(f) >= 4:
			r.mx = wrkDuration(f[3])
		case strings.HasPrefix(strings.TrimSpace(line), "Socket errors") || strings.HasPrefix(strings.TrimSpace(line), "Non-2xx"):
			return r, fmt.Errorf("wrk: %s", strings.TrimSpace(line))
		}
	}
	if rps == 0 {
		return r, fmt.Errorf("wrk: no Requests/sec in %q", out)
	}
	// requests and wall such that requests/wall is wrk's rate.
	r.requests, r.wall = int(rps), time.Second
	return r, nil
}

// wrkDuration parses wrk's "51.00us", "1.20ms", "2.00s".
func wrkDuration(s string) time.Duration {
	s = strings.Replace(s, "us", "µs", 1)
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0
	}
	return d
}

// clientEnv, set to 1 in its environment, makes the command the client
// process of --client-process (runClient) instead of httpxdp.
const clientEnv = "HTTPXDP_BENCH_CLIENT"

// measureProcess runs the --client go or echo measurement in a process of
// its own (this executable as runClient) inside h, so that the client
// shares no Go scheduler, thread or CPU accounting with the servers, as
// wrk and any real client do; it reads the result line the process
// prints.
func measureProcess(sv *server, h *testhost.Host, o options) (result, error) {
	exe, err := os.Executable()
	if err != nil {
		return result{}, err
	}
	target := sv.url
	if o.client == "echo" {
		target = sv.addr.String()
	}
	cmd := h.Command(exe, "--client", o.client, "--target", target,
		"--conns", fmt.Sprint(o.conns), "--requests", fmt.Sprint(o.requests))
	cmd.Env = append(os.Environ(), clientEnv+"=1")
	out, err := h.Output(cmd)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return result{}, fmt.Errorf("client process: %w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return result{}, fmt.Errorf("client process: %w", err)
	}
	return parseClientLine(sv.name, string(out))
}

// runClient is the client process of --client-process: one measurement
// (measure or measureEcho) from the namespace it runs in, its result as
// one line on stdout (clientLine). It returns the exit status.
func runClient(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("httpxdp client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var target string
	fs.StringVar(&o.client, "client", "go", "go or echo")
	fs.StringVar(&target, "target", "", "the server: a URL (go) or address:port (echo)")
	fs.IntVar(&o.conns, "conns", 1, "connections")
	fs.IntVar(&o.requests, "requests", 1000, "requests or round trips")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if target == "" || o.conns < 1 || o.requests < 1 || (o.client != "go" && o.client != "echo") {
		fmt.Fprintln(stderr, "httpxdp client: needs --client go|echo, --target, positive --conns and --requests")
		return 2
	}
	dial := (&net.Dialer{}).DialContext
	var r result
	var err error
	if o.client == "echo" {
		r, err = measureEcho("", target, dial, o)
	} else {
		r, err = measure("", target, dial, o)
	}
	if err != nil {
		fmt.Fprintln(stderr, "httpxdp client:", err)
		return 1
	}
	fmt.Fprintln(stdout, clientLine(r))
	return 0
}

// clientLine is the result line of a client process.
func clientLine(r result) string {
	return fmt.Sprintf("httpxdp-client requests=%d wall_ns=%d p50_ns=%d p90_ns=%d p99_ns=%d max_ns=%d",
		r.requests, r.wall.Nanoseconds(), r.p50.Nanoseconds(), r.p90.Nanoseconds(), r.p99.Nanoseconds(), r.mx.Nanoseconds())
}

// parseClientLine reads a client process's result line (clientLine).
func parseClientLine(name, out string) (result, error) {
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "httpxdp-client ") {
			continue
		}
		r := result{name: name}
		var wall, p50, p90, p99, mx int64
		if _, err := fmt.Sscanf(line, "httpxdp-client requests=%d wall_ns=%d p50_ns=%d p90_ns=%d p99_ns=%d max_ns=%d",
			&r.requests, &wall, &p50, &p90, &p99, &mx); err != nil {
			return result{}, fmt.Errorf("client process: %q: %w", line, err)
		}
		if r.requests < 1 || wall <= 0 {
			return result{}, fmt.Errorf("client process: %q: no requests", line)
		}
		r.wall, r.p50, r.p90, r.p99, r.mx = time.Duration(wall), time.Duration(p50), time.Duration(p90), time.Duration(p99), time.Duration(mx)
		return r, nil
	}
	return result{}, fmt.Errorf("client process: no result line in %q", out)
}
