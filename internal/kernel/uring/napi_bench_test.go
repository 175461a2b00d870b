//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package uring

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/cpu"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// setGRO turns GRO on or off on h's veth end. On veth, GRO on the receiving
// end is what makes the peer's transmit go through a NAPI instance (and the
// socket get a NAPI id); without it packets go through the per-CPU backlog.
func setGRO(h *testhost.Host, on bool) error {
	return h.Do(func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer e.Close()
		return e.Change(h.Iface, map[string]bool{"rx-gro": on})
	})
}

// napiID is the socket's SO_INCOMING_NAPI_ID: the NAPI instance its last
// packet came through, 0 for none.
func napiID(b *Backend) (int, error) {
	return unix.GetsockoptInt(b.fd, unix.SOL_SOCKET, unix.SO_INCOMING_NAPI_ID)
}

// ringInfo returns the NAPI lines of the ring's /proc fdinfo.
func ringInfo(b *Backend) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", b.ring.FD()))
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(strings.ToLower(l), "napi") {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, "; ")
}

type napiMode struct {
	name string
	ipi  bool // COOP_TASKRUN off: completions interrupt the receiving thread
	gro  bool // GRO on both veth ends
	napi bool // io_uring NAPI busy poll registered on both rings
	wait bool // sleep in Wait when Rx finds nothing, instead of spinning
}

// BenchmarkNAPIVeth measures the round trip of one 64-byte message at a
// time between two uring backends across a veth pair, with the receiver
// either spinning on the CQ (Rx) or sleeping in Wait (io_uring_enter), with
// and without io_uring NAPI busy polling, with and without GRO on the veth
// (without it there is no NAPI to poll), and with completions run by the
// ring's thread when it enters (COOP_TASKRUN, the default) or forced onto
// it by an interrupt ("ipi"). It reports p50 and p99 in µs and system
// calls per round trip. Run it alone on an idle machine:
//
//	go test -run '^$' -bench NAPIVeth -benchtime 20000x ./kernel/uring
func BenchmarkNAPIVeth(b *testing.B) {
	testutil.RequireRoot(b)
	modes := []napiMode{
		{"spin", false, true, false, false},
		{"spin,ipi", true, true, false, false},
		{"wait", false, true, false, true},
		{"wait+napi", false, true, true, true},
		{"spin+napi", false, true, true, false},
		{"wait+napi,ipi", true, true, true, true},
		{"spin,no-gro", false, false, false, false},
		{"wait+napi,no-gro", false, false, true, true},
	}
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) { benchNAPI(b, m) })
	}
}

