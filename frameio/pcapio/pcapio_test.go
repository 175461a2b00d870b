package pcapio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/frameio/memio"
)

// udpFrame builds an Ethernet/IPv4/UDP frame from src to dst carrying
// payload, with gopacket (checksums computed).
func udpFrame(t testing.TB, src, dst net.HardwareAddr, seq int, payload []byte) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, Id: uint16(seq),
		SrcIP: net.IPv4(198, 18, 0, 1), DstIP: net.IPv4(198, 18, 0, 2)}
	u := &layers.UDP{SrcPort: 40000, DstPort: 5000}
	if err := u.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, u, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// Frames both ways through a memio pair whose port A is wrapped: A's TX
// file holds exactly what A sent, its RX file exactly what A received,
// in order, and gopacket decodes them back to the same UDP datagrams.
func TestCaptureMemioRoundTrip(t *testing.T) {
	a, b := memio.NewPair(memio.Options{})
	prefix := filepath.Join(t.TempDir(), "cap")
	fio, err := Wrap(a, prefix)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var sentA, sentB [][]byte
	for i := 0; i < 300; i++ {
		p := make([]byte, 18+rng.IntN(1400)) // frames of 60 to 1460 bytes
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		binary.BigEndian.PutUint32(p, uint32(i))
		fa := udpFrame(t, a.MAC(), b.MAC(), i, p)
		if !fio.TxFrame(fa) {
			t.Fatalf("frame %d refused", i)
		}
		sentA = append(sentA, fa)
		fb := udpFrame(t, b.MAC(), a.MAC(), i, p[:len(p)/2+10])
		if !b.TxFrame(fb) {
			t.Fatalf("B's frame %d refused", i)
		}
		sentB = append(sentB, fb)
		if i%16 == 15 || i == 299 {
			if err := fio.Kick(); err != nil {
				t.Fatal(err)
			}
			if err := b.Kick(); err != nil {
				t.Fatal(err)
			}
			// Receive on both ends; A through the capture.
			for b.RxFrames(64, func([]byte) {}) > 0 {
			}
			for fio.RxFrames(5, func([]byte) {}) > 0 {
			}
		}
	}
	st := fio.Stats()
	if !strings.HasSuffix(st.Mode, " +pcap") {
		t.Errorf("mode %q", st.Mode)
	}
	want := map[string]uint64{"tx_frames": 300, "rx_frames": 300, "tx_write_errors": 0, "rx_write_errors": 0}
	for _, c := range st.Layers {
		if c.Layer == "pcap" {
			if c.Value != want[c.Name] {
				t.Errorf("pcap.%s = %d, want %d", c.Name, c.Value, want[c.Name])
			}
			delete(want, c.Name)
		}
	}
	if len(want) != 0 {
		t.Errorf("pcap counters missing: %v", want)
	}
	if err := fio.Close(); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		file string
		want [][]byte
	}{{prefix + TxSuffix, sentA}, {prefix + RxSuffix, sentB}} {
		recs, err := ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(c.want) {
			t.Fatalf("%s: %d frames, want %d", c.file, len(recs), len(c.want))
		}
		for i, r := range recs {
			if !bytes.Equal(r.Frame, c.want[i]) {
				t.Fatalf("%s: frame %d differs:\n got %x\nwant %x", c.file, i, r.Frame, c.want[i])
			}
			if r.Length != len(c.want[i]) {
				t.Fatalf("%s: frame %d of length %d, want %d", c.file, i, r.Length, len(c.want[i]))
			}
			if i > 0 && r.Time.Before(recs[i-1].Time) {
				t.Fatalf("%s: timestamps go back at %d", c.file, i)
			}
			pkt := gopacket.NewPacket(r.Frame, layers.LayerTypeEthernet, gopacket.Default)
			u, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
			if u == nil || u.DstPort != 5000 && u.DstPort != 40000 {
				t.Fatalf("%s: frame %d does not decode as our UDP: %v", c.file, i, pkt)
			}
			if seq := binary.BigEndian.Uint32(u.Payload); seq != uint32(i) {
				t.Fatalf("%s: frame %d carries sequence %d", c.file, i, seq)
			}
		}
	}
}

