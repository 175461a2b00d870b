//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package iouring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
)

// Options configure a ring.
type Options struct {
	// Entries is the SQ size; the kernel rounds it up to a power of two.
	Entries uint32
	// CQEntries is the CQ size; 0 means twice Entries (the kernel's
	// default). It must be at least Entries.
	CQEntries uint32
	// SingleIssuer sets IORING_SETUP_SINGLE_ISSUER (6.0): only the thread
	// that creates the ring may submit to it or register on it (others get
	// EEXIST). In Go that means the creating goroutine must be locked to
	// its OS thread (runtime.LockOSThread) for the ring's life.
	SingleIssuer bool
	// SQPoll makes a kernel thread take submissions (IORING_SETUP_SQPOLL):
	// Submit then only writes memory, and enters the kernel only to wake a
	// thread that went idle.
	SQPoll bool
	// SQCPU, with SQPoll, pins the SQ thread to that CPU
	// (IORING_SETUP_SQ_AFF); -1 leaves it to the scheduler. The CPU must be
	// in the process's cpuset, or the kernel answers EINVAL.
	SQCPU int
	// SQIdle is how long the SQ thread spins before it sleeps. 0: the
	// kernel's default (1 s).
	SQIdle time.Duration
	// CoopTaskrun sets IORING_SETUP_COOP_TASKRUN|IORING_SETUP_TASKRUN_FLAG
	// (5.19): completions are run without interrupting the task; SQFlags
	// shows SQTaskrun when they wait, and the task must then enter.
	CoopTaskrun bool
}

// Ring is one io_uring instance: the SQ and CQ rings and the SQE array
// mapped into this process.
//
// Threading: one goroutine submits and reaps (with SingleIssuer, one OS
// thread). Close may run on another goroutine only when that goroutine is
// not inside a Ring method.
type Ring struct {
	fd       int
	flags    uint32
	features uint32

	ringMem []byte // SQ and CQ rings (one mapping with FeatSingleMmap)
	cqMem   []byte // the CQ ring when the kernel maps it apart
	sqeMem  []byte

	sqHead, sqTail, sqFlags, sqDropped *uint32
	sqMask, sqEntries                  uint32
	sqes                               []SQE
	sqeTail                            uint32 // prepared, not yet published
	sqePub                             uint32 // published to the kernel

	cqHead, cqTail, cqOverflow *uint32
	cqMask, cqEntries          uint32
	cqes                       []CQE

	scratch *Region // getevents arg and timespec of timed waits

	syscalls atomic.Uint64 // io_uring_enter and io_uring_register calls
}

// Syscalls returns how many io_uring_enter and io_uring_register calls were
// made through this ring, EINTR retries included. Safe from any goroutine.
func (r *Ring) Syscalls() uint64 { return r.syscalls.Load() }

// New sets up a ring (io_uring_setup) and maps it. Errors: a
// dgramio.ErrNotSupported match when io_uring is missing or turned off (the
// sysctl kernel.io_uring_disabled), a *dgramio.PrivilegeError when the process
// is not allowed to use it, and a plain wrapped errno otherwise.
func New(o Options) (*Ring, error) {
	if o.Entries == 0 {
		return nil, errors.New("iouring: Entries is 0")
	}
	var p params
	p.Flags = SetupClamp
	if o.CQEntries != 0 {
		if o.CQEntries < o.Entries {
			return nil, fmt.Errorf("iouring: CQEntries %d < Entries %d", o.CQEntries, o.Entries)
		}
		p.Flags |= SetupCQSize
		p.CQEntries = o.CQEntries
	}
	if o.SingleIssuer {
		p.Flags |= SetupSingleIssuer
	}
	if o.SQPoll {
		p.Flags |= SetupSQPoll
		if o.SQCPU >= 0 {
			p.Flags |= SetupSQAff
			p.SQThreadCPU = uint32(o.SQCPU)
		}
		p.SQThreadIdle = uint32(o.SQIdle / time.Millisecond)
	}
	if o.CoopTaskrun {
		p.Flags |= SetupCoopTaskrun | SetupTaskrunFlag
	}
	flagsWanted := p.Flags
	p.Flags |= SetupSubmitAll // best effort: dropped below on kernels before 5.18
	fd, err := setup(o.Entries, &p)
	if err == unix.EINVAL {
		p = params{Flags: flagsWanted, CQEntries: p.CQEntries, SQThreadCPU: p.SQThreadCPU, SQThreadIdle: p.SQThreadIdle}
		fd, err = setup(o.Entries, &p)
	}
	if err != nil {
		return nil, setupError(err, o)
	}
	r := &Ring{fd: fd, flags: p.Flags, features: p.Features}
	if err := r.mapRings(&p); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func setup(entries uint32, p *params) (int, error) {
	for {
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return -1, errno
		}
		unix.CloseOnExec(int(fd))
		return int(fd), nil
	}
}

