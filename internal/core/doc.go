// Package core holds the API types that the root package dgramio and every
// backend share, and nothing else: Config with its option structs and
// typed enums (Kind, Poll, XDPMode, XDPCopy, Congestion), Backend, Packet,
// Stats and Counter, QueueGroup, and the errors (ConfigError,
// UnsupportedError, PrivilegeError, PeerError, ErrNotSupported, ErrNoDPDK,
// ErrClosed). It imports no backend, so backends can import it without a
// cycle; package dgramio re-exports everything here under its own name,
// and users import only dgramio.
//
// What backends share beyond the types lives in packages of its own
// under internal/: guard (Close against a running poll loop), queues (a
// group's queue slots), poison (debug builds' buffer poisoning), ifaddr
// (the kernel's addresses of an interface); the tools' address policy is
// internal/benchnet.
package core
