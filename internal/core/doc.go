// Package core holds the types that the root package dgramio and every
// backend share: Config, Backend, Packet, Stats and the errors. It imports
// no backend, so backends can import it without a cycle; package dgramio
// re-exports everything here under its own name, and users import only
// dgramio.
package core
