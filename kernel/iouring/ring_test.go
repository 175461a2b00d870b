//go:build linux && (amd64 || arm64 || ppc64 || ppc64le || mips64 || mips64le || riscv64 || s390x || loong64)

package iouring

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio/internal/testutil"
)

func TestABISizes(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"io_uring_sqe", unsafe.Sizeof(SQE{}), 64},
		{"io_uring_cqe", unsafe.Sizeof(CQE{}), 16},
		{"io_uring_params", unsafe.Sizeof(params{}), 120},
		{"io_uring_buf", unsafe.Sizeof(bufEntry{}), 16},
		{"io_uring_buf_reg", unsafe.Sizeof(bufReg{}), 40},
		{"io_uring_getevents_arg", unsafe.Sizeof(geteventsArg{}), 24},
		{"io_uring_napi", unsafe.Sizeof(napiReg{}), 16},
		{"sqe.user_data offset", unsafe.Offsetof(SQE{}.UserData), 32},
		{"sqe.buf_index offset", unsafe.Offsetof(SQE{}.BufIndex), 40},
		{"sqe.addr3 offset", unsafe.Offsetof(SQE{}.Addr3), 48},
		{"params.sq_off offset", unsafe.Offsetof(params{}.SQOff), 40},
		{"params.cq_off offset", unsafe.Offsetof(params{}.CQOff), 80},
		{"buf.bid offset (tail at 14)", unsafe.Offsetof(bufEntry{}.BID), 12},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
}

// newRing sets up a ring for a test on a locked thread (SingleIssuer) and
// closes it at the end.
func newRing(t *testing.T, o Options) *Ring {
	t.Helper()
	if err := Check(); err != nil {
		testutil.SkipIfNotSupported(t, err)
	}
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	r, err := New(o)
	if err != nil {
		testutil.SkipIfNotSupported(t, err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

// recvMem makes what a multishot RECVMSG on an IPv4 socket needs: buffer
// ring bgid of n buffers of size bytes, and a region of regionSize bytes
// with the receive msghdr at offset 0 (room for the source address, no
// control data, no iovec). At the end of the test it closes r before it
// frees them, so that no request still points into them.
func recvMem(t *testing.T, r *Ring, bgid uint16, n uint32, size, regionSize int) (*BufRing, *Region) {
	t.Helper()
	br, err := r.NewBufRing(bgid, n, size)
	testutil.SkipIfNotSupported(t, err)
	mem, err := NewRegion(regionSize)
	if err != nil {
		br.Free()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Close() // idempotent; newRing's cleanup then finds it closed
		if err := errors.Join(br.Free(), mem.Free()); err != nil {
			t.Error(err)
		}
	})
	*MsghdrAt(mem, 0) = Msghdr{Namelen: uint32(SockaddrInLen)}
	return br, mem
}

// waitN waits (generously) until n completions are in the CQ.
func waitN(t *testing.T, r *Ring, n uint32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.CQReady() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d completions after 10 s, want %d", r.CQReady(), n)
		}
		if err := r.WaitCQE(100 * time.Millisecond); err != nil && !errors.Is(err, ErrTimeout) {
			t.Fatal(err)
		}
		if r.CQReady() > 0 && r.CQReady() < n {
			runtime.Gosched()
		}
	}
}

func TestNopRoundTrip(t *testing.T) {
	r := newRing(t, Options{Entries: 8, SingleIssuer: true})
	if r.SQEntries() != 8 || r.CQEntries() != 16 {
		t.Fatalf("ring sizes %d/%d, want 8/16", r.SQEntries(), r.CQEntries())
	}
	for round := 0; round < 3; round++ { // wrap the rings around
		for i := 0; i < 8; i++ {
			e := r.GetSQE()
			if e == nil {
				t.Fatalf("round %d: SQ full after %d SQEs", round, i)
			}
			e.PrepNop(uint64(round*100 + i))
		}
		if r.GetSQE() != nil {
			t.Fatal("GetSQE on a full SQ returned an entry")
		}
		n, err := r.Submit(0)
		if err != nil || n != 8 {
			t.Fatalf("Submit: %d, %v; want 8", n, err)
		}
		waitN(t, r, 8)
		for i := 0; i < 8; i++ {
			c := r.PeekCQE()
			if c == nil || c.UserData != uint64(round*100+i) || c.Res != 0 {
				t.Fatalf("round %d CQE %d: %+v", round, i, c)
			}
			r.CQAdvance(1)
		}
		if r.PeekCQE() != nil {
			t.Fatal("CQ not empty after 8 NOPs")
		}
	}
	if r.Syscalls() == 0 {
		t.Error("Syscalls not counted")
	}
}

