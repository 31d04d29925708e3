package httpsched

// What WithMaxQueueWait's limit learns from: the part of a request's wait
// that its route's limit can shorten, not the time it spends behind work
// that cannot yield.
//
// The problem. The limit (internal/admission) halves when a request waits
// longer than d, and a request's wait (Task.Waited) is all the time it
// waited for a slot. A task in a call that cannot yield (bcrypt, gzip, a
// decoder with no Checkpoint in its loop) keeps its slot until the call
// returns, whatever its slice. A route that checkpoints, beside another
// route's bcrypt calls on the same Scheduler, waits for those calls, and
// its own limit does not shorten that wait: at a limit of one request it
// waits as long. Learnt as the route's own, those waits held its limit at
// one and shed nearly every request, with d at 5x the route's run time
// (docs/performance.md#shedding-beside-work-that-cannot-yield).
//
// Vocabulary:
//   - overrun: how far a task holding a slot has run past the end of its
//     slice while other tasks waited, counted once the scheduler has asked
//     it to give its slot up and until it comes to the scheduler
//     (Task.Overrun; Scheduler.Overruns for every slot). A task that
//     checkpoints is not counted while it runs on because the slice
//     monitor has not asked yet.
//   - stall: a stretch in which every slot is held by a task with an
//     overrun. The waiting tasks wait for work that has not come to a
//     Checkpoint, and no other task can shorten that.
//   - overrun share: the share of the slots held by tasks with an overrun;
//     1 during a stall.
//   - overrunClock: per Scheduler, two integrals over time that
//     httpsched's handlers keep from their samples: the stalled time and
//     the overrun share.
//
// Rejected approaches:
//   - Counting each task's wait during overruns in the scheduler itself:
//     exact, but a hook at every change of the running set and every new
//     slice, in the scheduler's hot paths, for one adapter. The scheduler
//     answers two questions when asked instead (overrun.go at the root).
//   - Discounting stalls alone (the wait while every slot is held past
//     its slice). Sound, but short: a request also waits while one slot
//     holds such a call and another one of its route's own requests, and
//     part of that wait is the call's (were it to yield at its slice's
//     end, both slots would turn over). Beside 40 ms calls the rest still
//     exceeded d = 5x the route's run time often enough that the limit
//     halved every few requests and the route lost much of what it served
//     without the option.
//   - Ignoring waits longer than some multiple of d, or learning from the
//     wait for the first slot alone: either ignores the route's own
//     overload too, which the limit is for.
//   - Estimating a route's expected wait from the others' demand (their
//     run times and requests in flight): the policy (EEVDF, weights, the
//     lane, the placement of long tasks) decides who waits, and the
//     scheduler knows who holds each slot.
//
// The chosen rule: a request's sample is its wait less the part the
// overruns explain, for a route whose own requests yield.
//  1. The clock. Per Scheduler, a sample reads the overruns of the slots'
//     holders and adds to the two integrals the part since the previous
//     sample: to the overrun share, each overrun up to that length, over
//     the slots; to the stalled time, while every slot has one, the
//     shortest. An overrun ends when its task comes to the scheduler; if
//     the task runs a request of an httpsched handler, it comes as the
//     handler returns, so a handler whose task reads an overrun at its end
//     samples then, and the whole overrun is counted. One that other work
//     ends (a task of Go, a Checkpoint after a long call) counts up to the
//     last sample in it, and the limit learns the rest as before. A sample
//     takes the scheduler's lock, so the handlers without WithMaxQueueWait
//     sample only while one of the Scheduler has it (overrunClock.active).
//  2. A request admitted by the limit samples the clock as it is queued and
//     as its handler ends: over its life L it saw stalled time S and
//     overrun share A. During a stall it waited (every slot was another's:
//     all of S is wait); over the rest of its life it waited W-S in all and
//     the overruns held A-S of the slots, each moment alike as far as the
//     two integrals tell. So the part of its wait W the overruns explain is
//     S + (W-S) x (A-S)/(L-S), at most W, and its sample is W less that:
//     the wait its route's limit can shorten, behind its own requests and
//     tasks within their slices. Where a call that cannot yield holds one
//     of two slots for good and four requests share the other, each waits
//     about 3 run times, and half of that is the call's: had it yielded at
//     its slice's end, the five would share two slots, each waiting about
//     1.5 run times. A request whose context ended in the queue waited all
//     its life, so its part is A.
//  3. Not for a route whose own requests overrun: it holds the slots its
//     other requests wait for, and its limit shortens those waits. Each
//     handler keeps a running estimate of its requests' overruns
//     (Task.Overrun as they end; RouteStats.Overrun); at or above
//     yieldingOverrun its limit learns from its whole waits, as before.
//
// What the rule leaves out: a task of a route that yields, asked but not
// yet at its next Checkpoint because the OS has not run its thread,
// overruns like any other, and its route's other requests do not learn
// that wait; where the route checkpoints often, that is rare and short.
// The clock is shared by the handlers of the Scheduler, so the overruns of
// one route's bcrypt calls are discounted from another's samples. The load
// reports (WithLoadMetricsHeader, promsched) keep each request's whole
// wait: they describe the server, not the route.

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/schedmap"
)