// A frame the wrapped FrameIO refuses (ring full) was not sent and is not
// in the capture.
func TestCaptureRefusedFrameNotWritten(t *testing.T) {
	a, b := memio.NewPair(memio.Options{TxSlots: 4})
	var tx, rx bytes.Buffer
	c, err := New(a, &tx, &rx)
	if err != nil {
		t.Fatal(err)
	}
	fio := c.As()
	f := udpFrame(t, a.MAC(), b.MAC(), 0, make([]byte, 40))
	n := 0
	for i := 0; i < 6; i++ {
		if fio.TxFrame(f) {
			n++
		}
	}
	if n != 4 {
		t.Fatalf("accepted %d, want 4 (ring of 4)", n)
	}
	if err := fio.Kick(); err != nil {
		t.Fatal(err)
	}
	if err := fio.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := Read(&tx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 {
		t.Fatalf("%d frames in the TX capture, want the 4 accepted", len(recs))
	}
}

// noWait hides memio's Wait (and Interrupt).
type noWait struct{ frameio.FrameIO }

// waitOnly is memio with its Wait and nothing else memio may offer (an
// Interrupt): the shape of a FrameIO that waits and cannot be interrupted.
type waitOnly struct {
	frameio.FrameIO
	w frameio.Waiter
}

func (w waitOnly) Wait(ctx context.Context) error { return w.w.Wait(ctx) }

// interrupting adds an Interrupt method.
type interrupting struct {
	*memio.Port
	n int
}

func (i *interrupting) Interrupt() { i.n++ }

// Wrap keeps the optional abilities of what it wraps, and no others.
func TestWrapShape(t *testing.T) {
	dir := t.TempDir()
	a, b := memio.NewPair(memio.Options{})
	if got, err := Wrap(a, ""); err != nil || got != frameio.FrameIO(a) {
		t.Fatalf("empty prefix: %v, %v; want the FrameIO itself", got, err)
	}

	wo := waitOnly{FrameIO: a, w: a}
	w, err := Wrap(wo, filepath.Join(dir, "w"))
	if err != nil {
		t.Fatal(err)
	}
	wt, ok := w.(frameio.Waiter)
	if !ok {
		t.Fatal("the wrapped FrameIO waits, the capture does not")
	}
	if _, ok := w.(interface{ Interrupt() }); ok {
		t.Fatal("the capture interrupts, the wrapped FrameIO does not")
	}
	// Wait goes through: a frame from B ends it.
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- wt.Wait(ctx)
	}()
	b.TxFrame(udpFrame(t, b.MAC(), a.MAC(), 1, []byte("x")))
	b.Kick()
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if w.(interface{ Unwrap() frameio.FrameIO }).Unwrap() != frameio.FrameIO(wo) {
		t.Fatal("Unwrap")
	}
	w.Close()

	a2, _ := memio.NewPair(memio.Options{})
	nw, err := Wrap(noWait{a2}, filepath.Join(dir, "nw"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := nw.(frameio.Waiter); ok {
		t.Fatal("capture waits over a FrameIO that cannot")
	}
	nw.Close()

	a3, _ := memio.NewPair(memio.Options{})
	ip := &interrupting{Port: a3}
	wi, err := Wrap(ip, filepath.Join(dir, "wi"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := wi.(frameio.Waiter); !ok {
		t.Fatal("lost Wait")
	}
	wi.(interface{ Interrupt() }).Interrupt()
	if ip.n != 1 {
		t.Fatal("Interrupt did not reach the wrapped FrameIO")
	}
	wi.Close()

	a4, _ := memio.NewPair(memio.Options{})
	in := &interruptOnly{FrameIO: noWait{a4}}
	ii, err := Wrap(in, filepath.Join(dir, "ii"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ii.(frameio.Waiter); ok {
		t.Fatal("capture waits over a FrameIO that cannot")
	}
	ii.(interface{ Interrupt() }).Interrupt()
	if in.n != 1 {
		t.Fatal("Interrupt did not reach the wrapped FrameIO")
	}
	ii.Close()
}

type interruptOnly struct {
	frameio.FrameIO
	n int
}

func (i *interruptOnly) Interrupt() { i.n++ }

// A prefix that cannot be created is an error; the FrameIO stays the
// caller's and open, and nothing is left behind.
func TestWrapErrorLeavesFrameIO(t *testing.T) {
	dir := t.TempDir()
	a, b := memio.NewPair(memio.Options{})
	if _, err := Wrap(a, filepath.Join(dir, "missing", "cap")); err == nil {
		t.Fatal("no error for a prefix in a missing directory")
	}
	// The RX file cannot be made: a directory already has its name.
	if err := os.Mkdir(filepath.Join(dir, "x"+RxSuffix), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Wrap(a, filepath.Join(dir, "x")); err == nil {
		t.Fatal("no error when the RX file cannot be created")
	}
	if _, err := os.Stat(filepath.Join(dir, "x"+TxSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the TX file was left behind: %v", err)
	}
	if !a.TxFrame(udpFrame(t, a.MAC(), b.MAC(), 0, []byte("still open"))) || a.Kick() != nil {
		t.Fatal("the FrameIO was closed by a failed Wrap")
	}
}

// failWriter accepts the header, then fails.
type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n > 0 {
		w.n--
		return len(p), nil
	}
	return 0, errors.New("disk full")
}

// A file that cannot be written does not stop the frames: they are sent,
// the failures counted, and Close reports them.
func TestCaptureWriteErrors(t *testing.T) {
	a, b := memio.NewPair(memio.Options{})
	c, err := New(a, &failWriter{n: 1}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	fio := c.As()
	for i := 0; i < 3; i++ {
		if !fio.TxFrame(udpFrame(t, a.MAC(), b.MAC(), i, []byte("x"))) {
			t.Fatal("refused")
		}
		if err := fio.Kick(); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.RxFrames(10, func([]byte) {}); got != 3 {
		t.Fatalf("B received %d, want 3", got)
	}
	var errs uint64
	for _, k := range fio.Stats().Layers {
		if k.Layer == "pcap" && k.Name == "tx_write_errors" {
			errs = k.Value
		}
	}
	if errs != 3 {
		t.Fatalf("tx_write_errors %d, want 3", errs)
	}
	if err := fio.Close(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Close: %v", err)
	}
}

// The data path allocates nothing per frame.
func TestCaptureNoAlloc(t *testing.T) {
	a, b := memio.NewPair(memio.Options{})
	c, err := New(a, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	fio := c.As()
	defer fio.Close()
	fa := udpFrame(t, a.MAC(), b.MAC(), 0, make([]byte, 100))
	fb := udpFrame(t, b.MAC(), a.MAC(), 0, make([]byte, 100))
	sink := func([]byte) {}
	allocs := testing.AllocsPerRun(200, func() {
		for i := 0; i < 8; i++ {
			fio.TxFrame(fa)
			b.TxFrame(fb)
		}
		fio.Kick()
		b.Kick()
		b.RxFrames(16, sink)
		fio.RxFrames(16, sink)
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per batch of 8 frames each way", allocs)
	}
}
