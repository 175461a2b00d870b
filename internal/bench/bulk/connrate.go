package bulk

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/tcp"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/stack/native"
	"github.com/dgramio/dgramio/tcp/netconn"
)

// The connection-rate mode ("dgramio-bulk connrate"): a server of each
// row in one namespace of a veth pair answers, on each connection, one
// request of connReqLen bytes with as many bytes and closes; kernel TCP
// clients in the other namespace, --parallel at once, open a connection,
// send the request, read the answer and the end, and close, again and
// again for --duration. It reports connections per second, the failures
// (a dial, a short answer, a connection reset or timed out: each one
// counted, none left waiting), and each side's CPU time per connection.

// connReqLen is the request's and the answer's size.
const connReqLen = 100

// connClientTimeout bounds each connection of a client (dial to end).
const connClientTimeout = 5 * time.Second

// ConnRateSpec is what a side of the connection-rate mode runs: the child
// process started with "<exe> connrate-side <ConnRateSpec as JSON>".
type ConnRateSpec struct {
	Row    string     `json:"row"`
	Server bool       `json:"server"`
	Iface  string     `json:"iface,omitempty"`
	Local  netip.Addr `json:"local"`
	Peer   netip.Addr `json:"peer"`
	Port   uint16     `json:"port"`
	// Parallel is the client's connections at once; Duration how long
	// it opens new ones.
	Parallel int           `json:"parallel,omitempty"`
	Duration time.Duration `json:"duration,omitempty"`
	// SYNRate is the tcp-xdp program's Config.XDP.SYNRate (0: its default).
	SYNRate int `json:"syn_rate,omitempty"`
	// Hold, when positive, is the hold mode: the client opens Hold
	// connections, carries one request and answer on each and keeps them
	// open; the server answers without closing, and when told to stop
	// reports the heap it holds per connection.
	Hold int `json:"hold,omitempty"`
	// Procs is the number of processes of this side that share the work
	// (the hold mode's, when one process may not open that many files):
	// each client process holds its own Hold; kernel servers listen on
	// the same port with SO_REUSEPORT.
	Procs int `json:"procs,omitempty"`
	// Native makes a client the native engine of tcp-xdp (on Iface, at
	// Local) instead of kernel TCP.
	Native bool `json:"native,omitempty"`
}

// ConnRateResult is a side's report: one line "result {...}".
type ConnRateResult struct {
	Runs string `json:"runs"`
	// Done is the connections that completed (request, answer, end);
	// Failed those that did not, by why.
	Done   uint64            `json:"done"`
	Failed map[string]uint64 `json:"failed,omitempty"`
	WallNs int64             `json:"wall_ns"`
	CPUNs  int64             `json:"cpu_ns"`
	// Counters are the server's counters that moved (the engine's and
	// the FrameIO's, or the kernel's TcpExt), for the report.
	Counters map[string]uint64 `json:"counters,omitempty"`
	// HeapPerConn is, in the hold mode, the server's heap (after a GC)
	// above what it was before its engine was made (its table of slots
	// included), per connection held.
	HeapPerConn float64 `json:"heap_per_conn,omitempty"`
	Error       string  `json:"error,omitempty"`
}

// ConnRateSideMain is the hidden "connrate-side" subcommand.
func ConnRateSideMain(args []string, stdout, stderr io.Writer) int {
	var sp ConnRateSpec
	if len(args) != 1 || json.Unmarshal([]byte(args[0]), &sp) != nil {
		fmt.Fprintln(stderr, "usage: dgramio-bulk connrate-side SPEC (started by dgramio-bulk connrate)")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var mu sync.Mutex
	say := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stdout, format, a...)
	}
	var res ConnRateResult
	var err error
	row, perr := ParseRow(sp.Row)
	switch {
	case perr != nil:
		err = perr
	case !sp.Server && sp.Hold > 0:
		err = connHoldClient(ctx, sp, func(r ConnRateResult) {
			b, _ := json.Marshal(r)
			say("result %s\n", b)
		})
		if err == nil {
			return 0
		}
	case !sp.Server && sp.Native:
		res, err = connRateNativeClient(ctx, sp)
	case !sp.Server:
		res, err = connRateClient(ctx, sp)
	case row.IsKernel():
		res, err = connRateKernelServer(ctx, sp, func() { say("ready\n") })
	case row.Stack == dgramio.TCPStackNative && row.Kind == dgramio.KindTCPXDP:
		res, err = connRateNativeServer(ctx, sp, row, func() { say("ready\n") })
	default:
		err = fmt.Errorf("row %s: the connection-rate mode runs tcp and tcp-xdp (native)", row)
	}
	if err != nil {
		res.Error = err.Error()
		fmt.Fprintln(stderr, "dgramio-bulk connrate-side:", err)
	}
	b, _ := json.Marshal(res)
	say("result %s\n", b)
	return 0
}

