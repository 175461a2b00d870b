package pcapio

import (
	"bytes"
	"testing"

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

// FuzzRead: Read of any bytes returns, without a panic, records no longer
// than the snap length and within their wire length.
func FuzzRead(f *testing.F) {
	f.Add(capture(f, udpFrame(f, memio.DefaultMACA, memio.DefaultMACB, 0, []byte("seed"))))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, _ := Read(bytes.NewReader(data))
		for i, r := range recs {
			if len(r.Frame) > Snaplen || len(r.Frame) != r.Info.CaptureLength || r.Info.CaptureLength > r.Info.Length {
				t.Fatalf("record %d: %d bytes, info %+v", i, len(r.Frame), r.Info)
			}
		}
	})
}
