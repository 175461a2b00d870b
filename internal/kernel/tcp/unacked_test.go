package tcp

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
)

// readRecords reads fd (blocking, up to a 2 s silence) until EOF or an
// error and returns the whole records in it and whether a cut one was
// left at the end.
func readRecords(t *testing.T, fd int) (whole uint64, cut bool) {
	t.Helper()
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2}); err != nil {
		t.Fatal(err)
	}
	var buf, pend []byte = make([]byte, 64<<10), nil
	for {
		n, err := unix.Read(fd, buf)
		if n <= 0 || err != nil {
			return whole, len(pend) > 0
		}
		pend = append(pend, buf[:n]...)
		for len(pend) >= 2 && len(pend) >= 2+int(binary.BigEndian.Uint16(pend)) {
			pend = pend[2+int(binary.BigEndian.Uint16(pend)):]
			whole++
		}
	}
}

// TestCloseCountsUnacked: a client whose server reads nothing closes
// with records in its socket that the server's TCP never acknowledged
// (RFC 9293 §3.10.4: CLOSE leaves them to be sent; here they never can
// be). Close counts them in TxDropped, not TxSent, and resets the
// connection, so that what the server can still read is exactly TxSent:
// the whole records, and at most one cut whose head it acknowledged.
func TestCloseCountsUnacked(t *testing.T) {
	lfd, port := rawListener(t)
	if err := unix.SetsockoptInt(lfd, unix.SOL_SOCKET, unix.SO_RCVBUF, 64<<10); err != nil {
		t.Fatal(err)
	}
	cli := newClient(t, dgramio.Config{SockBuf: 64 << 10, TxQueue: 64}, port, lo)
	afd, _, err := unix.Accept(lfd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(afd)
	queued := uint64(fillUntilRefused(t, cli, 1000, 0))
	cli.Close()
	s := cli.Stats()
	if s.TxQueued != queued || s.TxSent+s.TxDropped != queued {
		t.Fatalf("queued %d: TxQueued %d TxSent %d TxDropped %d", queued, s.TxQueued, s.TxSent, s.TxDropped)
	}
	whole, cut := readRecords(t, afd)
	var c uint64
	if cut {
		c = 1
	}
	if whole+c != s.TxSent {
		t.Errorf("the server read %d whole records (cut one: %v), the client counts %d sent, %d dropped of %d",
			whole, cut, s.TxSent, s.TxDropped, queued)
	}
	if s.TxDropped == 0 {
		t.Error("nothing counted dropped: the test did not leave records unacknowledged")
	}
}

// TestCloseCountsUnackedRaw: TestCloseCountsUnacked in raw framing
// (dgramio.FramingRaw), where a "record" is one QueueTo's append: the
// appends whose first byte the server never acknowledged move to
// TxDropped at Close, so the server reads exactly the appends counted
// sent (the last one perhaps cut).
func TestCloseCountsUnackedRaw(t *testing.T) {
	const size = 1000
	lfd, port := rawListener(t)
	if err := unix.SetsockoptInt(lfd, unix.SOL_SOCKET, unix.SO_RCVBUF, 64<<10); err != nil {
		t.Fatal(err)
	}
	cli := newClient(t, dgramio.Config{SockBuf: 64 << 10, TxQueue: 64, Framing: dgramio.FramingRaw}, port, lo)
	afd, _, err := unix.Accept(lfd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(afd)
	if m := cli.Stats().Mode; !strings.HasPrefix(m, "send/recv raw bytes") {
		t.Errorf("mode %q: a raw stream says so, not records", m)
	}
	queued := uint64(fillUntilRefused(t, cli, size, 0))
	cli.Close()
	s := cli.Stats()
	if s.TxQueued != queued || s.TxSent+s.TxDropped != queued {
		t.Fatalf("queued %d: TxQueued %d TxSent %d TxDropped %d", queued, s.TxQueued, s.TxSent, s.TxDropped)
	}
	if err := unix.SetsockoptTimeval(afd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2}); err != nil {
		t.Fatal(err)
	}
	var read uint64
	for buf := make([]byte, 64<<10); ; {
		n, err := unix.Read(afd, buf)
		if n <= 0 || err != nil {
			break
		}
		read += uint64(n)
	}
	if started := (read + size - 1) / size; started != s.TxSent {
		t.Errorf("the server read %d bytes (%d appends begun), the client counts %d sent, %d dropped of %d",
			read, started, s.TxSent, s.TxDropped, queued)
	}
	if s.TxDropped == 0 {
		t.Error("nothing counted dropped: the test did not leave appends unacknowledged")
	}
}

// TestServerCloseCountsClientUnacked: a server that closes while its
// client still sends resets the connection (RFC 9293 §3.10.7.4: data for
// a closed direction); the client counts the records its socket held
// that the server never acknowledged in TxDropped, and the server counts
// those it acknowledged and never delivered in "stream" "rx_closed": no
// record is left out.
func TestServerCloseCountsClientUnacked(t *testing.T) {
	cfg := dgramio.Config{SockBuf: 64 << 10, TxQueue: 64}
	srv := newServer(t, cfg, lo)
	cli := newClient(t, cfg, srv.LocalAddr().Port(), lo)
	until(t, "the server accepts", func() bool {
		srv.Rx(make([]dgramio.Packet, 1))
		return srv.Stats().Accepts == 1
	})
	queued := uint64(fillUntilRefused(t, cli, 1000, 0))
	srv.Close()
	until(t, "the client's connection ends", func() bool {
		cli.Rx(make([]dgramio.Packet, 16))
		cli.Flush()
		return cli.Stats().Conns == 0
	})
	cli.Close()
	cs, ss := cli.Stats(), srv.Stats()
	closed, _ := ss.Counter("stream", "rx_closed")
	if cs.TxSent+cs.TxDropped != queued {
		t.Fatalf("queued %d: TxSent %d TxDropped %d", queued, cs.TxSent, cs.TxDropped)
	}
	if got := ss.RxDelivered + closed + ss.RxMalformed; got != cs.TxSent {
		t.Errorf("server delivered %d, rx_closed %d, cut %d; the client counts %d sent, %d dropped of %d",
			ss.RxDelivered, closed, ss.RxMalformed, cs.TxSent, cs.TxDropped, queued)
	}
}

// TestClientLingerEndCountsAnswersInFlight: a server that keeps sending
// to a client that closes has answers in flight when the client's linger
// (2 s) ends; the client resets (RFC 9293 §3.10.4, data still arriving
// for a closed socket) and counts what it had read and not delivered in
// "stream" "rx_closed", and the server counts the answers its socket held
// unacknowledged in TxDropped: every record the server counts as sent is
// one the client counts.
func TestClientLingerEndCountsAnswersInFlight(t *testing.T) {
	cfg := dgramio.Config{SockBuf: 64 << 10, TxQueue: 4096}
	srv := newServer(t, cfg, lo)
	cli := newClient(t, cfg, srv.LocalAddr().Port(), lo)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the server talks until its client has gone
		defer close(done)
		msg := make([]byte, 1000)
		pkts := make([]dgramio.Packet, 16)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for srv.Queue(msg) == nil {
			}
			srv.Flush()
			srv.Rx(pkts)
			if s := srv.Stats(); s.Accepts == 1 && s.Conns == 0 {
				return
			}
		}
	}()
	until(t, "the first answers", func() bool {
		cli.Rx(make([]dgramio.Packet, 16))
		return cli.Stats().RxDelivered > 0
	})
	cli.Close()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		close(stop)
		<-done
		t.Fatal("the server never saw its client go")
	}
	srv.Close()
	cs, ss := cli.Stats(), srv.Stats()
	closed, _ := cs.Counter("stream", "rx_closed")
	if got := cs.RxDelivered + closed + cs.RxMalformed; got != ss.TxSent {
		t.Errorf("client delivered %d, rx_closed %d, cut %d; the server counts %d sent, %d dropped of %d",
			cs.RxDelivered, closed, cs.RxMalformed, ss.TxSent, ss.TxDropped, ss.TxQueued)
	}
	if ss.TxSent+ss.TxDropped != ss.TxQueued {
		t.Errorf("server TxSent %d + TxDropped %d != TxQueued %d", ss.TxSent, ss.TxDropped, ss.TxQueued)
	}
}

