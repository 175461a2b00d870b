package cli

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench"
	"github.com/dgramio/dgramio/internal/bench/preflight"
	"github.com/dgramio/dgramio/internal/cpu"
)

// uringFlags are the flags of kind uring's options (Config.URing) that
// echo and loadgen share.
type uringFlags struct {
	sqpollCPU *int
	napi      *bool
}

// addURingFlags defines --sqpoll-cpu and --napi on fs.
func addURingFlags(fs *flag.FlagSet) *uringFlags {
	return &uringFlags{
		sqpollCPU: fs.Int("sqpoll-cpu", -1, "kind uring: a kernel thread takes the submissions (SQPOLL), pinned to this CPU (IORING_SETUP_SQ_AFF), which must differ from the poller's (--cpu); -1: no SQPOLL"),
		napi:      fs.Bool("napi", false, "kind uring: register NAPI busy polling on the ring (Linux 6.9) for SO_BUSY_POLL's time; it acts while the poller sleeps in Wait (--poll yield), and on veth only with GRO on at the receiving end"),
	}
}

// apply sets cfg.URing from the flags. They are options of kind uring:
// given with another kind, they are refused rather than ignored.
func (u *uringFlags) apply(cfg *dgramio.Config) error {
	sq := *u.sqpollCPU
	if sq < -1 {
		return fmt.Errorf("--sqpoll-cpu %d: a CPU number, or -1 for no SQPOLL", sq)
	}
	if (sq >= 0 || *u.napi) && cfg.Kind != dgramio.KindURing {
		return fmt.Errorf("--sqpoll-cpu and --napi are options of kind uring, not of %s", cfg.Kind)
	}
	if sq >= 0 {
		cfg.URing.SQPoll = true
		cfg.URing.SQCPU = &sq
	}
	cfg.URing.NAPI = *u.napi
	return nil
}

// record writes the flags into a tool's JSON fields.
func (u *uringFlags) record(sqpollCPU **int, napi *bool) {
	if c := *u.sqpollCPU; c >= 0 {
		*sqpollCPU = &c
	}
	*napi = *u.napi
}

// hostCPUs returns the CPUs the run may use: NetbenchOptions.AllowedCPUs,
// or those this process may (cpu.Allowed).
func (nb *netbench) hostCPUs() ([]int, error) {
	if len(nb.o.AllowedCPUs) > 0 {
		return slices.Clone(nb.o.AllowedCPUs), nil
	}
	return cpu.Allowed()
}

// sqpollNeed is the number of CPUs a uring+sqpoll row needs with one
// queue: both tools' pollers and both tools' SQ threads, all distinct.
const sqpollNeed = 4