func TestSubmitInChunks(t *testing.T) {
	r := newRing(t, Options{Entries: 16, SingleIssuer: true})
	for i := 0; i < 10; i++ {
		r.GetSQE().PrepNop(uint64(i))
	}
	before := r.Syscalls()
	total := 0
	for r.Unsubmitted() > 0 {
		n, err := r.Submit(4)
		if err != nil {
			t.Fatal(err)
		}
		if n > 4 {
			t.Fatalf("Submit(4) took %d", n)
		}
		total += n
	}
	if total != 10 || r.Syscalls()-before != 3 {
		t.Fatalf("submitted %d in %d calls, want 10 in 3", total, r.Syscalls()-before)
	}
	waitN(t, r, 10)
}

func TestWaitTimeout(t *testing.T) {
	r := newRing(t, Options{Entries: 4, SingleIssuer: true})
	start := time.Now()
	err := r.WaitCQE(20 * time.Millisecond)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("WaitCQE on an empty ring: %v, want ErrTimeout", err)
	}
	if time.Since(start) < 10*time.Millisecond {
		t.Fatalf("WaitCQE returned after %v, before its timeout", time.Since(start))
	}
}

func TestSingleIssuerOtherThread(t *testing.T) {
	r := newRing(t, Options{Entries: 4, SingleIssuer: true})
	if r.Flags()&SetupSingleIssuer == 0 {
		t.Fatal("SINGLE_ISSUER not set")
	}
	r.GetSQE().PrepNop(1)
	if _, err := r.Submit(0); err != nil { // binds the ring to this thread
		t.Fatal(err)
	}
	waitN(t, r, 1)
	r.CQAdvance(1)
	// Waiting for completions is allowed from any thread...
	getc := make(chan error)
	go func() {
		runtime.LockOSThread() // surely another thread than the test's
		defer runtime.UnlockOSThread()
		_, err := r.Enter(0, 0, EnterGetEvents)
		getc <- err
	}()
	if err := <-getc; err != nil {
		t.Fatalf("getevents from another thread: %v", err)
	}
	// ...but a submission is refused; this is why the uring backend locks
	// its goroutine to the thread.
	r.GetSQE().PrepNop(2)
	r.publish()
	subc := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		_, err := r.Enter(1, 0, 0)
		subc <- err
	}()
	if err := <-subc; err != unix.EEXIST {
		t.Fatalf("submit from another thread: %v, want EEXIST", err)
	}
}

// udpPair returns two UDP sockets bound to 127.0.0.1 and their addresses.
func udpPair(t *testing.T) (a, b int, aAddr, bAddr netip.AddrPort) {
	t.Helper()
	open := func() (int, netip.AddrPort) {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			t.Fatal(err)
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			t.Fatal(err)
		}
		in := sa.(*unix.SockaddrInet4)
		return fd, netip.AddrPortFrom(netip.AddrFrom4(in.Addr), uint16(in.Port))
	}
	a, aAddr = open()
	b, bAddr = open()
	return
}

