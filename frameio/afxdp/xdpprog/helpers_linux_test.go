package xdpprog

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func unixSocketForTest() (int, error) {
	return unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
}

func closeFD(fd int) { _ = unix.Close(fd) }

func rootForFuzz() bool { return os.Geteuid() == 0 }

// pinToOneCPU binds the calling thread (locked by the caller) to the CPU
// it runs on until the test ends: the program's per-CPU state then stays
// the same between test runs.
func pinToOneCPU(t testing.TB) {
	t.Helper()
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	var c, node uint32
	if _, _, errno := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&c)), uintptr(unsafe.Pointer(&node)), 0); errno != 0 {
		t.Fatal(errno)
	}
	one.Set(int(c))
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.SchedSetaffinity(0, &old) })
}