func setupError(err error, o Options) error {
	switch err {
	case unix.ENOSYS:
		return dgramio.NotSupported("io_uring", MinKernelRing, "this kernel was built without io_uring (CONFIG_IO_URING)", err)
	case unix.EPERM, unix.EACCES:
		level, _ := disabledLevel()
		if level >= 2 {
			return dgramio.NotSupported("io_uring", "", "the sysctl kernel.io_uring_disabled is 2; set it to 0", err)
		}
		return &dgramio.PrivilegeError{Op: "io_uring_setup", Capability: "CAP_SYS_ADMIN or membership of the group kernel.io_uring_group (kernel.io_uring_disabled=1), or a seccomp filter allowing io_uring", Err: err}
	case unix.EEXIST:
		return fmt.Errorf("io_uring_setup: %w", err)
	case unix.EINVAL:
		if o.SingleIssuer {
			if v, verr := RunningKernel(); verr == nil && !v.AtLeast(MinKernelSingleIssuer) {
				return dgramio.NotSupported("IORING_SETUP_SINGLE_ISSUER", MinKernelSingleIssuer, "", err)
			}
		}
		if o.SQPoll && o.SQCPU >= 0 {
			return fmt.Errorf("io_uring_setup: SQ thread CPU %d refused (offline or outside this process's cpuset): %w", o.SQCPU, err)
		}
	}
	return fmt.Errorf("io_uring_setup: %w", err)
}

func (r *Ring) mapRings(p *params) error {
	sqSize := int(p.SQOff.Array) + int(p.SQEntries)*4
	cqSize := int(p.CQOff.CQEs) + int(p.CQEntries)*int(unsafe.Sizeof(CQE{}))
	single := p.Features&FeatSingleMmap != 0
	if single && cqSize > sqSize {
		sqSize = cqSize
	}
	var err error
	r.ringMem, err = unix.Mmap(r.fd, offSQRing, sqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap SQ ring: %w", err)
	}
	cqMem := r.ringMem
	if !single {
		r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return fmt.Errorf("mmap CQ ring: %w", err)
		}
		cqMem = r.cqMem
	}
	sqeSize := int(p.SQEntries) * int(unsafe.Sizeof(SQE{}))
	r.sqeMem, err = unix.Mmap(r.fd, offSQEs, sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("mmap SQEs: %w", err)
	}
	u32 := func(mem []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }
	r.sqHead = u32(r.ringMem, p.SQOff.Head)
	r.sqTail = u32(r.ringMem, p.SQOff.Tail)
	r.sqFlags = u32(r.ringMem, p.SQOff.Flags)
	r.sqDropped = u32(r.ringMem, p.SQOff.Dropped)
	r.sqMask = *u32(r.ringMem, p.SQOff.RingMask)
	r.sqEntries = *u32(r.ringMem, p.SQOff.RingEntries)
	r.sqes = unsafe.Slice((*SQE)(unsafe.Pointer(&r.sqeMem[0])), r.sqEntries)
	// The SQ array maps ring slots to SQE indexes; identity, set once.
	array := unsafe.Slice(u32(r.ringMem, p.SQOff.Array), r.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.sqeTail = atomic.LoadUint32(r.sqTail)
	r.sqePub = r.sqeTail

	r.cqHead = u32(cqMem, p.CQOff.Head)
	r.cqTail = u32(cqMem, p.CQOff.Tail)
	r.cqOverflow = u32(cqMem, p.CQOff.Overflow)
	r.cqMask = *u32(cqMem, p.CQOff.RingMask)
	r.cqEntries = *u32(cqMem, p.CQOff.RingEntries)
	r.cqes = unsafe.Slice((*CQE)(unsafe.Pointer(&cqMem[p.CQOff.CQEs])), r.cqEntries)

	r.scratch, err = NewRegion(int(unsafe.Sizeof(geteventsArg{}) + unsafe.Sizeof(timespec{})))
	return err
}

