//go:build linux

package stack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dgramio/dgramio"
)

// ethtool_rxfh's header: cmd, rss_context, indir_size, key_size, hfunc,
// input_xfrm, two reserved bytes, a reserved u32; then the table and the
// key.
const (
	rxfhHeader   = 24
	hashToeplitz = 1 // ETH_RSS_HASH_TOP
)

// ifreqData is struct ifreq with a pointer in its union (ifr_data).
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte
}

// ReadRSS reads the RSS key and indirection table of iface (ETHTOOL_GRSSH,
// Linux >= 3.16), in the calling thread's network namespace. A device
// without RSS (veth, loopback), or whose hash function is not Toeplitz, is
// an error matching dgramio.ErrNotSupported.
func ReadRSS(iface string) (RSS, error) {
	if len(iface) >= unix.IFNAMSIZ {
		return RSS{}, fmt.Errorf("stack: interface name %q too long", iface)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return RSS{}, fmt.Errorf("stack: socket for ethtool: %w", err)
	}
	defer unix.Close(fd)
	get := func(buf []byte) error {
		var ifr ifreqData
		copy(ifr.name[:], iface)
		ifr.data = unsafe.Pointer(&buf[0])
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
		runtime.KeepAlive(buf)
		if e != 0 {
			return e
		}
		return nil
	}
	hdr := make([]byte, rxfhHeader)
	binary.NativeEndian.PutUint32(hdr, unix.ETHTOOL_GRSSH)
	if err := get(hdr); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP) {
			return RSS{}, dgramio.NotSupported("RSS key and indirection table (ETHTOOL_GRSSH) on "+iface, "3.16", "the device has no receive side scaling (veth has none)", err)
		}
		return RSS{}, fmt.Errorf("stack: ETHTOOL_GRSSH on %s: %w", iface, err)
	}
	nIndir := binary.NativeEndian.Uint32(hdr[8:])
	nKey := binary.NativeEndian.Uint32(hdr[12:])
	if nIndir == 0 || nKey == 0 || nIndir > 1<<16 || nKey > 1<<10 {
		return RSS{}, dgramio.NotSupported("RSS on "+iface, "", fmt.Sprintf("the device reports an indirection table of %d entries and a %d-byte key", nIndir, nKey), nil)
	}
	buf := make([]byte, rxfhHeader+4*int(nIndir)+int(nKey))
	binary.NativeEndian.PutUint32(buf, unix.ETHTOOL_GRSSH)
	binary.NativeEndian.PutUint32(buf[8:], nIndir)
	binary.NativeEndian.PutUint32(buf[12:], nKey)
	if err := get(buf); err != nil {
		return RSS{}, fmt.Errorf("stack: ETHTOOL_GRSSH on %s: %w", iface, err)
	}
	if hf := buf[16]; hf != 0 && hf&hashToeplitz == 0 {
		return RSS{}, dgramio.NotSupported("RSS port choice on "+iface, "", fmt.Sprintf("the device hashes with function %#x, not Toeplitz", hf), nil)
	}
	r := RSS{Indir: make([]uint32, nIndir), Key: make([]byte, nKey)}
	for i := range r.Indir {
		r.Indir[i] = binary.NativeEndian.Uint32(buf[rxfhHeader+4*i:])
	}
	copy(r.Key, buf[rxfhHeader+4*int(nIndir):])
	return r, nil
}
