package stack

import (
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dgramio/dgramio/frameio/memio"
)

// tcp6Frame builds an Ethernet/IPv6/TCP frame from src to dst.
func tcp6Frame(t testing.TB, src, dst netip.AddrPort, syn, ack bool, seq, ackNo uint32, payload int) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP,
		SrcIP: net.IP(src.Addr().AsSlice()), DstIP: net.IP(dst.Addr().AsSlice())}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()),
		SYN: syn, ACK: ack, Seq: seq, Ack: ackNo, Window: 1000}
	tcp.SetNetworkLayerForChecksum(ip)
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: []byte{2, 0, 0, 0, 0, 1}, DstMAC: []byte{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv6},
		ip, tcp, gopacket.Payload(make([]byte, payload)))
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// TestUnackedFromACKs6: over IPv6 the table counts, as over IPv4 (RFC
// 9293 §3.4: an ACK number acknowledges every byte before it), how many
// of the first bytes netstack wrote the peer has not acknowledged: from
// netstack's SYN-ACK (its initial sequence number) and the peer's ACK
// numbers since, which only move forward; a reset leaves it readable; a
// flow never seen, or asked with the other family's addresses, is "cannot
// tell". An IPv4 flow in the same table keeps its own count.
func TestUnackedFromACKs6(t *testing.T) {
	local := netip.MustParseAddrPort("[2001:2::1]:5000")
	peer := netip.MustParseAddrPort("[2001:2::2]:40000")
	var a ackSalvage
	k := flowKey{local: local.Addr().As16(), remote: peer.Addr().As16(), lport: 5000, rport: 40000, v6: true}
	if _, ok := a.unacked(k, 100); ok {
		t.Fatal("a flow never seen: ok")
	}
	buf := make([]byte, 200)
	const iss = 4999
	a.sent(view(t, tcp6Frame(t, local, peer, true, true, iss, 1001, 0))) // netstack's SYN-ACK
	for _, s := range []struct {
		ack  uint32
		want uint64
	}{
		{iss + 1, 100}, // the handshake's ACK: nothing of the data
		{iss + 41, 60}, // 40 bytes
		{iss + 21, 60}, // an old ACK moves nothing back
		{iss + 101, 0}, // all of it
		{iss + 102, 0}, // and the FIN
	} {
		a.received(view(t, tcp6Frame(t, peer, local, false, true, 1001, s.ack, 0)), buf)
		if got, ok := a.unacked(k, 100); !ok || got != s.want {
			t.Fatalf("after ACK %d: %d unacknowledged (%v), want %d", s.ack, got, ok, s.want)
		}
	}

	// Through the Endpoint: netstack's frames out, the peer's in.
	pa, pb := memio.NewPair(memio.Options{})
	defer pa.Close()
	defer pb.Close()
	e := NewEndpoint(pa)
	e.acks.sent(view(t, tcp6Frame(t, local, peer, true, false, 7000, 0, 0)))
	e.acks.received(view(t, tcp6Frame(t, peer, local, true, true, 300, 7011, 0)), buf)
	if got, ok := e.Unacked(local, peer, 50); !ok || got != 40 {
		t.Fatalf("Endpoint.Unacked: %d, %v; want 40", got, ok)
	}
	if _, ok := e.Unacked(netip.MustParseAddrPort("198.18.0.1:5000"), peer, 50); ok {
		t.Fatal("mixed families answered")
	}
	if v, ok := parseTCP(tcpFrame(t, nil, nil)); !ok || v.v6 {
		t.Fatal("parseTCP: an IPv4 frame not read as IPv4")
	}
	if v, ok := parseTCP(tcp6Frame(t, local, peer, false, true, 1, 1, 10)); !ok || !v.v6 || v.payload != 10 {
		t.Fatal("parseTCP: an IPv6 frame not read as IPv6 with its payload")
	}
}
