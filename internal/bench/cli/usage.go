package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/dgramio/dgramio"
)

// The exit statuses of the tools, as iperf3's: a run that measured, a run
// that could not (the peer unreachable, everything lost, a connection
// refused, a kind this host cannot open), and a usage error (a bad flag,
// an impossible setting), said before anything starts.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// parseFlags parses args into fs as the tools do: --help (or -h) prints
// the flags on stdout and exits 0; a bad flag prints its error and one
// line that points at --help on stderr (not the whole flag list) and exits
// 2; an argument that is not a flag is a usage error too. done is true when
// the tool must return status at once.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (status int, done bool) {
	fs.SetOutput(stderr)
	fs.Usage = func() {} // printed below, on stdout, for --help only
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fmt.Fprintf(stdout, "usage: %s [flags]\n\nflags:\n", fs.Name())
		fs.PrintDefaults()
		fmt.Fprintf(stdout, "\nexit status: %d a run that measured, %d a run that could not (peer unreachable, everything lost), %d a usage error\n", ExitOK, ExitFailed, ExitUsage)
		return ExitOK, true
	case err != nil:
		fmt.Fprintf(stderr, "run '%s --help' for the flags\n", fs.Name())
		return ExitUsage, true
	case fs.NArg() != 0:
		fmt.Fprintf(stderr, "%s: unexpected arguments %q (every setting is a --flag)\nrun '%s --help' for the flags\n", fs.Name(), fs.Args(), fs.Name())
		return ExitUsage, true
	}
	return 0, false
}

// durationValue is a flag.Value for a duration that is never negative
// and, when it does not parse, says how to write one.
type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration: write it like 5s, 300ms or 1m30s", s)
	}
	if v < 0 {
		return fmt.Errorf("%q: a duration here is not negative", s)
	}
	*d = durationValue(v)
	return nil
}

// durationFlag defines a duration flag with durationValue's checks.
func durationFlag(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	d := def
	fs.Var((*durationValue)(&d), name, usage)
	return &d
}

// parsePoll resolves --poll and its alias --wait into the poll mode. The
// tools share one vocabulary: busy (spin, a CPU per poller) and yield
// (sleep when idle); httpxdp adds adaptive (spin a while, then sleep).
// spin and sleep, httpxdp's former names, are accepted as busy and yield.
func parsePoll(poll string, wait bool) (dgramio.Poll, error) {
	switch poll {
	case "", string(dgramio.PollBusy), "spin":
		if wait {
			return dgramio.PollYield, nil
		}
		return dgramio.PollBusy, nil
	case string(dgramio.PollYield), "sleep", "wait":
		return dgramio.PollYield, nil
	}
	return "", fmt.Errorf(`--poll %q: want "busy" (spin on Rx, a CPU per poller) or "yield" (sleep in Wait when idle)`, poll)
}

// checkIface checks --iface for a raw kind before anything opens: it
// must exist and be an Ethernet interface (the raw kinds build Ethernet
// frames: loopback has no MAC). Kernel kinds take no --iface.
func checkIface(kind dgramio.Kind, iface string) error {
	if !kind.IsRaw() || iface == "" || kind.IsDPDK() {
		return nil
	}
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return fmt.Errorf("--iface %s: %w", iface, err)
	}
	if len(ifi.HardwareAddr) != 6 {
		why := "it has no Ethernet MAC address"
		if ifi.Flags&net.FlagLoopback != 0 {
			why = "it is the loopback interface, which has no Ethernet MAC address"
		}
		twin := dgramio.KindUDP
		if kind.IsStream() {
			twin = dgramio.KindTCP
		}
		return fmt.Errorf("--iface %s: kind %s sends Ethernet frames and %s; use an Ethernet port or a veth, or --kind %s on loopback",
			iface, kind, why, twin)
	}
	return nil
}

// fixHint names the likely cause of err and its fix, where the error
// alone does not: a userspace TCP kind that got no answer to its SYN on a
// veth whose kernel end still offloads TX checksums (the frames arrive
// with the checksum unfinished, and the engine drops them as corrupt). ""
// when it knows none.
func fixHint(kind dgramio.Kind, err error) string {
	if kind.IsStream() && kind.IsRaw() && errors.Is(err, syscall.ETIMEDOUT) {
		return checksumFix
	}
	if !kind.IsRaw() && errors.Is(err, syscall.EADDRNOTAVAIL) {
		return "no interface of this host (of its network namespace) holds that address: give --local one of its own (ip addr), or 0.0.0.0 or :: for all of one family"
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return "something serves on that port already: stop it or give --port another"
	}
	return ""
}

// checksumFix is the cause and fix of tcp_checksum_errors on a veth.
const checksumFix = "if the peer is a kernel on a veth (or a NIC with TX checksum offload), its segments arrive with the TCP checksum left to the hardware, " +
	"and the userspace TCP drops them (counter tcp_checksum_errors): turn the offload off at the sending end, ethtool -K <its interface> tx off"

// checksumErrors returns the counter tcp_checksum_errors of s (any layer).
func checksumErrors(s dgramio.Stats) uint64 {
	var n uint64
	for _, c := range s.Layers {
		if c.Name == "tcp_checksum_errors" {
			n += c.Value
		}
	}
	return n
}

// watchChecksums prints checksumFix on stderr once, when the counter
// tcp_checksum_errors of stats has risen while no connection was ever
// accepted or opened, checking every period until stop is closed.
func watchChecksums(tool string, stats func() dgramio.Stats, period time.Duration, stderr io.Writer, stop <-chan struct{}) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if s := stats(); checksumErrors(s) > 0 && s.Accepts == 0 && s.Conns == 0 {
			fmt.Fprintf(stderr, "%s: %d TCP segments dropped for a bad checksum and no connection yet: %s\n", tool, checksumErrors(s), checksumFix)
			return
		}
	}
}

// framingHint is what the echo says once records longer than its largest
// message arrived on a stream kind in a length-prefixed framing: most
// often the client is not framing at all (nc, socat, telnet, curl send
// plain bytes, whose first two or four are read as a length). "" when
// none did, or in raw framing.
func framingHint(tool string, s dgramio.Stats, framing dgramio.Framing, maxRecord int) string {
	if s.RxTruncated == 0 || framing == dgramio.FramingRaw {
		return ""
	}
	return fmt.Sprintf("%s: %d records longer than %d bytes arrived and were skipped (rx_truncated): in --framing %s each record starts with its length; "+
		"a client that sends plain bytes (nc, socat, telnet, curl) needs --framing raw\n", tool, s.RxTruncated, maxRecord, framing)
}

// watchFraming prints framingHint once, as soon as it has something to
// say, until stop closes.
func watchFraming(tool string, stats func() dgramio.Stats, framing dgramio.Framing, maxRecord int, period time.Duration, stderr io.Writer, stop <-chan struct{}) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if h := framingHint(tool, stats(), framing, maxRecord); h != "" {
			fmt.Fprint(stderr, h)
			return
		}
	}
}
