package bulk

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/wire"
)

// Options configure a bulk run.
type Options struct {
	// Rows, Conns and Dirs: every row runs with every number of
	// connections in every direction.
	Rows  []Row
	Conns []int
	Dirs  []Dir
	// Duration is how long each sending connection sends; Bytes, when
	// positive, what each sends instead.
	Duration time.Duration
	Bytes    int64
	// Repeat runs every cell this many times, the rows interleaved and
	// their order rotating from one repeat to the next.
	Repeat int
	// Loss, when set, runs the cells over the lossy wire (package
	// internal/wire) at each loss rate and each of Delays (one-way, both
	// directions), instead of the clean veth pair.
	Loss   []float64
	Delays []time.Duration
	// KeepOffloads leaves TX checksum offload, TSO and GSO on at the veth
	// ends (kernel tcp then sends 64 KiB super-frames); by default they
	// are off, as a wire's frames would be. The lossy wire has them off.
	KeepOffloads bool
	// Busy makes the native engine's loop spin instead of sleeping.
	Busy bool
	// CC, when not empty ("reno", "cubic" or "bbr"), is the congestion
	// control of the kernel tcp rows (TCP_CONGESTION on each socket) and
	// of the native engine's; empty leaves each its default, the host's
	// (net.ipv4.tcp_congestion_control, BBR on some hosts) for both: the
	// kernel's own, and Config's for the engine (dgramio.TCPTuning's
	// Congestion: reno where the host's is none of reno, cubic, bbr).
	// The netstack rows keep Config's default (the host's if reno or
	// cubic, else reno).
	CC string
	// Buf, when above 0, is the native engine rows' TCP.SendBuf and
	// TCP.RecvBuf (default Config's, 4 MiB and 6 MiB), with receive-window
	// auto-tuning off (TCP.NoModerate, as SO_RCVBUF fixes a Linux
	// socket's); the kernel rows keep the kernel's auto-tuning (up to
	// tcp_wmem's and tcp_rmem's maximum).
	Buf int
	// Queues, above 1, gives the veth ends that many queues and runs each
	// native engine row (tcp-xdp) over all of them: an engine and a poll
	// loop per queue, each pinned to a CPU of its own where there are
	// enough (ClientCPUs and ServerCPUs, Options.Queues each; empty: the
	// first allowed CPUs for the client, the next for the server). Clean
	// veth only; kernel tcp uses the same veth as the kernel will.
	Queues                 int
	ClientCPUs, ServerCPUs []int
	// Port is the first server port; cell i uses Port+i.
	Port int
	// Exe is the binary that runs "<Exe> side SPEC" (empty: this
	// process's own executable).
	Exe string
	// Out is a directory for the sides' logs (empty: a temporary one,
	// removed at the end).
	Out string
	// CPUProfile, when set, is a directory each side writes its CPU
	// profile into (NNN-row-conns-dir-{client,server}.pprof, as the logs).
	CPUProfile string
	// Command is the command line, for the report.
	Command string
	// Progress receives a line per cell.
	Progress io.Writer
}

// stackOffset is how far above a side's kernel address the userspace
// kinds' own address lies (198.18.n.1 → 198.18.n.11), as netbench does:
// the kernel must not hold the userspace TCP's address.
const stackOffset = 10

// Run runs every cell and returns the report (with the cells that could
// not run carrying their error). The error is what kept the run from
// starting (no root, no hosts) or ended it (ctx).
func Run(ctx context.Context, o Options) (*Report, error) {
	host, _ := os.Hostname()
	rep := &Report{Command: o.Command, Start: time.Now().UTC(), Host: host, Kernel: kernelRelease(), CPUs: runtime.NumCPU()}
	if o.Repeat < 1 {
		o.Repeat = 1
	}
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return rep, fmt.Errorf("own executable: %w", err)
		}
		o.Exe = exe
	}
	logDir := o.Out
	if logDir == "" {
		d, err := os.MkdirTemp("", "dgramio-bulk-")
		if err != nil {
			return rep, err
		}
		defer os.RemoveAll(d)
		logDir = d
	} else if err := os.MkdirAll(filepath.Join(logDir, "logs"), 0o755); err != nil {
		return rep, err
	} else {
		logDir = filepath.Join(logDir, "logs")
	}
	if o.CPUProfile != "" {
		d, err := filepath.Abs(o.CPUProfile)
		if err == nil {
			err = os.MkdirAll(d, 0o755)
		}
		if err != nil {
			return rep, err
		}
		o.CPUProfile = d
	}
	if os.Geteuid() != 0 {
		return rep, errors.New("the test hosts (network namespaces, a veth pair) need root")
	}
	rep.LoadAvg = append(rep.LoadAvg, loadAvg())
	r := &runner{o: o, rep: rep, logDir: logDir}
	var err error
	if len(o.Loss) == 0 {
		err = r.clean(ctx)
	} else {
		err = r.lossy(ctx)
	}
	rep.LoadAvg = append(rep.LoadAvg, loadAvg())
	rep.Summarize()
	return rep, err
}

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

