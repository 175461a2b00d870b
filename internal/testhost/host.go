//go:build linux

package testhost

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
)

// Host is one end of a Pair: a network namespace and the veth end inside it.
// The fields are set by New and must not be changed. Every method is safe for
// concurrent use. After Pair.Close, methods return an error matching
// os.ErrClosed.
type Host struct {
	// Iface is the name of the veth end inside the namespace.
	Iface string
	// Index is its interface index (inside the namespace).
	Index int
	// Addr is its IPv4 address, Prefix the address with its prefix length
	// (198.18.n.1/24).
	Addr   netip.Addr
	Prefix netip.Prefix
	// Addr6 is its IPv6 address and Prefix6 the address with its prefix
	// length (2001:2:0:n::1/64), LinkLocal its fe80::/64 address: set when
	// the Pair was made with Options.IPv6, zero otherwise.
	Addr6     netip.Addr
	Prefix6   netip.Prefix
	LinkLocal netip.Addr
	// MAC is its hardware address.
	MAC net.HardwareAddr
	// NS is the namespace, an open file descriptor owned by the Host and
	// valid until Pair.Close; pass it to netlink.NewHandleAt or setns(2).
	// Do not close it.
	NS netns.NsHandle
	// Queues is the number of TX and RX queues of the veth end.
	Queues int

	mu     sync.RWMutex // read: NS in use by a setns; write: Close
	closed bool
	calls  chan func()   // served by the home thread
	gone   chan struct{} // closed when the home goroutine returns
	nl     *netlink.Handle
}

// newHost makes an anonymous network namespace, held by a new "home" OS
// thread that stays inside it until close, and a netlink handle whose socket
// lives in it.
func newHost() (*Host, error) {
	h := &Host{NS: netns.None(), calls: make(chan func()), gone: make(chan struct{})}
	ready := make(chan error, 1)
	goLocked(func() { h.home(ready) })
	if err := <-ready; err != nil {
		return nil, err
	}
	return h, nil
}

// home is the body of the host's own thread. It never unlocks the thread: a
// goroutine that returns while locked takes its thread with it, so the
// namespace never leaks into the runtime's pool.
func (h *Host) home(ready chan<- error) {
	defer close(h.gone)
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		ready <- privileged("create network namespace", "CAP_SYS_ADMIN", fmt.Errorf("unshare(CLONE_NEWNET): %w", err))
		return
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		ready <- fmt.Errorf("open netns: %w", err)
		return
	}
	nl, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		unix.Close(fd)
		ready <- fmt.Errorf("netlink socket: %w", err)
		return
	}
	h.NS, h.nl = netns.NsHandle(fd), nl
	ready <- nil
	for fn := range h.calls {
		fn()
	}
}

// privileged turns EPERM/EACCES into a *dgramio.PrivilegeError.
func privileged(op, capability string, err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return &dgramio.PrivilegeError{Op: op, Capability: capability, Err: err}
	}
	return err
}

// onHome runs fn on the home thread (inside the namespace) and waits for it.
// A panic in fn is raised again in the caller.
func (h *Host) onHome(fn func() error) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return fmt.Errorf("testhost %s: %w", h.Iface, os.ErrClosed)
	}
	var err error
	var p any
	done := make(chan struct{})
	h.calls <- func() {
		defer close(done)
		defer func() { p = recover() }()
		err = fn()
	}
	<-done
	if p != nil {
		panic(p)
	}
	return err
}

// goLocked runs fn on a new goroutine locked to an OS thread that is not
// the process's main thread, and never unlocks it: when fn returns, the
// goroutine exits locked and the runtime ends the thread, whatever fn did to
// it (unshare, setns). The main thread is avoided because the runtime
// cannot end it: a locked goroutine exiting there leaves it parked forever,
// still inside whatever namespace it joined, and /proc/self/ns/net (which
// names the main thread's namespace) would point there. If the new
// goroutine lands on the main thread it holds that thread, unchanged, while
// a second goroutine (which then cannot run on the main thread) does the
// work, and unlocks it afterwards.
func goLocked(fn func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			fn() // never unlocked: the thread ends with this goroutine
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread() // not the main thread: this goroutine's parent holds it
			fn()
		}()
		<-done
		runtime.UnlockOSThread() // the main thread was never changed
	}()
}

// errGoexit reports a function given to Do that ended its goroutine.
var errGoexit = errors.New("testhost: the function given to Do called runtime.Goexit (t.Fatal or t.FailNow inside Do? return an error instead)")

