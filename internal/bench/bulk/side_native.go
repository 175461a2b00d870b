package bulk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/frameio"
	"github.com/dgramio/dgramio/internal/stack"
	"github.com/dgramio/dgramio/internal/tcp"
	"github.com/dgramio/dgramio/stack/native"
	"github.com/dgramio/dgramio/tcp/netconn"
)

// nativeOptions are the engine options a tcp-xdp or tcp-dpdk Backend of
// cfg runs its native engine with (package tcp maps Config.TCP onto them
// the same way; the defaults of both are the engine's): the bulk side
// runs the engine itself, under no stream layer, so that what it measures
// is the engine moving bytes.
func nativeOptions(cfg dgramio.Config, opts tcp.Options, conns int) native.Options {
	t := tcp.TuningFromConfig(cfg)
	o := native.Options{
		Addr:       cfg.LocalIP,
		PrefixLen:  opts.PrefixLen,
		Gateway:    opts.Gateway,
		Neighbors:  stack.OptionsFromConfig(cfg).Neighbors,
		SendBuf:    t.SendBuf,
		RecvBuf:    t.RecvBuf,
		MinRTO:     t.MinRTO,
		MaxRetries: t.MaxRetries,
		DelayedACK: t.DelayedACK,
		Nagle:      !t.NoDelay,
		NoSACK:     !t.SACK,
		Congestion: tcp.NativeCongestion(t.Congestion),
		SYNBacklog: MaxConns,
		MaxConns:   conns + 16,
		// Config.TCP.NoModerate, as package tcp maps it.
		NoBufferTuning: !t.Moderate,
	}
	o.AllOnLink = o.PrefixLen == 0
	if o.MinRTO > native.DefaultMaxRTO {
		o.MaxRTO = o.MinRTO
	}
	return o
}

// cellOptions are the engine options of a bulk side of conns
// connections: nativeOptions, with room in SYN-RECEIVED for all of them.
// The client dials every connection of a cell at once; at the engine's
// default bound (MaxConns/4, (conns+16)/4 here) the server answered the
// SYNs beyond it with SYN cookies, which then kept only the MSS (RFC
// 4987 §3.6; they keep window scaling and SACK in the timestamp now,
// docs/hardening.md): with 16 connections, 8 ran without window scaling
// (a 64 KiB window), SACK or timestamps, and at 3% loss over 10 ms they
// made most of the cell's retransmission timeouts. A cell measures
// connections made as a listener with room makes them.
func cellOptions(cfg dgramio.Config, opts tcp.Options, conns int) native.Options {
	o := nativeOptions(cfg, opts, conns)
	o.MaxSYNReceived = max(o.MaxConns/4, conns)
	return o
}

// nativeConfig is the Config of the side's native engine (defaults not
// yet applied): the row's kind on the native engine, Options.CC and
// Options.Buf where given, Config's defaults otherwise (the congestion
// control the host's, as dgramio.TCPTuning.Congestion says).
func (s *side) nativeConfig() dgramio.Config {
	sp := s.spec
	cfg := dgramio.Config{Kind: s.row.Kind, Iface: sp.Iface, LocalIP: sp.Local, Port: sp.Port, Role: dgramio.RoleClient, Dests: []netip.AddrPort{netip.AddrPortFrom(sp.Peer, sp.Port)}}
	if sp.Server {
		cfg.Role, cfg.Dests = dgramio.RoleServer, nil
	}
	cfg.TCP.Stack = dgramio.TCPStackNative
	if sp.CC != "" {
		cfg.TCP.Congestion = dgramio.Congestion(sp.CC)
	}
	if sp.Buf > 0 {
		// A buffer size given fixes the window there, as SO_RCVBUF does
		// on Linux (auto-tuning off): the matrix measures recovery and
		// congestion control, not how fast the window grows under loss.
		cfg.TCP.SendBuf, cfg.TCP.RecvBuf, cfg.TCP.NoModerate = sp.Buf, sp.Buf, true
	}
	return cfg
}

// runNative is the native engine over the kind's FrameIO (tcp.OpenXDP's
// AF_XDP socket and XDP program, or the DPDK port), driven by one poll
// loop on this goroutine: Poll, read and write every connection, Flush;
// when a round moved nothing, Engine.Wait (unless Busy).
func (s *side) runNative(ctx context.Context) error {
	sp := s.spec
	if sp.Queues > 1 {
		return s.runNativeQueues(ctx)
	}
	cfg := s.nativeConfig()
	open := netconn.OpenXDP
	if s.row.Kind == dgramio.KindTCPDPDK {
		open = netconn.OpenDPDK // tcp.NewDPDK's port, which OpenDPDK opens for either engine
		cfg = cfg.WithDefaults()
	}
	op, err := open(cfg)
	if err != nil {
		return err
	}
	fio := op.FIO
	opts := tcp.Options{Mode: op.Mode, Close: op.Close}
	release := opts.Close
	if release == nil {
		release = fio.Close
	}
	defer release()
	o := cellOptions(cfg.WithDefaults(), opts, sp.Conns)
	e, err := native.New(fio, o)
	if err != nil {
		return fmt.Errorf("native engine: %w", err)
	}
	defer e.Close()
	conns, err := s.nativeConnect(ctx, e)
	if err != nil {
		return err
	}
	counters := func() (map[string]uint64, uint64) { return engineCounters(e, fio) }
	mode := opts.Mode
	if mode == "" {
		mode = fio.Stats().Mode
	}
	runs := "the engine of tcp-xdp's Backend, driven directly: " + mode + " (one poll loop for every connection, " + s.loopWords() + "; reads in place with Peek; congestion control " + string(o.Congestion) + ")"
	if err := s.nativeMove(ctx, e, conns, counters, runs); err != nil {
		return err
	}
	linger(ctx, e, conns)
	return nil
}

