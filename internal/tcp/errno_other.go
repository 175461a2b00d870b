//go:build !linux

package tcp

import "syscall"

// errNoNet stands in for Linux's ENONET, which this system lacks.
const errNoNet = syscall.ENETUNREACH
