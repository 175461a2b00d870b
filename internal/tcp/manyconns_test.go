package tcp

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/stack/native"
)

// manyClients is a native-engine server Backend over memio with n
// connections from one engine on the other port (peers that speak only
// when told), all established and accepted.
type manyClients struct {
	srv   *Backend
	e     *native.Engine
	conns []*native.Conn
	pkts  []dgramio.Packet
}

func newManyClients(tb testing.TB, n int) *manyClients {
	tb.Helper()
	pa, pb := memio.NewPair(memio.Options{TxSlots: 1024, RxSlots: 1024})
	tb.Cleanup(func() { pa.Close(); pb.Close() })
	scfg := serverConfig()
	scfg.TCP.Stack, scfg.TCP.MaxConns = dgramio.TCPStackNative, n+16
	scfg.TCP.SendBuf, scfg.TCP.RecvBuf = 4096, 4096
	srv, err := NewOverFrameIO(scfg, pa, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	e, err := native.New(pb, native.Options{Addr: cliIP, AllOnLink: true, MaxConns: n + 16, SendBuf: 4096, RecvBuf: 4096})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	m := &manyClients{srv: srv, e: e, pkts: make([]dgramio.Packet, 64)}
	for end := time.Now().Add(time.Minute); len(m.conns) < n || srv.Stats().Accepts < uint64(n); {
		if time.Now().After(end) {
			tb.Fatalf("accepted %d of %d within a minute", srv.Stats().Accepts, n)
		}
		// A listener's backlog at a time, so that no SYN overflows it.
		for k := 0; k < listenBacklog/2 && len(m.conns) < n; k++ {
			c, err := e.Dial(netip.AddrPortFrom(srvIP, testPort), 0)
			if err != nil {
				tb.Fatalf("dial %d: %v", len(m.conns), err)
			}
			m.conns = append(m.conns, c)
		}
		for range 20 {
			m.step(tb)
		}
	}
	for i, c := range m.conns {
		if c.State() != native.Established {
			tb.Fatalf("connection %d: %v", i, c.State())
		}
	}
	return m
}

// step runs the clients' engine once and the server's Rx once, echoing
// what it returns, and returns the server's records.
func (m *manyClients) step(tb testing.TB) int {
	m.e.Poll(1024)
	if err := m.e.Flush(); err != nil {
		tb.Fatal(err)
	}
	k, err := m.srv.Rx(m.pkts)
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range m.pkts[:k] {
		if m.srv.QueueTo(p.Data, p.From) != nil {
			tb.Fatal("QueueTo refused an answer")
		}
	}
	if err := m.srv.Flush(); err != nil {
		tb.Fatal(err)
	}
	return k
}

// TestNativeServerThousandsOfConns: a server on the native engine holds
// 2,000 connections (TCP.MaxConns above the engine's default 1024), and
// the record one of them sends is answered on that one, after its peers
// all went quiet.
func TestNativeServerThousandsOfConns(t *testing.T) {
	const n = 2000
	m := newManyClients(t, n)
	if st := m.srv.Stats(); st.Conns != n {
		t.Fatalf("server holds %d connections, want %d", st.Conns, n)
	}
	rec := append([]byte{0, 5}, "hello"...)
	c := m.conns[1234]
	c.Write(rec)
	buf := make([]byte, 16)
	got := 0
	for end := time.Now().Add(20 * time.Second); got < len(rec); {
		if time.Now().After(end) {
			t.Fatalf("no answer: %d bytes", got)
		}
		m.step(t)
		for i, o := range m.conns {
			if k, _ := o.Read(buf[got:]); k > 0 {
				if i != 1234 {
					t.Fatalf("connection %d got %d bytes", i, k)
				}
				got += k
			}
		}
	}
	if string(buf[:got]) != string(rec) {
		t.Fatalf("answer %q, want %q", buf[:got], rec)
	}
}

// BenchmarkNativeServerIdleRx is a native-engine server's Rx with nothing
// arriving, among conns idle connections: its cost stays the same from
// one connection to thousands.
func BenchmarkNativeServerIdleRx(b *testing.B) {
	for _, n := range []int{1, 100, 1000, 2000} {
		b.Run(fmt.Sprintf("conns=%d", n), func(b *testing.B) {
			m := newManyClients(b, n)
			for range 100 {
				m.step(b)
			}
			b.ReportAllocs()
			for b.Loop() {
				if k, err := m.srv.Rx(m.pkts); k != 0 || err != nil {
					b.Fatal(k, err)
				}
			}
		})
	}
}