// Do runs fn on a new goroutine locked to a new OS thread that has joined
// the host's namespace (setns), waits for it and returns its error. The
// thread is never returned to the pool: the goroutine exits while still
// locked, and the runtime ends the thread. Sockets made inside fn belong to
// the namespace and stay usable from any goroutine after Do returns. Only
// fn's own goroutine is inside the namespace: goroutines that fn starts run
// on other threads, in the root namespace. A panic
// in fn is raised again in the caller of Do. fn must not call t.Fatal or
// runtime.Goexit (Do returns an error saying so if it does). Several Do may
// run at once. A thread costs tens of microseconds: do not call Do per
// packet.
func (h *Host) Do(fn func() error) error {
	h.mu.RLock()
	if h.closed {
		h.mu.RUnlock()
		return fmt.Errorf("testhost %s: %w", h.Iface, os.ErrClosed)
	}
	entered := make(chan error, 1)
	type result struct {
		err      error
		panicked bool
		p        any
	}
	res := make(chan result, 1)
	goLocked(func() {
		if err := unix.Setns(int(h.NS), unix.CLONE_NEWNET); err != nil {
			entered <- fmt.Errorf("setns: %w", err)
			return
		}
		entered <- nil
		normal := false
		defer func() {
			if normal {
				return
			}
			if p := recover(); p != nil {
				res <- result{panicked: true, p: p}
				return
			}
			res <- result{err: errGoexit}
		}()
		err := fn()
		normal = true
		res <- result{err: err}
	})
	err := <-entered
	h.mu.RUnlock()
	if err != nil {
		return err
	}
	r := <-res
	if r.panicked {
		panic(r.p)
	}
	return r.err
}

// notStarted is put in the Err field of a Command's *exec.Cmd so that a
// plain cmd.Start(), which would fork from a thread of the root namespace,
// fails instead of silently running in the wrong namespace.
type notStarted struct{ lookErr error }

func (e *notStarted) Error() string {
	return "testhost: start this command with Host.Start, Host.Run or Host.Output (cmd.Start would run it outside the namespace)"
}

// Command returns an *exec.Cmd for name and args that is to run inside the
// host's namespace, with Pdeathsig SIGKILL. Start it with h.Start, h.Run or
// h.Output; a plain cmd.Start, Run or Output returns an error. Other fields
// (Stdout, Env, Dir, ExtraFiles, ...) may be set as usual before starting.
// The process sees the namespace's interfaces through netlink and sockets;
// /sys is still the root namespace's sysfs (use ReadSys/WriteSys from Go).
func (h *Host) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Err = &notStarted{lookErr: cmd.Err}
	return cmd
}

// Start starts cmd inside the host's namespace: it forks from the host's
// own thread, which stays inside the namespace until Pair.Close. cmd may come
// from Command or from exec.Command; a cmd without SysProcAttr.Pdeathsig gets
// SIGKILL. The process is killed (SIGKILL) when the Pair is closed or this
// process dies. Wait for it with cmd.Wait from any goroutine.
func (h *Host) Start(cmd *exec.Cmd) error {
	if ns, ok := cmd.Err.(*notStarted); ok {
		cmd.Err = ns.lookErr
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if cmd.SysProcAttr.Pdeathsig == 0 {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	return h.onHome(cmd.Start)
}

// Run starts cmd inside the namespace (as Start) and waits for it.
func (h *Host) Run(cmd *exec.Cmd) error {
	if err := h.Start(cmd); err != nil {
		return err
	}
	return cmd.Wait()
}

// Output runs cmd inside the namespace and returns its standard output. If
// cmd.Stderr is nil, standard error is captured into the *exec.ExitError, as
// exec.Cmd.Output does.
func (h *Host) Output(cmd *exec.Cmd) ([]byte, error) {
	if cmd.Stdout != nil {
		return nil, errors.New("testhost: Output: Stdout already set")
	}
	var out, stderr bytes.Buffer
	cmd.Stdout = &out
	captureErr := cmd.Stderr == nil
	if captureErr {
		cmd.Stderr = &stderr
	}
	err := h.Run(cmd)
	if ee, ok := err.(*exec.ExitError); ok && captureErr {
		ee.Stderr = stderr.Bytes()
	}
	return out.Bytes(), err
}

// Link returns the veth end as netlink sees it now (flags, counters, XDP).
func (h *Host) Link() (netlink.Link, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	l, err := h.nl.LinkByIndex(h.Index)
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", h.Iface, err)
	}
	return l, nil
}

// check returns an error once the Pair is closed.
func (h *Host) check() error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return fmt.Errorf("testhost %s: %w", h.Iface, os.ErrClosed)
	}
	return nil
}

// link is a netlink.Link naming the veth end by index, for set operations.
func (h *Host) link() netlink.Link {
	return &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: h.Index, Name: h.Iface}}
}

// SetLinkUp sets the veth end administratively up or down (for link-flap
// tests). Taking either end down drops the carrier of both.
func (h *Host) SetLinkUp(up bool) error {
	return h.setFlag("up", up, h.nl.LinkSetUp, h.nl.LinkSetDown)
}

// setFlag sets a flag of the veth end with on(link) when it is to be on,
// off(link) otherwise; errors name the flag as name.
func (h *Host) setFlag(name string, to bool, on, off func(netlink.Link) error) error {
	if err := h.check(); err != nil {
		return err
	}
	set := off
	if to {
		set = on
	}
	if err := set(h.link()); err != nil {
		return fmt.Errorf("set %s %s=%v: %w", h.Iface, name, to, err)
	}
	return nil
}

