package bulk

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/tcp/netconn"
	"golang.org/x/sys/unix"
)

// runKernel is kernel TCP: net.Listen and net.Dial in the side's
// namespace, the kernel's defaults (no socket option set but
// TCP_CONGESTION with --cc; accepted sockets inherit the listener's).
func (s *side) runKernel(ctx context.Context) error {
	sp := s.spec
	var conns []halfCloser
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if sp.Server {
		lc := net.ListenConfig{Control: ccControl(sp.CC)}
		l, err := lc.Listen(ctx, "tcp4", netip.AddrPortFrom(sp.Local, sp.Port).String())
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		ln := l.(*net.TCPListener)
		defer ln.Close()
		s.ready()
		for len(conns) < sp.Conns {
			c, err := ln.AcceptTCP()
			if err != nil {
				return fmt.Errorf("accept: %w", err)
			}
			conns = append(conns, c)
		}
	} else {
		d := net.Dialer{Timeout: connectTimeout, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(sp.Local, 0)), Control: ccControl(sp.CC)}
		for len(conns) < sp.Conns {
			c, err := d.DialContext(ctx, "tcp4", netip.AddrPortFrom(sp.Peer, sp.Port).String())
			if err != nil {
				return fmt.Errorf("dial: %w", err)
			}
			conns = append(conns, c.(*net.TCPConn))
		}
	}
	runs := "kernel TCP (net.Conn, a goroutine per connection and direction, the kernel's defaults)"
	if sp.CC != "" {
		runs = "kernel TCP (net.Conn, a goroutine per connection and direction, the kernel's defaults but " + sp.CC + ")"
	}
	err := s.runConns(ctx, conns, kernelCounters, runs)
	if err == nil {
		waitSignal(ctx)
	}
	return err
}

// kernelCounters reads the Tcp lines of /proc/self/net/snmp and the
// TcpExt lines of /proc/self/net/netstat (this process's namespace), and
// RetransSegs.
func kernelCounters() (map[string]uint64, uint64) {
	m := map[string]uint64{}
	for _, f := range []struct{ path, prefix string }{{"/proc/self/net/snmp", "snmp"}, {"/proc/self/net/netstat", "netstat"}} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			continue
		}
		for k, v := range parseProcNet(string(b), "Tcp", "TcpExt") {
			m[f.prefix+"."+k] = v
		}
	}
	rt := m["snmp.tcp.RetransSegs"]
	return m, rt
}

// parseProcNet parses the "Proto: names" / "Proto: values" line pairs of
// /proc/net/snmp and /proc/net/netstat for the protocols named, into
// "proto.Name" keys ("tcp.RetransSegs", "tcpext.TCPLostRetransmit").
// Negative values (gauges) are left out.
func parseProcNet(s string, protos ...string) map[string]uint64 {
	out := map[string]uint64{}
	lines := strings.Split(s, "\n")
	for i := 0; i+1 < len(lines); i++ {
		p, names, ok := strings.Cut(lines[i], ":")
		p2, vals, ok2 := strings.Cut(lines[i+1], ":")
		if !ok || !ok2 || p != p2 {
			continue
		}
		want := false
		for _, q := range protos {
			want = want || q == p
		}
		ns, vs := strings.Fields(names), strings.Fields(vals)
		if !want || len(ns) != len(vs) {
			continue
		}
		for j := range ns {
			if v, err := strconv.ParseUint(vs[j], 10, 64); err == nil {
				out[strings.ToLower(p)+"."+ns[j]] = v
			}
		}
		i++
	}
	return out
}

// runNetstack is gVisor netstack through package tcp/netconn: one Service
// (a poller goroutine, its idle mode the default) over the kind's FrameIO,
// net.Conn on top.
func (s *side) runNetstack(ctx context.Context) error {
	sp := s.spec
	cfg := dgramio.Config{Kind: s.row.Kind, Iface: sp.Iface, LocalIP: sp.Local, Port: sp.Port}
	cfg.TCP.Stack = dgramio.TCPStackNetstack
	svc, err := netconn.New(cfg, netconn.Options{MaxConns: sp.Conns + 16})
	if err != nil {
		return err
	}
	defer svc.Close()
	var conns []halfCloser
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if sp.Server {
		ln, err := svc.Listen(sp.Port)
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		defer ln.Close()
		s.ready()
		for len(conns) < sp.Conns {
			c, err := ln.AcceptConn()
			if err != nil {
				return fmt.Errorf("accept: %w", err)
			}
			conns = append(conns, c)
		}
	} else {
		dctx, cancel := context.WithTimeout(ctx, connectTimeout)
		defer cancel()
		for len(conns) < sp.Conns {
			c, err := svc.DialAddr(dctx, netip.AddrPortFrom(sp.Peer, sp.Port))
			if err != nil {
				return fmt.Errorf("dial: %w", err)
			}
			conns = append(conns, c)
		}
	}
	counters := func() (map[string]uint64, uint64) {
		st := svc.Stats()
		m := layerMap(st.Layers)
		return m, m["netstack.tcp_retransmits"]
	}
	runs := "gVisor " + svc.Stats().Mode + " (tcp/netconn: its poller goroutine; net.Conn, a goroutine per connection and direction)"
	err = s.runConns(ctx, conns, counters, runs)
	if err == nil {
		waitSignal(ctx)
	}
	return err
}

// layerMap turns counters into "layer.name" keys.
func layerMap(cs []dgramio.Counter) map[string]uint64 {
	m := make(map[string]uint64, len(cs))
	for _, c := range cs {
		m[c.Layer+"."+c.Name] += c.Value
	}
	return m
}

// ccControl sets TCP_CONGESTION to cc on a socket before it listens or
// connects; nil when cc is empty (the host's default).
func ccControl(cc string) func(network, address string, rc syscall.RawConn) error {
	if cc == "" {
		return nil
	}
	return func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc)
		}); err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("TCP_CONGESTION %s: %w", cc, serr)
		}
		return nil
	}
}
