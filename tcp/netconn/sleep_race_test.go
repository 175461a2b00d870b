package netconn

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/peertest"
	"github.com/dgramio/dgramio/internal/testhost"
	"github.com/dgramio/dgramio/internal/testhost/hosttest"
	"github.com/dgramio/dgramio/internal/testutil"
)

// TestFrameBeforeSleepWakesThePoller: a frame that reaches the AF_XDP RX
// ring after the poller's last round and before its netpoller wait is
// armed (the Read clears the readiness the netpoller already held) is
// polled at once, not when the next frame or a timer wakes the poller. A
// hook holds the native poller at that point until a frame is in the
// ring; a kernel client in B then sends 60 one-byte writes to a
// connection nobody reads, each waiting until the engine has
// acknowledged it. A frame left in the ring is acknowledged only when the
// client's RTO resends it (a third of the writes, without the look at the
// ring); a host that stalls the test for a whole RTO (200 ms) may cost
// one or two.
func TestFrameBeforeSleepWakesThePoller(t *testing.T) {
	testutil.RequireRoot(t)
	p := hosttest.New(t, testhost.Options{})
	addr := peertest.Addr(p.A, 3)
	s := openVeth(t, p.A, onEngine("native", dgramio.Config{LocalIP: addr, Port: testPort}), Options{})
	if s.nat == nil || s.nat.pf == nil || s.nat.rxReady == nil {
		testutil.Skip(t, "the Service does not sleep in the netpoller over an RX ring it can look at")
	}
	ln := listen(t, s, testPort)
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		accepted <- err
	}()
	c, err := peertest.Dialer(p.B)(t.Context(), "tcp4", fmt.Sprintf("%s:%d", addr, testPort))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	hook := func(n *nativeSvc) {
		if n != s.nat {
			return
		}
		for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end) && !n.rxReady(); {
			time.Sleep(50 * time.Microsecond)
		}
		time.Sleep(2 * time.Millisecond) // the netpoller takes the frame's readiness
	}
	sleepHook.Store(&hook)
	defer sleepHook.Store(nil)
	before := retransSegs(t, p.B)
	for i := range 60 {
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		waitAcked(t, c)
	}
	if n := retransSegs(t, p.B) - before; n > 2 {
		t.Fatalf("the client retransmitted %d segments: a frame waited in the ring for the next wake-up", n)
	}
}

// waitAcked waits until the kernel connection c has nothing unacknowledged
// (TCP_INFO's unacked).
func waitAcked(t *testing.T, c net.Conn) {
	t.Helper()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(30 * time.Second); ; {
		var unacked uint32
		var gerr error
		if err := rc.Control(func(fd uintptr) {
			var info *unix.TCPInfo
			info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
			if gerr == nil {
				unacked = info.Unacked
			}
		}); err != nil || gerr != nil {
			t.Fatal(err, gerr)
		}
		if unacked == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d segments still unacknowledged after 30 s", unacked)
		}
		time.Sleep(time.Millisecond)
	}
}

// retransSegs returns Tcp RetransSegs of h's namespace.
func retransSegs(t *testing.T, h *testhost.Host) uint64 {
	t.Helper()
	var b []byte
	if err := h.Do(func() error {
		var err error
		b, err = os.ReadFile("/proc/thread-self/net/snmp")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "Tcp:") || !strings.HasPrefix(lines[i+1], "Tcp:") {
			continue
		}
		names, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		for j := range names {
			if names[j] == "RetransSegs" && j < len(vals) {
				v, err := strconv.ParseUint(vals[j], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
		}
	}
	t.Fatal("no Tcp RetransSegs in /proc/net/snmp")
	return 0
}
