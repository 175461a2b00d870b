package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
)

// lockedBuffer is a bytes.Buffer a tool writes from its goroutines while
// the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A client that sends plain bytes (nc, socat) to an echo in u16 framing:
// its first two bytes read as a record length beyond the largest message,
// the record is skipped (rx_truncated), and the echo says why and names
// --framing raw, instead of staying silent. Kernel tcp on loopback.
func TestEchoFramingHint(t *testing.T) {
	testEchoFramingHint(t, 1)
}

// The same with --queues 2 (a group, one listener per queue): the hint
// reads the sum over the queues, so it comes whichever queue the kernel
// hands the plain-bytes connections to. Several connections from other
// source ports land on both queues (SO_REUSEPORT hashing).
func TestEchoFramingHintQueues(t *testing.T) {
	testEchoFramingHint(t, 2)
}

func testEchoFramingHint(t *testing.T, queues int) {
	defer func(p time.Duration) { framingPeriod = p }(framingPeriod)
	framingPeriod = 5 * time.Millisecond
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- RunEcho(ctx, []string{"--kind", "tcp", "--local", "127.0.0.1", "--port", fmt.Sprint(port), "--wait", "--queues", fmt.Sprint(queues)}, &stdout, &stderr)
	}()
	wait := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			select {
			case rc := <-done:
				t.Fatalf("echo exited (%d) before %s: %s %s", rc, what, stdout.String(), stderr.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s: %s %s", what, stdout.String(), stderr.String())
			}
		}
	}
	wait("ready line", func() bool { return strings.HasPrefix(stdout.String(), "ready ") })
	for range 2 * queues {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("hello, plain bytes\n")) // "he" = 26725: beyond 1472
		c.Close()
	}
	wait("framing hint", func() bool { return strings.Contains(stderr.String(), "needs --framing raw") })
	cancel()
	if rc := <-done; rc != 0 {
		t.Errorf("echo exited %d: %s", rc, stderr.String())
	}
	if n := strings.Count(stderr.String(), "needs --framing raw"); n != 1 {
		t.Errorf("hint said %d times, want once: %s", n, stderr.String())
	}
}

// framingHint says nothing without a truncated record, nor in raw
// framing, where there are no lengths to misread.
func TestFramingHintQuiet(t *testing.T) {
	if h := framingHint("echo", dgramio.Stats{}, dgramio.FramingU16, 1472); h != "" {
		t.Errorf("no truncation: %q", h)
	}
	if h := framingHint("echo", dgramio.Stats{RxTruncated: 3}, dgramio.FramingRaw, 1472); h != "" {
		t.Errorf("raw framing: %q", h)
	}
	if h := framingHint("echo", dgramio.Stats{RxTruncated: 3}, dgramio.FramingU32, 1472); !strings.Contains(h, "--framing u32") {
		t.Errorf("u32: %q", h)
	}
}
