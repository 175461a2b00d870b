//go:build linux

package testhost

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/cpu"
)

// Sysfs shows the network devices of the namespace of whoever mounted it, so
// /sys seen from a thread that joined another namespace still lists the root
// namespace's devices. withSysfs therefore makes a fresh sysfs instance on
// the home thread (inside the namespace) with the new mount API, fsopen +
// fsmount (Linux >= 5.2). The mount is detached: it is never attached to any
// directory, is seen by no one else, and goes away when its descriptor is
// closed, so there is nothing to unmount and no mount namespace to make.
func (h *Host) withSysfs(fn func(root int) error) error {
	return h.onHome(func() error {
		fs, err := unix.Fsopen("sysfs", unix.FSOPEN_CLOEXEC)
		if err != nil {
			if errors.Is(err, unix.ENOSYS) {
				return dgramio.NotSupported("fsopen (sysfs of another network namespace)", "5.2", "", err)
			}
			return privileged("mount sysfs", "CAP_SYS_ADMIN", fmt.Errorf("fsopen sysfs: %w", err))
		}
		defer unix.Close(fs)
		if err := unix.FsconfigCreate(fs); err != nil {
			return privileged("mount sysfs", "CAP_SYS_ADMIN", fmt.Errorf("fsconfig sysfs: %w", err))
		}
		root, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOEXEC|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
		if err != nil {
			return privileged("mount sysfs", "CAP_SYS_ADMIN", fmt.Errorf("fsmount sysfs: %w", err))
		}
		defer unix.Close(root)
		return fn(root)
	})
}

// sysPath turns "/sys/class/net/x/carrier" or "class/net/x/carrier" into a
// path relative to the sysfs root, refusing ".." and empty paths.
func sysPath(p string) (string, error) {
	p = strings.TrimPrefix(path.Clean("/"+p), "/")
	p = strings.TrimPrefix(p, "sys/")
	if p == "" || p == "." || p == "sys" || slices.Contains(strings.Split(p, "/"), "..") {
		return "", fmt.Errorf("testhost: sysfs path %q", p)
	}
	return p, nil
}

func readAt(root int, rel string) (string, error) {
	fd, err := unix.Openat(root, rel, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("open /sys/%s: %w", rel, err)
	}
	f := os.NewFile(uintptr(fd), "/sys/"+rel)
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return "", fmt.Errorf("read /sys/%s: %w", rel, err)
	}
	return string(b), nil
}

func writeAt(root int, rel, value string) error {
	fd, err := unix.Openat(root, rel, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open /sys/%s: %w", rel, err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(value)); err != nil {
		return fmt.Errorf("write /sys/%s: %w", rel, err)
	}
	return nil
}

// ReadSys reads a sysfs file as the namespace sees it: p is relative to /sys
// ("class/net/dg1-1a/carrier"; a leading "/sys/" is accepted). It needs
// Linux >= 5.2 (fsmount) and CAP_SYS_ADMIN.
func (h *Host) ReadSys(p string) (string, error) {
	rel, err := sysPath(p)
	if err != nil {
		return "", err
	}
	var s string
	err = h.withSysfs(func(root int) error {
		s, err = readAt(root, rel)
		return err
	})
	return s, err
}

// WriteSys writes value to a sysfs file as the namespace sees it (see
// ReadSys for p).
func (h *Host) WriteSys(p, value string) error {
	rel, err := sysPath(p)
	if err != nil {
		return err
	}
	return h.withSysfs(func(root int) error { return writeAt(root, rel, value) })
}

// XPS returns the CPUs of the XPS mask (xps_cpus) of each TX queue of the
// veth end, read from sysfs inside the namespace.
func (h *Host) XPS() ([][]int, error) {
	out := make([][]int, h.Queues)
	err := h.withSysfs(func(root int) error {
		for q := range h.Queues {
			s, err := readAt(root, xpsPath(h.Iface, q))
			if err != nil {
				return err
			}
			if out[q], err = cpu.ParseMask(s); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

func xpsPath(iface string, q int) string {
	return fmt.Sprintf("class/net/%s/queues/tx-%d/xps_cpus", iface, q)
}

// setXPS writes the XPS mask of every TX queue: queue q to CPU
// cpus[q%len(cpus)], and reads each back.
func (h *Host) setXPS(cpus []int) error {
	err := h.withSysfs(func(root int) error {
		for q := range h.Queues {
			want := []int{cpus[q%len(cpus)]}
			rel := xpsPath(h.Iface, q)
			if err := writeAt(root, rel, cpu.FormatMask(want)); err != nil {
				if errors.Is(err, unix.ENOENT) {
					return dgramio.NotSupported("XPS (xps_cpus)", "", "build the kernel with CONFIG_XPS", err)
				}
				return fmt.Errorf("tx-%d to CPU %d: %w", q, want[0], err)
			}
			s, err := readAt(root, rel)
			if err != nil {
				return err
			}
			got, err := cpu.ParseMask(s)
			if err != nil {
				return err
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("testhost %s: xps_cpus of tx-%d reads back %v, want %v", h.Iface, q, got, want)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("testhost %s: set XPS: %w", h.Iface, err)
	}
	return nil
}
