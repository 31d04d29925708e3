// When each request is sent: one after another in closed loop, on the
// open loop's schedule of due times otherwise.

package load

import (
	"context"
	"math"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/hrsleep"
)

// closedLoop sends one request after another until the run stops or the
// Requests budget is used up.
func (r *runner) closedLoop(ctx context.Context, s *shard) {
	for ctx.Err() == nil {
		if r.cfg.Requests > 0 && r.issued.Add(1) > int64(r.cfg.Requests) {
			return
		}
		r.do(ctx, s, time.Now())
	}
}

// dueOffset returns when request i of an open-loop run at rate falls due,
// relative to the start of the run. An offset beyond what a Duration holds
// (request 1 at 1e-10 requests/s) is the longest Duration, past any run's
// end: converted as it is, it would overflow to a negative offset, due at
// once.
func dueOffset(i int64, rate float64) time.Duration {
	d := float64(i) * float64(time.Second) / rate
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
}

// dueBefore returns how many requests of an open-loop run at rate fall due
// before offset t, with the same rounding as openLoop; math.MaxInt64 when
// more do than an int64 counts (rates of about 1e18 requests/s and more).
func dueBefore(t time.Duration, rate float64) int64 {
	estimate := math.Ceil(t.Seconds() * rate)
	if estimate >= math.MaxInt64 {
		return math.MaxInt64
	}
	n := int64(estimate)
	for n > 0 && dueOffset(n-1, rate) >= t {
		n--
	}
	for n < math.MaxInt64 && dueOffset(n, rate) < t {
		n++
	}
	return n
}

// openLoop takes due requests in order from the shared schedule, waits until
// each is due, sends it and charges its latency from the due time.
func (r *runner) openLoop(ctx context.Context, s *shard) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		i := r.ticket.Add(1) - 1
		offset := dueOffset(i, r.cfg.Rate)
		if offset >= r.cfg.Duration {
			return
		}
		due := r.start.Add(offset)
		if !waitUntil(ctx, timer, due) {
			return
		}
		r.do(ctx, s, due)
	}
}

// waitUntil blocks until due and reports whether ctx is still live then.
//
// Go's timers can wake most of a millisecond late (the netpoller waits in
// whole milliseconds), and since open-loop latency counts from the due
// time, that lateness would be charged to the server: a 1 ms endpoint
// would look far slower than it is. So the timer only covers the wait down
// to hrsleep.Coarse before due (where ctx can still interrupt it), and the
// rest is slept with hrsleep.Sleep, which wakes within the timer slack
// (docs/performance.md#tools). Spinning the last stretch would be more
// precise but burns CPU that the server under test needs on a small
// machine. The precise sleep cannot be interrupted; it is shorter than
// hrsleep.Coarse.
func waitUntil(ctx context.Context, timer *time.Timer, due time.Time) bool {
	for {
		wait := time.Until(due)
		if wait <= 0 {
			return ctx.Err() == nil
		}
		if wait < hrsleep.Coarse {
			hrsleep.Sleep(wait)
			continue
		}
		timer.Reset(wait - hrsleep.Coarse)
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
		}
	}
}