// cpuNs is the process's user and system time.
func cpuNs() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// connHoldClient opens sp.Hold connections, sends a request on each and
// reads its answer, reports, and keeps them open until ctx ends.
func connHoldClient(ctx context.Context, sp ConnRateSpec, report func(ConnRateResult)) error {
	ports := widenPorts()
	cpu0, t0 := cpuNs(), time.Now()
	dst := netip.AddrPortFrom(sp.Peer, sp.Port).String()
	d := net.Dialer{Timeout: connClientTimeout, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(sp.Local, 0)),
		Control: bindNoPort}
	conns := make([]net.Conn, sp.Hold)
	var mu sync.Mutex
	failed := map[string]uint64{}
	var done atomic.Uint64
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(sp.Parallel, 1) {
		wg.Go(func() {
			req, buf := make([]byte, connReqLen), make([]byte, connReqLen)
			for i := next.Add(1) - 1; i < int64(sp.Hold) && ctx.Err() == nil; i = next.Add(1) - 1 {
				c, err := d.DialContext(ctx, "tcp4", dst)
				why := ""
				if err != nil {
					why = "dial"
				} else if _, err := c.Write(req); err != nil {
					why = "write"
				} else if _, err := io.ReadFull(c, buf); err != nil {
					why = whyRead(err)
				}
				if why != "" {
					mu.Lock()
					failed[why+": "+oneLine(fmt.Sprint(err))]++
					mu.Unlock()
					if c != nil {
						c.Close()
					}
					continue
				}
				conns[i] = c
				done.Add(1)
			}
		})
	}
	wg.Wait()
	report(ConnRateResult{Runs: fmt.Sprintf("kernel TCP client holding %d connections, local ports %s", sp.Hold, ports), Done: done.Load(), Failed: failed,
		WallNs: int64(time.Since(t0)), CPUNs: cpuNs() - cpu0})
	<-ctx.Done()
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	return nil
}

// raiseNOFILE raises the process's open-file limit, soft and hard, to at
// least n (its children inherit it): up to the hard limit, and beyond it
// up to fs.nr_open (the kernel's ceiling) where the process may raise
// its hard limit (CAP_SYS_RESOURCE). It says so when n is out of reach.
func raiseNOFILE(n int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("open-file limit: %w", err)
	}
	want := uint64(n)
	if lim.Cur >= want {
		return nil
	}
	ceiling := lim.Max
	if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil && os.Geteuid() == 0 {
		if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			ceiling = max(ceiling, v)
		}
	}
	if want > ceiling {
		return fmt.Errorf("open-file limit: %d files wanted, at most %d (fs.nr_open, or the hard limit without root)", n, ceiling)
	}
	set := syscall.Rlimit{Cur: want, Max: max(lim.Max, want)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &set); err != nil {
		return fmt.Errorf("open-file limit %d: %w", n, err)
	}
	return nil
}

// reusePort sets SO_REUSEPORT on a listener's socket, so that several
// processes' listeners share the port.
func reusePort(network, address string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	return serr
}

// holdProcs is how many client and (kernel) server processes share hold
// connections when each may open perProc files: one each when perProc
// is enough, else as many as it takes, the servers with a quarter to
// spare for SO_REUSEPORT's uneven spread.
func holdProcs(hold, perProc int) (clients, servers int) {
	per := max(perProc-256, 1)
	if hold <= per {
		return 1, 1
	}
	return (hold + per - 1) / per, (hold + hold/4 + per - 1) / per
}

