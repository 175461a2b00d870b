//go:build dpdk

package dpdk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/testutil"
)

var (
	ealErr  error
	ringSeq int
	// startFDs are the descriptors without close-on-exec the process had
	// before the EAL started (from whoever started it).
	startFDs fdSet
)

func TestMain(m *testing.M) {
	if os.Getenv("DGRAMIO_DPDK_CHILD") != "" {
		os.Exit(childMain())
	}
	startFDs = inheritableFDs()
	if os.Geteuid() == 0 {
		ealErr = StartEAL(EALOptions{Quiet: os.Getenv("DGRAMIO_DPDK_LOG") == ""})
	} else {
		ealErr = errors.New("not root")
	}
	os.Exit(m.Run())
}

// needEAL skips (fails in CI) when the EAL could not start.
func needEAL(t *testing.T) {
	t.Helper()
	testutil.RequireRoot(t)
	if ealErr != nil {
		testutil.Skip(t, "DPDK EAL did not start: "+ealErr.Error())
	}
}

// openRing opens a net_ring vdev: its RX and TX queues share one ring, so
// every frame sent comes back.
func openRing(t *testing.T, o Options) *Port {
	t.Helper()
	needEAL(t)
	// The PMD names its ring "ETH_RXTX0_<name>", within 29 characters.
	ringSeq++
	o.VDev = fmt.Sprintf("net_ring_t%d", ringSeq)
	p, err := Open(o)
	if err != nil {
		t.Fatalf("open %s: %v", o.VDev, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// frame builds a test frame of n bytes carrying seq.
func frame(src net.HardwareAddr, n int, seq uint32) []byte {
	f := make([]byte, n)
	for i := range f {
		f[i] = byte(i * 7)
	}
	copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 0x02})
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:], 0x88b5) // local experimental ethertype
	binary.BigEndian.PutUint32(f[14:], seq)
	return f
}

// drain receives until want frames came or the deadline passed, copying
// each (the frame is valid only inside deliver).
func drain(p *Port, want int, limit time.Duration) [][]byte {
	var got [][]byte
	deadline := time.Now().Add(limit)
	for len(got) < want && time.Now().Before(deadline) {
		if p.RxFrames(64, func(f []byte) { got = append(got, append([]byte(nil), f...)) }) == 0 {
			time.Sleep(100 * time.Microsecond)
		}
	}
	return got
}

func layer(t *testing.T, p *Port, name string) uint64 {
	t.Helper()
	for _, c := range p.Stats().Layers {
		if c.Layer == "dpdk" && c.Name == name {
			return c.Value
		}
	}
	t.Fatalf("no dpdk counter %q", name)
	return 0
}

func TestRingLoopback(t *testing.T) {
	p := openRing(t, Options{})
	if in := p.Info(); in.Driver != "net_ring" {
		t.Fatalf("driver %q, want net_ring", in.Driver)
	}
	if p.MTU() != DefaultMTU || len(p.MAC()) != 6 {
		t.Fatalf("MTU %d MAC %v", p.MTU(), p.MAC())
	}
	const n = 5000
	sizes := []int{20, 59, 60, 61, 200, 1514}
	var sent [][]byte
	var got [][]byte
	for i := 0; i < n; i++ {
		f := frame(p.MAC(), sizes[i%len(sizes)], uint32(i))
		if !p.TxFrame(f) {
			t.Fatalf("TxFrame %d refused", i)
		}
		sent = append(sent, f)
		if i%100 == 99 {
			if err := p.Kick(); err != nil {
				t.Fatal(err)
			}
			got = append(got, drain(p, 100, 10*time.Second)...)
		}
	}
	if len(got) != n {
		t.Fatalf("got %d frames back, want %d", len(got), n)
	}
	for i := range sent {
		want := sent[i]
		if len(want) < 60 {
			want = append(append([]byte(nil), want...), make([]byte, 60-len(want))...)
		}
		if !bytes.Equal(got[i], want) {
			t.Fatalf("frame %d: got %d bytes %x..., want %d bytes %x...", i, len(got[i]), got[i][:16], len(want), want[:16])
		}
	}
	s := p.Stats()
	if s.TxFrames != n || s.RxFrames != n || s.TxDropped != 0 || s.RxDropped != 0 {
		t.Fatalf("stats %+v", s)
	}
	if op, ip := layer(t, p, "opackets"), layer(t, p, "ipackets"); op != n || ip != n {
		t.Fatalf("rte_eth_stats opackets %d ipackets %d, want %d", op, ip, n)
	}
	// Everything went back to the pool: only TxFrame's spares are out once
	// the last burst is given back.
	p.RxFrames(0, nil)
	if in, sp := p.mbufsInUse(), p.spareMbufs(); in != sp {
		t.Fatalf("%d mbufs in use, %d of them spare: a leak", in, sp)
	}
}