// Close unmaps the rings and closes the ring. The kernel then cancels what
// is still in flight: once close(2) of the last reference returns, the
// ring's context is dying and its pending requests end without touching
// user memory again. The mappings hold references to the ring file, so
// they are removed first and the file closed last.
func (r *Ring) Close() error {
	var errs []error
	for _, m := range []*[]byte{&r.sqeMem, &r.cqMem, &r.ringMem} {
		if *m != nil {
			if err := unix.Munmap(*m); err != nil {
				errs = append(errs, fmt.Errorf("munmap ring: %w", err))
			}
			*m = nil
		}
	}
	r.sqes, r.cqes = nil, nil
	if r.scratch != nil {
		errs = append(errs, r.scratch.Free())
		r.scratch = nil
	}
	if r.fd >= 0 {
		if err := unix.Close(r.fd); err != nil {
			errs = append(errs, fmt.Errorf("close ring: %w", err))
		}
		r.fd = -1
	}
	return errors.Join(errs...)
}

// FD returns the ring's file descriptor.
func (r *Ring) FD() int { return r.fd }

// Flags returns the setup flags the kernel accepted.
func (r *Ring) Flags() uint32 { return r.flags }

// Features returns the IORING_FEAT_ bits the kernel reported.
func (r *Ring) Features() uint32 { return r.features }

// SQEntries and CQEntries return the ring sizes the kernel chose.
func (r *Ring) SQEntries() uint32 { return r.sqEntries }

// CQEntries returns the CQ size the kernel chose.
func (r *Ring) CQEntries() uint32 { return r.cqEntries }

// SQFlags returns the SQ ring's flags (SQNeedWakeup, SQCQOverflow,
// SQTaskrun), read atomically.
func (r *Ring) SQFlags() uint32 { return atomic.LoadUint32(r.sqFlags) }

// SQDropped returns how many SQEs the kernel refused as invalid.
func (r *Ring) SQDropped() uint32 { return atomic.LoadUint32(r.sqDropped) }

// CQOverflow returns how many completions the kernel could not post
// (without FeatNoDrop they were lost; with it they wait in the kernel).
func (r *Ring) CQOverflow() uint32 { return atomic.LoadUint32(r.cqOverflow) }

// GetSQE returns the next free SQE, zeroed, or nil when the SQ is full. The
// SQE is the kernel's to read once Submit publishes it; fill it before.
func (r *Ring) GetSQE() *SQE {
	head := atomic.LoadUint32(r.sqHead)
	if r.sqeTail-head >= r.sqEntries {
		return nil
	}
	e := &r.sqes[r.sqeTail&r.sqMask]
	*e = SQE{}
	r.sqeTail++
	return e
}

// Unsubmitted returns how many prepared SQEs the kernel has not taken yet.
func (r *Ring) Unsubmitted() uint32 { return r.sqeTail - atomic.LoadUint32(r.sqHead) }

// Retract takes back the prepared SQEs the kernel has not taken yet,
// calling fn on each (oldest first), and returns how many there were. It
// does nothing on an SQPOLL ring, whose kernel thread takes SQEs on its
// own. Call it only when no io_uring_enter on the ring is in progress
// (e.g. before closing a ring whose last submission met EAGAIN).
func (r *Ring) Retract(fn func(*SQE)) int {
	if r.flags&SetupSQPoll != 0 {
		return 0
	}
	head := atomic.LoadUint32(r.sqHead)
	for i := head; i != r.sqeTail; i++ {
		fn(&r.sqes[i&r.sqMask])
	}
	n := int(r.sqeTail - head)
	r.sqeTail = head
	atomic.StoreUint32(r.sqTail, head)
	r.sqePub = head
	return n
}

// publish makes the prepared SQEs visible to the kernel. The atomic store
// orders the SQE writes before the tail (a release, and on amd64 a full
// barrier, which the SQPOLL wake-up check below relies on).
func (r *Ring) publish() {
	if r.sqePub != r.sqeTail {
		atomic.StoreUint32(r.sqTail, r.sqeTail)
		r.sqePub = r.sqeTail
	}
}

// Submit publishes the prepared SQEs and has the kernel take at most max of
// them (max <= 0: all). Without SQPOLL that is one io_uring_enter; with
// SQPOLL it enters only when the SQ thread sleeps (SQNeedWakeup), and
// returns the number published. It returns how many the kernel took.
// EINTR is retried; EAGAIN and EBUSY (the kernel is short of memory or of
// CQ room) return 0 and nil: what was not taken stays in the SQ for the
// next Submit.
func (r *Ring) Submit(max int) (int, error) {
	r.publish()
	if r.flags&SetupSQPoll != 0 {
		n := int(r.Unsubmitted())
		if atomic.LoadUint32(r.sqFlags)&SQNeedWakeup != 0 {
			if _, err := r.Enter(0, 0, EnterSQWakeup); err != nil {
				return 0, err
			}
		}
		return n, nil
	}
	n := r.Unsubmitted()
	if max > 0 && uint32(max) < n {
		n = uint32(max)
	}
	if n == 0 {
		return 0, nil
	}
	got, err := r.Enter(n, 0, 0)
	if err == unix.EAGAIN || err == unix.EBUSY {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("io_uring_enter: %w", err)
	}
	return got, nil
}

