package httpsched

// Load shedding by expected queueing delay (WithMaxQueueWait).
//
// The question at each request is whether it would spend longer than the
// budget waiting for CPU, before it is queued. A request waits for its first
// worker slot, and then, each time Checkpoint gives its slot to another task
// (time sharing) or a Blocking call returns, for its slot back; the sum is
// Task.Waited. It is the response time minus the handler's own CPU and I/O
// time (Blocking's fn), the part of the delay the scheduler adds, so the
// budget bounds that. The scheduler's policy (EEVDF with classes, nice
// levels, groups and wakeup preemption) makes the wait depend on much more
// than the queue's length, so the handler does not model it: it measures
// it. Each admitted request's Task.Waited, read as its handler ends (also
// when it panics), is a sample.
//
// Rejected approaches:
//   - The wait for the first slot alone (the sample before Task.Waited
//     existed). Under CPU load a new Normal task gets a slot at the next
//     Checkpoint of a task past its first slice (wakeup preemption), so time
//     sharing puts most of the delay after the first slot: with 32
//     closed-loop clients of 20 ms of CPU on one slot, responses took
//     635-663 ms while first-slot waits were 3.7-5.0 ms, and a 5 ms budget
//     shed 1-6% (BenchmarkShedUnderLoad).
//   - An average updated only by admitted requests sticks: once it exceeds
//     the budget every request is shed, no sample ever comes again, and the
//     handler answers 503 forever, even on an idle scheduler.
//   - Decaying that average with time recovers, but only after a delay the
//     decay rate sets (too slow for one load, too twitchy for another), and
//     then it admits every request that arrives before the first of them
//     ends and reports the wait still long: a burst per cycle.
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
//     probe, and the others are shed with 503. The probe's sample, given
//     when its handler ends, replaces estimate: it is the only fresh
//     measurement there is. So while the wait stays long this handler keeps
//     at most one request queued or running, and the first probe that
//     waits within the budget in total ends the shedding. The estimate
//     cannot stick: a probe is always admitted when none is in flight, and
//     every probe ends (its sample is taken in a deferred call).
//  4. A request whose context ends while it waits for its first slot waited
//     at least that long (measured by the middleware from just before s.Run
//     until Run returns the context's error): estimate becomes at least its
//     wait (a lower bound never lowers the estimate). A probe refused by the
//     scheduler (queue full, closed) gives no sample; the next request
//     becomes the probe.
//
// The samples come late: a request reports its wait only when it ends. When
// a probe ends the shedding, every request that arrives before the first of
// the admitted ones ends is admitted too, so under sustained overload the
// handler alternates between a burst of admitted requests, which time-share
// the slots and can wait far beyond the budget, and a probe alone
// (BenchmarkShedUnderLoad and WithMaxQueueWait's doc give the numbers).
//
// estimate and probing are separate atomics; concurrent samples may
// overwrite each other (one sample of an average lost), which is harmless.
// The hot path while not shedding is one atomic load to admit and a load
// and a store to sample, plus a clock read before s.Run and a deferred call
// at the end of the handler.

import (
	"sync/atomic"
	"time"
)

// sampleWeightShift sets a sample's weight in the moving average: 1/4.
const sampleWeightShift = 2

// waitEstimator decides, per request, whether the expected queueing delay
// is within budget.
type waitEstimator struct {
	budget   time.Duration
	estimate atomic.Int64 // ns
	probing  atomic.Bool  // a probe is admitted and its handler has not ended
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

// observe records the queueing delay in total (Task.Waited) of a request
// whose handler has ended.
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
// its first slot for wait: cancelled says its context ended (so the wait is
// a lower bound).
func (e *waitEstimator) dropped(wait time.Duration, probe, cancelled bool) {
	if cancelled && int64(wait) > e.estimate.Load() {
		e.estimate.Store(int64(wait))
	}
	if probe {
		e.probing.Store(false)
	}
}