type runner struct {
	o      Options
	rep    *Report
	logDir string
	idx    int
	total  int
	// a and b are the client's and the server's host; w the lossy wire.
	a, b *testhost.Host
	w    *wire.Wire
}

func (r *runner) progress(format string, args ...any) {
	if r.o.Progress != nil {
		fmt.Fprintf(r.o.Progress, format+"\n", args...)
	}
}

// clean runs the cells over a veth pair.
func (r *runner) clean(ctx context.Context) error {
	ho := testhost.Options{KeepOffloads: r.o.KeepOffloads}
	if r.o.Queues > 1 {
		ho.Queues, ho.XPSCPUs = r.o.Queues, r.o.ClientCPUs
	}
	p, err := testhost.New(ho)
	if err != nil {
		return fmt.Errorf("test hosts: %w", err)
	}
	defer p.Close()
	r.a, r.b = p.A, p.B
	offl := "TX checksum offload, TSO and GSO off at both ends (a wire's frames)"
	if r.o.KeepOffloads {
		offl = "offloads as the kernel sets them (TSO and GSO on)"
	}
	r.rep.Setup = append(r.rep.Setup, fmt.Sprintf("veth %s (%s, client) — %s (%s, server), each end in a network namespace of its own (internal/testhost), MTU 1500, %s; the userspace kinds on the address %d above the kernel's",
		p.A.Iface, p.A.Prefix, p.B.Iface, p.B.Prefix, offl, stackOffset))
	if r.o.Queues > 1 {
		r.rep.Queues = r.o.Queues
		r.rep.Setup = append(r.rep.Setup, fmt.Sprintf("%d queues at each veth end (XPS: CPU %s → TX queue 0, 1, … at both ends); each native engine row runs an engine and a poll loop per queue, the client's pinned to CPUs %s, the server's to %s; connection i on queue i mod %d at both ends (veth puts a frame on the peer's queue it was sent from); kernel tcp as the kernel runs it",
			r.o.Queues, cpu.FormatList(r.o.ClientCPUs), cpu.FormatList(r.o.ClientCPUs), cpu.FormatList(r.o.ServerCPUs), r.o.Queues))
	}
	r.total = len(r.o.Conns) * len(r.o.Dirs) * r.o.Repeat * len(r.o.Rows)
	return r.matrix(ctx, Wire{})
}

// lossy runs the cells over the lossy wire at each loss rate and delay.
func (r *runner) lossy(ctx context.Context) error {
	maxDelay := time.Duration(0)
	for _, d := range r.o.Delays {
		maxDelay = max(maxDelay, d)
	}
	w, err := wire.New(wire.Options{Limit: wireLimit(maxDelay)})
	if err != nil {
		return fmt.Errorf("lossy wire: %w", err)
	}
	defer w.Close()
	r.a, r.b, r.w = w.A, w.B, w
	r.rep.Setup = append(r.rep.Setup, fmt.Sprintf("the lossy wire of internal/wire: %s (%s, client) — forwarder in this process — %s (%s, server), seed %d, %d frame buffers each way; each cell's loss rate and one-way delay apply to both directions (no duplication, reordering or corruption); offloads off",
		w.A.Iface, w.A.Prefix, w.B.Iface, w.B.Prefix, w.Seed(), wireLimit(maxDelay)))
	r.total = len(r.o.Loss) * len(r.o.Delays) * len(r.o.Conns) * len(r.o.Dirs) * r.o.Repeat * len(r.o.Rows)
	for _, loss := range r.o.Loss {
		for _, d := range r.o.Delays {
			im := wire.Impairment{Loss: loss, Delay: d}
			for _, dir := range []wire.Direction{wire.AtoB, wire.BtoA} {
				if err := w.SetImpairment(dir, im); err != nil {
					return fmt.Errorf("lossy wire: %w", err)
				}
			}
			if err := r.matrix(ctx, Wire{Lossy: true, Loss: loss, Delay: d}); err != nil {
				return err
			}
		}
	}
	return nil
}

