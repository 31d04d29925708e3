package cpusched

// The kept slot: where a task of a kind that yields ends, and the task
// that would take its slot is a new one of a kind that runs past its
// slices (a call that cannot yield: bcrypt, gzip), the slot stays free for
// a moment, for a task of a kind that yields that arrives meanwhile.
//
// Why. A closed-loop caller (a client that sends its next request once the
// last is answered, a batch loop) submits its next task a moment after its
// last ended. The slot its task leaves goes at once to whoever waits, and
// if that is a call that cannot yield, the caller's next task waits out the
// whole call: short tasks and such calls then alternate one for one,
// whatever their lengths and their groups' weights. With one slot, renders
// that checkpoint beside bcrypt logins that cannot got a fifth of the
// renders that Go's own scheduler, preempting the logins' goroutines,
// gave the same service (docs/measurements/slot-hold.md).
//
// How. finish keeps the slot (keepSlotLocked) for keepMax, or a
// keepShare-th of the call's expected length if shorter, so that an idle
// slot costs the call at most that share. The first task to arrive
// meanwhile ends the keeping (submit, endKeepLocked), and the policy picks
// between it and those that wait, as it would had it come before the
// slot was free: the lane's order and budget and the groups' weights
// stand. The time the slot stood kept is charged to the task that takes
// it, where that task is of those it was kept for, as slot time
// (chargeKept): the slot was held for it as surely as if it had run, and
// its group's weight pays. Uncharged, a group whose callers kept the slot
// between their tasks got its weight's share of the time charged and the
// kept time besides. At its time the monitor (or a test's tick) gives
// the slot to whoever waits (expireKeptLocked). Where most kept slots run
// out with nobody arriving, as when tasks arrive at random, one chance in
// keepProbe is taken (keptSlot.misses). Judged instead by how long kept
// slots stood idle (keep where that averaged under a quarter of
// keepMax), it kept almost none where it paid: a loopback client's next
// request took longer than that.
// One slot is kept at a time. The kind is what tells a call from a task
// that yields (kind.go): by group, a service's short tasks were taken for
// the calls beside them.

import (
	"math"
	"time"
)

const (
	// keepMax is the longest a slot is kept: about a loopback round trip
	// of a closed-loop client and its handler, several times over.
	keepMax = time.Millisecond
	// keepShare bounds the kept time by the call's expected length:
	// at most a twentieth of it goes idle.
	keepShare = 20
	// keepProbe: where most kept slots ran out with no task arriving
	// (tasks that arrive at random, not callers that come straight
	// back), one chance in keepProbe is still taken, to see whether that
	// has changed.
	keepProbe = 8
	// keepHitOne is 1 in keptSlot.misses' fixed point.
	keepHitOne = 1024
)

// keptSlot is the slot finish left free (keepSlotLocked), under s.mu.
type keptSlot struct {
	on    bool
	at    int64 // when it was kept
	until int64 // when it goes to whoever waits
	skips int   // chances not taken since the last kept slot
	// misses is the moving average, weighing the newest 1/4, of whether
	// a kept slot ran out with no task arriving (keepHitOne) or not (0):
	// near 0 where closed-loop callers come straight back, high where
	// the calls would only lose the time.
	misses int64
}

// ended records that the kept slot was given on: to a task that arrived
// (arrived), or at its time.
func (k *keptSlot) ended(arrived bool) {
	k.on = false
	var miss int64
	if !arrived {
		miss = keepHitOne
	}
	k.misses += (miss - k.misses) / 4
}

// kept is how many slots are kept: 0 or 1.
func (k *keptSlot) kept() int {
	if k.on {
		return 1
	}
	return 0
}

// freeSlotLocked reports whether a slot is free for any task: not held,
// lent (lend.go) or kept.
func (s *Scheduler) freeSlotLocked() bool {
	return len(s.running)+s.keep.kept() < s.slotsLocked()
}

// yieldsLocked reports whether t, about to end, is of the tasks a slot is
// kept for (keptForLocked), and ran.
func (s *Scheduler) yieldsLocked(t *Task) bool {
	return t.started && s.keptForLocked(t)
}

// keptForLocked reports whether t is of the tasks a slot is kept for: a
// Normal task of the fair queue, of a kind that comes to the scheduler
// near its slices' ends (runQueue.overruns).
func (s *Scheduler) keptForLocked(t *Task) bool {
	return t.qidx == qFair && t.class() == ClassNormal && !s.rq.overruns(t)
}

// keepSlotLocked keeps the slot a task of a kind that yields (yields:
// yieldsLocked, read before it ended) has just left, at now, where the
// next task would be a new call that cannot yield; it reports whether it
// did. The caller then hands no slot on.
func (s *Scheduler) keepSlotLocked(yields bool, now int64) bool {
	if !yields || s.keep.on || s.closed || !s.keeps || !s.freeSlotLocked() {
		return false
	}
	next := s.rq.nextLong(now)
	if next == nil {
		return false
	}
	if s.keep.misses > keepHitOne/2 {
		if s.keep.skips++; s.keep.skips < keepProbe {
			return false
		}
	}
	d := min(int64(keepMax), longRequest(next)/keepShare)
	s.keep.on, s.keep.at, s.keep.until, s.keep.skips = true, now, now+d, 0
	s.stats.kept++
	s.watching = true
	s.kickMonitor()
	return true
}

// endKeepLocked ends the keeping of a slot, if one is kept, as new task
// t has just been queued at now: the slot goes to the task the policy
// picks, t or one that waited, whom the caller must start (resume, or run
// t where it is t).
func (s *Scheduler) endKeepLocked(t *Task, now int64) (next *Task, first bool) {
	if !s.keep.on {
		return nil, false
	}
	s.keep.ended(true)
	next, first = s.pickLocked(now)
	if next == t {
		s.stats.keptTaken++
	}
	if next != nil && s.keptForLocked(next) {
		s.chargeKept(next, now-s.keep.at, now)
	}
	return next, first
}

// chargeKept charges task next, which has just taken the slot kept for a
// task of its sort (keptForLocked), the time kept, as an unmeasured
// stretch of slot time (charge.go): to its vruntime and its group's, and
// to the lane's budget where the lane gave it the slot. Not to RunTime or
// CPUTime: no task ran. A kept slot that runs out (expireKeptLocked) is
// charged to nobody; the miss rule (keptSlot.misses) bounds what those
// cost.
func (s *Scheduler) chargeKept(next *Task, kept, now int64) {
	if kept > 0 {
		s.rq.account(next, kept, kept, now)
	}
}

// expireKeptLocked ends the kept slot once its time is up at now and
// gives it to whoever waits, whom the caller must resume; wait is the
// time until it is up, or math.MaxInt64 where no slot is kept.
func (s *Scheduler) expireKeptLocked(now int64) (next *Task, first bool, wait int64) {
	if !s.keep.on {
		return nil, false, math.MaxInt64
	}
	if now < s.keep.until {
		return nil, false, s.keep.until - now
	}
	s.keep.ended(false)
	next, first = s.pickLocked(now)
	return next, first, math.MaxInt64
}

// nextLong returns the task pick would take now where it is a new task of
// a kind that runs past its slices, which would hold the slot for its
// whole call; nil otherwise.
func (q *runQueue) nextLong(now int64) *Task {
	t, lane := q.next(now)
	if t == nil || lane || t.qidx != qFair || t.started || !q.overruns(t) {
		return nil
	}
	return t
}
