package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/core"
)

// EchoFile is the JSON an echo writes with --stats.
type EchoFile struct {
	Kind    string            `json:"kind"`
	CPU     int               `json:"cpu"`
	Wait    bool              `json:"wait"`
	Result  *bench.EchoResult `json:"result,omitempty"`
	Failure *Failure          `json:"failure,omitempty"`
}

// EchoMain is the echo tool: it opens a server of --kind on --local:--port,
// prints "ready <mode>" on stdout, and reflects every message back to its
// sender until SIGINT or SIGTERM (or --max-time). Then it prints its
// counters on stderr and writes them as JSON to --stats. If the backend
// cannot be opened it prints "failed <class>: <error>" on stdout, writes
// the failure to --stats and returns 2. It returns the exit status.
func EchoMain(args []string, stdout, stderr io.Writer) int {
	return RunEcho(context.Background(), args, stdout, stderr)
}

// RunEcho is EchoMain that also stops when ctx ends.
func RunEcho(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("kind", "udp", "packet path: udp, uring, xdp, dpdk, tcp, tcp-xdp, tcp-dpdk")
	local := fs.String("local", "", "our IPv4 address (198.18.0.0/15 or loopback); required for raw kinds")
	port := fs.Uint("port", 5000, "UDP/TCP port to serve")
	iface := fs.String("iface", "", "network interface (raw kinds)")
	cpuN := fs.Int("cpu", -1, "CPU to pin the poller to (-1: not pinned)")
	wait := fs.Bool("wait", false, "sleep in Wait when idle instead of busy polling (for machines with too few CPUs)")
	batch := fs.Int("batch", bench.DefaultBatch, "messages per Rx and per send batch")
	maxDgram := fs.Int("max-datagram", 0, "largest message accepted (0: the kind's default)")
	pcap := fs.String("pcap", "", "capture prefix: the raw kinds write every frame to <prefix>-tx.pcap and <prefix>-rx.pcap (Config.Pcap)")
	xdpFrames := fs.Int("xdp-frames", 0, "UMEM frames of the AF_XDP kinds (0: the default)")
	xdpRing := fs.Int("xdp-ring", 0, "ring size of the AF_XDP kinds (0: the default)")
	stats := fs.String("stats", "", "write the counters as JSON to this file on exit")
	maxTime := fs.Duration("max-time", 0, "stop after this long even without a signal (0: never)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	out := EchoFile{Kind: *kind, CPU: *cpuN, Wait: *wait}
	fail := func(class string, err error) int {
		out.Failure = &Failure{Class: class, Error: err.Error()}
		fmt.Fprintf(stdout, "failed %s: %v\n", class, err)
		if werr := writeJSON(*stats, &out); werr != nil {
			fmt.Fprintln(stderr, "echo:", werr)
		}
		return 2
	}
	if fs.NArg() != 0 {
		return fail(ClassConfig, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	localIP, err := parseAddr("local", *local)
	if err != nil {
		return fail(ClassConfig, err)
	}
	if *port == 0 || *port > 65535 {
		return fail(ClassConfig, fmt.Errorf("--port %d: must be 1..65535", *port))
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *maxTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *maxTime)
		defer cancel()
	}

	cpus, err := pin(*cpuN)
	if err != nil {
		return fail(Classify(*kind, err), err)
	}
	cfg := core.Config{
		Kind:        *kind,
		Role:        core.RoleServer,
		Iface:       *iface,
		LocalIP:     localIP,
		Port:        uint16(*port),
		MaxDatagram: *maxDgram,
		TxBatch:     *batch,
		RxBatch:     *batch,
		CPUs:        cpus,
		Pcap:        *pcap,
	}
	cfg.XDP.Frames, cfg.XDP.RingSize = *xdpFrames, *xdpRing
	b, err := Open(cfg)
	if err != nil {
		return fail(Classify(*kind, err), err)
	}
	st := b.Stats()
	fmt.Fprintf(stdout, "ready %s\n", st.Mode)
	if f, ok := stdout.(interface{ Sync() error }); ok {
		_ = f.Sync()
	}

	start := time.Now()
	res, runErr := bench.Echo(ctx, b, bench.EchoOptions{Batch: *batch, Wait: *wait})
	if cerr := b.Close(); cerr != nil && runErr == nil {
		fmt.Fprintln(stderr, "echo: close:", cerr)
	}
	out.Result = res
	status := 0
	if runErr != nil {
		fmt.Fprintln(stderr, "echo:", runErr)
		status = 1
	}
	if res != nil {
		fmt.Fprintf(stderr, "echo ran %v\n%s", time.Since(start).Round(time.Millisecond), formatStats("echo", &res.Stats, res.Layers()))
	}
	if err := writeJSON(*stats, &out); err != nil {
		fmt.Fprintln(stderr, "echo:", err)
		status = 1
	}
	return status
}
