//go:build dpdk

package dpdk

// #include <stdlib.h>
// #include "shim.h"
import "C"

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/cpu"
	"golang.org/x/sys/unix"
)

// EALOptions are the process-wide settings of DPDK's EAL. The first call to
// StartEAL or Open decides them for the life of the process; the EAL cannot
// be restarted, nor started again after a failed start.
type EALOptions struct {
	// HugePages runs the EAL on hugepages (--in-memory). They must be
	// reserved beforehand (vm.nr_hugepages). Default: ordinary memory
	// (--no-huge --no-shconf), which every vdev here works with.
	HugePages bool
	// PCI lists the PCI devices allowed at start (-a). Without any, the EAL
	// is started with --no-pci and only vdevs can be opened.
	PCI []string
	// MemoryMB is the memory of an EAL without hugepages (-m), in MiB.
	// Default 512. It is reserved address space; only what the mempools
	// use is touched.
	MemoryMB int
	// ExtraArgs are appended to the EAL arguments (and so override ours;
	// "--log-level=debug" makes DPDK talkative).
	ExtraArgs []string
	// Quiet stops DPDK's log from being echoed on stderr. It is still kept
	// for error messages.
	Quiet bool
}

var eal struct {
	once sync.Once
	err  error
	args []string
}

// StartEAL starts the EAL once per process with o, or returns the result of
// the start that already happened (o is then ignored). The main lcore runs
// on the CPUs the calling thread may run on now: pin the calling thread
// first (internal/cpu.Pin) to put DPDK's main lcore on one core. The start
// takes about 200 ms (the EAL calibrates its timer), loads every PMD the
// distribution ships, and leaves nothing under /var/run/dpdk: the run-time
// directory is removed as soon as the EAL is up.
//
// Errors are a *dgramio.UnsupportedError when hugepages are asked for but none
// are free, a *dgramio.PrivilegeError when the EAL is refused for want of
// privileges, and otherwise the EAL's own complaint, taken from its log.
func StartEAL(o EALOptions) error {
	eal.once.Do(func() { eal.err = startEAL(o) })
	return eal.err
}

// EALArgs returns the arguments the EAL was started with, or nil before it
// was. The slice is a copy.
func EALArgs() []string { return append([]string(nil), eal.args...) }

func startEAL(o EALOptions) error {
	if o.HugePages {
		if free, err := freeHugePages(); err != nil || free == 0 {
			return dgramio.NotSupported("DPDK on hugepages", "", "no free hugepages: reserve some (sysctl vm.nr_hugepages=512) or leave DPDK.HugePages off", err)
		}
	}
	cpus, err := cpu.Current()
	if err != nil {
		return fmt.Errorf("dpdk: EAL: read CPU affinity: %w", err)
	}
	args := ealArgs(o, cpus, os.Getpid())

	runDir := runtimeBase()
	_, statErr := os.Stat(runDir)
	existed := statErr == nil

	// The EAL runs on a thread of its own that takes the caller's affinity,
	// so that the lcore it binds to is where the caller runs, and so that
	// the EAL's own threads (interrupts) start from a thread of the root
	// network namespace even when the caller sits in another one.
	type result struct {
		err error
		log string
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread carries the EAL's lcore state and the
		// affinity set below, so it ends with the goroutine.
		var set unix.CPUSet
		for _, c := range cpus {
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			done <- result{err: fmt.Errorf("sched_setaffinity: %w", err)}
			return
		}
		C.dg_log_echo = 1
		if o.Quiet {
			C.dg_log_echo = 0
		}
		if C.dg_log_setup() != 0 {
			done <- result{err: errors.New("cannot redirect the DPDK log")}
			return
		}
		argv := make([]*C.char, len(args)+1)
		for i, a := range args {
			argv[i] = C.CString(a)
		}
		// rte_eal_init keeps pointers into argv: it is never freed.
		cargv := (**C.char)(C.malloc(C.size_t(len(argv)) * C.size_t(unsafe.Sizeof(argv[0]))))
		copy(unsafe.Slice(cargv, len(argv)), argv)
		// The EAL opens its descriptors without close-on-exec: no fork
		// until they have it (see closeOnExec).
		syscall.ForkLock.RLock()
		before := inheritableFDs()
		ret := C.dg_eal_init(C.int(len(args)), cargv)
		closeOnExec(before)
		syscall.ForkLock.RUnlock()
		if ret < 0 {
			done <- result{err: rteError(int(C.dg_rte_errno())), log: takeLog()}
			return
		}
		done <- result{log: takeLog()}
	}()
	r := <-done
	if r.err != nil {
		return ealError(args, r.err, r.log)
	}
	eal.args = args
	removeRuntimeDir(runDir, existed)
	return nil
}