func benchNAPI(b *testing.B, m napiMode) {
	p := hosttest.New(b, testhost.Options{})
	for _, h := range []*testhost.Host{p.A, p.B} {
		if err := setGRO(h, m.gro); err != nil {
			b.Fatal(err)
		}
	}
	allowed, err := cpu.Allowed()
	if err != nil {
		b.Fatal(err)
	}
	var cliCPU, srvCPU []int
	if len(allowed) >= 2 {
		cliCPU, srvCPU = []int{allowed[0]}, []int{allowed[1]}
	}
	const port = 5410
	uo := dgramio.URingOptions{NAPI: m.napi, Interrupts: m.ipi}
	stopServer := startNAPIEcho(b, p.B, m.wait, dgramio.Config{Role: dgramio.RoleServer, LocalIP: p.B.Addr, Port: port, CPUs: srvCPU, URing: uo})
	cli, err := openIn(p.A, dgramio.Config{LocalIP: p.A.Addr, Dests: []netip.AddrPort{netip.AddrPortFrom(p.B.Addr, port)}, Port: port, CPUs: cliCPU, URing: uo})
	if err != nil {
		stopServer()
		testutil.SkipIfNotSupported(b, err)
	}
	defer cli.Close()

	c := &napiClient{b: cli, wait: m.wait, msg: make([]byte, 64), pkts: make([]dgramio.Packet, 4)}
	for i := 0; i < 500; i++ { // warm-up: ARP, NAPI ids, caches
		if err := c.roundTrip(); err != nil {
			b.Fatal(err)
		}
	}
	c.rtts = make([]time.Duration, 0, b.N)
	before := cli.Stats()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.roundTrip(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	after := cli.Stats()
	cliID, _ := napiID(cli)
	cliInfo := ringInfo(cli)
	srvInfo := stopServer()
	reportNAPI(b, c.rtts, after.Syscalls-before.Syscalls)
	b.Logf("%s: client napi id %d; ring fdinfo: %s | %s", m.name, cliID, cliInfo, srvInfo)
}

// startNAPIEcho opens a uring server with cfg inside h, on a goroutine of
// its own, that echoes every datagram, sleeping in Wait when it has
// nothing if wait is set and spinning otherwise. It skips (fails in CI)
// where the kind is not supported. The returned stop ends the server and
// returns its NAPI id and the NAPI lines of its ring's fdinfo.
func startNAPIEcho(b *testing.B, h *testhost.Host, wait bool, cfg dgramio.Config) (stop func() string) {
	ready := make(chan error, 1)
	done := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		srv, err := openIn(h, cfg)
		ready <- err
		if err != nil {
			return
		}
		pkts := make([]dgramio.Packet, 32)
		for ctx.Err() == nil {
			n, err := srv.Rx(pkts)
			if err != nil {
				break
			}
			for _, pk := range pkts[:n] {
				srv.QueueTo(pk.Data, pk.From)
			}
			if n > 0 {
				srv.Flush()
			} else if wait {
				wctx, c := context.WithTimeout(ctx, 50*time.Millisecond)
				srv.Wait(wctx)
				c()
			}
		}
		id, _ := napiID(srv)
		info := fmt.Sprintf("server napi id %d; ring fdinfo: %s", id, ringInfo(srv))
		srv.Close()
		done <- info
	}()
	if err := <-ready; err != nil {
		cancel()
		testutil.SkipIfNotSupported(b, err)
	}
	return func() string { cancel(); return <-done }
}

// napiClient is benchNAPI's client: one message in flight, its round
// trips timed into rtts.
type napiClient struct {
	b    *Backend
	wait bool // sleep in Wait for the answer, instead of spinning
	msg  []byte
	pkts []dgramio.Packet
	rtts []time.Duration
}

// roundTrip sends msg and waits up to a second for the echo; one that
// comes back is timed, one lost or late is not counted.
func (c *napiClient) roundTrip() error {
	start := time.Now()
	if c.b.Queue(c.msg) != nil {
		return errors.New("queue refused")
	}
	if err := c.b.Flush(); err != nil {
		return err
	}
	deadline := start.Add(time.Second)
	for {
		n, err := c.b.Rx(c.pkts)
		if err != nil {
			return err
		}
		if n > 0 {
			c.rtts = append(c.rtts, time.Since(start))
			return nil
		}
		if time.Now().After(deadline) {
			return nil // lost or late: not counted
		}
		if c.wait {
			wctx, cancel := context.WithDeadline(context.Background(), deadline)
			c.b.Wait(wctx)
			cancel()
		}
	}
}

// reportNAPI reports p50 and p99 of rtts in µs, the system calls per
// round trip of b.N, and how many of them were late.
func reportNAPI(b *testing.B, rtts []time.Duration, syscalls uint64) {
	if len(rtts) == 0 {
		b.Fatal("no round trip completed")
	}
	slices.Sort(rtts)
	us := func(q float64) float64 { return float64(rtts[int(q*float64(len(rtts)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(us(0.5), "p50-µs")
	b.ReportMetric(us(0.99), "p99-µs")
	b.ReportMetric(float64(syscalls)/float64(b.N), "syscalls/rt")
	b.ReportMetric(float64(b.N-len(rtts)), "late")
}