// sendSlot lays out one send in a region: msghdr, iovec, sockaddr, payload.
func sendSlot(reg *Region, off int, to netip.AddrPort, payload []byte) uint64 {
	const iovOff, nameOff, dataOff = 64, 80, 96
	copy(reg.Slice(off+dataOff, len(payload)), payload)
	PutSockaddrIn4(reg.Slice(off+nameOff, SockaddrInLen), to)
	*IovecAt(reg, off+iovOff) = Iovec{Base: reg.Addr(off + dataOff), Len: uint64(len(payload))}
	*MsghdrAt(reg, off) = Msghdr{Name: reg.Addr(off + nameOff), Namelen: uint32(SockaddrInLen), Iov: reg.Addr(off + iovOff), Iovlen: 1}
	return reg.Addr(off)
}

func TestSendRecvMultishot(t *testing.T) {
	r := newRing(t, Options{Entries: 32, CQEntries: 64, SingleIssuer: true})
	a, b, aAddr, bAddr := udpPair(t)
	if err := r.RegisterFiles([]int32{int32(a), int32(b)}); err != nil {
		t.Fatal(err)
	}
	const bufSize = RecvmsgOutLen + SockaddrInLen + 256
	br, mem := recvMem(t, r, 7, 8, bufSize, 64<<10)
	r.GetSQE().PrepRecvmsgMultishot(1, true, mem.Addr(0), br.Group(), 1000)
	const n = 6
	for i := 0; i < n; i++ {
		msg := sendSlot(mem, 1024*(i+1), bAddr, []byte(fmt.Sprintf("datagram %d", i)))
		r.GetSQE().PrepSendmsg(0, true, msg, 0, uint64(i))
	}
	if _, err := r.Submit(0); err != nil {
		t.Fatal(err)
	}
	sends, recvs := 0, 0
	seen := map[string]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for (sends < n || recvs < n) && time.Now().Before(deadline) {
		if err := r.WaitCQE(100 * time.Millisecond); err != nil && !errors.Is(err, ErrTimeout) {
			t.Fatal(err)
		}
		for c := r.PeekCQE(); c != nil; c = r.PeekCQE() {
			switch {
			case c.UserData < n:
				if c.Res != int32(len("datagram 0")) {
					t.Errorf("send %d: res %d", c.UserData, c.Res)
				}
				sends++
			case c.UserData == 1000:
				if c.Res < 0 || !c.HasBuffer() || !c.More() {
					t.Fatalf("recv CQE: res %d flags %#x", c.Res, c.Flags)
				}
				m := RecvmsgOut{Buf: br.Buf(c.BufID())[:c.Res], NameLen: SockaddrInLen}
				if !m.IsValid() || m.Truncated() {
					t.Fatalf("recv buffer: valid %v truncated %v", m.IsValid(), m.Truncated())
				}
				from, ok := SockaddrIn4(m.Name())
				if !ok || from != aAddr {
					t.Errorf("from %v (%v), want %v", from, ok, aAddr)
				}
				seen[string(m.Payload())] = true
				br.Recycle(c.BufID())
				recvs++
			default:
				t.Fatalf("unexpected CQE %+v", c)
			}
			r.CQAdvance(1)
		}
		br.Publish()
	}
	if sends != n || recvs != n {
		t.Fatalf("%d sends and %d receives completed, want %d each", sends, recvs, n)
	}
	for i := 0; i < n; i++ {
		if !seen[fmt.Sprintf("datagram %d", i)] {
			t.Errorf("datagram %d not received", i)
		}
	}
	if err := r.UnregisterFiles(); err != nil {
		t.Fatal(err)
	}
}

