package pcapio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// The pcap file format (libpcap's, "tcpdump -w"; described in the IETF
// draft draft-ietf-opsawg-pcap): a 24-byte file header, then per frame a
// 16-byte record header and the captured bytes. Files written here are
// little-endian with nanosecond time stamps; Read takes either byte order
// and either resolution.

const (
	magicMicro = 0xa1b2c3d4 // time stamps in microseconds
	magicNano  = 0xa1b23c4d // time stamps in nanoseconds

	fileHeaderLen   = 24
	recordHeaderLen = 16

	// linkEthernet is LINKTYPE_ETHERNET: each record is an Ethernet frame.
	linkEthernet = 1
)

// appendFileHeader appends the file header of a capture of Ethernet frames
// cut at snaplen, nanosecond time stamps, to b.
func appendFileHeader(b []byte, snaplen uint32) []byte {
	le := binary.LittleEndian
	b = le.AppendUint32(b, magicNano)
	b = le.AppendUint16(b, 2) // version 2.4
	b = le.AppendUint16(b, 4)
	b = le.AppendUint32(b, 0) // reserved (the time zone, always 0)
	b = le.AppendUint32(b, 0) // reserved (the accuracy, always 0)
	b = le.AppendUint32(b, snaplen)
	return le.AppendUint32(b, linkEthernet)
}

// appendRecordHeader appends a record header: captured at t, capLen bytes
// kept of a frame of wireLen.
func appendRecordHeader(b []byte, t time.Time, capLen, wireLen int) []byte {
	le := binary.LittleEndian
	b = le.AppendUint32(b, uint32(t.Unix()))
	b = le.AppendUint32(b, uint32(t.Nanosecond()))
	b = le.AppendUint32(b, uint32(capLen))
	return le.AppendUint32(b, uint32(wireLen))
}

// reader reads a pcap stream's records.
type reader struct {
	r       io.Reader
	order   binary.ByteOrder
	nano    bool
	snaplen uint32
	hdr     [recordHeaderLen]byte
}

// newReader reads and checks the file header: pcap of Ethernet frames
// with a snap length of at most Snaplen.
func newReader(r io.Reader) (*reader, error) {
	var h [fileHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, fmt.Errorf("file header: %w", err)
	}
	rd := &reader{r: r}
	switch {
	case binary.LittleEndian.Uint32(h[0:4]) == magicMicro:
		rd.order = binary.LittleEndian
	case binary.LittleEndian.Uint32(h[0:4]) == magicNano:
		rd.order, rd.nano = binary.LittleEndian, true
	case binary.BigEndian.Uint32(h[0:4]) == magicMicro:
		rd.order = binary.BigEndian
	case binary.BigEndian.Uint32(h[0:4]) == magicNano:
		rd.order, rd.nano = binary.BigEndian, true
	default:
		return nil, fmt.Errorf("not a pcap file (magic %#x)", binary.LittleEndian.Uint32(h[0:4]))
	}
	if major := rd.order.Uint16(h[4:6]); major != 2 {
		return nil, fmt.Errorf("pcap version %d.%d, want 2.x", major, rd.order.Uint16(h[6:8]))
	}
	rd.snaplen = rd.order.Uint32(h[16:20])
	// The link type is the low 16 bits; the bits above may say whether
	// frames carry their FCS, which none of ours do.
	if lt := rd.order.Uint32(h[20:24]) & 0xffff; lt != linkEthernet {
		return nil, fmt.Errorf("link type %d, want Ethernet (%d)", lt, linkEthernet)
	}
	// A record longer than the header's snap length is refused before its
	// bytes are allocated; a larger snap length than ours (libpcap's
	// maximum too) is no capture of frames.
	if rd.snaplen > Snaplen {
		return nil, fmt.Errorf("snap length %d, over %d", rd.snaplen, Snaplen)
	}
	return rd, nil
}

// errEnd is next's answer at the end of the stream, between records.
var errEnd = errors.New("end of capture")

// next reads one record: errEnd at the stream's end between records, an
// error for a record cut short or longer than the snap length.
func (rd *reader) next() (Record, error) {
	n, err := io.ReadFull(rd.r, rd.hdr[:])
	if err == io.EOF && n == 0 {
		return Record{}, errEnd
	}
	if err != nil {
		return Record{}, fmt.Errorf("record header: %w", err)
	}
	o := rd.order
	sec, frac := o.Uint32(rd.hdr[0:4]), o.Uint32(rd.hdr[4:8])
	capLen, wireLen := o.Uint32(rd.hdr[8:12]), o.Uint32(rd.hdr[12:16])
	if capLen > rd.snaplen {
		return Record{}, fmt.Errorf("record of %d bytes, over the snap length %d", capLen, rd.snaplen)
	}
	if wireLen < capLen {
		return Record{}, fmt.Errorf("record of %d bytes of a %d-byte frame", capLen, wireLen)
	}
	ns := int64(frac)
	if !rd.nano {
		ns *= 1000
	}
	if ns >= 1e9 {
		return Record{}, fmt.Errorf("time stamp fraction %d out of range", frac)
	}
	rec := Record{Frame: make([]byte, capLen), Time: time.Unix(int64(sec), ns), Length: int(wireLen)}
	if _, err := io.ReadFull(rd.r, rec.Frame); err != nil {
		return Record{}, fmt.Errorf("record data: %w", io.ErrUnexpectedEOF)
	}
	return rec, nil
}