// loopWords says how the side's poll loops wait, for SideResult.Runs.
func (s *side) loopWords() string {
	if s.spec.Busy {
		return "spinning"
	}
	return "sleeping in Engine.Wait when a round moves nothing"
}

// linger keeps e running until the parent ends the cell (ctx), so that
// the side's last segments and FIN are acknowledged, and retransmitted
// if lost, and the peer's are answered.
func linger(ctx context.Context, e *native.Engine, conns []*native.Conn) {
	for ctx.Err() == nil {
		e.Poll(256)
		for _, c := range conns {
			_, _ = c.Read(nil)
		}
		_ = e.Flush()
		_ = e.Wait(ctx)
	}
}

// engineCounters are e's counters and its FrameIO's, "layer.name", and
// the segments it retransmitted.
func engineCounters(e *native.Engine, fio frameio.FrameIO) (map[string]uint64, uint64) {
	m := layerMap(e.AppendCounters(nil))
	fs := fio.Stats()
	for k, v := range layerMap(fs.Layers) {
		m[k] = v
	}
	m["frameio.rx_dropped"], m["frameio.tx_dropped"], m["frameio.tx_ring_full"] = fs.RxDropped, fs.TxDropped, fs.TxRingFull
	return m, m[native.Layer+".tcp_retransmits"]
}

// nativeConnect listens and accepts (server) or dials (client) the
// spec's connections, driving the engine until each is established.
func (s *side) nativeConnect(ctx context.Context, e *native.Engine) ([]*native.Conn, error) {
	sp := s.spec
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	var conns []*native.Conn
	var ln *native.Listener
	if sp.Server {
		var err error
		if ln, err = e.Listen(sp.Port, MaxConns); err != nil {
			return nil, fmt.Errorf("listen: %w", err)
		}
		s.ready()
	} else {
		for range sp.Conns {
			c, err := e.Dial(netip.AddrPortFrom(sp.Peer, sp.Port), 0)
			if err != nil {
				return nil, fmt.Errorf("dial: %w", err)
			}
			conns = append(conns, c)
		}
	}
	for {
		e.Poll(256)
		if ln != nil {
			for len(conns) < sp.Conns {
				c, ok := ln.Accept()
				if !ok {
					break
				}
				conns = append(conns, c)
			}
		}
		up := 0
		for _, c := range conns {
			if err := c.Err(); err != nil {
				return nil, fmt.Errorf("connection to %s: %w", c.Peer(), err)
			}
			if c.State() != native.SynSent && c.State() != native.SynReceived {
				up++
			}
		}
		if err := e.Flush(); err != nil {
			return nil, fmt.Errorf("flush: %w", err)
		}
		if up == sp.Conns {
			return conns, nil
		}
		if err := e.Wait(ctx); err != nil {
			return nil, fmt.Errorf("%d of %d connections established: %w", up, sp.Conns, err)
		}
	}
}

// nativeMove moves the bytes of the engine's connections on this
// goroutine and reports the side's result.
func (s *side) nativeMove(ctx context.Context, e *native.Engine, conns []*native.Conn, counters func() (map[string]uint64, uint64), runs string) error {
	c0, rt0 := counters()
	ru0 := rusage()
	start := time.Now()
	fl := s.newFlows(start)
	if err := s.moveLoop(ctx, e, conns, fl); err != nil {
		return err
	}
	end := time.Now()
	c1, rt1 := counters()
	r := SideResult{Runs: runs, Retransmits: rt1 - rt0, Counters: filterLossy(moved(c0, c1))}
	s.finish(&r, fl, start, ru0, end)
	return nil
}

// moveLoop moves the bytes of conns, fl[i] the flow of conns[i], on
// engine e from this goroutine until every flow is done: Poll, read and
// write every connection, Flush; when a round moved nothing, Engine.Wait
// (unless Busy).
func (s *side) moveLoop(ctx context.Context, e *native.Engine, conns []*native.Conn, fl []*flow) error {
	left := len(fl)
	for left > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		e.Poll(256)
		now := time.Now()
		progress := false
		for i, c := range conns {
			f := fl[i]
			if f.finSent && f.eof {
				continue
			}
			if !f.eof {
				for {
					p := c.Peek()
					if len(p) == 0 {
						break
					}
					if err := f.rcv.take(p, now); err != nil {
						return fmt.Errorf("connection %d: %w", f.id, err)
					}
					c.Lend(len(p))
					progress = true
				}
				if _, err := c.Read(nil); errors.Is(err, io.EOF) {
					f.eof, f.rcv.last, progress = true, now, true
				} else if err != nil {
					return fmt.Errorf("connection %d: %w", f.id, err)
				}
			}
			if !f.finSent {
				if f.snd != nil {
					for !f.snd.done(now) {
						n := c.Write(f.snd.next(c.Room()))
						if n == 0 {
							break
						}
						f.snd.advance(n)
						progress = true
					}
				}
				if (f.snd != nil && f.snd.done(now)) || (f.snd == nil && f.eof) {
					c.CloseWrite()
					f.finSent, progress = true, true
				}
				if err := c.Err(); err != nil {
					return fmt.Errorf("connection %d: %w", f.id, err)
				}
			}
			if f.finSent && f.eof {
				left--
			}
		}
		if err := e.Flush(); err != nil {
			return fmt.Errorf("flush: %w", err)
		}
		if !progress && !s.spec.Busy {
			if err := e.Wait(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}