// TestBufRingRecycling fills a four-buffer ring: the multishot receive ends
// with ENOBUFS once the buffers run out, nothing is lost (the datagrams
// wait in the socket), and after the buffers are recycled a new request
// receives the rest.
func TestBufRingRecycling(t *testing.T) {
	r := newRing(t, Options{Entries: 16, CQEntries: 64, SingleIssuer: true})
	a, b, _, bAddr := udpPair(t)
	const bufSize = RecvmsgOutLen + SockaddrInLen + 64
	br, mem := recvMem(t, r, 1, 4, bufSize, 4096)
	if br.Tail() != 4 {
		t.Fatalf("tail after set-up %d, want 4", br.Tail())
	}
	const n = 10
	for i := 0; i < n; i++ {
		if err := unix.Sendto(a, []byte{byte(i), 'x'}, 0, &unix.SockaddrInet4{Addr: bAddr.Addr().As4(), Port: int(bAddr.Port())}); err != nil {
			t.Fatal(err)
		}
	}
	var got []byte
	arms, enobufs := 0, 0
	deadline := time.Now().Add(10 * time.Second)
	armed := false
	for len(got) < n && time.Now().Before(deadline) {
		if !armed {
			r.GetSQE().PrepRecvmsgMultishot(int32(b), false, mem.Addr(0), br.Group(), 5)
			if _, err := r.Submit(0); err != nil {
				t.Fatal(err)
			}
			armed = true
			arms++
		}
		if err := r.WaitCQE(100 * time.Millisecond); err != nil && !errors.Is(err, ErrTimeout) {
			t.Fatal(err)
		}
		var held []uint16
		for c := r.PeekCQE(); c != nil; c = r.PeekCQE() {
			if c.Res >= 0 && c.HasBuffer() {
				m := RecvmsgOut{Buf: br.Buf(c.BufID())[:c.Res], NameLen: SockaddrInLen}
				if !m.IsValid() || !bytes.Equal(m.Payload()[1:], []byte("x")) {
					t.Fatalf("bad datagram in buffer %d", c.BufID())
				}
				got = append(got, m.Payload()[0])
				held = append(held, c.BufID())
			} else if c.Res == -int32(unix.ENOBUFS) {
				enobufs++
			} else {
				t.Fatalf("recv CQE res %d", c.Res)
			}
			if !c.More() {
				armed = false
			}
			r.CQAdvance(1)
		}
		for _, bid := range held { // given back after use, as the backend does
			br.Recycle(bid)
		}
		br.Publish()
	}
	if len(got) != n {
		t.Fatalf("received %d of %d", len(got), n)
	}
	for i, v := range got {
		if v != byte(i) {
			t.Fatalf("datagram %d carries %d: order or content lost", i, v)
		}
	}
	if enobufs == 0 || arms < 2 {
		t.Fatalf("ENOBUFS %d times, armed %d times: the four buffers never ran out", enobufs, arms)
	}
	if err := br.Unregister(r); err != nil {
		t.Fatal(err)
	}
}

func TestRegisterNAPI(t *testing.T) {
	r := newRing(t, Options{Entries: 4, SingleIssuer: true})
	err := r.RegisterNAPI(50*time.Microsecond, false)
	testutil.SkipIfNotSupported(t, err)
	if err := r.UnregisterNAPI(); err != nil {
		t.Fatal(err)
	}
}

func TestOpSupported(t *testing.T) {
	r := newRing(t, Options{Entries: 4})
	for _, op := range []uint8{OpNop, OpSendmsg, OpRecvmsg, OpAsyncCancel} {
		ok, err := r.OpSupported(op)
		if err != nil || !ok {
			t.Errorf("opcode %d: %v, %v", op, ok, err)
		}
	}
	if ok, err := r.OpSupported(250); err != nil || ok {
		t.Errorf("opcode 250: %v, %v; want unsupported", ok, err)
	}
}

func TestCancelAll(t *testing.T) {
	r := newRing(t, Options{Entries: 8, SingleIssuer: true})
	_, b, _, _ := udpPair(t)
	br, mem := recvMem(t, r, 3, 4, 256, 4096)
	r.GetSQE().PrepRecvmsgMultishot(int32(b), false, mem.Addr(0), br.Group(), 9)
	if _, err := r.Submit(0); err != nil {
		t.Fatal(err)
	}
	r.GetSQE().PrepCancelAll(10)
	if _, err := r.Submit(0); err != nil {
		t.Fatal(err)
	}
	waitN(t, r, 2)
	var recvRes, cancelRes int32 = 1, -1
	for c := r.PeekCQE(); c != nil; c = r.PeekCQE() {
		switch c.UserData {
		case 9:
			recvRes = c.Res
		case 10:
			cancelRes = c.Res
		}
		r.CQAdvance(1)
	}
	if recvRes != -int32(unix.ECANCELED) || cancelRes != 1 {
		t.Fatalf("recv res %d (want -ECANCELED), cancel res %d (want 1)", recvRes, cancelRes)
	}
}

