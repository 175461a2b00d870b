package pcapio

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/dgramio/dgramio/frameio/memio"
)

// capture returns the TX file of a capture of a memio port that sent
// frames, whole.
func capture(t testing.TB, frames ...[]byte) []byte {
	t.Helper()
	a, _ := memio.NewPair(memio.Options{})
	var tx, rx bytes.Buffer
	c, err := New(a, &tx, &rx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		if !c.TxFrame(f) {
			t.Fatal("TxFrame refused")
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return tx.Bytes()
}

// TestRead: Read gives back what a capture wrote, and says what is wrong
// with a stream that is not a whole capture of Ethernet frames, keeping
// the records before the fault.
func TestRead(t *testing.T) {
	f0 := udpFrame(t, memio.DefaultMACA, memio.DefaultMACB, 0, []byte("zero"))
	f1 := udpFrame(t, memio.DefaultMACA, memio.DefaultMACB, 1, []byte("one"))
	file := capture(t, f0, f1)
	recs, err := Read(bytes.NewReader(file))
	if err != nil || len(recs) != 2 || !bytes.Equal(recs[0].Frame, f0) || !bytes.Equal(recs[1].Frame, f1) {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		keep int
	}{
		{"empty", nil, 0},
		{"not pcap", []byte("not a pcap file at all, but long enough"), 0},
		{"cut in the second record's data", file[:len(file)-1], 1},
		{"cut in the second record's header", file[:len(file)-len(f1)-8], 1},
		{"a header with no data", file[:len(file)-len(f1)], 1},
	} {
		recs, err := Read(bytes.NewReader(tc.data))
		if err == nil || len(recs) != tc.keep {
			t.Errorf("%s: %d records, %v; want %d and an error", tc.name, len(recs), err, tc.keep)
		}
	}
	if _, err := ReadFile(t.TempDir() + "/none.pcap"); err == nil {
		t.Error("ReadFile of a missing file: no error")
	}
}

// TestReadFormats: Read takes the format's other byte order and its
// microsecond time stamps, as tcpdump writes them, and refuses what is
// not a capture of Ethernet frames within its snap length.
func TestReadFormats(t *testing.T) {
	frame := udpFrame(t, memio.DefaultMACA, memio.DefaultMACB, 7, []byte("seven"))
	file := func(o binary.AppendByteOrder, magic uint32, major uint16, snaplen, link uint32, recs ...[4]uint32) []byte {
		var b []byte
		b = o.AppendUint32(b, magic)
		b = o.AppendUint16(b, major)
		b = o.AppendUint16(b, 4)
		b = o.AppendUint32(b, 0)
		b = o.AppendUint32(b, 0)
		b = o.AppendUint32(b, snaplen)
		b = o.AppendUint32(b, link)
		for _, r := range recs {
			for _, v := range r {
				b = o.AppendUint32(b, v)
			}
			b = append(b, frame[:r[2]]...)
		}
		return b
	}
	n := uint32(len(frame))
	for _, tc := range []struct {
		name string
		data []byte
		want time.Time
		cut  bool
	}{
		{"big-endian, microseconds", file(binary.BigEndian, 0xa1b2c3d4, 2, 65535, 1, [4]uint32{1700000000, 250000, n, n}), time.Unix(1700000000, 250000000), false},
		{"little-endian, microseconds", file(binary.LittleEndian, 0xa1b2c3d4, 2, 65535, 1, [4]uint32{1700000000, 1, n, n}), time.Unix(1700000000, 1000), false},
		{"big-endian, nanoseconds", file(binary.BigEndian, 0xa1b23c4d, 2, 65535, 1, [4]uint32{1700000000, 999999999, n, n}), time.Unix(1700000000, 999999999), false},
		{"cut by the snap length", file(binary.LittleEndian, 0xa1b23c4d, 2, 20, 1, [4]uint32{1, 0, 20, n}), time.Unix(1, 0), true},
		{"the FCS bits of the link type", file(binary.LittleEndian, 0xa1b23c4d, 2, 65535, 1|0x10000000, [4]uint32{1, 0, n, n}), time.Unix(1, 0), false},
	} {
		recs, err := Read(bytes.NewReader(tc.data))
		if err != nil || len(recs) != 1 {
			t.Errorf("%s: %d records, %v", tc.name, len(recs), err)
			continue
		}
		r := recs[0]
		if !r.Time.Equal(tc.want) || r.Length != len(frame) || !bytes.Equal(r.Frame, frame[:len(r.Frame)]) || (len(r.Frame) < len(frame)) != tc.cut {
			t.Errorf("%s: record at %v, %d of %d bytes; want %v", tc.name, r.Time, len(r.Frame), r.Length, tc.want)
		}
	}
	for _, tc := range []struct {
		name, want string
		data       []byte
	}{
		{"version 1", "version", file(binary.LittleEndian, 0xa1b23c4d, 1, 65535, 1)},
		{"raw IP", "link type", file(binary.LittleEndian, 0xa1b23c4d, 2, 65535, 101)},
		{"a snap length over ours", "snap length", file(binary.LittleEndian, 0xa1b23c4d, 2, Snaplen+1, 1)},
		{"a record over the snap length", "snap length", file(binary.LittleEndian, 0xa1b23c4d, 2, 20, 1, [4]uint32{1, 0, n, n})},
		{"a record longer than its frame", "of a", file(binary.LittleEndian, 0xa1b23c4d, 2, 65535, 1, [4]uint32{1, 0, n, n - 1})},
		{"microseconds out of range", "out of range", file(binary.LittleEndian, 0xa1b2c3d4, 2, 65535, 1, [4]uint32{1, 1000000, n, n})},
	} {
		if _, err := Read(bytes.NewReader(tc.data)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}

// TestWrittenFilesReadElsewhere: another reader of the format (gopacket's
// pcapgo) reads a capture's file: the same frames, lengths and times.
func TestWrittenFilesReadElsewhere(t *testing.T) {
	f0 := udpFrame(t, memio.DefaultMACA, memio.DefaultMACB, 0, []byte("zero"))
	f1 := udpFrame(t, memio.DefaultMACA, memio.DefaultMACB, 1, bytes.Repeat([]byte("x"), 1400))
	file := capture(t, f0, f1)
	ours, err := Read(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	pr, err := pcapgo.NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if pr.LinkType() != layers.LinkTypeEthernet || pr.Snaplen() != Snaplen {
		t.Errorf("pcapgo reads link type %v, snap length %d", pr.LinkType(), pr.Snaplen())
	}
	for i, want := range [][]byte{f0, f1} {
		data, ci, err := pr.ReadPacketData()
		if err != nil || !bytes.Equal(data, want) || ci.Length != len(want) || !ci.Timestamp.Equal(ours[i].Time) {
			t.Errorf("record %d: pcapgo reads %d bytes at %v (length %d), %v; we wrote %d at %v", i, len(data), ci.Timestamp, ci.Length, err, len(want), ours[i].Time)
		}
	}
	if _, _, err := pr.ReadPacketData(); err != io.EOF {
		t.Errorf("after the last record: %v, want EOF", err)
	}
}

// FuzzRead: Read of any bytes returns, without a panic, records no longer
// than the snap length and within their wire length.
func FuzzRead(f *testing.F) {
	f.Add(capture(f, udpFrame(f, memio.DefaultMACA, memio.DefaultMACB, 0, []byte("seed"))))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, _ := Read(bytes.NewReader(data))
		for i, r := range recs {
			if len(r.Frame) > Snaplen || len(r.Frame) > r.Length {
				t.Fatalf("record %d: %d bytes of a %d-byte frame", i, len(r.Frame), r.Length)
			}
		}
	})
}
