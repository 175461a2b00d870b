//go:build !linux

package conformance

import "github.com/dgramio/dgramio"

// Linux is the Factory of the Linux kernel's stack as a DUT; it needs
// Linux network namespaces, so elsewhere every DUT it makes is an
// *dgramio.UnsupportedError (the cases skip).
func Linux() Factory { return unsupported("linux") }

// OursXDP is the Factory of our stack on the tcp-xdp path; it needs Linux
// (AF_XDP on a veth), so elsewhere it makes no DUT.
func OursXDP() Factory { return unsupported("ours-xdp") }

type unsupported string

// Name implements Factory.
func (u unsupported) Name() string { return string(u) }

// New implements Factory: not supported here.
func (u unsupported) New(TB, Setup) (DUT, error) {
	return nil, dgramio.NotSupported("conformance DUT "+string(u), "", "it needs Linux network namespaces", nil)
}

var (
	linuxLacks = map[Cap]string{}
	xdpLacks   = map[Cap]string{}
)

// NativeXDP is the Factory of the native engine on the tcp-xdp path; it
// needs Linux, so elsewhere it makes no DUT.
func NativeXDP() Factory { return unsupported("native-xdp") }
