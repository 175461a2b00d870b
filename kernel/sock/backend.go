package sock

import (
	"sync"

	"github.com/dgramio/dgramio/internal/core"
)

// Prepare is how the New of kernel kind kind (udp, uring or tcp, each in
// package kernel/<kind>) starts: an empty cfg.Kind becomes kind, another
// kind is a *core.ConfigError, and cfg gets its defaults and is validated,
// before any system call; Queues > 1 is refused (core.CheckOneQueue: a
// group's queues are opened through their kind's group). It returns the
// completed Config.
func Prepare(cfg core.Config, kind string) (core.Config, error) {
	if cfg.Kind == "" {
		cfg.Kind = kind
	}
	if cfg.Kind != kind {
		return cfg, &core.ConfigError{Field: "Kind", Value: cfg.Kind, Reason: "package kernel/" + kind + " opens kind " + kind + " only"}
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	if err := core.CheckOneQueue(cfg); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// Life is the open or closed state the kernel backends share: the
// core.Guard their data-path methods enter, and the counters frozen at
// Close, which Stats returns from then on (the socket they were read from
// is gone). The zero Life is open.
type Life struct {
	core.Guard
	mu    sync.Mutex // held by Close; a Stats after Shut waits on it
	final core.Stats
}

// Stats returns snapshot() while the backend is open, called under the
// guard so that no data-path call runs meanwhile, and afterwards the
// counters Close froze (waiting for a Close in progress to freeze them).
// The result is the caller's: its Layers are never shared.
func (l *Life) Stats(snapshot func() core.Stats) core.Stats {
	if l.Enter() {
		s := snapshot()
		l.Exit()
		return s
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.final
	s.Layers = append([]core.Counter(nil), s.Layers...)
	return s
}

// Close shuts the guard (core.Guard.Shut with wake, so that a Wait in
// progress returns and no data-path call is left running), then calls
// shutdown, which releases what the backend holds and returns the counters
// to freeze and the error Close returns. A Close after the first returns
// nil without calling shutdown.
func (l *Life) Close(wake func(), shutdown func() (final core.Stats, err error)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.Shut(wake) {
		return nil
	}
	var err error
	l.final, err = shutdown()
	return err
}
