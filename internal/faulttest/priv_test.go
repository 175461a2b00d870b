package faulttest

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench/cli"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// nobody is the unprivileged user and group the privilege test runs as.
const nobody = 65534

// probeResult is what privprobe writes: how dgramio.New and a short round
// trip went for one kind, as an unprivileged user.
type probeResult struct {
	Kind   string `json:"kind"`
	UID    int    `json:"uid"`
	CapEff string `json:"cap_eff"`
	// Class and Error are cli.Classify's class and the error of New, when
	// it failed; Op and Capability are those of its *dgramio.PrivilegeError.
	Class      string `json:"class,omitempty"`
	Error      string `json:"error,omitempty"`
	Op         string `json:"op,omitempty"`
	Capability string `json:"capability,omitempty"`
	// Sent and Echoed count a round trip through the backend New opened.
	Sent   int    `json:"sent"`
	Echoed int    `json:"echoed"`
	RunErr string `json:"run_error,omitempty"`
}

// privProbe is the child of TestFaultPrivileges: "privprobe --kind K
// --iface I --local A --dst B" opens a client of kind K with dgramio.New
// and, if that works, sends 20 messages to the echo at B and counts the
// answers. It writes a probeResult as JSON on out.
func privProbe(args []string, out io.Writer) int {
	fs := flag.NewFlagSet("privprobe", flag.ContinueOnError)
	kind := fs.String("kind", "", "kind")
	iface := fs.String("iface", "", "interface")
	local := fs.String("local", "", "our address")
	dst := fs.String("dst", "", "the echo's address")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	r := probeResult{Kind: *kind, UID: os.Geteuid(), CapEff: capEff()}
	cfg := dgramio.Config{Kind: dgramio.Kind(*kind), Iface: *iface, LocalIP: netip.MustParseAddr(*local),
		Dests: []netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr(*dst), port)}, Port: port, ConnectTimeout: 10 * time.Second}
	b, err := newBackend(cfg)
	if err != nil {
		r.Class, r.Error = cli.Classify(dgramio.Kind(*kind), err), err.Error()
		var pe *dgramio.PrivilegeError
		if errors.As(err, &pe) {
			r.Op, r.Capability = pe.Op, pe.Capability
		}
	} else {
		r.Sent, r.Echoed, err = roundTrip(b, 20)
		if err != nil {
			r.RunErr = err.Error()
		}
		if err := b.Close(); err != nil && r.RunErr == "" {
			r.RunErr = "close: " + err.Error()
		}
	}
	json.NewEncoder(out).Encode(&r)
	return 0
}

// capEff returns the effective capabilities of this process as
// /proc/self/status shows them.
func capEff() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown: " + err.Error()
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// roundTrip sends n numbered messages through b, one at a time, and counts
// the ones that come back intact (10 s for all).
func roundTrip(b dgramio.Backend, n int) (sent, echoed int, err error) {
	msg := make([]byte, 32)
	pkts := make([]dgramio.Packet, 16)
	end := time.Now().Add(10 * time.Second)
	for sent < n && time.Now().Before(end) {
		fillMsg(msg, 0xfa17, uint64(sent))
		if b.Queue(msg) != nil {
			return sent, echoed, fmt.Errorf("Queue refused message %d", sent)
		}
		sent++
		if err := b.Flush(); err != nil {
			return sent, echoed, err
		}
		for time.Now().Before(end) {
			k, err := b.Rx(pkts)
			if err != nil {
				return sent, echoed, err
			}
			got := false
			for _, p := range pkts[:k] {
				if seq, ok := checkMsg(p.Data, 0xfa17, len(msg)); ok && seq == uint64(sent-1) {
					echoed++
					got = true
				}
			}
			if got {
				break
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			b.Wait(ctx)
			cancel()
		}
	}
	return sent, echoed, nil
}

// kernelEchoes serves UDP and TCP echo on h's address and port with kernel
// sockets, until the test ends.
func kernelEchoes(t testing.TB, h *testhost.Host) {
	t.Helper()
	uc, err := h.ListenUDP(port)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := h.ListenTCP(port)
	if err != nil {
		uc.Close()
		t.Fatal(err)
	}
	testutil.EchoUDP(uc)
	conns := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(conns)
				return
			}
			conns <- c
			go io.Copy(c, c)
		}
	}()
	t.Cleanup(func() {
		uc.Close()
		ln.Close()
		for c := range conns {
			c.Close()
		}
	})
}

// capSet is a set of capabilities the probe keeps (as ambient
// capabilities) although it runs as nobody.
type capSet struct {
	name string
	caps []uintptr
}

var capNames = map[uintptr]string{
	unix.CAP_NET_ADMIN: "CAP_NET_ADMIN", unix.CAP_NET_RAW: "CAP_NET_RAW",
	unix.CAP_IPC_LOCK: "CAP_IPC_LOCK", unix.CAP_BPF: "CAP_BPF", unix.CAP_SYS_ADMIN: "CAP_SYS_ADMIN",
}

// rawCapSets are the capability sets the raw kinds are tried with: none,
// each one short of rawCaps (what the raw kinds of this build need), and
// all of rawCaps.
func rawCapSets() []capSet {
	sets := []capSet{{"none", nil}}
	for _, skip := range rawCaps {
		var cs []uintptr
		for _, c := range rawCaps {
			if c != skip {
				cs = append(cs, c)
			}
		}
		sets = append(sets, capSet{"without " + capNames[skip], cs})
	}
	return append(sets, capSet{"all of " + strings.Join(sortedNames(rawCaps), ", "), rawCaps})
}