func TestRingTxLimits(t *testing.T) {
	p := openRing(t, Options{TxDesc: 64, RxDesc: 64})
	txCap := p.Info().TxDesc
	f := frame(p.MAC(), 100, 1)
	for i := 0; i < txCap; i++ {
		if !p.TxFrame(f) {
			t.Fatalf("TxFrame %d of %d refused", i, txCap)
		}
	}
	if p.TxFrame(f) {
		t.Fatal("TxFrame accepted a frame beyond a full batch")
	}
	if s := p.Stats(); s.TxRingFull != 1 {
		t.Fatalf("TxRingFull %d, want 1", s.TxRingFull)
	}
	if p.TxFrame(make([]byte, p.MTU()+15)) {
		t.Fatal("TxFrame accepted a frame longer than MTU+14")
	}
	if v := layer(t, p, "tx_oversize"); v != 1 {
		t.Fatalf("tx_oversize %d, want 1", v)
	}
	if !p.TxFrame(make([]byte, 0)) == true && p.Stats().TxRingFull != 2 {
		t.Fatal("a full batch must refuse even an empty frame")
	}
	if err := p.Kick(); err != nil {
		t.Fatal(err)
	}
	if got := drain(p, txCap, 10*time.Second); len(got) != txCap {
		t.Fatalf("got %d frames, want %d", len(got), txCap)
	}
}

// The ring of a net_ring port holds 1024 frames. With nobody receiving, a
// Kick beyond that retries for TxWait and then drops and counts the rest:
// it returns instead of hanging.
func TestRingFullDrops(t *testing.T) {
	p := openRing(t, Options{TxDesc: 512, TxWait: 2 * time.Millisecond})
	f := frame(p.MAC(), 64, 0)
	total := 0
	for round := 0; round < 4; round++ {
		for p.TxFrame(f) {
			total++
		}
		if err := p.Kick(); err != nil {
			t.Fatal(err)
		}
	}
	s := p.Stats()
	if s.TxDropped == 0 {
		t.Fatalf("nothing dropped after %d frames into a ring of 1024: %+v", total, s)
	}
	op := layer(t, p, "opackets")
	if op+s.TxDropped != uint64(total) {
		t.Fatalf("opackets %d + TxDropped %d != %d sent", op, s.TxDropped, total)
	}
	got := drain(p, int(op), 10*time.Second)
	if uint64(len(got)) != op {
		t.Fatalf("received %d, the device took %d", len(got), op)
	}
	p.RxFrames(0, nil)
	if in, sp := p.mbufsInUse(), p.spareMbufs(); in != sp {
		t.Fatalf("%d mbufs in use, %d of them spare: dropped frames leaked", in, sp)
	}
}

func TestCloseTwiceAndAfter(t *testing.T) {
	p := openRing(t, Options{})
	f := frame(p.MAC(), 64, 0)
	p.TxFrame(f)
	p.Kick()
	drain(p, 1, 5*time.Second)
	p.TxFrame(f) // pending at Close: freed by Close
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if p.TxFrame(f) || p.RxFrames(8, func([]byte) {}) != 0 {
		t.Fatal("data path works after Close")
	}
	if err := p.Kick(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Kick after Close: %v, want net.ErrClosed", err)
	}
	if s := p.Stats(); s.TxFrames != 2 || s.RxFrames != 1 {
		t.Fatalf("stats after Close: %+v", s)
	}
}

