package bulk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/tcp"
	"github.com/dgramio/dgramio/stack/native"
	"github.com/dgramio/dgramio/tcp/netconn"
)

// connRateNativeClient is the native engine of tcp-xdp as the client of
// the connection-rate mode, driven by one poll loop: sp.Parallel
// connections in flight, each dialled with its request written at once,
// its answer and the server's FIN read, then closed, for sp.Duration;
// then the ones in flight are finished. Each connection has
// connClientTimeout (a connection past it is aborted and counted).
func connRateNativeClient(ctx context.Context, sp ConnRateSpec) (ConnRateResult, error) {
	dst := netip.AddrPortFrom(sp.Peer, sp.Port)
	cfg := dgramio.Config{Kind: dgramio.KindTCPXDP, Iface: sp.Iface, LocalIP: sp.Local, Port: sp.Port,
		Role: dgramio.RoleClient, Dests: []netip.AddrPort{dst}}
	cfg.TCP.Stack = dgramio.TCPStackNative
	op, err := netconn.OpenXDP(cfg)
	if err != nil {
		return ConnRateResult{}, err
	}
	release := op.Close
	if release == nil {
		release = op.FIO.Close
	}
	defer release()
	o := nativeOptions(cfg.WithDefaults(), tcp.Options{Mode: op.Mode}, max(native.DefaultMaxConns, 2*sp.Parallel))
	e, err := native.New(op.FIO, o)
	if err != nil {
		return ConnRateResult{}, fmt.Errorf("native engine: %w", err)
	}
	defer e.Close()
	type flight struct {
		c     *native.Conn
		got   int
		start time.Time
	}
	failed := map[string]uint64{}
	var done uint64
	req, buf := make([]byte, connReqLen), make([]byte, connReqLen+1)
	for i := range req {
		req[i] = byte(i)
	}
	cpu0, t0 := cpuNs(), time.Now()
	end := t0.Add(sp.Duration)
	var flights []flight
	for ctx.Err() == nil {
		now := time.Now()
		opening := now.Before(end)
		if !opening && len(flights) == 0 {
			break
		}
		moved := e.Poll(256) > 0
		for opening && len(flights) < max(sp.Parallel, 1) {
			c, err := e.Dial(dst, 0)
			if err != nil {
				failed["dial: "+oneLine(err.Error())]++
				break
			}
			if c.Write(req) != connReqLen {
				failed["write"]++
				c.Abort()
				continue
			}
			flights = append(flights, flight{c: c, start: now})
			moved = true
		}
		keep := flights[:0]
		for _, f := range flights {
			n, err := f.c.Read(buf[f.got:])
			f.got += n
			why := ""
			switch {
			case f.got > connReqLen:
				why = "answer too long"
			case errors.Is(err, io.EOF) && f.got == connReqLen:
				done++
				f.c.Close()
				moved = true
				continue
			case errors.Is(err, io.EOF):
				why = "short answer"
			case errors.Is(err, native.ErrReset), errors.Is(err, native.ErrRefused):
				why = "reset"
			case err != nil:
				why = "ended: " + oneLine(err.Error())
			case now.Sub(f.start) > connClientTimeout:
				why = "answer timed out"
			}
			if why != "" {
				failed[why]++
				f.c.Abort()
				moved = true
				continue
			}
			moved = moved || n > 0
			keep = append(keep, f)
		}
		clear(flights[len(keep):])
		flights = keep
		_ = e.Flush()
		if !moved {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
			_ = e.Wait(wctx)
			cancel()
		}
	}
	wall := time.Since(t0)
	// The last closes' FINs acknowledged before the engine goes.
	for linger := time.Now().Add(200 * time.Millisecond); time.Now().Before(linger) && ctx.Err() == nil; {
		e.Poll(256)
		_ = e.Flush()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		_ = e.Wait(wctx)
		cancel()
	}
	return ConnRateResult{Runs: fmt.Sprintf("native engine of tcp-xdp (%s) as the client, %d at once, one poll loop", op.Mode, sp.Parallel),
		Done: done, Failed: failed, WallNs: int64(wall), CPUNs: cpuNs() - cpu0}, nil
}
