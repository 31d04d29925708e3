// Package admission is load shedding by an adaptive limit on calls in
// flight: the one implementation behind WithMaxQueueWait in both adapters,
// httpsched (each handler has a limit per place of its requests: their
// group, class and nice level) and grpcsched (each method of an
// interceptor has one per place of its calls): Groups. A call is an HTTP
// request or a gRPC call.
//
// The goal is that a call admitted by the adapter spends about the budget
// or less waiting for CPU. A call waits for its first worker slot, and
// then, each time Checkpoint gives its slot to another task (time sharing)
// or a Blocking call returns, for its slot back; the sum is Task.Waited,
// the part of the response time the scheduler adds. The scheduler's policy
// (EEVDF with classes, nice levels, groups and wakeup preemption) makes
// that wait depend on much more than the queue's length, so the adapter
// does not model it: it measures it, and controls the one thing it owns,
// how many of its calls are queued or running at once.
//
// Vocabulary:
//   - inflight: the limit's calls admitted and not yet ended (queued,
//     running, or waiting for their slot back).
//   - limit: the most calls inflight may hold; a call that finds inflight
//     == limit is shed at once (503, or codes.Unavailable), before it is
//     queued.
//   - sample: an admitted call's Task.Waited, read as its handler ends (in
//     a deferred call, so also when it panics or calls runtime.Goexit).
//     httpsched gives it less the part that tasks running past their
//     slice explain, which no limit on its route shortens (work that
//     cannot yield, beside it on the Scheduler: httpsched/overrun.go);
//     grpcsched gives the whole wait.
//   - round: the calls admitted since the last decrease of limit, numbered
//     by a counter that each decrease advances.
//
// The hard part is that samples come late: a call reports its wait only
// when it ends, after a whole service time, so any rule that admits every
// call while the last report was good lets a burst in before the first
// bad report arrives.
//
// Rejected approaches (measured with httpsched's BenchmarkShedUnderLoad:
// closed-loop clients, requests of several times the budget's CPU, one
// slot; the figures are in docs/performance.md#shedding-under-load):
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
//     limit's share of a queue that other adapters and classes fill, and
//     EEVDF does not serve it in order. Scheduler.Stats per call takes the
//     scheduler's mutex.
//
// The chosen protocol, additive increase and multiplicative decrease of
// limit (AIMD, as TCP's congestion window), per limit, lock-free:
//  1. limit starts at the scheduler's Workers(): that many calls would
//     each find a slot without waiting if this limit's calls had the
//     scheduler to themselves; if other work shares it, the first long
//     samples halve it. (Starting at 1 would hold a many-slot scheduler to
//     one call until the samples raised it, one at a time.)
//     Until the first sample (cold), Admit allows coldFactor times that
//     many (see coldFactor): a burst at startup that the budget allows
//     must not be shed before anything is known of its waits.
//  2. Admit: if inflight < limit (while cold, the cold limit), inflight += 1
//     (a compare-and-swap) and the call is queued with the round it was
//     admitted in; else it is shed.
//  3. When an admitted call's handler ends, with sample w, and it was
//     admitted in the current round:
//     a. w <= budget: if it is the first sample, limit rises to inflight
//     (this call included) if lower, as that many fitted within the
//     budget. Then, if inflight >= limit: limit += 1, up to MaxLimit.
//     Only a full limit grows: while the adapter uses fewer than limit
//     calls, a good sample says nothing about more, and
//     limit stays within one of the most it has used (TCP's congestion
//     window validation, RFC 7661), so a burst after an idle spell cannot
//     find a limit grown without bound.
//     b. w > budget: limit = max(1, limit/2), and the round ends. The
//     calls admitted before the decrease ran under the old limit, and
//     their late samples say so again: counting them would halve limit once
//     per call of the wave, down to 1. So at most one decrease per round,
//     and samples from an older round (good or bad) are ignored.
//     A bad first sample halves limit from Workers(), as if there had been
//     no cold start, whatever the cold limit let in.
//     Then inflight -= 1, in every case. The first sample of either kind
//     ends the cold start.
//  4. A call whose context ends while it waits for its first slot waited
//     at least that long (the adapter's clock, from just before s.Run until
//     Run returns): over the budget it is a bad sample (3b); within it, a
//     lower bound says nothing. A call the scheduler refuses (queue full,
//     closed, bad task options) gives no sample. Either way it gives its
//     place back: inflight -= 1, exactly once per admitted call.
//
// limit cannot stick at shedding everything, which the average needed the
// probe for: limit >= 1, so when none of this limit's calls is in flight
// the next one is admitted, and every admitted call ends and gives its
// place back (the deferred sample, or the not-started path). Under
// overload the limit oscillates: with a budget shorter than a call's
// service time and one slot, between 1 (each call alone, waiting little)
// and 2 (two time-sharing, each waiting about the other's service time),
// so the mean wait is a fraction of a service time and may exceed the
// budget: the budget is a target, not a bound. In BenchmarkShedUnderLoad
// the served requests waited a small multiple of the budget in total,
// whatever the number of clients, with the slot kept busy
// (docs/performance.md#shedding-under-load).
//
// Each step is a few atomic operations on the limit's counters, which its
// calls share (one cache line's contention per call, no lock); concurrent
// updates of limit are compare-and-swap loops, so none is lost.
package admission