func TestBadDevices(t *testing.T) {
	needEAL(t)
	cases := []struct {
		vdev string
		want string
	}{
		{"net_nosuchpmd0", "net_nosuchpmd0"},
		{"net_af_packet_bad0,iface=dgramio_none0", "dgramio_none0"},
		{"net_af_xdp_bad0,iface=dgramio_none0", "dgramio_none0"},
		// A crypto vdev attaches fine but makes no ethdev port: the check
		// after the probe must catch it.
		{"crypto_null_dg0", "no ethdev port"},
	}
	for _, c := range append(cases, cases...) { // twice: a failed Open leaves nothing attached
		p, err := Open(Options{VDev: c.vdev, LinkWait: time.Second})
		if err == nil {
			p.Close()
			t.Errorf("%s: opened", c.vdev)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not mention %q", c.vdev, err, c.want)
		}
		t.Logf("%s: %v", c.vdev, err)
	}
	// Options are checked before DPDK is touched.
	for _, o := range []Options{{}, {VDev: "net_ring0", PCI: "0000:00:01.0"}, {VDev: "net_ring0", MTU: 20}, {VDev: "net_ring0", Mbufs: 100}} {
		var ce *dgramio.ConfigError
		if _, err := Open(o); !errors.As(err, &ce) {
			t.Errorf("%+v: %v, want a *dgramio.ConfigError", o, err)
		}
	}
}

func TestRuntimeDirRemoved(t *testing.T) {
	needEAL(t)
	dir := RuntimeDir()
	if dir == "" {
		t.Fatal("no runtime dir after StartEAL")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s still exists after StartEAL (%v)", dir, err)
	}
	t.Logf("EAL args: %q", EALArgs())
}

func TestRingJumbo(t *testing.T) {
	p := openRing(t, Options{MTU: 9000})
	t.Logf("info %+v", p.Info())
	if p.MTU() != 9000 {
		t.Fatalf("MTU %d, want 9000 (notes %q)", p.MTU(), p.Info().Notes)
	}
	f := frame(p.MAC(), 9014, 7)
	if !p.TxFrame(f) {
		t.Fatal("a 9014-byte frame refused at MTU 9000")
	}
	p.Kick()
	got := drain(p, 1, 5*time.Second)
	if len(got) != 1 || !bytes.Equal(got[0], f) {
		t.Fatalf("jumbo frame did not come back whole (%d frames)", len(got))
	}
}

// The data path allocates nothing per frame: TxFrame, Kick and RxFrames
// in steady state.
func TestRingNoAllocs(t *testing.T) {
	p := openRing(t, Options{})
	f := frame(p.MAC(), 100, 1)
	n := 0
	deliver := func(b []byte) { n += len(b) }
	round := func() {
		for i := 0; i < 32; i++ {
			p.TxFrame(f)
		}
		p.Kick()
		for p.RxFrames(64, deliver) > 0 {
		}
	}
	round()
	if a := testing.AllocsPerRun(200, round); a != 0 {
		t.Fatalf("%.1f allocations per round of 32 frames", a)
	}
	if n == 0 {
		t.Fatal("nothing received")
	}
}

// Stats may be read from another goroutine while both sides run.
func TestRingStatsConcurrent(t *testing.T) {
	p := openRing(t, Options{})
	f := frame(p.MAC(), 100, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			p.Stats()
			time.Sleep(50 * time.Microsecond)
		}
	}()
	rx := 0
	for sent := 0; sent < 20000; {
		for i := 0; i < 32; i++ {
			if p.TxFrame(f) {
				sent++
			}
		}
		p.Kick()
		rx += p.RxFrames(64, func([]byte) {})
	}
	<-done
	rx += len(drain(p, 20000-rx, 10*time.Second))
	if s := p.Stats(); rx != 20000 || s.RxFrames != 20000 || s.TxFrames != 20000 {
		t.Fatalf("received %d, stats %+v", rx, s)
	}
}