// ealArgs builds the EAL's argument list.
func ealArgs(o EALOptions, cpus []int, pid int) []string {
	args := []string{
		"dgramio",
		"--lcores=0@(" + cpu.FormatList(cpus) + ")",
		"--file-prefix=dgramio_" + strconv.Itoa(pid),
		"--no-telemetry",
		"--log-level=warning",
	}
	if o.HugePages {
		args = append(args, "--in-memory")
	} else {
		mem := o.MemoryMB
		if mem <= 0 {
			mem = 512
		}
		args = append(args, "--no-huge", "--no-shconf", "-m", strconv.Itoa(mem))
	}
	if len(o.PCI) == 0 {
		args = append(args, "--no-pci")
	}
	for _, p := range o.PCI {
		args = append(args, "-a", p)
	}
	return append(args, o.ExtraArgs...)
}

func ealError(args []string, err error, log string) error {
	msg := fmt.Sprintf("dpdk: EAL start (%s): %v", strings.Join(args[1:], " "), err)
	if l := lastLines(log, 3); l != "" {
		msg += "; DPDK says: " + l
	}
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		return &dgramio.PrivilegeError{Op: msg, Capability: "root (CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_IPC_LOCK)", Err: err}
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// runtimeBase is the directory under which the EAL makes its per-prefix
// run-time directory: /var/run/dpdk for root, else XDG_RUNTIME_DIR/dpdk or
// /tmp/dpdk.
func runtimeBase() string {
	if os.Geteuid() == 0 {
		return "/var/run/dpdk"
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		return filepath.Join(x, "dpdk")
	}
	return "/tmp/dpdk"
}

// removeRuntimeDir removes the EAL's run-time directory of this process
// (with --no-shconf or --in-memory nothing in it is used after the start),
// and base too when the EAL created it and nothing else is left there.
func removeRuntimeDir(base string, existed bool) {
	dir := C.GoString(C.rte_eal_get_runtime_dir())
	if dir != "" && strings.HasPrefix(filepath.Clean(dir), filepath.Clean(base)+"/") {
		_ = os.RemoveAll(dir)
	}
	if !existed {
		_ = os.Remove(base) // fails, harmlessly, when another process uses it
	}
}

// RuntimeDir returns the EAL's run-time directory of this process (which
// StartEAL has removed), or "" before the EAL is started.
func RuntimeDir() string {
	if eal.args == nil {
		return ""
	}
	return C.GoString(C.rte_eal_get_runtime_dir())
}

func freeHugePages() (int, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "HugePages_Free:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, s.Err()
}

// rteError converts a positive errno or rte_errno value into an error:
// a syscall.Errno, or DPDK's own text for its codes above 1000.
func rteError(code int) error {
	if code < 0 {
		code = -code
	}
	switch {
	case code == 0:
		return errors.New("failed (no errno)")
	case code < 1000:
		return syscall.Errno(code)
	default:
		return errors.New(C.GoString(C.rte_strerror(C.int(code))))
	}
}

// takeLog returns what DPDK logged since the last call.
func takeLog() string {
	var buf [8192]byte
	n := C.dg_log_take((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	return string(buf[:n])
}

// lastLines returns the last n non-empty lines of log, joined by " | ".
func lastLines(log string, n int) string {
	var out []string
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			out = append([]string{l}, out...)
		}
	}
	return strings.Join(out, " | ")
}