// TestFaultPrivileges runs dgramio.New for every kind as user nobody
// (uid and gid 65534) inside a test namespace, in a child process. With no
// capability at all, the kernel kinds (udp, uring, tcp) open and carry a
// round trip to a kernel echo in the other namespace. Every other kind is
// tried with no capability and with each set one short of rawCaps (AF_XDP:
// creating the socket needs CAP_NET_RAW, pinning the UMEM beyond
// RLIMIT_MEMLOCK CAP_IPC_LOCK, loading the program CAP_BPF, attaching it
// and its XSKMAP CAP_NET_ADMIN; DPDK's net_af_xdp also CAP_SYS_ADMIN): it
// must fail with a *dgramio.PrivilegeError whose Capability names one that is
// missing, and leave nothing on the interface (no XDP program, promiscuous
// mode unchanged). With all of rawCaps it must work: they are enough.
func TestFaultPrivileges(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	kernelEchoes(t, p.B)
	bin := testutil.BinaryForNobody(t, "faulttest.test")
	kinds := testKinds
	for _, k := range names(dgramio.KindUDP, dgramio.KindURing, dgramio.KindTCP) {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k) // the dpdk build tests the kernel kinds here too
		}
	}
	promisc0, err := p.A.Promisc()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			if k := dgramio.Kind(kind); k == dgramio.KindUDP || k == dgramio.KindURing || k == dgramio.KindTCP {
				r := runProbe(t, p, bin, kind, nil)
				if r.Class == cli.ClassNotBuilt {
					testutil.Skip(t, fmt.Sprintf("kind %s is not reached through dgramio.New in this build yet: %s", kind, r.Error))
				}
				if r.Error != "" || r.RunErr != "" || r.Echoed != r.Sent || r.Sent == 0 {
					t.Fatalf("kind %s does not work without privileges: New: %q, run: %q, %d of %d echoed",
						kind, r.Error, r.RunErr, r.Echoed, r.Sent)
				}
				return
			}
			for _, cs := range rawCapSets() {
				r := runProbe(t, p, bin, kind, cs.caps)
				if r.Class == cli.ClassNotBuilt {
					testutil.Skip(t, fmt.Sprintf("kind %s is not reached through dgramio.New in this build yet: %s", kind, r.Error))
				}
				checkProbe(t, kind, cs, r)
				if on, id := xdpAttached(t, p.A); on {
					t.Errorf("%s: an XDP program (id %d) is on %s after the probe", cs.name, id, p.A.Iface)
				}
				if on, err := p.A.Promisc(); err != nil || on != promisc0 {
					t.Errorf("%s: promiscuous mode %v (was %v), %v", cs.name, on, promisc0, err)
				}
			}
		})
	}
}

// checkProbe checks the result of a raw kind run with the capabilities of
// cs.
func checkProbe(t *testing.T, kind string, cs capSet, r probeResult) {
	t.Helper()
	var missing []string
	for _, c := range rawCaps {
		if !slices.Contains(cs.caps, c) {
			missing = append(missing, capNames[c])
		}
	}
	sort.Strings(missing)
	if len(missing) == 0 {
		if r.Error != "" || r.RunErr != "" || r.Echoed != r.Sent || r.Sent == 0 {
			t.Errorf("%s with %s: New: %q (capability %q), run: %q, %d of %d echoed",
				kind, strings.Join(sortedNames(cs.caps), ", "), r.Error, r.Capability, r.RunErr, r.Echoed, r.Sent)
		}
		return
	}
	switch {
	case r.Error == "":
		t.Errorf("%s without %s: opened (and echoed %d of %d): it needs less than documented, or the probe is wrong",
			kind, strings.Join(missing, ", "), r.Echoed, r.Sent)
	case r.Class != cli.ClassPrivilege || r.Capability == "":
		t.Errorf("%s without %s: the error is not a *dgramio.PrivilegeError naming a capability (class %s): %s",
			kind, strings.Join(missing, ", "), r.Class, r.Error)
	default:
		named := false
		for _, m := range missing {
			named = named || strings.Contains(r.Capability, m)
		}
		if !named {
			t.Errorf("%s without %s: the PrivilegeError names %q, none of the missing ones: %s",
				kind, strings.Join(missing, ", "), r.Capability, r.Error)
		}
	}
	t.Logf("%s with {%s}: %s", kind, cs.name, r.Error)
}

func sortedNames(cs []uintptr) []string {
	var s []string
	for _, c := range cs {
		s = append(s, capNames[c])
	}
	sort.Strings(s)
	return s
}

// runProbe runs privprobe for kind as nobody, keeping the capabilities
// caps, inside p.A's namespace.
func runProbe(t *testing.T, p *testhost.Pair, bin, kind string, caps []uintptr) probeResult {
	t.Helper()
	cmd := p.A.Command(bin, "privprobe", "--kind", kind, "--iface", p.A.Iface,
		"--local", addrFor(kind, p.A).String(), "--dst", p.B.Addr.String())
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Dir = filepath.Dir(bin)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}
	cmd.SysProcAttr.AmbientCaps = caps
	var stderr testutil.LockedBuffer
	cmd.Stderr = &stderr
	out, err := p.A.Output(cmd)
	if err != nil {
		t.Fatalf("privprobe %s: %v; stderr:\n%s", kind, err, stderr.String())
	}
	var r probeResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("privprobe %s wrote %q: %v; stderr:\n%s", kind, out, err, stderr.String())
	}
	if r.UID != nobody {
		t.Fatalf("the probe ran as uid %d", r.UID)
	}
	t.Logf("%s as uid %d with {%s} (CapEff %s): %+v", kind, r.UID, strings.Join(sortedNames(caps), ","), r.CapEff, r)
	return r
}
