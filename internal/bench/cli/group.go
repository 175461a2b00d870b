package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/dgramio/dgramio"
	"github.com/dgramio/dgramio/internal/bench/preflight"
	_ "github.com/dgramio/dgramio/kinds"
)

// Group is a kind opened with several queues: what the tools need of a
// *dgramio.Group.
type Group interface {
	// Open opens queue q on the calling goroutine, which becomes its
	// poller (pinned to Config.CPUs[q] when set).
	Open(q int) (dgramio.Backend, error)
	// Stats returns the sum of the queues' counters and those of what
	// they share.
	Stats() dgramio.Stats
	// Close releases what the queues share, after their Backends.
	Close() error
}

// openers open the tools' backends: a kind with one queue (single), and
// with several (group). The tools use defaultOpeners; their tests pass
// fakes to runEcho and runLoadgen.
type openers struct {
	single func(dgramio.Config) (dgramio.Backend, error)
	group  func(dgramio.Config) (Group, error)
}

// defaultOpeners open through dgramio.New and dgramio.NewGroup.
func defaultOpeners() openers {
	return openers{single: dgramio.New, group: func(cfg dgramio.Config) (Group, error) {
		g, err := dgramio.NewGroup(cfg)
		if err != nil {
			return nil, err
		}
		return g, nil
	}}
}

// runGroup runs the n queues of g, each on a goroutine of its own, the
// queue's poller: it opens every queue (Open pins its poller), calls
// ready once all are open, then body(q, b) on every poller at once. When
// every body has returned, each poller closes its Backend (which undoes
// its pinning); then runGroup reads the group's Stats and each queue's
// Backend's Stats, after those Closes, so that what only a Close counts
// (frames left in a ring, records still staged) is in them, and returns
// both. If a queue cannot be opened, the queues already open are closed,
// ready and body are not called, and the error names the queue. The
// caller closes g.
func runGroup(g Group, n int, ready func(), body func(q int, b dgramio.Backend)) (total dgramio.Stats, queues []dgramio.Stats, err error) {
	opened := make(chan error, n)
	start := make(chan bool) // true: run; closed without a value: give up
	bodies := make(chan struct{}, n)
	closing := make(chan struct{})
	var wg sync.WaitGroup
	closeErrs := make([]error, n)
	backends := make([]dgramio.Backend, n)
	for q := 0; q < n; q++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := g.Open(q)
			if err != nil {
				opened <- fmt.Errorf("queue %d: %w", q, err)
				return
			}
			backends[q] = b
			opened <- nil
			if run := <-start; run {
				body(q, b)
				bodies <- struct{}{}
				<-closing
			}
			if err := b.Close(); err != nil {
				closeErrs[q] = fmt.Errorf("close queue %d: %w", q, err)
			}
		}()
	}
	var errs []error
	for range n {
		if err := <-opened; err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		close(start)
		wg.Wait()
		return dgramio.Stats{}, nil, errors.Join(errs...)
	}
	ready()
	for range n {
		start <- true
	}
	for range n {
		<-bodies
	}
	close(closing)
	wg.Wait()
	queues = make([]dgramio.Stats, n)
	for q, b := range backends {
		queues[q] = b.Stats()
	}
	return g.Stats(), queues, errors.Join(closeErrs...)
}

// parseCPUs parses the --cpus flag: CPU numbers and ranges separated by
// commas ("0,1", "2-5"), in the order of the queues; unlike a Linux CPU
// list the order is kept and a CPU may repeat (yielding pollers may share
// one). Empty is none.
func parseCPUs(s string) ([]int, error) {
	out, err := preflight.ParseCPUs(s, dgramio.MaxQueues)
	if err != nil {
		return nil, fmt.Errorf("--cpus %q: %w", s, err)
	}
	return out, nil
}

// formatCPUs writes a CPU list for --cpus, in order.
func formatCPUs(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// queueCPUs checks the tool's --queues, --cpu and --cpus and returns the
// queues' CPUs (nil: not pinned).
func queueCPUs(queues, cpuN int, cpus string) ([]int, error) {
	if queues < 1 || queues > dgramio.MaxQueues {
		return nil, fmt.Errorf("--queues %d: must be 1..%d", queues, dgramio.MaxQueues)
	}
	list, err := parseCPUs(cpus)
	if err != nil {
		return nil, err
	}
	switch {
	case len(list) > 0 && cpuN >= 0:
		return nil, fmt.Errorf("--cpu %d and --cpus %q: give one of them", cpuN, cpus)
	case cpuN >= 0 && queues > 1:
		return nil, fmt.Errorf("--cpu %d with --queues %d: give a CPU per queue with --cpus", cpuN, queues)
	case cpuN >= 0:
		return []int{cpuN}, nil
	case len(list) > 0 && len(list) != queues:
		return nil, fmt.Errorf("--cpus %q: %d CPUs for %d queues; give one per queue", cpus, len(list), queues)
	}
	return list, nil
}
