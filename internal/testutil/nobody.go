package testutil

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BinaryForNobody copies the running test binary into a fresh directory
// that user nobody may enter (go test builds it in one only root may; so
// is t.TempDir's parent), removed when the test ends, and returns the
// copy's path, named name. Tests that re-run themselves as nobody to check
// what an unprivileged user gets start that copy.
func BinaryForNobody(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dgramio-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(dir, name)
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
