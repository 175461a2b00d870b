//go:build dpdk

package dpdk

// #cgo pkg-config: libdpdk
// #include "shim.h"
import "C"
