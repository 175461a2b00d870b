package bulk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dgramio/dgramio"
)

// SideSpec is what one side of a cell runs: the child process started
// with "<exe> side <SideSpec as JSON>" inside its namespace.
type SideSpec struct {
	Row    string `json:"row"`
	Server bool   `json:"server"`
	// Iface is the interface of the userspace kinds; Local our address,
	// Peer the other side's; Port the server's port.
	Iface string     `json:"iface,omitempty"`
	Local netip.Addr `json:"local"`
	Peer  netip.Addr `json:"peer"`
	Port  uint16     `json:"port"`
	// Conns is the number of connections, Dir the direction of the bytes.
	Conns int `json:"conns"`
	Dir   Dir `json:"dir"`
	// Duration is how long each sending connection sends; Bytes, when
	// positive, is what each sends instead (Duration then bounds nothing).
	Duration time.Duration `json:"duration"`
	Bytes    int64         `json:"bytes,omitempty"`
	// Busy makes the native engine's loop spin instead of sleeping in
	// Engine.Wait when a round moved nothing.
	Busy bool `json:"busy,omitempty"`
	// Queues, above 1, runs the native engine over that many interface
	// queues, the loop of queue q pinned to CPUs[q] (runNativeQueues).
	Queues int   `json:"queues,omitempty"`
	CPUs   []int `json:"cpus,omitempty"`
	// CC is Options.CC, Buf Options.Buf.
	CC  string `json:"cc,omitempty"`
	Buf int    `json:"buf,omitempty"`
	// Seed picks the connections' start offsets into the pattern.
	Seed uint64 `json:"seed"`
	// CPUProfile, when set, is a file the side writes its CPU profile
	// (runtime/pprof) to: from its start to its report.
	CPUProfile string `json:"cpuprofile,omitempty"`
}

// SideResult is what a side reports when its transfer is over: one JSON
// line "result {...}" on its stdout.
type SideResult struct {
	// Runs says what the side ran ("kernel TCP, net.Conn, a goroutine per
	// connection and direction", "native engine over xdp driver copy, one
	// poll loop"...).
	Runs string `json:"runs"`
	// Sent and Received are the bytes of every connection together, the
	// streams' 8-byte headers included; every received byte was checked
	// against the pattern.
	Sent     int64 `json:"sent"`
	Received int64 `json:"received"`
	// RecvMin and RecvMax are the bytes of this side's connection that
	// received the fewest and of the one that received the most (header
	// included); Received over the number of connections is their mean.
	// 0 when this side received nothing.
	RecvMin int64 `json:"recv_min,omitempty"`
	RecvMax int64 `json:"recv_max,omitempty"`
	// RecvNs is the receive window: from the first byte received on any
	// connection to the last end of stream (0 when this side received
	// nothing).
	RecvNs int64 `json:"recv_ns"`
	// WallNs is the transfer, from the connections being open to the side
	// being done (every stream sent and ended, every peer stream ended);
	// UserNs and SysNs the process's CPU time over it (getrusage).
	WallNs int64 `json:"wall_ns"`
	UserNs int64 `json:"user_ns"`
	SysNs  int64 `json:"sys_ns"`
	// Retransmits counts the segments this side's TCP sent again
	// (kernel: Tcp RetransSegs of its namespace; the userspace engines:
	// their tcp_retransmits) during the transfer.
	Retransmits uint64 `json:"retransmits"`
	// Counters are the counters about loss and recovery that moved during
	// the transfer, "layer.name" (kernel: "snmp.tcp.*", "netstat.tcpext.*";
	// the engines: their layers, the FrameIO's).
	Counters map[string]uint64 `json:"counters,omitempty"`
	// Error says why the side could not finish; Class is "config",
	// "unsupported" or "run".
	Error string `json:"error,omitempty"`
	Class string `json:"class,omitempty"`
}

// connectTimeout bounds the connections' set-up on each side.
const connectTimeout = 30 * time.Second

