package testutil

import (
	"bytes"
	"sync"
)

// LockedBuffer is a bytes.Buffer that one goroutine may write (a child
// process's output, a tool's stderr) while another reads it. The zero
// value is ready to use.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p; it never fails.
func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
