package httpsched

// Load shedding by an adaptive limit on requests in flight (WithMaxQueueWait).
//
// The goal is that a request admitted by the handler spends about the
// budget or less waiting for CPU. A request waits for its first worker
// slot, and then, each time Checkpoint gives its slot to another task (time
// sharing) or a Blocking call returns, for its slot back; the sum is
// Task.Waited, the part of the response time the scheduler adds. The
// scheduler's policy (EEVDF with classes, nice levels, groups and wakeup
// preemption) makes that wait depend on much more than the queue's length,
// so the handler does not model it: it measures it, and controls the one
// thing it owns, how many of its requests are queued or running at once.
//
// Vocabulary:
//   - inflight: this handler's requests admitted and not yet ended (queued,
//     running, or waiting for their slot back).
//   - limit: the most requests inflight may hold; a request that finds
//     inflight == limit is shed with 503 at once, before it is queued.
//   - sample: an admitted request's Task.Waited, read as its handler ends
//     (in a deferred call, so also when it panics or calls runtime.Goexit).
//   - round: the requests admitted since the last decrease of limit,
//     numbered by a counter that each decrease advances.
//
// The hard part is that samples come late: a request reports its wait only
// when it ends, after a whole service time, so any rule that admits every
// request while the last report was good lets a burst in before the first
// bad report arrives.
//
// Rejected approaches (measured with BenchmarkShedUnderLoad: closed-loop
// clients, requests of several times the budget's CPU, one slot; the
// figures are in docs/performance.md#shedding-under-load):
//   - Sampling the wait for the first slot alone (the first version, before
//     Task.Waited existed). Under CPU load a new task gets a slot at the next
//     Checkpoint of a task past its first slice (wakeup preemption), so time
//     sharing puts most of the delay after the first slot: with 32 clients
//     responses took over a hundred times the first-slot waits, and few
//     requests were shed.
//   - A moving average of the total waits, with one probe request admitted
//     at a time while it exceeded the budget (the second version). When a
//     probe's short wait reopened the gate, every client got in before any
//     reported: bursts that time-shared the slot. It shed most requests,
//     yet the served ones waited tens of times the budget (8 clients) and
//     a hundred times it (32 clients) in total. Decaying the
//     average with time instead of probing recovers only after a delay the
//     decay rate sets, then bursts the same.
//   - Queue length x service time / workers (Little's law) needs this
//     handler's share of a queue that other handlers and classes fill, and
//     EEVDF does not serve it in order. Scheduler.Stats per request takes the
//     scheduler's mutex.
//
// The chosen protocol, additive increase and multiplicative decrease of
// limit (AIMD, as TCP's congestion window), per handler, lock-free:
//  1. limit starts at the scheduler's Workers(): that many requests would
//     each find a slot without waiting if this handler had the scheduler to
//     itself; if other work shares it, the first long samples halve it.
//     (Starting at 1 would hold a many-slot scheduler to one request until
//     the samples raised it, one at a time.)
//  2. Admit: if inflight < limit, inflight += 1 (a compare-and-swap) and the
//     request is queued with the round it was admitted in; else 503.
//  3. When an admitted request's handler ends, with sample w, and it was
//     admitted in the current round:
//     a. w <= budget and inflight (this request included) >= limit: limit +=
//     1, up to maxLimit. Only a full limit grows: while the handler uses
//     fewer than limit requests, a good sample says nothing about more, and
//     limit stays within one of the most it has used (TCP's congestion
//     window validation, RFC 7661), so a burst after an idle spell cannot
//     find a limit grown without bound.
//     b. w > budget: limit = max(1, limit/2), and the round ends. The
//     requests admitted before the decrease ran under the old limit, and
//     their late samples say so again: counting them would halve limit once
//     per request of the wave, down to 1. So at most one decrease per round,
//     and samples from an older round (good or bad) are ignored.
//     Then inflight -= 1, in every case.
//  4. A request whose context ends while it waits for its first slot waited
//     at least that long (the middleware's clock, from just before s.Run
//     until Run returns): over the budget it is a bad sample (3b); within it,
//     a lower bound says nothing. A request the scheduler refuses (queue
//     full, closed, bad task options) gives no sample. Either way it gives
//     its place back: inflight -= 1, exactly once per admitted request.
//
// limit cannot stick at shedding everything, which the average needed the
// probe for: limit >= 1, so when none of this handler's requests is in
// flight the next one is admitted, and every admitted request ends and
// gives its place back (the deferred sample, or the not-started path).
// Under overload the limit oscillates: with a budget shorter than a
// request's service time and one slot, between 1 (each request alone,
// waiting little) and 2 (two time-sharing, each waiting about the other's
// service time), so the mean wait is a fraction of a service time and may
// exceed the budget: the budget is a target, not a bound. In
// BenchmarkShedUnderLoad the served requests waited a small multiple of the
// budget in total, whatever the number of clients, with the slot kept busy
// (docs/performance.md#shedding-under-load).
//
// Each step is a few atomic operations on the handler's counters, which the
// handler's requests share (one cache line's contention per request, no
// lock); concurrent updates of limit are compare-and-swap loops, so none is
// lost.

