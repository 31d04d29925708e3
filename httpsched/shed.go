package httpsched

// Load shedding by expected queue wait (WithMaxQueueWait).
//
// The question at each request is whether it would wait longer than the
// budget for its first worker slot, before it is queued. (That first wait is
// what Run lets a caller see. The time a started task spends parked after
// Checkpoint, which is where time sharing puts most of the delay under CPU
// load, is not visible from outside the core: bounding it would need the
// task's run time, e.g. a Task.RunTime, to subtract from the response time.) The scheduler's
// policy (EEVDF with classes, nice levels, groups and wakeup preemption)
// makes the wait depend on much more than the queue's length, so the
// handler does not model it: it measures it. Each admitted request's wait
// (from just before s.Run to the start of its task) is a sample.
//
// Rejected approaches:
//   - An average updated only by admitted requests sticks: once it exceeds
//     the budget every request is shed, no sample ever comes again, and the
//     handler answers 503 forever, even on an idle scheduler.
//   - Decaying that average with time recovers, but only after a delay the
//     decay rate sets (too slow for one load, too twitchy for another), and
//     then it admits every request that arrives before the first of them
//     starts and reports the queue still long: a burst per cycle.
//   - Queue length x service time / workers (Little's law) needs this
//     handler's share of a queue that other handlers and classes fill, and
//     EEVDF does not serve it in order.
//   - Scheduler.Stats per request takes the scheduler's mutex.
//
// The chosen protocol, per handler, lock-free:
//  1. estimate is a moving average of the samples, each weighing 1/4
//     (recent waits count most; one outlier does not shed).
//  2. While estimate <= budget, every request is admitted.
//  3. While estimate > budget, one request at a time is admitted as a
//     probe, and the others are shed with 503. The probe's sample replaces
//     estimate: it is the only fresh measurement there is. So while the
//     queue stays long this handler keeps at most one request queued, and
//     the first probe that starts within the budget ends the shedding. The
//     estimate cannot stick: a probe is always admitted when none waits.
//  4. A request whose context ends while it waits waited at least that
//     long: estimate becomes at least its wait (a lower bound never lowers
//     the estimate). A probe refused by the scheduler (queue full, closed)
//     gives no sample; the next request becomes the probe.
//
// estimate and probing are separate atomics; concurrent samples may
// overwrite each other (one sample of an average lost), which is harmless.
// The hot path while not shedding is one atomic load to admit and a load
// and a store to sample, plus the two clock reads that measure the wait.

import (
	"sync/atomic"
	"time"
)

// sampleWeightShift sets a sample's weight in the moving average: 1/4.
const sampleWeightShift = 2

// waitEstimator decides, per request, whether the expected queue wait is
// within budget.
type waitEstimator struct {
	budget   time.Duration
	estimate atomic.Int64 // ns
	probing  atomic.Bool  // a probe is admitted and has not started yet
}

// admit reports whether a request may be queued, and whether it is the
// probe (whose caller must then call observe or dropped).
func (e *waitEstimator) admit() (admit, probe bool) {
	if time.Duration(e.estimate.Load()) <= e.budget {
		return true, false
	}
	if e.probing.CompareAndSwap(false, true) {
		return true, true
	}
	return false, false
}

// observe records the wait of a request whose task started.
func (e *waitEstimator) observe(wait time.Duration, probe bool) {
	if probe {
		e.estimate.Store(int64(wait))
		e.probing.Store(false)
		return
	}
	est := e.estimate.Load()
	e.estimate.Store(est + (int64(wait)-est)>>sampleWeightShift)
}

// dropped records a request whose task never started after waiting for
// wait: cancelled says its context ended (so the wait is a lower bound).
func (e *waitEstimator) dropped(wait time.Duration, probe, cancelled bool) {
	if cancelled && int64(wait) > e.estimate.Load() {
		e.estimate.Store(int64(wait))
	}
	if probe {
		e.probing.Store(false)
	}
}
