package load

import (
	"context"
	"time"
)

// The open loop's pacing, for other open-loop drivers (fleet's gRPC
// client): the same schedule and the same precise wait, so that their
// latencies from the due time mean what Run's do.

// DueOffset returns when request i of an open loop at rate falls due,
// relative to the start of the run (the longest Duration if that is past
// what a Duration holds).
func DueOffset(i int64, rate float64) time.Duration { return dueOffset(i, rate) }

// WaitUntil blocks until due and reports whether ctx is still live then. It
// sleeps the last stretch precisely (see waitUntil for why); timer is the
// caller's, stopped and drained, reused between calls.
func WaitUntil(ctx context.Context, timer *time.Timer, due time.Time) bool {
	return waitUntil(ctx, timer, due)
}
