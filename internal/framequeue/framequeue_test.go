package framequeue

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgramio/dgramio/frameio/memio"
)

// Capture without a pcap prefix gives the device and its mode back as
// they are; with one, a capture around the device (both files made) and
// the mode noting " +pcap"; with a prefix it cannot create, an error and
// the device still open.
func TestCapture(t *testing.T) {
	a, b := memio.NewPair(memio.Options{})
	defer b.Close()
	fio, mode, err := Capture(a, "", "xdp copy")
	if err != nil || fio != a || mode != "xdp copy" {
		t.Fatalf("without pcap: %v %q %v, want the device and its mode", fio, mode, err)
	}
	if _, _, err := Capture(a, filepath.Join(t.TempDir(), "no", "such", "dir", "cap"), "xdp copy"); err == nil {
		t.Fatal("a pcap prefix in a missing directory was accepted")
	}
	if err := a.Kick(); err != nil {
		t.Fatalf("the device after a failed Capture: %v, want it open", err)
	}
	prefix := filepath.Join(t.TempDir(), "cap")
	fio, mode, err = Capture(a, prefix, "xdp copy")
	if err != nil || fio == a || mode != "xdp copy +pcap" {
		t.Fatalf("with pcap: %v %q %v, want a capture and the mode noting it", fio, mode, err)
	}
	for _, f := range []string{prefix + "-tx.pcap", prefix + "-rx.pcap"} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	if err := fio.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Kick(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the device after the capture's Close: %v, want closed", err)
	}
}

// ClaimQueue without CPUs claims nothing and captures as Capture does;
// when the capture fails it closes the device.
func TestClaimQueue(t *testing.T) {
	a, b := memio.NewPair(memio.Options{})
	defer b.Close()
	fio, th, mode, err := ClaimQueue(a, nil, "", "dpdk net_af_xdp")
	if err != nil || fio != a || mode != "dpdk net_af_xdp" {
		t.Fatalf("ClaimQueue: %v %q %v", fio, mode, err)
	}
	if err := th.Release(); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := ClaimQueue(a, nil, filepath.Join(t.TempDir(), "no", "such", "dir", "cap"), "dpdk"); err == nil {
		t.Fatal("a pcap prefix in a missing directory was accepted")
	}
	if err := a.Kick(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the device after a failed ClaimQueue: %v, want closed", err)
	}
}
