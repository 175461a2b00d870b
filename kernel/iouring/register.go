//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package iouring

import (
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
)

// RegisterFiles registers fds as the ring's fixed files (5.1): an SQE with
// SQEFixedFile and FD i then uses fds[i] without the per-request file
// lookup and reference count. The ring holds its own reference to each
// file until UnregisterFiles or Close, so closing an fd does not end the
// file's use by the ring. The slice is read during the call only.
func (r *Ring) RegisterFiles(fds []int32) error {
	if len(fds) == 0 {
		return fmt.Errorf("iouring: no files to register")
	}
	if err := r.register(registerFiles, unsafe.Pointer(&fds[0]), uint32(len(fds))); err != nil {
		return fmt.Errorf("io_uring_register files: %w", err)
	}
	return nil
}

// UnregisterFiles drops the fixed files.
func (r *Ring) UnregisterFiles() error {
	if err := r.register(unregisterFiles, nil, 0); err != nil {
		return fmt.Errorf("io_uring_unregister files: %w", err)
	}
	return nil
}

// RegisterNAPI turns on NAPI busy polling for the ring (IORING_REGISTER_NAPI,
// Linux 6.9): while the task waits for completions in io_uring_enter (and
// the SQPOLL thread, when there is one), the kernel polls the NAPI contexts
// of the sockets the ring's requests use, for up to busyPoll each time.
// A socket has a NAPI id only when its packets came through a NAPI
// instance (on veth: only with GRO or an XDP program on the receiving
// end). preferBusyPoll sets prefer_busy_poll (interrupts stay deferred
// while busy polling keeps up). A spinning reader that never waits in the
// kernel gains nothing from it: the poll runs inside the wait.
func (r *Ring) RegisterNAPI(busyPoll time.Duration, preferBusyPoll bool) error {
	reg := napiReg{BusyPollTo: uint32(busyPoll / time.Microsecond)}
	if preferBusyPoll {
		reg.PreferBusyPoll = 1
	}
	if err := r.register(registerNAPI, unsafe.Pointer(&reg), 1); err != nil {
		if err == unix.EINVAL {
			if v, verr := RunningKernel(); verr == nil && !v.AtLeast(MinKernelNAPI) {
				return dgramio.NotSupported("io_uring NAPI busy poll", MinKernelNAPI, "leave URing.NAPI off", err)
			}
		}
		return fmt.Errorf("io_uring_register napi: %w", err)
	}
	return nil
}

// UnregisterNAPI turns NAPI busy polling off again.
func (r *Ring) UnregisterNAPI() error {
	var reg napiReg
	if err := r.register(unregisterNAPI, unsafe.Pointer(&reg), 1); err != nil {
		return fmt.Errorf("io_uring_unregister napi: %w", err)
	}
	return nil
}

// OpSupported asks the kernel (IORING_REGISTER_PROBE, 5.6) whether it knows
// opcode op.
func (r *Ring) OpSupported(op uint8) (bool, error) {
	const nOps = 256
	var buf [unsafe.Sizeof(probeHdr{}) + nOps*unsafe.Sizeof(probeOp{})]byte
	if err := r.register(registerProbe, unsafe.Pointer(&buf[0]), nOps); err != nil {
		return false, fmt.Errorf("io_uring_register probe: %w", err)
	}
	hdr := (*probeHdr)(unsafe.Pointer(&buf[0]))
	if op > hdr.LastOp || int(op) >= int(hdr.OpsLen) {
		return false, nil
	}
	ops := unsafe.Slice((*probeOp)(unsafe.Pointer(&buf[unsafe.Sizeof(probeHdr{})])), nOps)
	return ops[op].Flags&1 != 0, nil
}
