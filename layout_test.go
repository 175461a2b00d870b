package dgramio_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A program that opens kind udp only links no userspace TCP, AF_XDP, eBPF
// or netlink code, and stays small: the kinds are registered by the
// packages a program imports (kinds/udp here), not by the root package.
func TestUDPOnlyLinksOneKind(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	out, err := exec.Command(gobin, "list", "-deps", "./internal/tools/udponly").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, heavy := range []string{"gvisor.dev/", "github.com/google/gopacket", "github.com/cilium/ebpf", "github.com/vishvananda/", "github.com/dgramio/dgramio/internal/tcp", "github.com/dgramio/dgramio/stack", "github.com/dgramio/dgramio/frameio"} {
			if strings.HasPrefix(dep, heavy) {
				t.Errorf("a udp-only program links %s", dep)
			}
		}
	}
	bin := filepath.Join(t.TempDir(), "udponly")
	if out, err := exec.Command(gobin, "build", "-o", bin, "./internal/tools/udponly").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 5 << 20
	if fi.Size() > limit {
		t.Errorf("a udp-only program is %d bytes; want at most %d", fi.Size(), limit)
	}
}

// No package a program links to send and receive (the root, the kinds,
// the frame I/O packages, the engines, net.Conn) nor any tool links
// gopacket: it decodes frames in tests and in the conformance suite only.
// Its layers package alone takes tens of milliseconds to initialise and
// half a megabyte of heap in every process that links it (pcapio writes
// the pcap format itself).
func TestLibraryLinksNoGopacket(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	pkgs := []string{".", "./kinds/...", "./frameio/...", "./stack/...", "./tcp/...", "./cmd/..."}
	out, err := exec.Command(gobin, append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/google/gopacket") {
			t.Errorf("%s links %s", strings.Join(pkgs, " "), dep)
		}
	}
}