func TestParseKernelVersion(t *testing.T) {
	for _, c := range []struct {
		in   string
		want KernelVersion
		ok   bool
	}{
		{"6.18.44-fc-v857", KernelVersion{6, 18}, true},
		{"5.14.0-362.el9.x86_64", KernelVersion{5, 14}, true},
		{"6.0", KernelVersion{6, 0}, true},
		{"6.9-rc1", KernelVersion{6, 9}, true},
		{"6", KernelVersion{}, false},
		{"x.1", KernelVersion{}, false},
		{"6.x", KernelVersion{}, false},
	} {
		got, err := ParseKernelVersion(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseKernelVersion(%q) = %v, %v", c.in, got, err)
		}
	}
	v := KernelVersion{6, 1}
	if !v.AtLeast("6.0") || !v.AtLeast("5.19") || v.AtLeast("6.9") || !v.AtLeast("6.1") {
		t.Error("AtLeast compares wrongly")
	}
}

// TestCoopTaskrun: with COOP_TASKRUN|TASKRUN_FLAG a completion that needs
// the ring's thread shows up as SQTaskrun until the thread enters; then
// FlushOverflow (one io_uring_enter) brings it into the CQ.
func TestCoopTaskrun(t *testing.T) {
	r := newRing(t, Options{Entries: 8, SingleIssuer: true, CoopTaskrun: true})
	if r.Flags()&(SetupCoopTaskrun|SetupTaskrunFlag) != SetupCoopTaskrun|SetupTaskrunFlag {
		t.Fatalf("flags %#x: COOP_TASKRUN|TASKRUN_FLAG not set", r.Flags())
	}
	a, b, _, bAddr := udpPair(t)
	br, mem := recvMem(t, r, 2, 4, 256, 4096)
	r.GetSQE().PrepRecvmsgMultishot(int32(b), false, mem.Addr(0), br.Group(), 1)
	if _, err := r.Submit(0); err != nil {
		t.Fatal(err)
	}
	// Send from another thread, so that the completion work is queued for
	// this one while it does not enter the kernel.
	// This thread spins on an atomic instead of blocking on a channel,
	// which would enter the kernel (and run the work).
	var sent atomic.Int32
	var sendErr error
	go func() {
		sendErr = unix.Sendto(a, []byte("coop"), 0, &unix.SockaddrInet4{Addr: bAddr.Addr().As4(), Port: int(bAddr.Port())})
		sent.Store(1)
	}()
	for start := time.Now(); sent.Load() == 0 && time.Since(start) < 10*time.Second; {
	}
	if sent.Load() == 0 || sendErr != nil {
		t.Fatalf("send: done %v, %v", sent.Load() == 1, sendErr)
	}
	sawFlag := false
	deadline := time.Now().Add(10 * time.Second)
	for r.CQReady() == 0 && time.Now().Before(deadline) {
		if r.SQFlags()&SQTaskrun != 0 {
			sawFlag = true
			before := r.Syscalls()
			if err := r.FlushOverflow(); err != nil {
				t.Fatal(err)
			}
			if r.Syscalls() != before+1 {
				t.Fatalf("FlushOverflow made %d calls, want 1", r.Syscalls()-before)
			}
		}
	}
	if r.CQReady() == 0 {
		t.Fatal("the receive never completed")
	}
	c := r.PeekCQE()
	if c.Res <= 0 || !c.HasBuffer() {
		t.Fatalf("receive CQE res %d flags %#x", c.Res, c.Flags)
	}
	// Usually the flag is seen; the thread may also have entered the kernel
	// by itself (a Go preemption signal, the channel wait above).
	t.Logf("SQTaskrun seen before the completion: %v", sawFlag)
}
