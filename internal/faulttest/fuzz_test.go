package faulttest

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio/memio"
	"github.com/dgramio/dgramio/internal/tcp"
	"github.com/dgramio/dgramio/internal/udp"
)

// fuzzMaxDatagram is the raw backend's MaxDatagram in FuzzRawRx: small, so
// that datagrams too long for it (dropped as truncated) are easy to reach.
const fuzzMaxDatagram = 64

// joinFrames encodes frames as the fuzz input of FuzzRawRx: each frame is
// a two-byte big-endian length and its bytes.
func joinFrames(frames ...[]byte) []byte {
	var b []byte
	for _, f := range frames {
		b = binary.BigEndian.AppendUint16(b, uint16(len(f)))
		b = append(b, f...)
	}
	return b
}

// splitFrames decodes joinFrames' encoding; a length beyond the input
// takes what is left.
func splitFrames(b []byte) [][]byte {
	var out [][]byte
	for len(b) >= 2 && len(out) < 512 {
		n := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		n = min(n, len(b))
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// FuzzRawRx drives the receive path of the raw datagram backend (udp.Raw,
// what kinds xdp and dpdk run) through its public API with arbitrary
// frames: they are written onto an in-memory wire (frameio/memio) and read
// with Rx. It checks, against udp.Parse run on the same frames on the side,
// that Rx delivers exactly the datagrams Parse accepts that fit
// MaxDatagram, in order, with their payload and sender; that every other
// frame lands in exactly one of RxFiltered, RxMalformed, RxBadChecksum and
// RxTruncated; and that nothing panics.
func FuzzRawRx(f *testing.F) {
	e := &wireEnds{srcMAC: memio.DefaultMACA, dstMAC: memio.DefaultMACB,
		src: netip.MustParseAddrPort("198.18.7.1:40000"), dst: netip.MustParseAddrPort("198.18.7.2:5000")}
	var all [][]byte
	for _, c := range badCases {
		fr := c.frame(e)
		f.Add(joinFrames(fr))
		all = append(all, fr)
	}
	f.Add(joinFrames(all...))
	f.Add(joinFrames(e.datagram(bytes.Repeat([]byte{7}, fuzzMaxDatagram+1)), e.datagram([]byte("fits"))))
	f.Add(joinFrames(e.datagram(nil), e.datagram(bytes.Repeat([]byte{1}, fuzzMaxDatagram))))
	filter := &udp.Filter{MAC: e.dstMAC, Addr: e.dst.Addr(), Port: e.dst.Port()}
	// One wire and one backend serve every input (a fresh pair per input
	// costs megabytes): each input starts with an empty wire, and the
	// counters are compared by their change.
	a, b := memio.NewPair(memio.Options{RxSlots: 512, TxSlots: 512})
	r, err := udp.NewRaw(dgramio.Config{Kind: dgramio.KindXDP, Role: dgramio.RoleServer, LocalIP: e.dst.Addr(),
		Port: e.dst.Port(), MaxDatagram: fuzzMaxDatagram}, b, udp.RawOptions{Mode: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { r.Close(); a.Close() })

	f.Fuzz(func(t *testing.T, in []byte) {
		frames := splitFrames(in)
		s0 := r.Stats()

		type want struct {
			payload []byte
			from    netip.AddrPort
		}
		var delivered []want
		var classes [4]uint64 // by udp.Class
		var truncated, injected uint64
		for _, fr := range frames {
			if !a.TxFrame(fr) {
				continue // the wire refuses it (too long, too short): never sent
			}
			injected++
			d, why := udp.Parse(fr, filter)
			switch {
			case why != udp.OK:
				classes[why.Class()]++
			case len(d.Payload) > fuzzMaxDatagram:
				truncated++
			default:
				delivered = append(delivered, want{bytes.Clone(d.Payload), d.From})
			}
		}
		if err := a.Kick(); err != nil {
			t.Fatal(err)
		}
		pkts := make([]dgramio.Packet, 32)
		got := 0
		for {
			n, err := r.Rx(pkts)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			for _, p := range pkts[:n] {
				if got >= len(delivered) {
					t.Fatalf("Rx delivered more than the %d datagrams Parse accepts: %q from %v", len(delivered), p.Data, p.From)
				}
				if w := delivered[got]; !bytes.Equal(p.Data, w.payload) || p.From != w.from {
					t.Fatalf("datagram %d: %q from %v, Parse says %q from %v", got, p.Data, p.From, w.payload, w.from)
				}
				got++
			}
		}
		s1 := r.Stats()
		s := dgramio.Stats{RxDelivered: s1.RxDelivered - s0.RxDelivered, RxTruncated: s1.RxTruncated - s0.RxTruncated,
			RxFiltered: s1.RxFiltered - s0.RxFiltered, RxMalformed: s1.RxMalformed - s0.RxMalformed,
			RxBadChecksum: s1.RxBadChecksum - s0.RxBadChecksum}
		if got != len(delivered) || s.RxDelivered != uint64(got) {
			t.Fatalf("delivered %d (RxDelivered %d), Parse accepts %d", got, s.RxDelivered, len(delivered))
		}
		if s.RxTruncated != truncated || s.RxFiltered != classes[udp.ClassFiltered] ||
			s.RxMalformed != classes[udp.ClassMalformed] || s.RxBadChecksum != classes[udp.ClassBadChecksum] {
			t.Fatalf("counters: truncated %d filtered %d malformed %d bad checksum %d; Parse: %d %d %d %d",
				s.RxTruncated, s.RxFiltered, s.RxMalformed, s.RxBadChecksum,
				truncated, classes[udp.ClassFiltered], classes[udp.ClassMalformed], classes[udp.ClassBadChecksum])
		}
		if sum := s.RxDelivered + s.RxTruncated + s.RxFiltered + s.RxMalformed + s.RxBadChecksum; sum != injected {
			t.Fatalf("%d frames written, %d accounted for", injected, sum)
		}
	})
}

// FuzzStreamRx drives the receive path of the userspace TCP backend
// (tcp.Backend over netstack, what kinds tcp-xdp and tcp-dpdk run) through
// its public API: a server listening on an in-memory wire gets arbitrary
// frames and is polled with Rx and Flush. Nothing may panic; every frame
// is seen and counted by the link endpoint (link rx_frames grows by the
// number of frames written); no record is delivered (no input can finish
// a handshake whose sequence numbers it cannot see); and Rx and Flush
// report no error (a connection's end is no error of the backend).
func FuzzStreamRx(f *testing.F) {
	e := &wireEnds{srcMAC: memio.DefaultMACA, dstMAC: memio.DefaultMACB,
		src: netip.MustParseAddrPort("198.18.7.1:40000"), dst: netip.MustParseAddrPort("198.18.7.2:5000")}
	conn := netip.MustParseAddrPort("198.18.7.1:40001")
	var all [][]byte
	for _, c := range streamBadCases {
		fr := c.frame(e, conn)
		f.Add(joinFrames(fr))
		all = append(all, fr)
	}
	f.Add(joinFrames(all...))
	syn := e.tcp(tcpSYN)
	ack := e.tcp(tcpACK | tcpPSH)
	f.Add(joinFrames(syn, ack, e.tcp(tcpFIN|tcpACK), e.tcp(tcpRST)))

	a, b := memio.NewPair(memio.Options{RxSlots: 512, TxSlots: 512})
	// The netstack backend, whose link endpoint counts the frames (the
	// native engine's input has fuzz targets of its own in stack/native).
	srv, err := tcp.NewOverFrameIO(dgramio.Config{Kind: dgramio.KindTCPXDP, Role: dgramio.RoleServer, LocalIP: e.dst.Addr(),
		Port: e.dst.Port(), TCP: dgramio.TCPTuning{Stack: dgramio.TCPStackNetstack}}, b, tcp.Options{Mode: "fuzz", Linger: time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close(); a.Close() })
	pkts := make([]dgramio.Packet, 32)
	drain := func() {
		for a.RxFrames(64, func([]byte) {}) > 0 {
		}
	}

	f.Fuzz(func(t *testing.T, in []byte) {
		frames := splitFrames(in)
		s0 := srv.Stats()
		injected := uint64(0)
		for _, fr := range frames {
			if a.TxFrame(fr) {
				injected++
			}
		}
		if err := a.Kick(); err != nil {
			t.Fatal(err)
		}
		for round := 0; round < 4; round++ {
			n, err := srv.Rx(pkts)
			if err != nil {
				t.Fatalf("Rx: %v", err)
			}
			if n != 0 {
				t.Fatalf("Rx delivered %d records from frames that cannot open a connection: %q", n, pkts[0].Data)
			}
			if err := srv.Flush(); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			drain()
		}
		s1 := srv.Stats()
		r0, _ := s0.Counter("link", "rx_frames")
		r1, _ := s1.Counter("link", "rx_frames")
		if r1-r0 != injected {
			t.Fatalf("%d frames written, the endpoint counted %d", injected, r1-r0)
		}
		if s1.RxDelivered != s0.RxDelivered {
			t.Fatalf("RxDelivered went from %d to %d", s0.RxDelivered, s1.RxDelivered)
		}
	})
}
