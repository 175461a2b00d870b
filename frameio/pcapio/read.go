package pcapio

import (
	"fmt"
	"io"
	"os"
	"time"
)

// Record is one frame of a capture read back.
type Record struct {
	// Frame is the frame's bytes as captured (at most the file's snap
	// length); the caller owns it.
	Frame []byte
	// Time is when the frame was captured.
	Time time.Time
	// Length is the frame's length on the wire: above len(Frame) when the
	// capture cut it short.
	Length int
}

// Read reads every record of a pcap stream of Ethernet frames (one file
// that New or Wrap wrote, say, or tcpdump -w) from r, in order. It returns
// what it read before an error: not pcap, a link type other than
// Ethernet, a snap length over Snaplen, a record longer than the snap
// length or than its frame, or a stream cut short in a record.
func Read(r io.Reader) ([]Record, error) {
	rd, err := newReader(r)
	if err != nil {
		return nil, fmt.Errorf("pcapio: read: %w", err)
	}
	var recs []Record
	for {
		rec, err := rd.next()
		if err == errEnd {
			return recs, nil
		}
		if err != nil {
			return recs, fmt.Errorf("pcapio: read: record %d: %w", len(recs), err)
		}
		recs = append(recs, rec)
	}
}

// ReadFile is Read of the file at path (<prefix>+TxSuffix, say); its
// errors name path.
func ReadFile(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := Read(f)
	if err != nil {
		err = fmt.Errorf("%s: %w", path, err)
	}
	return recs, err
}
