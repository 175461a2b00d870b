package netconn

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/peertest"
)

// TestThousandConns: 1,000 connections open at once between two Services
// (each dialled from its own goroutine, echoed by its own server
// goroutine), each checked with a round trip, then all closed. Afterwards
// the goroutines return to the baseline, both Services hold no connection,
// netstack counts none established, and once TIME-WAIT (shortened here)
// is over, no endpoint is left but the listener.
func TestThousandConns(t *testing.T) {
	const n = 1000
	// netstack's counters are its own: 1,000 connections to a native
	// Service are TestKernelThousandConns's.
	cfg := dgramio.Config{ConnectTimeout: 60 * time.Second, TCP: dgramio.TCPTuning{Stack: dgramio.TCPStackNetstack}}
	// Small buffers: 1,000 connections of netstack's defaults would
	// reserve 2 GiB (nothing allocates it, but the window scale follows).
	cfg.TCP.SendBuf, cfg.TCP.RecvBuf = 64<<10, 64<<10
	p := newPair(t, memio.Options{TxSlots: 1024, RxSlots: 4096}, Options{MaxConns: n, TimeWait: 500 * time.Millisecond}, cfg)
	ln := listen(t, p.B, testPort)
	served := peertest.ServeEcho(ln)
	baseline := runtime.NumGoroutine()

	conns := make([]*Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := p.A.Dial(ctx, fmt.Sprintf("%s:%d", ipB, testPort))
			if err != nil {
				errs[i] = err
				return
			}
			conns[i] = c
			msg := binary.BigEndian.AppendUint32(bytes.Repeat([]byte{'x'}, 96), uint32(i))
			c.SetDeadline(time.Now().Add(60 * time.Second))
			if _, err := c.Write(msg); err != nil {
				errs[i] = err
				return
			}
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, msg) {
				errs[i] = fmt.Errorf("echo: %v (%d bytes back)", err, len(got))
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("%v", err)
	}
	if a, b := p.A.Conns(), p.B.Conns(); a != n || b != n {
		t.Fatalf("open: A %d, B %d; want %d each", a, b, n)
	}
	st := p.B.Stats()
	if v, _ := st.Counter("netstack", "tcp_established"); v != n {
		t.Errorf("B's netstack counts %d established, want %d", v, n)
	}
	for _, c := range conns {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	established := func(s *Service) uint64 {
		st := s.Stats()
		v, _ := st.Counter("netstack", "tcp_established")
		return v
	}
	waitFor(t, 60*time.Second, func() bool {
		return p.A.Conns() == 0 && p.B.Conns() == 0 && established(p.A) == 0 && established(p.B) == 0
	}, func() string {
		return fmt.Sprintf("open: A %d B %d; established: A %d B %d", p.A.Conns(), p.B.Conns(), established(p.A), established(p.B))
	})
	waitFor(t, 60*time.Second, func() bool { return runtime.NumGoroutine() <= baseline }, func() string {
		return fmt.Sprintf("%d goroutines, baseline %d", runtime.NumGoroutine(), baseline)
	})
	waitFor(t, 60*time.Second, func() bool { return p.A.Endpoints() == 0 && p.B.Endpoints() == 1 }, func() string {
		return fmt.Sprintf("netstack endpoints: A %d (want 0), B %d (want 1, the listener)", p.A.Endpoints(), p.B.Endpoints())
	})
	sa, sb := p.A.Stats(), p.B.Stats()
	dials, _ := sa.Counter("netconn", "dials")
	closes, _ := sa.Counter("netconn", "closes")
	if dials != n || closes != n || sb.Accepts != n {
		t.Errorf("A dials %d closes %d, B accepts %d; want %d", dials, closes, sb.Accepts, n)
	}
	ln.Close()
	served()
}

// TestConnLimit: past MaxConns, Accept resets the new connection and
// returns a Temporary *ConnLimitError (counted), the peer sees the reset,
// and a connection closed makes room again; a dialling Service refuses
// its own dial past its limit before sending anything.
func TestConnLimit(t *testing.T) { forEngines(t, testConnLimit) }

func testConnLimit(t *testing.T, stk dgramio.TCPStack) {
	p := newPair(t, memio.Options{}, Options{MaxConns: 2}, onEngine(stk))
	ln := listen(t, p.B, testPort)
	addr := fmt.Sprintf("%s:%d", ipB, testPort)
	d1, a1 := connect(t, p, ln)
	_, _ = connect(t, p, ln)
	if _, err := p.A.Dial(context.Background(), addr); !errors.Is(err, ErrConnLimit) {
		t.Fatalf("A's third dial: %v, want ErrConnLimit", err)
	}
	// Let A dial once more (test only), for a third connection to B.
	p.A.mu.Lock()
	p.A.opts.MaxConns = 3
	p.A.mu.Unlock()
	d3, err := p.A.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer d3.Close()
	_, err = ln.Accept()
	var ne net.Error
	if !errors.Is(err, ErrConnLimit) || !errors.As(err, &ne) || ne.Timeout() {
		t.Fatalf("Accept past the limit: %v", err)
	}
	var le *ConnLimitError
	if errors.As(err, &le); le == nil || le.Limit != 2 || le.Peer.Addr() != ipA {
		t.Errorf("limit error %+v", le)
	}
	if oe := (*net.OpError)(nil); !errors.As(err, &oe) || !oe.Temporary() {
		t.Errorf("%v: not a Temporary *net.OpError (net/http would stop serving)", err)
	}
	st := p.B.Stats()
	if v, _ := st.Counter("netconn", "conn_limit_refused"); v != 1 {
		t.Errorf("conn_limit_refused %d", v)
	}
	d3.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := d3.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the refused peer's Read: %v, want ECONNRESET", err)
	}
	// Room again after a close.
	a1.Close()
	d1.Close()
	d4, err := p.A.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer d4.Close()
	a4, err := ln.Accept()
	if err != nil {
		t.Fatalf("Accept after a close made room: %v", err)
	}
	a4.Close()
}