// SideMain is the hidden "side" subcommand: args[0] is a SideSpec as JSON.
// A server prints "ready" once it listens. Each side prints "result
// <SideResult as JSON>" when its transfer is over, then keeps its
// connections (and its engine running, so that its last segments are
// acknowledged) until SIGTERM or SIGINT, and exits 0; 2 when the spec is
// not one.
func SideMain(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: dgramio-bulk side SPEC (started by dgramio-bulk itself)")
		return 2
	}
	var sp SideSpec
	if err := json.Unmarshal([]byte(args[0]), &sp); err != nil {
		fmt.Fprintln(stderr, "dgramio-bulk side:", err)
		return 2
	}
	row, err := ParseRow(sp.Row)
	if err != nil || sp.Conns < 1 || sp.Conns > MaxConns || (sp.Duration <= 0 && sp.Bytes <= 0) {
		fmt.Fprintf(stderr, "dgramio-bulk side: bad spec %s (%v)\n", args[0], err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var out sync.Mutex
	print := func(format string, a ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Fprintf(stdout, format, a...)
		if f, ok := stdout.(interface{ Sync() error }); ok {
			_ = f.Sync()
		}
	}
	s := &side{spec: sp, row: row, ready: func() { print("ready\n") }, log: stderr}
	stopProfile := func() {}
	if sp.CPUProfile != "" {
		f, err := os.Create(sp.CPUProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(stderr, "dgramio-bulk side: cpu profile:", err)
		} else {
			var once sync.Once
			stopProfile = func() { once.Do(func() { pprof.StopCPUProfile(); _ = f.Close() }) }
		}
	}
	defer stopProfile()
	s.report = func(r SideResult) {
		stopProfile()
		b, _ := json.Marshal(r)
		print("result %s\n", b)
	}
	var runErr error
	switch {
	case row.IsKernel():
		runErr = s.runKernel(ctx)
	case row.Stack == dgramio.TCPStackNetstack:
		runErr = s.runNetstack(ctx)
	default:
		runErr = s.runNative(ctx)
	}
	if runErr != nil && !s.reported {
		s.report(SideResult{Error: runErr.Error(), Class: classify(runErr)})
	}
	if runErr != nil {
		fmt.Fprintln(stderr, "dgramio-bulk side:", runErr)
	}
	return 0
}

// classify names the class of a side's error.
func classify(err error) string {
	var ce *dgramio.ConfigError
	switch {
	case errors.As(err, &ce):
		return "config"
	case errors.Is(err, dgramio.ErrNotSupported):
		return "unsupported"
	}
	return "run"
}

// side is one running side.
type side struct {
	spec     SideSpec
	row      Row
	ready    func()
	report   func(SideResult)
	reported bool
	log      io.Writer
}

// flow is one connection's two directions.
type flow struct {
	snd *sender   // nil: this side does not send on it
	rcv *receiver // nil: this side does not receive on it
	// finSent and eof: our stream ended (FIN queued), the peer's ended.
	finSent, eof bool
	// id numbers the connection in errors.
	id int
}

// newFlows makes the connections' senders and receivers.
func (s *side) newFlows(start time.Time) []*flow {
	sends := s.spec.Dir.clientSends()
	if s.spec.Server {
		sends = s.spec.Dir.serverSends()
	}
	fl := make([]*flow, s.spec.Conns)
	for i := range fl {
		f := &flow{rcv: &receiver{}, id: i}
		if sends {
			off := int((s.spec.Seed*0x9e3779b97f4a7c15 + uint64(i)*7919 + boolU64(s.spec.Server)*104729) % patternLen)
			f.snd = newSender(off, s.spec.Bytes, start.Add(s.spec.Duration))
		}
		fl[i] = f
	}
	return fl
}

func boolU64(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// finish fills r from the flows and the start, and reports it.
func (s *side) finish(r *SideResult, fl []*flow, start time.Time, ru0 syscall.Rusage, done time.Time) {
	var first, last time.Time
	for _, f := range fl {
		if f.snd != nil {
			r.Sent += f.snd.total()
		}
		if got := f.rcv.total(); got > 0 {
			r.Received += got
			r.RecvMax = max(r.RecvMax, got)
			if first.IsZero() || f.rcv.first.Before(first) {
				first = f.rcv.first
			}
			if f.rcv.last.After(last) {
				last = f.rcv.last
			}
		}
	}
	if !first.IsZero() && last.After(first) {
		r.RecvNs = int64(last.Sub(first))
	}
	if r.Received > 0 {
		r.RecvMin = r.RecvMax
		for _, f := range fl {
			r.RecvMin = min(r.RecvMin, f.rcv.total())
		}
	}
	r.WallNs = int64(done.Sub(start))
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	r.UserNs = tvNs(ru.Utime) - tvNs(ru0.Utime)
	r.SysNs = tvNs(ru.Stime) - tvNs(ru0.Stime)
	s.reported = true
	s.report(*r)
}

func tvNs(tv syscall.Timeval) int64 { return tv.Sec*1e9 + tv.Usec*1e3 }

func rusage() syscall.Rusage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru
}

// halfCloser is a connection that can end its own direction.
type halfCloser interface {
	net.Conn
	CloseWrite() error
}

// chunk is the most each Write or Read of a blocking connection moves.
const chunk = 256 << 10

// runConns moves the bytes of blocking connections: a goroutine per
// connection and direction. A side that does not send on a connection
// ends its direction once the peer's has ended, so that a sender's end of
// stream arrives only after the receiver has every byte. It returns when
// every flow is done, or with the first error.
func (s *side) runConns(ctx context.Context, conns []halfCloser, counters func() (map[string]uint64, uint64), runs string) error {
	c0, rt0 := counters()
	ru0 := rusage()
	start := time.Now()
	fl := s.newFlows(start)
	errc := make(chan error, 2*len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		f := fl[i]
		eofc := make(chan struct{})
		wg.Add(2)
		go func() { // the reader
			defer wg.Done()
			buf := make([]byte, chunk)
			for {
				n, err := c.Read(buf)
				now := time.Now()
				if terr := f.rcv.take(buf[:n], now); terr != nil {
					errc <- fmt.Errorf("connection %d: %w", i, terr)
					return
				}
				if errors.Is(err, io.EOF) {
					f.rcv.last = now
					close(eofc)
					return
				}
				if err != nil {
					errc <- fmt.Errorf("connection %d: read: %w", i, err)
					return
				}
			}
		}()
		go func() { // the writer
			defer wg.Done()
			if f.snd == nil {
				select {
				case <-eofc:
				case <-ctx.Done():
					return
				}
			}
			for f.snd != nil && !f.snd.done(time.Now()) {
				b := f.snd.next(chunk)
				n, err := c.Write(b)
				f.snd.advance(n)
				if err != nil {
					errc <- fmt.Errorf("connection %d: write: %w", i, err)
					return
				}
			}
			if err := c.CloseWrite(); err != nil {
				errc <- fmt.Errorf("connection %d: close write: %w", i, err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-errc:
		return err
	default:
	}
	end := time.Now()
	c1, rt1 := counters()
	r := SideResult{Runs: runs, Retransmits: rt1 - rt0, Counters: filterLossy(moved(c0, c1))}
	s.finish(&r, fl, start, ru0, end)
	return nil
}

// moved returns after − before for the counters that moved.
func moved(before, after map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, a := range after {
		if b := before[k]; a > b {
			out[k] = a - b
		}
	}
	return out
}

// lossy says whether a counter's name is about loss, recovery, drops
// or how slow start ended (HyStart++): the ones a bulk report shows.
func lossy(name string) bool {
	for _, w := range []string{"retrans", "loss", "lost", "drop", "timeout", "dsack", "sack", "ofo", "out_of_order",
		"probe", "err", "full", "recovery", "reorder", "spurious", "undo", "prune", "collapse", "zero_window", "zerowindow",
		"hystart"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// filterLossy keeps the counters lossy names.
func filterLossy(m map[string]uint64) map[string]uint64 {
	for k := range m {
		if !lossy(strings.ToLower(k)) {
			delete(m, k)
		}
	}
	return m
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// waitSignal blocks until ctx ends: the parent's SIGTERM after both
// sides reported.
func waitSignal(ctx context.Context) { <-ctx.Done() }
