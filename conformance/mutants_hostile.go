package conformance

import "encoding/binary"

// nativeMutantFresh is nativeMutant with rewrites that keep state: mk
// makes a fresh pair for each DUT (each case), so that what one case's
// frames left does not rewrite another's.
func nativeMutantFresh(name string, mk func() (tx, rx func(frame, scratch []byte) []byte)) Factory {
	return nativeFactory{name: name, wrap: func(w waitFrameIO) waitFrameIO {
		tx, rx := mk()
		return &mutantFIO{waitFrameIO: w, tx: tx, rx: rx}
	}}
}

// hostileMutants are the mutants of the hostile-peer cases
// (cases_tcp_hostile.go).
func hostileMutants() []Mutant {
	return []Mutant{
		{
			Factory: nativeMutant("mutant-native-syn-rst-as-syn", nil, clearRSTOnSYN),
			Defect:  "the native engine takes a segment with both SYN and RST as a SYN (the RST bit is not checked first)",
			Fails:   []string{"tcp-syn-rst-listen", "tcp-all-flags-listen"},
			Control: []string{"tcp-handshake-passive", "tcp-rst-closed-port-ignored"},
		},
		{
			Factory: nativeMutantFresh("mutant-native-paws-on-rst", func() (tx, rx func(frame, scratch []byte) []byte) {
				return nil, dropOldTSRST()
			}),
			Defect:  "the native engine applies PAWS to RSTs: a RST with an old TSval is dropped",
			Fails:   []string{"tcp-paws-rst-accepted"},
			Control: []string{"tcp-rst-exact-resets", "tcp-synack-timestamps"},
		},
		{
			Factory: nativeMutant("mutant-native-mss-default-1460", nil, mssAbsentAs1460),
			Defect:  "the native engine takes a SYN without an MSS option, or with an MSS of 0, as offering 1460",
			Fails:   []string{"tcp-peer-mss-absent", "tcp-peer-mss-zero"},
			Control: []string{"tcp-peer-mss-respected", "tcp-handshake-passive"},
		},
		{
			Factory: nativeMutantFresh("mutant-native-wscale-15", func() (tx, rx func(frame, scratch []byte) []byte) {
				return nil, windowScale15()
			}),
			Defect:  "the native engine takes a window scale of 15 as offered, not as 14",
			Fails:   []string{"tcp-wscale-over-14"},
			Control: []string{"tcp-handshake-passive", "tcp-peer-window-respected"},
		},
		{
			Factory: nativeMutantFresh("mutant-native-synrcvd-keeps-syn", func() (tx, rx func(frame, scratch []byte) []byte) {
				return nil, synAsFirst()
			}),
			Defect:  "the native engine takes a SYN with a new ISN in SYN-RECEIVED as its first SYN again and keeps the half-open connection",
			Fails:   []string{"tcp-synrcvd-new-syn"},
			Control: []string{"tcp-handshake-passive", "tcp-synrcvd-ack-unsent-rst"},
		},
	}
}

// tcpOptions returns the offset of the TCP options of frame f (whose TCP
// header is at t) and their end, or false when the header is cut short.
func tcpOptions(f []byte, t int) (int, int, bool) {
	end := t + int(f[t+12]>>4)*4
	return t + 20, end, end >= t+20 && end <= len(f)
}

// findOption returns the offset of the first option of kind k in
// f[from:to], or -1.
func findOption(f []byte, from, to int, k byte) int {
	for i := from; i < to; {
		switch f[i] {
		case 0:
			return -1
		case 1:
			i++
			continue
		}
		if i+1 >= to || f[i+1] < 2 {
			return -1
		}
		if f[i] == k {
			return i
		}
		i += int(f[i+1])
	}
	return -1
}

// isSYN reports whether the TCP segment at t of f is a SYN without ACK.
func isSYN(f []byte, t int) bool { return f[t+13]&0x12 == 0x02 }