// pickSQPollCPUs picks the CPUs of the two SQ threads of a uring+sqpoll
// row, the loadgen's and the echo's, apart from both pollers (loadCPU,
// echoCPU) and from each other. given, when set, is --sqpoll-cpus (two
// CPUs) and is only checked. Otherwise CPUs that are not hyperthread
// siblings of a poller come first (siblings reports them; nil: none
// known). A host that does not allow enough CPUs gets reason, the row's
// text, instead of CPUs: an SQ thread that shares a CPU with a busy
// poller measures the scheduler, not io_uring (its round trip turns from
// microseconds into milliseconds).
func pickSQPollCPUs(allowed, given []int, loadCPU, echoCPU int, siblings func(int) []int) (load, echo int, reason string) {
	if len(allowed) == 0 {
		return -1, -1, "the CPUs this process may use are unknown, so the SQ threads cannot be given CPUs of their own"
	}
	if loadCPU < 0 || echoCPU < 0 {
		return -1, -1, "the tools are not pinned, so the SQ threads cannot be kept off the pollers' CPUs"
	}
	if len(allowed) < sqpollNeed {
		return -1, -1, fmt.Sprintf("needs %d CPUs (2 pollers, 2 SQ threads); this host allows %d (%s)",
			sqpollNeed, len(allowed), cpu.FormatList(allowed))
	}
	if loadCPU == echoCPU {
		return -1, -1, fmt.Sprintf("needs %d CPUs (2 pollers, 2 SQ threads), all distinct; both pollers are on CPU %d", sqpollNeed, loadCPU)
	}
	if len(given) > 0 {
		if len(given) != 2 {
			return -1, -1, fmt.Sprintf("--sqpoll-cpus %s: give two CPUs, the loadgen's SQ thread's and the echo's", formatCPUs(given))
		}
		for _, c := range given {
			if !slices.Contains(allowed, c) {
				return -1, -1, fmt.Sprintf("--sqpoll-cpus: CPU %d is not one this process may use (%s)", c, cpu.FormatList(allowed))
			}
		}
		if l, e := given[0], given[1]; l == e || l == loadCPU || l == echoCPU || e == loadCPU || e == echoCPU {
			return -1, -1, fmt.Sprintf("--sqpoll-cpus %s: the SQ threads need CPUs of their own, apart from each other and from the pollers' (%d, %d)", formatCPUs(given), loadCPU, echoCPU)
		}
		return given[0], given[1], ""
	}
	near := map[int]bool{}
	for _, p := range []int{loadCPU, echoCPU} {
		if siblings != nil {
			for _, s := range siblings(p) {
				near[s] = true
			}
		}
	}
	var free []int
	for pass := 0; pass < 2; pass++ {
		for _, c := range allowed {
			if c == loadCPU || c == echoCPU || slices.Contains(free, c) {
				continue
			}
			if pass == 0 && near[c] {
				continue // a poller's hyperthread sibling: last resort
			}
			free = append(free, c)
		}
	}
	if len(free) < 2 {
		return -1, -1, fmt.Sprintf("needs %d CPUs (2 pollers, 2 SQ threads), all distinct; this host allows %s and the pollers use %d and %d",
			sqpollNeed, cpu.FormatList(allowed), loadCPU, echoCPU)
	}
	return free[0], free[1], ""
}

// variantFailure says why the row of kind's variant with n queues cannot
// run here, before any cell runs; nil when it can.
func (nb *netbench) variantFailure(variant string, n int) *Failure {
	if bench.IsIPv6(variant) && nb.o.IfaceA != "" {
		return &Failure{Class: ClassNotSupported, Error: "IPv6 rows run on the veth test hosts only: real ports (--iface-a, --iface-b) get IPv4 addresses"}
	}
	if variant == bench.VariantNetstackIPv6 && n > 1 {
		return &Failure{Class: ClassNotSupported, Error: "an IPv6 client on netstack runs on one queue: its queues do not share neighbour advertisements (the native engine's do)"}
	}
	if variant != bench.VariantSQPoll {
		return nil
	}
	if n > 1 {
		return &Failure{Class: ClassNotSupported, Error: fmt.Sprintf("uring+sqpoll runs with one queue only: Config.URing.SQCPU is one CPU, which the SQ threads of all %d queues would share", n)}
	}
	if nb.sqReason != "" {
		return &Failure{Class: ClassNotSupported, Error: nb.sqReason}
	}
	return nil
}

// variantArgs returns the flags that make tool ("echo" or "loadgen") run
// variant: --sqpoll-cpu with the tool's SQ CPU, or --napi (and, for the
// echo, --poll yield unless every row yields already: NAPI busy polling
// acts only while the poller sleeps in io_uring_enter), or --tcp-stack
// for an engine of tcp-xdp and tcp-dpdk (both tools run it).
func (nb *netbench) variantArgs(variant, tool string) []string {
	switch variant = bench.BaseVariant(variant); variant {
	case bench.VariantSQPoll:
		c := nb.sqLoad
		if tool == "echo" {
			c = nb.sqEcho
		}
		return []string{"--sqpoll-cpu", strconv.Itoa(c)}
	case bench.VariantNAPI:
		if tool == "echo" && !nb.o.Wait {
			return []string{"--napi", "--poll", string(dgramio.PollYield)}
		}
		return []string{"--napi"}
	case bench.VariantNative, bench.VariantNetstack:
		return []string{"--tcp-stack", variant}
	case bench.VariantRaw:
		if tool == "echo" {
			return []string{"--framing", "raw"}
		}
	}
	return nil
}