// AddNeigh adds (or replaces) a permanent neighbour entry ip → mac on the
// veth end, so the kernel sends to ip without ARP (or, for an IPv6 ip,
// without neighbour discovery).
func (h *Host) AddNeigh(ip netip.Addr, mac net.HardwareAddr) error {
	if err := h.check(); err != nil {
		return err
	}
	n := &netlink.Neigh{LinkIndex: h.Index, Family: family(ip), State: netlink.NUD_PERMANENT,
		IP: net.IP(ip.AsSlice()), HardwareAddr: mac}
	if err := h.nl.NeighSet(n); err != nil {
		return fmt.Errorf("neigh set %s lladdr %s dev %s: %w", ip, mac, h.Iface, err)
	}
	return nil
}

// DelNeigh removes the neighbour entry of ip; none there is not an error.
func (h *Host) DelNeigh(ip netip.Addr) error {
	if err := h.check(); err != nil {
		return err
	}
	n := &netlink.Neigh{LinkIndex: h.Index, Family: family(ip), IP: net.IP(ip.AsSlice())}
	if err := h.nl.NeighDel(n); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("neigh del %s dev %s: %w", ip, h.Iface, err)
	}
	return nil
}

// Neigh returns the hardware address the kernel's neighbour table holds for
// ip on the veth end and the entry's NUD state (netlink.NUD_*), or a nil
// address when there is no entry.
func (h *Host) Neigh(ip netip.Addr) (net.HardwareAddr, int, error) {
	if err := h.check(); err != nil {
		return nil, 0, err
	}
	list, err := h.nl.NeighList(h.Index, family(ip))
	if err != nil {
		return nil, 0, fmt.Errorf("neigh list dev %s: %w", h.Iface, err)
	}
	for _, n := range list {
		if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == ip {
			return n.HardwareAddr, n.State, nil
		}
	}
	return nil, 0, nil
}

// DelAddr takes the host's address (Prefix) off the veth end, so the kernel
// no longer answers ARP for it (for raw paths that own the address).
func (h *Host) DelAddr() error { return h.addrOp("del", h.nl.AddrDel) }

// AddAddr puts the host's address (Prefix) back on the veth end.
func (h *Host) AddAddr() error { return h.addrOp("add", h.nl.AddrAdd) }

// addrOp applies fn (netlink's AddrAdd or AddrDel) to the host's address on
// the veth end; errors name the operation as op.
func (h *Host) addrOp(op string, fn func(netlink.Link, *netlink.Addr) error) error {
	if err := h.check(); err != nil {
		return err
	}
	if err := fn(h.link(), h.addr()); err != nil {
		return fmt.Errorf("addr %s %s dev %s: %w", op, h.Prefix, h.Iface, err)
	}
	return nil
}

// Addrs lists the IPv4 addresses on the veth end (Prefix, normally; none
// after DelAddr; none on the address-less middle ends of a wire).
func (h *Host) Addrs() ([]netip.Prefix, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	list, err := h.nl.AddrList(h.link(), netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("addr list dev %s: %w", h.Iface, err)
	}
	out := make([]netip.Prefix, 0, len(list))
	for _, a := range list {
		ip, ok := netip.AddrFromSlice(a.IP.To4())
		ones, _ := a.Mask.Size()
		if ok {
			out = append(out, netip.PrefixFrom(ip, ones))
		}
	}
	return out, nil
}

func (h *Host) addr() *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(h.Addr.AsSlice()),
		Mask: net.CIDRMask(h.Prefix.Bits(), 32)}}
}

// SetPromisc turns promiscuous mode of the veth end on or off and reads it
// back; an error if the flag did not follow.
func (h *Host) SetPromisc(on bool) error {
	if err := h.setFlag("promisc", on, h.nl.SetPromiscOn, h.nl.SetPromiscOff); err != nil {
		return err
	}
	got, err := h.Promisc()
	if err != nil {
		return err
	}
	if got != on {
		return fmt.Errorf("set %s promisc=%v: reads back %v", h.Iface, on, got)
	}
	return nil
}

// Promisc reports whether IFF_PROMISC is set on the veth end (by anyone:
// us, a packet socket, an XDP program's user).
func (h *Host) Promisc() (bool, error) {
	l, err := h.Link()
	if err != nil {
		return false, err
	}
	return l.Attrs().RawFlags&unix.IFF_PROMISC != 0, nil
}

// close ends the home thread (killing processes started there), closes the
// netlink handle and the namespace descriptor. The namespace itself goes
// when nothing else refers to it.
func (h *Host) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	if h.nl != nil {
		h.nl.Close()
	}
	close(h.calls)
	<-h.gone
	var err error
	if h.NS.IsOpen() {
		if e := h.NS.Close(); e != nil {
			err = fmt.Errorf("close netns fd: %w", e)
		}
	}
	return err
}