// TestBufferLimit: a connection's buffers cannot be raised past the
// Config's per-connection sizes (a *BufferLimitError), can be lowered,
// and bound what a writer to a peer that does not read can queue: its
// Write blocks (here until its deadline) after about SendBuf + RecvBuf.
func TestBufferLimit(t *testing.T) { forEngines(t, testBufferLimit) }

func testBufferLimit(t *testing.T, stk dgramio.TCPStack) {
	cfg := dgramio.Config{}
	cfg.TCP.SendBuf, cfg.TCP.RecvBuf, cfg.TCP.NoModerate = 64<<10, 64<<10, true
	p := newPair(t, memio.Options{}, Options{}, onEngine(stk, cfg))
	ln := listen(t, p.B, testPort)
	d, _ := connect(t, p, ln)
	if err := d.SetWriteBuffer(128 << 10); !errors.Is(err, ErrBufferLimit) {
		t.Errorf("SetWriteBuffer past the limit: %v", err)
	}
	if err := d.SetReadBuffer(1 << 20); !errors.Is(err, ErrBufferLimit) {
		t.Errorf("SetReadBuffer past the limit: %v", err)
	}
	var be *BufferLimitError
	if err := d.SetReadBuffer(1 << 20); !errors.As(err, &be) || be.Limit != 64<<10 {
		t.Errorf("%v", err)
	}
	if err := d.SetWriteBuffer(32 << 10); err != nil {
		t.Fatal(err)
	}
	if snd, _ := d.Buffers(); snd != 32<<10 {
		t.Errorf("send buffer %d after SetWriteBuffer(32 KiB)", snd)
	}
	d.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := d.Write(make([]byte, 4<<20))
	if !errors.Is(err, syscall.ETIMEDOUT) && !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
		t.Fatalf("Write to a peer that does not read: %d bytes, %v", n, err)
	}
	// The peer's receive buffer (64 KiB) plus our send buffer (32 KiB),
	// with room for netstack's accounting of segment overhead; on the
	// native engine the send ring (32 KiB now) is in front of the
	// engine's send buffer (64 KiB), and the peer's receive ring behind
	// its receive buffer.
	most := 160 << 10
	if stk == dgramio.TCPStackNative {
		most = 32<<10 + 64<<10 + 64<<10 + rxRing
	}
	if n < 32<<10 || n > most {
		t.Errorf("queued %d bytes before blocking; want about 96 KiB", n)
	}
	t.Logf("a writer to a peer that does not read queued %d bytes before its deadline", n)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