func TestDevargs(t *testing.T) {
	for _, c := range []struct{ in, name, args, iface string }{
		{"net_ring0", "net_ring0", "", ""},
		{"net_af_packet0,iface=veth0", "net_af_packet0", "iface=veth0", "veth0"},
		{" net_af_xdp1 ,start_queue=0, iface = eth1 ,queue_count=1", "net_af_xdp1", "start_queue=0, iface = eth1 ,queue_count=1", "eth1"},
		{"net_af_xdp1,ifaces=x", "net_af_xdp1", "ifaces=x", ""},
	} {
		name, args := splitDevargs(c.in)
		if name != c.name || args != c.args || devargValue(args, "iface") != c.iface {
			t.Errorf("%q: %q %q %q, want %q %q %q", c.in, name, args, devargValue(args, "iface"), c.name, c.args, c.iface)
		}
	}
}

// A second process starts its own EAL while this one runs: the file
// prefixes differ, and neither leaves anything under /var/run/dpdk.
func TestSecondProcess(t *testing.T) {
	needEAL(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DGRAMIO_DPDK_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "child: ok") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "prefix=dgramio_") || strings.Contains(string(out), fmt.Sprintf("dgramio_%d\"", os.Getpid())) {
		t.Fatalf("child's EAL arguments do not have a prefix of its own:\n%s", out)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(RuntimeDir()), "dgramio_*"))
	if len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// TestEALErrors: a start that cannot work says why, in a child process
// (the EAL starts once per process, and a failed start is final).
func TestEALErrors(t *testing.T) {
	needEAL(t)
	for _, c := range []struct{ mode, want string }{
		{"badarg", "no-such-eal-option"},
		{"hugepages", "unsupported=true"},
	} {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "DGRAMIO_DPDK_CHILD="+c.mode)
		out, err := cmd.CombinedOutput()
		if c.mode == "hugepages" {
			if free, _ := freeHugePages(); free > 0 {
				// Hugepages are there: the child must start on them.
				if err != nil || !strings.Contains(string(out), "--in-memory") {
					t.Errorf("with %d free hugepages: %v\n%s", free, err, out)
				}
				continue
			}
		}
		if err == nil || !strings.Contains(string(out), c.want) || strings.Contains(string(out), "another answer") {
			t.Errorf("%s: %v, output lacks %q:\n%s", c.mode, err, c.want, out)
		}
		t.Logf("%s: %s", c.mode, out)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(RuntimeDir()), "dgramio_*"))
	if len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// childMain is the whole test binary in the child of TestSecondProcess:
// start the EAL, send a frame round a net_ring port, say the EAL's
// arguments, close.
func childMain() int {
	if f, ok := childModes[os.Getenv("DGRAMIO_DPDK_CHILD")]; ok {
		return f()
	}
	o := EALOptions{Quiet: true}
	switch os.Getenv("DGRAMIO_DPDK_CHILD") {
	case "hugepages":
		o.HugePages = true
	case "badarg":
		o.ExtraArgs = []string{"--no-such-eal-option"}
	}
	if err := StartEAL(o); err != nil {
		fmt.Println("child: EAL:", err)
		var ue *dgramio.UnsupportedError
		var pe *dgramio.PrivilegeError
		fmt.Printf("child: unsupported=%v privilege=%v\n", errors.As(err, &ue), errors.As(err, &pe))
		if again := StartEAL(EALOptions{}); again != err {
			fmt.Println("child: a second StartEAL gave another answer:", again)
		}
		return 1
	}
	p, err := Open(Options{VDev: "net_ring_child"})
	if err != nil {
		fmt.Println("child: open:", err)
		return 1
	}
	defer p.Close()
	p.TxFrame(frame(p.MAC(), 60, 1))
	p.Kick()
	if len(drain(p, 1, 5*time.Second)) != 1 {
		fmt.Println("child: no frame back")
		return 1
	}
	fmt.Printf("child: ok, EAL args %q\n", EALArgs())
	return 0
}