// variantNotes are the remarks every cell of variant carries.
func (nb *netbench) variantNotes(variant string) []string {
	if base := bench.BaseVariant(variant); base != variant && base != "" {
		return append(nb.variantNotes(base), nb.variantNotes(bench.VariantIPv6)...)
	}
	switch variant {
	case bench.VariantSQPoll:
		return []string{fmt.Sprintf("SQPOLL: the loadgen's SQ thread on CPU %d, the echo's on CPU %d, apart from the pollers (%d, %d)",
			nb.sqLoad, nb.sqEcho, nb.o.LoadCPU, nb.o.EchoCPU)}
	case bench.VariantNAPI:
		if nb.o.Wait {
			return []string{"NAPI busy polling registered on both rings; it acts while a poller sleeps in Wait (io_uring_enter), as both do here (poll yield)"}
		}
		return []string{"NAPI busy polling registered on both rings; the echo sleeps in Wait (io_uring_enter, poll yield), where the kernel busy polls the socket's NAPI for SO_BUSY_POLL's time, " +
			"instead of spinning on the CQ as in row uring; the loadgen spins as in every row (NAPI does not act there)"}
	case bench.VariantRaw:
		return []string{"raw framing: the echo reflects each connection's bytes as they came (Config.Framing raw); the loadgen sends and reads u16 records as in the plain row"}
	}
	return nil
}

// sqpollEnv picks the SQ threads' CPUs when the run has a uring+sqpoll
// row, and records them or why there are none.
func (nb *netbench) sqpollEnv(allowed []int) {
	has := false
	for _, k := range nb.o.Kinds {
		if _, v := bench.SplitRow(k); v == bench.VariantSQPoll {
			has = true
		}
	}
	if !has {
		return
	}
	sib := func(c int) []int {
		s, _ := preflight.Host.Siblings(c)
		return s
	}
	nb.sqLoad, nb.sqEcho, nb.sqReason = pickSQPollCPUs(allowed, nb.o.SQPollCPUs, nb.o.LoadCPU, nb.o.EchoCPU, sib)
	e := &nb.rep.Env
	if nb.sqReason != "" {
		e.Notes = append(e.Notes, "uring+sqpoll: "+nb.sqReason+": the row is not measured")
		return
	}
	e.Pinning += fmt.Sprintf("; uring+sqpoll: the loadgen's SQ thread on CPU %d, the echo's on CPU %d", nb.sqLoad, nb.sqEcho)
}

// parseRows checks the row names of --kinds: kinds, and variants of a
// kind ("uring+napi").
func parseRows(names []string) error {
	var bad []string
	for _, n := range names {
		kind, _, err := bench.ParseRow(n)
		switch {
		case err != nil:
			bad = append(bad, err.Error())
		case !dgramio.Kind(kind).Known():
			why := fmt.Sprintf("%q: not a kind; the kinds are %s", kind, strings.Join(kindNames(dgramio.Kinds()), ", "))
			if low := strings.ToLower(kind); low != kind && dgramio.Kind(low).Known() {
				why = fmt.Sprintf("%q: kinds are written in lower case: %s", kind, low)
			}
			bad = append(bad, why)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("--kinds: %s", strings.Join(bad, "; "))
	}
	return nil
}

// checkNetbenchSize refuses a --size that a kind of the run cannot send
// (netbench gives the tools --max-datagram when the size needs it), before
// the test hosts are made.
func checkNetbenchSize(rows []string, size int) error {
	for _, r := range rows {
		kind, _ := bench.SplitRow(r)
		cfg := dgramio.Config{Kind: dgramio.Kind(kind)}
		if size > dgramio.DefaultMaxDatagram {
			cfg.MaxDatagram = min(size, maxMessage(cfg.Kind))
		}
		if err := checkSize(cfg, size); err != nil {
			return err
		}
	}
	return nil
}

// maxMessage is the largest --max-datagram of kind.
func maxMessage(kind dgramio.Kind) int {
	if kind.IsStream() {
		return dgramio.MaxRecord
	}
	return 9000 - 28
}