// wireLimit is the lossy wire's frame buffers for a delay: room for
// 10 Gbit/s of full frames held that long, at least the default.
func wireLimit(delay time.Duration) int {
	n := int(delay.Seconds() * 10e9 / 8 / 1514)
	return min(max(n, wire.DefaultLimit), 1<<16)
}

// matrix runs every cell on one wire.
func (r *runner) matrix(ctx context.Context, w Wire) error {
	for _, conns := range r.o.Conns {
		for _, dir := range r.o.Dirs {
			for rep := range r.o.Repeat {
				for i := range r.o.Rows {
					if err := ctx.Err(); err != nil {
						return err
					}
					row := r.o.Rows[(i+rep)%len(r.o.Rows)]
					c := r.cell(ctx, row, conns, dir, w, rep)
					r.rep.Cells = append(r.rep.Cells, c)
					if c.Error != "" {
						r.progress("bulk: %d/%d %s %s %d conns %s #%d: failed: %s", r.idx, r.total, w, row, conns, dir, rep+1, oneLine(c.Error))
					} else {
						share := ""
						if c.MinShare > 0 {
							share = fmt.Sprintf(", slowest connection %.2f of the mean", c.MinShare)
						}
						r.progress("bulk: %d/%d %s %s %d conns %s #%d: %.2f Gbit/s%s, CPU s/GB client %.2f server %.2f, %d retransmits",
							r.idx, r.total, w, row, conns, dir, rep+1, c.Gbps, share, c.ClientCPU, c.ServerCPU, c.Retransmits)
					}
				}
			}
		}
	}
	return nil
}

// addr is the address a row uses on host h.
func addr(row Row, h *testhost.Host) netip.Addr {
	if row.IsKernel() {
		return h.Addr
	}
	a := h.Addr.As4()
	a[3] += stackOffset
	return netip.AddrFrom4(a)
}

// child is a running side.
type child struct {
	cmd   *exec.Cmd
	lines chan string
	log   string
}

// start starts "<exe> side spec" on h, its stderr into logPath.
func (r *runner) start(h *testhost.Host, sp SideSpec, logPath string) (*child, error) {
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	cmd := h.Command(r.o.Exe, "side", string(b))
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := h.Start(cmd); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, lines: make(chan string, 4), log: logPath}
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

