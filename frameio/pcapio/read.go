package pcapio

import (
	"fmt"
	"io"
	"os"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// Record is one frame of a capture read back.
type Record struct {
	// Frame is the frame's bytes as captured (at most Snaplen); the
	// caller owns it.
	Frame []byte
	// Info holds when the frame was captured and its length on the wire
	// (Length > len(Frame) when the capture cut it short).
	Info gopacket.CaptureInfo
}

// Read reads every record of a pcap stream of Ethernet frames (one file
// that New or Wrap wrote, say) from r, in order. It returns what it read
// before an error: not pcap, a link type other than Ethernet, a snap
// length over Snaplen, or a stream cut short in a record.
func Read(r io.Reader) ([]Record, error) {
	pr, err := pcapgo.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("pcapio: read: %w", err)
	}
	if lt := pr.LinkType(); lt != layers.LinkTypeEthernet {
		return nil, fmt.Errorf("pcapio: read: link type %v, want Ethernet", lt)
	}
	// A record longer than the header's snap length is refused before its
	// bytes are allocated; a larger snap length than ours (libpcap's
	// maximum too) is no capture of frames.
	if sl := pr.Snaplen(); sl > Snaplen {
		return nil, fmt.Errorf("pcapio: read: snap length %d, over %d", sl, Snaplen)
	}
	var recs []Record
	for {
		data, ci, err := pr.ReadPacketData()
		if err == io.EOF && ci.CaptureLength == 0 { // at a record's start
			return recs, nil
		}
		if err != nil {
			return recs, fmt.Errorf("pcapio: read: record %d: %w", len(recs), err)
		}
		recs = append(recs, Record{Frame: data, Info: ci})
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