// mssAbsentAs1460 rewrites a received SYN without an MSS option, or with
// an MSS of 0, into one that offers 1460.
func mssAbsentAs1460(f, scratch []byte) []byte {
	t := tcpHeader(f)
	if t < 0 || !isSYN(f, t) {
		return f
	}
	from, to, ok := tcpOptions(f, t)
	if !ok {
		return f
	}
	if i := findOption(f, from, to, 2); i >= 0 {
		if i+4 > to || f[i+1] != 4 || binary.BigEndian.Uint16(f[i+2:]) != 0 {
			return f
		}
		out := append(scratch, f...)
		binary.BigEndian.PutUint16(out[i+2:], 1460)
		setTransportChecksum(out)
		return out
	}
	if to-t+4 > 60 {
		return f
	}
	out := append(scratch, f[:from]...)
	out = append(out, 2, 4, 0x05, 0xb4)
	out = append(out, f[from:]...)
	out[t+12] = byte((to-t+4)/4)<<4 | out[t+12]&0x0f
	binary.BigEndian.PutUint16(out[16:], binary.BigEndian.Uint16(out[16:])+4)
	ihl := int(out[14]&0x0f) * 4
	binary.BigEndian.PutUint16(out[24:], 0)
	binary.BigEndian.PutUint16(out[24:], ^fold(sum(0, out[14:14+ihl])))
	setTransportChecksum(out)
	return out
}

// windowScale15 doubles the window field of every segment received after
// a SYN that offered a window scale of 15 (from the same port): the
// engine then scales windows by 1<<15.
func windowScale15() func(f, scratch []byte) []byte {
	over := map[uint16]bool{}
	return func(f, scratch []byte) []byte {
		t := tcpHeader(f)
		if t < 0 {
			return f
		}
		port := binary.BigEndian.Uint16(f[t:])
		if f[t+13]&0x02 != 0 {
			from, to, ok := tcpOptions(f, t)
			i := -1
			if ok {
				i = findOption(f, from, to, 3)
			}
			over[port] = i >= 0 && i+3 <= to && f[i+2] == 15
			return f
		}
		if !over[port] {
			return f
		}
		out := append(scratch, f...)
		binary.BigEndian.PutUint16(out[t+14:], uint16(min(2*int(binary.BigEndian.Uint16(f[t+14:])), 0xffff)))
		setTransportChecksum(out)
		return out
	}
}

// synAsFirst rewrites every SYN received after the first from the same
// port to carry the first one's sequence number: a new SYN in SYN-RECEIVED
// reads as the peer's first SYN sent again.
func synAsFirst() func(f, scratch []byte) []byte {
	first := map[uint16]uint32{}
	return func(f, scratch []byte) []byte {
		t := tcpHeader(f)
		if t < 0 || !isSYN(f, t) {
			return f
		}
		port := binary.BigEndian.Uint16(f[t:])
		seq, ok := first[port]
		if !ok {
			first[port] = binary.BigEndian.Uint32(f[t+4:])
			return f
		}
		out := append(scratch, f...)
		binary.BigEndian.PutUint32(out[t+4:], seq)
		setTransportChecksum(out)
		return out
	}
}

// clearRSTOnSYN clears the RST bit of every received segment that also
// has SYN.
func clearRSTOnSYN(f, scratch []byte) []byte {
	t := tcpHeader(f)
	if t < 0 || f[t+13]&0x06 != 0x06 {
		return f
	}
	out := append(scratch, f...)
	out[t+13] &^= 0x04
	setTransportChecksum(out)
	return out
}

// dropOldTSRST drops every received RST whose timestamp is older than
// the newest seen from the same port (PAWS, RFC 7323 §5.3, applied where
// R1 exempts it).
func dropOldTSRST() func(f, scratch []byte) []byte {
	newest := map[uint16]uint32{}
	return func(f, _ []byte) []byte {
		t := tcpHeader(f)
		if t < 0 {
			return f
		}
		from, to, ok := tcpOptions(f, t)
		i := -1
		if ok {
			i = findOption(f, from, to, 8)
		}
		if i < 0 || i+10 > to {
			return f
		}
		port, val := binary.BigEndian.Uint16(f[t:]), binary.BigEndian.Uint32(f[i+2:])
		last, seen := newest[port]
		if f[t+13]&0x04 != 0 {
			if seen && int32(val-last) < 0 {
				return nil
			}
			return f
		}
		if !seen || int32(val-last) > 0 {
			newest[port] = val
		}
		return f
	}
}