import (
	"sync/atomic"
	"time"
)

// MaxLimit caps limit at cpusched's DefaultQueueLimit: a scheduler with
// the default queue limit refuses more tasks than that itself
// (ErrQueueFull), and the growth rule (3a) keeps limit within one of the
// concurrency actually used, so the cap binds only an adapter that serves
// more calls than that at once within the budget. (The scheduler's own
// queue limit is not exported to read.)
const MaxLimit = 1 << 16

// coldFactor is how many calls per place of the initial limit (per slot)
// Admit lets in before the first sample (step 1). Without it, a burst at
// startup found the limit at Workers() and was shed beyond it: 6 requests
// to a route on 2 workers, 4 answered 503 at once though the budgets (250
// ms, 1 s) allowed them all. Before any sample the run time r of a call is
// unknown, so the cold limit is a multiple of the slots: a burst of
// coldFactor calls per slot, sharing the slots, waits about
// (coldFactor-1) x r in all, within a budget of a few r (the one
// WithMaxQueueWait's doc advises). An overload from the start lets at most
// that many calls in before the first sample, over the budget once; that
// sample then halves the limit from Workers(), as it would have without a
// cold start.
const coldFactor = 4

// Limit admits calls while fewer than an adaptive limit are in flight (see
// the protocol above). Its methods are safe for concurrent use.
type Limit struct {
	budget    time.Duration
	coldLimit int64         // what Admit allows while cold: coldFactor x the initial limit
	cold      atomic.Bool   // no sample yet
	inflight  atomic.Int64  // admitted calls not yet ended
	limit     atomic.Int64  // 1..MaxLimit
	round     atomic.Uint64 // advanced by each decrease of limit
}

// New returns a limit with the budget and initial limit (clamped to
// 1..MaxLimit), cold: until the first sample it admits coldFactor times
// the initial limit (at most MaxLimit).
func New(budget time.Duration, initial int) *Limit {
	initial = min(max(initial, 1), MaxLimit)
	l := &Limit{budget: budget, coldLimit: int64(min(coldFactor*initial, MaxLimit))}
	l.limit.Store(int64(initial))
	l.cold.Store(true)
	return l
}

// Admit reports whether a call may be queued, and the round it is admitted
// in; if it may, its caller must later call exactly one of Observe and
// Dropped with that round.
func (l *Limit) Admit() (round uint64, ok bool) {
	round = l.round.Load() // before the increment: a decrease in between makes the sample stale, never wrongly current
	for {
		n := l.inflight.Load()
		if n >= l.Current() {
			return 0, false
		}
		if l.inflight.CompareAndSwap(n, n+1) {
			return round, true
		}
	}
}

// Observe takes the queueing delay in total (Task.Waited) of a call
// admitted in round whose handler has ended, and gives its place back.
func (l *Limit) Observe(wait time.Duration, round uint64) {
	first := l.warm()
	if wait > l.budget {
		l.decrease(round)
	} else if l.round.Load() == round {
		n := l.inflight.Load()
		if first {
			l.raise(n) // the calls in flight fitted within the budget
		}
		if n >= l.limit.Load() {
			l.increase()
		}
	}
	l.inflight.Add(-1)
}

// Dropped gives back the place of a call admitted in round whose task
// never started after waiting wait for its first slot; cancelled says its
// context ended, so wait is a lower bound of its delay.
func (l *Limit) Dropped(wait time.Duration, round uint64, cancelled bool) {
	if cancelled && wait > l.budget {
		l.warm()
		l.decrease(round)
	}
	l.inflight.Add(-1)
}

// Inflight returns the number of calls admitted and not yet ended.
func (l *Limit) Inflight() int64 { return l.inflight.Load() }

// Current returns the limit Admit applies now: the cold limit until the
// first sample.
func (l *Limit) Current() int64 {
	if l.cold.Load() {
		return max(l.coldLimit, l.limit.Load())
	}
	return l.limit.Load()
}

// warm ends the cold start, and reports whether this call ended it (the
// first sample).
func (l *Limit) warm() bool {
	return l.cold.Load() && l.cold.CompareAndSwap(true, false)
}

// raise sets limit to n if it is lower, up to MaxLimit.
func (l *Limit) raise(n int64) {
	n = min(n, MaxLimit)
	for {
		cur := l.limit.Load()
		if cur >= n || l.limit.CompareAndSwap(cur, n) {
			return
		}
	}
}

// increase adds one to limit, up to MaxLimit.
func (l *Limit) increase() {
	for {
		n := l.limit.Load()
		if n >= MaxLimit || l.limit.CompareAndSwap(n, n+1) {
			return
		}
	}
}

// decrease halves limit (to at least 1) if round is the current round, and
// ends it, so that the rest of its late samples do not halve it again.
func (l *Limit) decrease(round uint64) {
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