// holdPorts is the local port range of the hold mode's clients: the
// kernel's search for a free port to connect from slows as the range
// fills (25,000 of the default 28,232 took 30 s to open, 5,000 0.8 s).
const holdPorts = "1024 65535"

// widenPorts sets the network namespace's ephemeral port range
// (net.ipv4.ip_local_port_range, one per namespace: the test host's) to
// holdPorts and returns the range in force.
func widenPorts() string {
	const path = "/proc/sys/net/ipv4/ip_local_port_range"
	_ = os.WriteFile(path, []byte(holdPorts+"\n"), 0o644)
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b)), "–")
}

// bindNoPort sets IP_BIND_ADDRESS_NO_PORT on a dialer's socket: with a
// local address to bind, the kernel leaves the port to connect, which
// picks one free for the destination, instead of searching for a port
// free for every destination at bind (slow with tens of thousands bound).
func bindNoPort(network, address string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
	}); err != nil {
		return err
	}
	return serr
}

// connRateClient runs the kernel clients for sp.Duration.
func connRateClient(ctx context.Context, sp ConnRateSpec) (ConnRateResult, error) {
	var done atomic.Uint64
	var mu sync.Mutex
	failed := map[string]uint64{}
	fail := func(why string) {
		mu.Lock()
		failed[why]++
		mu.Unlock()
	}
	cpu0, t0 := cpuNs(), time.Now()
	end := t0.Add(sp.Duration)
	dst := netip.AddrPortFrom(sp.Peer, sp.Port).String()
	d := net.Dialer{Timeout: connClientTimeout, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(sp.Local, 0))}
	var wg sync.WaitGroup
	for range max(sp.Parallel, 1) {
		wg.Go(func() {
			req, buf := make([]byte, connReqLen), make([]byte, connReqLen+1)
			for i := range req {
				req[i] = byte(i)
			}
			for time.Now().Before(end) && ctx.Err() == nil {
				c, err := d.DialContext(ctx, "tcp4", dst)
				if err != nil {
					fail("dial")
					continue
				}
				_ = c.SetDeadline(time.Now().Add(connClientTimeout))
				switch _, err := c.Write(req); {
				case err != nil:
					fail("write")
				default:
					n, err := io.ReadFull(c, buf[:connReqLen])
					switch {
					case err != nil || n != connReqLen:
						fail(whyRead(err))
					default:
						if k, err := c.Read(buf); k != 0 || err != io.EOF {
							fail("no end after the answer")
						} else {
							done.Add(1)
						}
					}
				}
				c.Close()
			}
		})
	}
	wg.Wait()
	return ConnRateResult{Runs: fmt.Sprintf("kernel TCP clients, %d at once", sp.Parallel), Done: done.Load(), Failed: failed,
		WallNs: int64(time.Since(t0)), CPUNs: cpuNs() - cpu0}, nil
}

// whyRead names a failed read of the answer.
func whyRead(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "short answer"
	case errors.As(err, &ne) && ne.Timeout():
		return "answer timed out"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	}
	return "read"
}

// connRateKernelServer is the kernel listener: a goroutine per connection.
func connRateKernelServer(ctx context.Context, sp ConnRateSpec, ready func()) (ConnRateResult, error) {
	var lc net.ListenConfig
	if sp.Procs > 1 {
		lc.Control = reusePort
	}
	l, err := lc.Listen(ctx, "tcp4", netip.AddrPortFrom(sp.Local, sp.Port).String())
	if err != nil {
		return ConnRateResult{}, err
	}
	before, _ := kernelCounters()
	var served atomic.Uint64
	cpu0, t0 := cpuNs(), time.Now()
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	ready()
	for {
		c, err := l.Accept()
		if err != nil {
			break
		}
		go func() {
			defer c.Close()
			buf := make([]byte, connReqLen)
			_ = c.SetReadDeadline(time.Now().Add(connClientTimeout))
			if _, err := io.ReadFull(c, buf); err == nil {
				if _, err := c.Write(buf); err == nil {
					served.Add(1)
					if sp.Hold > 0 {
						<-ctx.Done() // held until the end
					}
				}
			}
		}()
	}
	after, _ := kernelCounters()
	return ConnRateResult{Runs: "kernel TCP listener, a goroutine per connection", Done: served.Load(),
		WallNs: int64(time.Since(t0)), CPUNs: cpuNs() - cpu0, Counters: countersMoved(before, after)}, nil
}

