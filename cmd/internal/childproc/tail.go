package childproc

import (
	"strings"
	"sync"
)

// TailSize is how much of a child's output a Tail keeps.
const TailSize = 4096

// Tail is a writer that keeps the last TailSize bytes written to it, for
// a child's stderr in the error that says how it failed. It is safe for
// concurrent use; the zero value is empty and ready.
type Tail struct {
	mu  sync.Mutex
	buf []byte
}

// Write keeps the end of p; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - TailSize; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns what is kept, without leading or trailing space.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
