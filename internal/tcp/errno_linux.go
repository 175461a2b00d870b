package tcp

import "syscall"

// errNoNet is what netstack's ErrNoNet maps to: ENONET, "machine is not on
// the network", which only Linux has.
const errNoNet = syscall.ENONET
