package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// NetnsInode returns the inode of the namespace descriptor fd: the
// namespace's identity, as NetnsRefs takes it. It fails the test when fd
// cannot be read.
func NetnsInode(t testing.TB, fd int) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatalf("fstat namespace descriptor %d: %v", fd, err)
	}
	return st.Ino
}

// NetnsRefs lists what in this process refers to the network namespace
// with inode ino: open descriptors and threads inside it, as paths under
// /proc/self. A test that removed the namespace expects none.
func NetnsRefs(ino uint64) []string {
	want := fmt.Sprintf("net:[%d]", ino)
	var refs []string
	for _, pat := range []string{"/proc/self/fd/*", "/proc/self/task/*/ns/net"} {
		paths, _ := filepath.Glob(pat)
		for _, p := range paths {
			if l, _ := os.Readlink(p); l == want {
				refs = append(refs, p)
			}
		}
	}
	return refs
}
