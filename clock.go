package cpusched

// The clock the scheduler reads, injected so that tests control time.

import "time"

// clock is the scheduler's source of time, injected so tests control it.
// Now is monotonic nanoseconds from an arbitrary origin.
type clock interface {
	Now() int64
}

var processStart = time.Now()

// systemClock reads the monotonic clock.
type systemClock struct{}

func (systemClock) Now() int64 { return int64(time.Since(processStart)) }