// Enter is io_uring_enter(2) without an argument, EINTR retried (Go's
// preemption signal interrupts waits). It returns the kernel's result and
// the bare errno, unwrapped, so callers can test it cheaply.
func (r *Ring) Enter(toSubmit, minComplete, flags uint32) (int, error) {
	for {
		r.syscalls.Add(1)
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), uintptr(minComplete), uintptr(flags), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, errno
		}
		return int(n), nil
	}
}

// ErrTimeout is returned by WaitCQE when the timeout passed first.
var ErrTimeout = errors.New("iouring: wait timed out")

// WaitCQE submits what is prepared and sleeps in the kernel until at least
// one completion is in the CQ or timeout passes (IORING_ENTER_EXT_ARG,
// 5.11): nil, ErrTimeout, or a wrapped errno. A signal (EINTR, e.g. Go's
// preemption) ends the sleep early with nil, so callers loop on their own
// condition. It returns at once when the CQ is not empty.
func (r *Ring) WaitCQE(timeout time.Duration) error {
	r.publish()
	if r.CQReady() > 0 {
		return nil
	}
	if r.features&FeatExtArg == 0 {
		return dgramio.NotSupported("io_uring wait with timeout (IORING_ENTER_EXT_ARG)", MinKernelExtArg, "", nil)
	}
	if timeout < 0 {
		timeout = 0
	}
	arg := (*geteventsArg)(r.scratch.Ptr(0))
	ts := (*timespec)(r.scratch.Ptr(int(unsafe.Sizeof(geteventsArg{}))))
	ts.Sec = int64(timeout / time.Second)
	ts.Nsec = int64(timeout % time.Second)
	*arg = geteventsArg{TS: r.scratch.Addr(int(unsafe.Sizeof(geteventsArg{})))}
	toSubmit := uint32(0)
	if r.flags&SetupSQPoll == 0 {
		toSubmit = r.Unsubmitted()
	}
	r.syscalls.Add(1)
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(toSubmit), 1,
		EnterGetEvents|EnterExtArg, uintptr(r.scratch.Addr(0)), unsafe.Sizeof(geteventsArg{}))
	switch errno {
	case 0, unix.EINTR:
		return nil
	case unix.ETIME:
		return ErrTimeout
	case unix.EAGAIN, unix.EBUSY:
		return nil
	}
	return fmt.Errorf("io_uring_enter wait: %w", errno)
}

// FlushOverflow moves completions the kernel kept aside (SQCQOverflow) into
// the CQ, with one io_uring_enter; it does nothing when there are none.
func (r *Ring) FlushOverflow() error {
	if atomic.LoadUint32(r.sqFlags)&(SQCQOverflow|SQTaskrun) == 0 {
		return nil
	}
	if _, err := r.Enter(0, 0, EnterGetEvents); err != nil && err != unix.EAGAIN && err != unix.EBUSY {
		return fmt.Errorf("io_uring_enter getevents: %w", err)
	}
	return nil
}

// CQReady returns how many completions wait in the CQ: one atomic load, no
// system call.
func (r *Ring) CQReady() uint32 {
	return atomic.LoadUint32(r.cqTail) - *r.cqHead
}

// PeekCQE returns the completion at the head of the CQ, or nil when it is
// empty. The CQE stays valid until CQAdvance moves past it.
func (r *Ring) PeekCQE() *CQE {
	head := *r.cqHead
	if atomic.LoadUint32(r.cqTail) == head {
		return nil
	}
	return &r.cqes[head&r.cqMask]
}

// CQEAt returns the i-th waiting completion (i < CQReady()).
func (r *Ring) CQEAt(i uint32) *CQE { return &r.cqes[(*r.cqHead+i)&r.cqMask] }

// CQAdvance hands n completions back to the kernel (a release store of the
// CQ head: the kernel may overwrite them from then on).
func (r *Ring) CQAdvance(n uint32) {
	if n > 0 {
		atomic.StoreUint32(r.cqHead, *r.cqHead+n)
	}
}

// register is io_uring_register(2), EINTR retried, counted in Syscalls.
func (r *Ring) register(op uint32, arg unsafe.Pointer, nr uint32) error {
	for {
		r.syscalls.Add(1)
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), uintptr(op), uintptr(arg), uintptr(nr), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}
