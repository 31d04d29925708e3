package httpsched

// The package's test seams: options that only its tests use.

import (
	"time"

	"github.com/cpusched/cpusched"
)

// withClock replaces the clock that measures the wait of a request whose
// context ends before its task starts (tests).
func withClock(now func() time.Duration) Option {
	return optionFunc(func(c *config) error { c.now = now; return nil })
}

// withWaited replaces (*cpusched.Task).Waited, which gives the queueing
// delay of a request whose handler has ended (tests).
func withWaited(waited func(*cpusched.Task) time.Duration) Option {
	return optionFunc(func(c *config) error { c.waited = waited; return nil })
}