// TestCloseResetsPeerStillSendingRFC1122Sec4_2_2_13: bytes read from a
// connection after the backend's Close shut it down (the peer was still
// sending; nobody will deliver them) make its close a reset (RFC 1122
// §4.2.2.13: data pending at CLOSE is answered with a RST), so that the
// peer learns at once. A plain close(2) of the socket that read just
// emptied sends nothing more after the FIN: the peer stays in CLOSE-WAIT,
// and one that was held by a zero window is never told its data is lost
// (until the orphan's FIN-WAIT-2 timeout).
func TestCloseResetsPeerStillSendingRFC1122Sec4_2_2_13(t *testing.T) {
	for _, cut := range []bool{true, false} {
		ln, err := net.Listen("tcp", netip.AddrPortFrom(lo, 0).String())
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		cc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		// A descriptor of our own, which c.Close closes (the socket
		// goes when cc closes too).
		fd := -1
		raw, err := cc.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		raw.Control(func(s uintptr) { fd, err = unix.Dup(int(s)) })
		if err != nil {
			t.Fatal(err)
		}
		c := &conn{b: &Backend{byFD: make([]*conn, fd+1)}, fd: fd}
		if _, err := sc.Write([]byte("still sending")); err != nil {
			t.Fatal(err)
		}
		if cut {
			c.settled = true // as settle does, before Layer.Close's last reads
		}
		buf := make([]byte, 64)
		until(t, "the peer's bytes", func() bool { n, _ := c.Read(buf); return n > 0 })
		if err := unix.Shutdown(fd, unix.SHUT_RDWR); err != nil {
			t.Fatal(err)
		}
		c.Close()
		cc.Close()
		state := func() uint8 {
			var st uint8
			raw, _ := sc.(*net.TCPConn).SyscallConn()
			raw.Control(func(s uintptr) {
				if ti, err := unix.GetsockoptTCPInfo(int(s), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
					st = ti.State
				}
			})
			return st
		}
		if cut {
			until(t, "the peer to take our reset", func() bool { return state() == tcpClose })
			continue
		}
		// Without bytes cut off, an orderly close: the peer got our FIN
		// and stays in CLOSE-WAIT (8) until it closes.
		time.Sleep(100 * time.Millisecond)
		if st := state(); st != 8 {
			t.Errorf("after a close with nothing cut off, the peer's state is %d, want CLOSE-WAIT (8)", st)
		}
	}
}
