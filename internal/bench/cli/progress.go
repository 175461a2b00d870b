package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/sys/unix"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progress reports a run's advance: on a terminal, a bar that names the
// cell being measured and the time left, with the results printed above
// it; elsewhere (a pipe, a file, a test) plain lines only.
type progress struct {
	w    io.Writer
	mu   sync.Mutex
	bar  *progressbar.ProgressBar
	stop chan struct{}
	done chan struct{}
	// Expected seconds: of the whole run, of the cells done, of the cell
	// running and when it started.
	total, doneSec, cellSec float64
	cellStart               time.Time
}

// tick is the bar's unit: a tenth of a second.
const tick = 10

func newProgress(w io.Writer, bar bool, total time.Duration) *progress {
	p := &progress{w: w, total: total.Seconds()}
	if !bar {
		return p
	}
	p.bar = progressbar.NewOptions64(int64(p.total*tick)+1,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetRenderBlankState(true),
	)
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go p.run()
	return p
}

// run moves the bar with the clock inside the running cell, never past
// what the cell is expected to take.
func (p *progress) run() {
	defer close(p.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			in := 0.0
			if !p.cellStart.IsZero() {
				in = min(time.Since(p.cellStart).Seconds(), p.cellSec*0.98)
			}
			_ = p.bar.Set64(int64((p.doneSec + in) * tick))
			p.mu.Unlock()
		}
	}
}

// startCell names the cell being measured and how long it should take.
func (p *progress) startCell(name string, expected time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cellSec, p.cellStart = expected.Seconds(), time.Now()
	if p.bar != nil {
		p.bar.Describe(name)
		return
	}
	fmt.Fprintf(p.w, "%s: running\n", name)
}

// endCell marks the running cell done.
func (p *progress) endCell() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.doneSec += p.cellSec
	p.cellSec, p.cellStart = 0, time.Time{}
	if p.bar != nil {
		_ = p.bar.Set64(int64(p.doneSec * tick))
	}
}

// skip takes d off the expected total (cells of a kind that cannot run).
func (p *progress) skip(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total -= d.Seconds()
	if p.bar != nil {
		p.bar.ChangeMax64(int64(max(p.total, p.doneSec)*tick) + 1)
	}
}

// logf prints a line, above the bar when there is one.
func (p *progress) logf(format string, a ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Clear()
	}
	fmt.Fprintf(p.w, format+"\n", a...)
	if p.bar != nil {
		_ = p.bar.RenderBlank()
	}
}

// finish removes the bar.
func (p *progress) finish() {
	if p.bar == nil {
		return
	}
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.bar.Finish()
	_ = p.bar.Clear()
	p.bar = nil
}
