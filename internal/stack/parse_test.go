package stack

import (
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

func tcpFrame(t testing.TB, payload []byte, opts []layers.TCPOption) []byte {
	buf := gopacket.NewSerializeBuffer()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: addrB.AsSlice(), DstIP: addrA.AsSlice()}
	tcp := &layers.TCP{SrcPort: 1, DstPort: 2, ACK: true, Window: 100, Options: opts}
	tcp.SetNetworkLayerForChecksum(ip)
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: []byte{2, 0, 0, 0, 0, 1}, DstMAC: []byte{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4},
		ip, tcp, gopacket.Payload(payload))
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func TestTCPPayloadLen(t *testing.T) {
	ts := []layers.TCPOption{{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: make([]byte, 8)},
		{OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindNop}}
	ack := tcpFrame(t, nil, nil)
	padded := append(append([]byte(nil), ack...), make([]byte, 60-len(ack))...)
	data := tcpFrame(t, make([]byte, 100), ts)
	frag := append([]byte(nil), data...)
	frag[14+6] |= 0x20 // MF
	arp := append([]byte(nil), padded...)
	arp[12], arp[13] = 0x08, 0x06
	for _, c := range []struct {
		name  string
		frame []byte
		want  int
	}{
		{"pure ACK", ack, 0},
		{"pure ACK padded to 60", padded, 0},
		{"100 bytes with options", data, 100},
		{"fragment", frag, 0},
		{"ARP", arp, 0},
		{"truncated", data[:40], 0},
		{"empty", nil, 0},
	} {
		if got := tcpPayloadLen(c.frame); got != c.want {
			t.Errorf("%s: tcpPayloadLen = %d, want %d", c.name, got, c.want)
		}
	}
}

func FuzzTCPPayloadLen(f *testing.F) {
	f.Add(tcpFrame(f, nil, nil))
	f.Add(tcpFrame(f, []byte("hello"), nil))
	f.Add(tcpFrame(f, make([]byte, 1400), []layers.TCPOption{{OptionType: layers.TCPOptionKindNop}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, frame []byte) {
		n := tcpPayloadLen(frame)
		if n < 0 || n > len(frame)-14-20-20 && n != 0 {
			t.Fatalf("payload %d in a %d-byte frame", n, len(frame))
		}
	})
}