// yieldingOverrun is the overrun estimate at and above which a route's
// own requests are taken to hold slots past their slices (rule 3). A
// task that calls Checkpoint as its doc asks (a tenth of its slice at
// most between two calls) overruns by at most a millisecond under the
// longest default slice (10 ms, IsolationOSPriority); twice that leaves
// room for a late call, while a library call that cannot yield overruns
// by its length less a slice, tens of milliseconds for bcrypt.
const yieldingOverrun = 2 * time.Millisecond

// overrunWeight is the weight of a request's overrun in its route's
// running estimate (1/overrunWeight): about the last eight requests, so
// that one long call moves the estimate past yieldingOverrun at once
// (an overrun of 16 ms or more), and a route whose calls change is seen
// as it is within a few requests.
const overrunWeight = 8

// overrunClock is a Scheduler's stalled time and overrun share, as its
// handlers have sampled them (rule 1). Its methods are safe for
// concurrent use.
type overrunClock struct {
	active  atomic.Int32         // handlers of the Scheduler with WithMaxQueueWait
	now     func() time.Duration // the clock's time: since it was made
	stalled atomic.Int64         // the stalled time counted, ns; written under mu
	share   atomic.Int64         // the overrun share counted, ns; written under mu

	mu       sync.Mutex
	mark     time.Duration   // the integrals are counted up to here
	overruns []time.Duration // Scheduler.Overruns' buffer
}

// clockReading is an overrunClock's integrals at a time of the clock.
type clockReading struct{ at, stalled, share time.Duration }

// overrunClocks holds the overrunClock of each Scheduler.
var overrunClocks schedmap.Map[*overrunClock]

// overrunClockFor returns the overrunClock of s, made at the first call
// for s.
func overrunClockFor(s *cpusched.Scheduler) *overrunClock {
	return overrunClocks.For(s, func(weak.Pointer[cpusched.Scheduler]) *overrunClock {
		start := time.Now()
		return &overrunClock{now: func() time.Duration { return time.Since(start) }}
	})
}

// sample counts the overruns of s's slots up to now and returns the
// integrals.
func (c *overrunClock) sample(s *cpusched.Scheduler) clockReading {
	c.mu.Lock()
	defer c.mu.Unlock()
	var slots int
	c.overruns, slots = s.Overruns(c.overruns[:0])
	return c.countLocked(c.overruns, slots, c.now()) // now after Overruns: now less an overrun is not before it began
}

// countLocked adds to the integrals the part since the last count of the
// overruns that slots' holders have at now, and returns them. A count at
// or before the last one (two samples raced) adds nothing: the last one
// counted the same overruns further. It sorts overruns.
func (c *overrunClock) countLocked(overruns []time.Duration, slots int, now time.Duration) clockReading {
	if since := now - c.mark; since > 0 && slots > 0 {
		var held time.Duration
		for _, o := range overruns {
			held += min(o, since)
		}
		c.share.Add(int64(min(held/time.Duration(slots), since)))
		if len(overruns) >= slots { // a stall: it has lasted as long as the slots' shortest overrun
			slices.Sort(overruns)
			c.stalled.Add(int64(min(overruns[len(overruns)-slots], since)))
		}
		c.mark = now
	}
	return clockReading{at: now, stalled: time.Duration(c.stalled.Load()), share: time.Duration(c.share.Load())}
}

// overrunWait returns the part of wait, a request's wait over its life
// from queued to end, that the overruns explain (rule 2): at most wait.
func overrunWait(wait time.Duration, queued, end clockReading) time.Duration {
	life := end.at - queued.at
	stalled := min(max(end.stalled-queued.stalled, 0), wait, max(life, 0))
	share := max(end.share-queued.share, stalled)
	rest := life - stalled
	if rest <= 0 || wait <= stalled {
		return stalled
	}
	f := min(float64(share-stalled)/float64(rest), 1)
	return stalled + time.Duration(float64(wait-stalled)*f)
}

// overrunEstimate is a route's running estimate of its requests'
// overruns (rule 3), ns. Its methods are safe for concurrent use.
type overrunEstimate struct{ ns atomic.Int64 }

// add folds a request's overrun into the estimate.
func (e *overrunEstimate) add(d time.Duration) {
	for {
		cur := e.ns.Load()
		if e.ns.CompareAndSwap(cur, cur+(int64(d)-cur)/overrunWeight) {
			return
		}
	}
}

// get returns the estimate.
func (e *overrunEstimate) get() time.Duration { return time.Duration(e.ns.Load()) }

// yields reports whether the route's requests are taken to yield (rule 3).
func (e *overrunEstimate) yields() bool { return e.get() < yieldingOverrun }