// countersMoved is the counters of after that differ from before, by how much.
func countersMoved(before, after map[string]uint64) map[string]uint64 {
	m := map[string]uint64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 && v >= before[k] {
			m[k] = d
		}
	}
	return m
}

// connRateNativeServer is the native engine of tcp-xdp, driven by one
// poll loop: accept, read the request, write the answer, close.
func connRateNativeServer(ctx context.Context, sp ConnRateSpec, row Row, ready func()) (ConnRateResult, error) {
	cfg := dgramio.Config{Kind: row.Kind, Iface: sp.Iface, LocalIP: sp.Local, Port: sp.Port, Role: dgramio.RoleServer}
	cfg.TCP.Stack = dgramio.TCPStackNative
	cfg.XDP.SYNRate = sp.SYNRate
	op, err := netconn.OpenXDP(cfg)
	if err != nil {
		return ConnRateResult{}, err
	}
	release := op.Close
	if release == nil {
		release = op.FIO.Close
	}
	defer release()
	var m0 runtime.MemStats // before the engine: its table counts
	runtime.GC()
	runtime.ReadMemStats(&m0)
	o := nativeOptions(cfg.WithDefaults(), tcp.Options{Mode: op.Mode}, max(native.DefaultMaxConns, sp.Hold))
	o.SYNBacklog = native.DefaultSYNBacklog
	e, err := native.New(op.FIO, o)
	if err != nil {
		return ConnRateResult{}, fmt.Errorf("native engine: %w", err)
	}
	defer e.Close()
	l, err := e.Listen(sp.Port, 0)
	if err != nil {
		return ConnRateResult{}, err
	}
	counters := func() map[string]uint64 {
		m := layerMap(e.AppendCounters(nil))
		fs := op.FIO.Stats()
		for k, v := range layerMap(fs.Layers) {
			m[k] = v
		}
		return m
	}
	before := counters()
	cpu0, t0 := cpuNs(), time.Now()
	ready()
	var open, held []*native.Conn
	buf := make([]byte, connReqLen+1)
	served := uint64(0)
	for ctx.Err() == nil {
		moved := e.Poll(256) > 0
		for c, ok := l.Accept(); ok; c, ok = l.Accept() {
			open = append(open, c)
		}
		keep := open[:0]
		for _, c := range open {
			n, err := c.Read(buf)
			switch {
			case n == connReqLen:
				c.Write(buf[:n])
				if sp.Hold > 0 {
					held = append(held, c)
				} else {
					c.Close()
				}
				served++
				moved = true
			case n > 0 || err != nil:
				c.Abort() // a request cut or too long, or the connection ended
				moved = true
			default:
				keep = append(keep, c)
			}
		}
		clear(open[len(keep):])
		open = keep
		_ = e.Flush()
		if !moved {
			_ = e.Wait(ctx)
		}
	}
	res := ConnRateResult{Runs: "the native engine of tcp-xdp (" + op.Mode + "), one poll loop", Done: served,
		WallNs: int64(time.Since(t0)), CPUNs: cpuNs() - cpu0, Counters: countersMoved(before, counters())}
	if sp.Hold > 0 {
		est := 0
		for _, c := range held {
			if c.State() == native.Established {
				est++
			}
		}
		var m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m1)
		res.Done = uint64(est)
		res.HeapPerConn = float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(max(est, 1))
		used, pooled, _, _ := e.BufferStats()
		res.Counters["buffers.used"], res.Counters["buffers.pooled"] = uint64(used), uint64(pooled)
		runtime.KeepAlive(held)
	}
	return res, nil
}

