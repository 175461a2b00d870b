//go:build dpdk

package dpdk

// #cgo pkg-config: libdpdk libxdp libbpf
// #cgo CFLAGS: -Wall -Werror=implicit-function-declaration -Werror=int-conversion
// #include "shim.h"
import "C"