// next waits for the child's next line, at most timeout.
func (c *child) next(ctx context.Context, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l, ok := <-c.lines:
		if !ok {
			return "", fmt.Errorf("exited without a word: %s", tailFile(c.log, 400))
		}
		return l, nil
	case <-t.C:
		return "", fmt.Errorf("no word in %v: %s", timeout, tailFile(c.log, 400))
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// result waits for the child's result line.
func (c *child) result(ctx context.Context, timeout time.Duration) (*SideResult, error) {
	l, err := c.next(ctx, timeout)
	if err != nil {
		return nil, err
	}
	js, ok := strings.CutPrefix(l, "result ")
	if !ok {
		return nil, fmt.Errorf("said %q", l)
	}
	var res SideResult
	if err := json.Unmarshal([]byte(js), &res); err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	if res.Error != "" {
		return &res, errors.New(res.Error)
	}
	return &res, nil
}

// stop ends the child: SIGTERM, then SIGKILL after a while.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// cell runs one cell: the server side on B, then the client side on A.
func (r *runner) cell(ctx context.Context, row Row, conns int, dir Dir, w Wire, rep int) Cell {
	r.idx++
	c := Cell{Row: row.String(), Conns: conns, Dir: dir, Wire: w, Repeat: rep + 1}
	port := r.o.Port + r.idx - 1
	name := fmt.Sprintf("%03d-%s-%d-%s", r.idx, strings.ReplaceAll(row.String(), "+", "-"), conns, dir)
	base := SideSpec{Row: row.String(), Port: uint16(port), Conns: conns, Dir: dir, Duration: r.o.Duration, Bytes: r.o.Bytes,
		Busy: r.o.Busy, CC: r.o.CC, Buf: r.o.Buf, Seed: uint64(r.idx)}
	if r.o.Queues > 1 && !row.IsKernel() {
		base.Queues = r.o.Queues
	}
	sv, cl := base, base
	if base.Queues > 1 {
		sv.CPUs, cl.CPUs = r.o.ServerCPUs, r.o.ClientCPUs
	}
	sv.Server, sv.Iface, sv.Local, sv.Peer = true, r.b.Iface, addr(row, r.b), addr(row, r.a)
	cl.Iface, cl.Local, cl.Peer = r.a.Iface, addr(row, r.a), addr(row, r.b)
	if r.o.CPUProfile != "" {
		sv.CPUProfile = filepath.Join(r.o.CPUProfile, name+"-server.pprof")
		cl.CPUProfile = filepath.Join(r.o.CPUProfile, name+"-client.pprof")
	}
	wire0 := r.wireCounters()

	server, err := r.start(r.b, sv, filepath.Join(r.logDir, name+"-server.log"))
	if err != nil {
		c.Error = "server: " + err.Error()
		return c
	}
	defer server.stop()
	l, err := server.next(ctx, 60*time.Second)
	if err != nil || l != "ready" {
		if js, ok := strings.CutPrefix(l, "result "); ok {
			var res SideResult
			if json.Unmarshal([]byte(js), &res) == nil && res.Error != "" {
				err = errors.New(res.Error)
			}
		}
		c.Error = fmt.Sprintf("server did not start: %v", orLine(err, l))
		return c
	}
	client, err := r.start(r.a, cl, filepath.Join(r.logDir, name+"-client.log"))
	if err != nil {
		c.Error = "client: " + err.Error()
		return c
	}
	defer client.stop()
	limit := r.o.Duration + 2*time.Minute
	if r.o.Bytes > 0 {
		limit = 5 * time.Minute
	}
	type got struct {
		res *SideResult
		err error
	}
	cres, sres := make(chan got, 1), make(chan got, 1)
	go func() { res, err := client.result(ctx, limit+connectTimeout); cres <- got{res, err} }()
	go func() { res, err := server.result(ctx, limit+connectTimeout); sres <- got{res, err} }()
	// A side that fails ends the cell: the other would wait for bytes that
	// never come.
	var cg, sg *got
	for cg == nil || sg == nil {
		select {
		case g := <-cres:
			cg = &g
		case g := <-sres:
			sg = &g
		}
		if (cg != nil && cg.err != nil) || (sg != nil && sg.err != nil) {
			break
		}
	}
	switch {
	case cg != nil && cg.err != nil:
		c.Error = "client: " + cg.err.Error()
	case sg != nil && sg.err != nil:
		c.Error = "server: " + sg.err.Error()
	}
	if c.Error != "" {
		return c
	}
	c.Client, c.Server = cg.res, sg.res
	if want := int64(conns) * headerLen; (dir.clientSends() && c.Server.Received < want) || (dir.serverSends() && c.Client.Received < want) {
		c.Error = fmt.Sprintf("a receiving side got less than the streams' headers (client %d, server %d bytes)", c.Client.Received, c.Server.Received)
		return c
	}
	if c.Client.Sent != c.Server.Received || c.Server.Sent != c.Client.Received {
		c.Error = fmt.Sprintf("bytes sent and received differ: client sent %d, server received %d; server sent %d, client received %d",
			c.Client.Sent, c.Server.Received, c.Server.Sent, c.Client.Received)
		return c
	}
	c.WireCounters = moved(wire0, r.wireCounters())
	c.compute()
	return c
}

func orLine(err error, line string) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("said %q", line)
}

// wireCounters reads what the lossy wire did, per direction; nil on the
// clean veth.
func (r *runner) wireCounters() map[string]uint64 {
	if r.w == nil {
		return nil
	}
	m := map[string]uint64{}
	for _, d := range []wire.Direction{wire.AtoB, wire.BtoA} {
		s := r.w.Stats(d)
		p := map[wire.Direction]string{wire.AtoB: "client_to_server.", wire.BtoA: "server_to_client."}[d]
		for k, v := range map[string]uint64{"forwarded": s.Forwarded, "dropped": s.Dropped, "overflow": s.Overflow,
			"socket_drops": s.SocketDrops, "send_errors": s.SendErrors, "truncated": s.Truncated} {
			m[p+k] = v
		}
	}
	return m
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	if s == "" {
		return "(no log)"
	}
	return s
}

// kernelRelease is uname -r.
func kernelRelease() string {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return ""
	}
	var b strings.Builder
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b.WriteByte(byte(c))
	}
	return b.String()
}