// ConnRateMain is "dgramio-bulk connrate": it runs every row --repeat
// times and prints a table of the medians.
func ConnRateMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dgramio-bulk connrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kinds := fs.String("kinds", "tcp,tcp-xdp", "server rows: tcp (the kernel listener), tcp-xdp (the native engine)")
	duration := fs.Duration("duration", 3*time.Second, "how long the clients open connections, per run")
	parallel := fs.Int("parallel", 16, "client connections at once")
	repeat := fs.Int("repeat", 1, "runs of every row, interleaved; the table shows medians")
	port := fs.Int("port", 7000, "the server's first port; each run uses the next")
	synRate := fs.Int("syn-rate", 0, "the tcp-xdp program's SYN limit per second and CPU (Config.XDP.SYNRate; 0: its default, -1: off)")
	hold := fs.Int("hold", 0, "instead of the rate: the client opens this many connections and holds them; the tcp-xdp server reports its heap per connection")
	clients := fs.String("clients", "kernel", "the clients of every row: kernel (kernel TCP), native (the native engine of tcp-xdp), or both")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var rows []Row
	for _, n := range ParseList(*kinds) {
		r, err := ParseRow(n)
		if err != nil || !(r.IsKernel() || r.Kind == dgramio.KindTCPXDP && r.Stack == dgramio.TCPStackNative) {
			fmt.Fprintf(stderr, "dgramio-bulk connrate: --kinds %q: tcp and tcp-xdp only\n", n)
			return 2
		}
		rows = append(rows, r)
	}
	var natives []bool
	for _, n := range ParseList(*clients) {
		switch n {
		case "kernel", "native":
			natives = append(natives, n == "native")
		default:
			fmt.Fprintf(stderr, "dgramio-bulk connrate: --clients %q: kernel and native only\n", n)
			return 2
		}
	}
	if len(natives) == 0 || *hold > 0 && slices.Contains(natives, true) {
		fmt.Fprintln(stderr, "dgramio-bulk connrate: --clients: kernel, native or both (--hold: kernel)")
		return 2
	}
	type pair struct {
		row    Row
		native bool
	}
	var cases []pair
	for _, nat := range natives {
		for _, r := range rows {
			cases = append(cases, pair{r, nat})
		}
	}
	name := func(c pair) string {
		if c.native {
			return c.row.String() + " ← native"
		}
		return c.row.String()
	}
	if len(rows) == 0 || *parallel < 1 || *repeat < 1 || *duration <= 0 || *port < 1 || *port > 60000 {
		fmt.Fprintln(stderr, "dgramio-bulk connrate: bad flags")
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "dgramio-bulk connrate: the test hosts (network namespaces, a veth pair) need root")
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "dgramio-bulk connrate:", err)
		return 1
	}
	p, err := testhost.New(testhost.Options{})
	if err != nil {
		fmt.Fprintln(stderr, "dgramio-bulk connrate: test hosts:", err)
		return 1
	}
	defer p.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cliProcs, srvProcs := 1, 1
	if *hold > 0 {
		// Every side's process inherits the limit; where it cannot be
		// raised so far, the connections are shared among processes.
		perProc := *hold + 256
		if err := raiseNOFILE(perProc); err != nil {
			var lim syscall.Rlimit
			_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
			perProc = int(lim.Cur)
			fmt.Fprintf(stderr, "connrate: %v; sharing the connections among processes of %d files each\n", err, perProc)
		}
		cliProcs, srvProcs = holdProcs(*hold, perProc)
	}
	type run struct{ rate, cliCPU, srvCPU float64 }
	runs := map[string][]run{}
	failed := map[string]map[string]uint64{}
	notes := map[string]string{}
	status := 0
	idx := 0
	for rep := range *repeat {
		for i := range cases {
			cs := cases[(i+rep)%len(cases)]
			row, key := cs.row, name(cs)
			idx++
			srv := ConnRateSpec{Row: row.String(), Server: true, Iface: p.B.Iface, Local: addr(row, p.B), Port: uint16(*port + idx - 1), SYNRate: *synRate, Hold: *hold, Procs: 1}
			cli := ConnRateSpec{Row: row.String(), Local: p.A.Addr, Peer: srv.Local, Port: srv.Port, Parallel: *parallel, Duration: *duration, Hold: *hold, Procs: cliProcs}
			if row.IsKernel() {
				srv.Procs = srvProcs
			}
			if cs.native {
				cli.Native, cli.Iface, cli.Local = true, p.A.Iface, addr(Row{Kind: dgramio.KindTCPXDP, Stack: dgramio.TCPStackNative}, p.A)
			}
			s, c, err := connRateRun(ctx, p.B, p.A, exe, srv, cli)
			if err != nil {
				fmt.Fprintf(stderr, "connrate: %s #%d: %v\n", key, rep+1, err)
				status = 1
				continue
			}
			r := run{rate: float64(c.Done) / time.Duration(c.WallNs).Seconds(),
				cliCPU: float64(c.CPUNs) / float64(max(c.Done, 1)) / 1e3, srvCPU: float64(s.CPUNs) / float64(max(c.Done, 1)) / 1e3}
			runs[key] = append(runs[key], r)
			if failed[key] == nil {
				failed[key] = map[string]uint64{}
			}
			for k, v := range c.Failed {
				failed[key][k] += v
			}
			notes[key] = "server: " + s.Runs + "; client: " + c.Runs + "; server counters: " + fmtCounters(s.Counters)
			if *hold > 0 {
				heap := fmt.Sprintf("heap %.0f B per connection", s.HeapPerConn)
				if row.IsKernel() {
					heap = "its memory is the kernel's (not measured)"
				}
				fmt.Fprintf(stdout, "hold: %s: client held %d of %d (%.1f s to open; %d client, %d server processes), failed %v; server: %d answered, %s\n",
					row, c.Done, *hold, time.Duration(c.WallNs).Seconds(), cli.Procs, srv.Procs, c.Failed, s.Done, heap)
				continue
			}
			fmt.Fprintf(stderr, "connrate: %s #%d: %.0f conns/s, %d done, failed %v, CPU µs/conn client %.1f server %.1f\n",
				key, rep+1, r.rate, c.Done, c.Failed, r.cliCPU, r.srvCPU)
		}
	}
	if *hold > 0 {
		return status
	}
	fmt.Fprintf(stdout, "| server | client | conns/s (median) | min–max | × tcp | failed | client CPU µs/conn | server CPU µs/conn | runs |\n|---|---|---:|---|---:|---|---:|---:|---:|\n")
	for _, cs := range cases {
		key, who := name(cs), "kernel"
		if cs.native {
			who = "native"
		}
		rs := runs[key]
		if len(rs) == 0 {
			fmt.Fprintf(stdout, "| %s | %s | — | | | | | | 0/%d |\n", cs.row, who, *repeat)
			continue
		}
		rate := medianOf(rs, func(r run) float64 { return r.rate })
		lo, hi := rate, rate
		for _, r := range rs {
			lo, hi = min(lo, r.rate), max(hi, r.rate)
		}
		// The ratio to the kernel listener with the same clients.
		x := "—"
		if ks := runs[name(pair{Row{Kind: dgramio.KindTCP}, cs.native})]; len(ks) > 0 && !cs.row.IsKernel() {
			x = fmt.Sprintf("%.2f", rate/medianOf(ks, func(r run) float64 { return r.rate }))
		}
		fmt.Fprintf(stdout, "| %s | %s | %.0f | %.0f–%.0f | %s | %s | %.1f | %.1f | %d/%d |\n", cs.row, who, rate, lo, hi, x, fmtCounters(failed[key]),
			medianOf(rs, func(r run) float64 { return r.cliCPU }), medianOf(rs, func(r run) float64 { return r.srvCPU }), len(rs), *repeat)
	}
	for _, cs := range cases {
		if n := notes[name(cs)]; n != "" {
			fmt.Fprintf(stdout, "- %s: %s\n", name(cs), n)
		}
	}
	fmt.Fprintf(stdout, "- clients: in the other namespace, %d at once, each connection: dial, %d-byte request, %d-byte answer, the server's FIN, close; %v per run\n",
		*parallel, connReqLen, connReqLen, *duration)
	return status
}