import (
	"sync/atomic"
	"time"
)

// maxLimit caps limit at cpusched's DefaultQueueLimit: a scheduler with
// the default queue limit refuses more tasks than that itself
// (ErrQueueFull), and the growth rule (3a) keeps limit within one of the
// concurrency actually used, so the cap binds only a handler that serves
// more requests than that at once within the budget. (The scheduler's own
// queue limit is not exported to read.)
const maxLimit = 1 << 16

// concurrencyLimit admits a handler's requests while fewer than an
// adaptive limit are in flight (see the protocol above).
type concurrencyLimit struct {
	budget   time.Duration
	inflight atomic.Int64  // admitted requests not yet ended
	limit    atomic.Int64  // 1..maxLimit
	round    atomic.Uint64 // advanced by each decrease of limit
}

// newConcurrencyLimit returns a limit with the budget and initial limit
// (clamped to 1..maxLimit).
func newConcurrencyLimit(budget time.Duration, initial int) *concurrencyLimit {
	l := &concurrencyLimit{budget: budget}
	l.limit.Store(int64(min(max(initial, 1), maxLimit)))
	return l
}

// admit reports whether a request may be queued, and the round it is
// admitted in; if it may, its caller must later call exactly one of
// observe and dropped with that round.
func (l *concurrencyLimit) admit() (round uint64, ok bool) {
	round = l.round.Load() // before the increment: a decrease in between makes the sample stale, never wrongly current
	for {
		n := l.inflight.Load()
		if n >= l.limit.Load() {
			return 0, false
		}
		if l.inflight.CompareAndSwap(n, n+1) {
			return round, true
		}
	}
}

// observe takes the queueing delay in total (Task.Waited) of a request
// admitted in round whose handler has ended, and gives its place back.
func (l *concurrencyLimit) observe(wait time.Duration, round uint64) {
	if wait > l.budget {
		l.decrease(round)
	} else if l.round.Load() == round && l.inflight.Load() >= l.limit.Load() {
		l.increase()
	}
	l.inflight.Add(-1)
}

// dropped gives back the place of a request admitted in round whose task
// never started after waiting wait for its first slot; cancelled says its
// context ended, so wait is a lower bound of its delay.
func (l *concurrencyLimit) dropped(wait time.Duration, round uint64, cancelled bool) {
	if cancelled && wait > l.budget {
		l.decrease(round)
	}
	l.inflight.Add(-1)
}

// increase adds one to limit, up to maxLimit.
func (l *concurrencyLimit) increase() {
	for {
		n := l.limit.Load()
		if n >= maxLimit || l.limit.CompareAndSwap(n, n+1) {
			return
		}
	}
}

// decrease halves limit (to at least 1) if round is the current round, and
// ends it, so that the rest of its late samples do not halve it again.
func (l *concurrencyLimit) decrease(round uint64) {
	if !l.round.CompareAndSwap(round, round+1) {
		return // admitted before the last decrease
	}
	for {
		n := l.limit.Load()
		if l.limit.CompareAndSwap(n, max(1, n/2)) {
			return
		}
	}
}
