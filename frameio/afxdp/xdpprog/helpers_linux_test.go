package xdpprog

import (
	"os"

	"golang.org/x/sys/unix"
)

func unixSocketForTest() (int, error) {
	return unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
}

func closeFD(fd int) { _ = unix.Close(fd) }

func rootForFuzz() bool { return os.Geteuid() == 0 }