// connRateRun runs one server and its clients and returns both results.
func connRateRun(ctx context.Context, hs, hc *testhost.Host, exe string, srv, cli ConnRateSpec) (*ConnRateResult, *ConnRateResult, error) {
	start := func(h *testhost.Host, sp ConnRateSpec) (*child, error) {
		b, _ := json.Marshal(sp)
		cmd := h.Command(exe, "connrate-side", string(b))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := h.Start(cmd); err != nil {
			return nil, err
		}
		c := &child{cmd: cmd, lines: make(chan string, 4), log: os.DevNull}
		go func() {
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 64<<10), 16<<20)
			for sc.Scan() {
				c.lines <- sc.Text()
			}
			close(c.lines)
		}()
		return c, nil
	}
	result := func(c *child, timeout time.Duration) (*ConnRateResult, error) {
		l, err := c.next(ctx, timeout)
		if err != nil {
			return nil, err
		}
		js, ok := strings.CutPrefix(l, "result ")
		if !ok {
			return nil, fmt.Errorf("said %q", l)
		}
		var r ConnRateResult
		if err := json.Unmarshal([]byte(js), &r); err != nil {
			return nil, err
		}
		if r.Error != "" {
			return &r, errors.New(r.Error)
		}
		return &r, nil
	}
	// The servers, then the clients: Procs processes each, the clients'
	// hold shared among theirs.
	var srvs, clis []*child
	defer func() {
		for _, c := range append(clis, srvs...) {
			c.stop()
		}
	}()
	for range max(srv.Procs, 1) {
		s, err := start(hs, srv)
		if err != nil {
			return nil, nil, err
		}
		srvs = append(srvs, s)
		if l, err := s.next(ctx, 30*time.Second); err != nil || l != "ready" {
			if err == nil {
				err = fmt.Errorf("server said %q", l)
			}
			return nil, nil, err
		}
	}
	n := max(cli.Procs, 1)
	for i := range n {
		sp := cli
		if cli.Hold > 0 {
			sp.Hold = cli.Hold/n + btoi(i < cli.Hold%n)
			sp.Parallel = max(cli.Parallel/n, 1)
		}
		c, err := start(hc, sp)
		if err != nil {
			return nil, nil, err
		}
		clis = append(clis, c)
	}
	wait := cli.Duration + 2*connClientTimeout + 10*time.Second
	if cli.Hold > 0 {
		wait = time.Duration(cli.Hold)*time.Millisecond + time.Minute
	}
	var crs, srs []*ConnRateResult
	for _, c := range clis {
		cr, err := result(c, wait)
		if err != nil {
			return nil, nil, fmt.Errorf("client: %w", err)
		}
		crs = append(crs, cr)
	}
	if cli.Hold > 0 {
		time.Sleep(3 * time.Second) // idle: the server's pool trims (PoolIdle)
	}
	for _, s := range srvs {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, s := range srvs {
		sr, err := result(s, 30*time.Second)
		if err != nil {
			return nil, nil, fmt.Errorf("server: %w", err)
		}
		srs = append(srs, sr)
	}
	return mergeConnRate(srs), mergeConnRate(crs), nil
}

// mergeConnRate is the result of a side's processes together: their
// connections and CPU summed, the longest wall time, the failures added
// up; the counters and the heap of the first (the counters are the
// namespace's, the heap is measured only where one process serves).
func mergeConnRate(rs []*ConnRateResult) *ConnRateResult {
	m := *rs[0]
	if len(rs) == 1 {
		return &m
	}
	m.Runs = fmt.Sprintf("%d processes: %s", len(rs), m.Runs)
	m.Failed = map[string]uint64{}
	m.Done, m.CPUNs = 0, 0
	for _, r := range rs {
		m.Done += r.Done
		m.CPUNs += r.CPUNs
		m.WallNs = max(m.WallNs, r.WallNs)
		for k, v := range r.Failed {
			m.Failed[k] += v
		}
	}
	return &m
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// medianOf is the median of f over rs.
func medianOf[T any](rs []T, f func(T) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return median(xs)
}

// fmtCounters prints m as "k=v" sorted by name.
func fmtCounters(m map[string]uint64) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	for i, k := range ks {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return b.String()
}
