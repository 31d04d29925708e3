package cpusched

// Lowering a task's own thread: in IsolationOSPriority a task on its own
// goroutine runs at normal priority until it has computed for
// osLowerAfter, then on its thread lowered.

import (
	"math"
	"runtime"
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
)

// osLowerAfter is how long a task on its own goroutine holds its slot at
// its thread's normal priority before the monitor lowers the thread: long
// enough that the tasks of a server that only wraps its handlers (and an
// empty Run) never pay the two system calls, short enough that the rest of
// the program waits behind a task's normal-priority start for no longer
// than a fraction of its own 1 ms-scale work
// (docs/measurements/ospriority-settings.md#own-goroutines).
const osLowerAfter = 250 * time.Microsecond

// lowerIdle is how long the monitor keeps looking for tasks to lower after
// the last task got a slot, so that back-to-back short Runs do not wake it
// at every start, while tasks that come further apart (a stream of small
// requests) cost one wake each, not one every osLowerAfter.
const lowerIdle = 2 * osLowerAfter

// lockThread locks t's goroutine, which is about to call fn (first) or
// to go on with it after a wait, to its thread, records the thread for the
// monitor, and sets the Checkpoint countdown to t's next lowering check:
// the first Checkpoint when fn begins, the lowerCheckEvery-th after a
// wait (lowerCheckEvery). After a wait it marks the thread (markAfterWait).
func (s *Scheduler) lockThread(t *Task, first bool) {
	runtime.LockOSThread()
	tid := int32(osprio.ThreadID())
	switch {
	case first:
		t.os.tid.Store(tid)
		t.setLowerCheck(lowerCheckMark)
	case !t.os.lowered.Load():
		s.markAfterWait(t, tid)
		t.countDown(lowerCheckEvery)
	default:
		t.os.tid.Store(tid)
	}
}

// markAfterWait records thread tid as t's, t's goroutine having locked it
// again after it waited unlocked (for its slot, or in a Blocking call),
// and, as the stretch on its slot begins there, marks where the charge of
// the stretch is measured from (charge.go): tid's clock now, against the
// mark lowerIfLongLocked measures from, which it takes here on a thread
// new to t rather than at its next look. One system call and s.mu, per
// wait that was unlocked. tid is stored with the mark, under s.mu, so
// that a Stats snapshot sees both or neither (cpuSoFarLocked).
func (s *Scheduler) markAfterWait(t *Task, tid int32) {
	if !s.rq.cpuClock {
		t.os.tid.Store(tid)
		return
	}
	clock := osprio.ThreadCPU()
	s.mu.Lock()
	t.os.tid.Store(tid)
	t.markStretchLocked(tid, clock)
	s.mu.Unlock()
}

// markStretchLocked marks thread tid, t's own, at clock, a reading of it,
// where it has no mark yet (as lowerIfLongLocked would at its next look),
// and the stretch t begins as measured from clock (charge.go); under
// s.mu.
func (t *Task) markStretchLocked(tid int32, clock int64) {
	if t.os.markTid != tid {
		t.os.markTid, t.os.markCPU = tid, clock-int64(t.os.computed)
	}
	t.cpuUsed = clock - t.os.markCPU
}

// countDown sets t's Checkpoint countdown to n (1..127) and counts those
// Checkpoints in t.os.lowerSeen.
func (t *Task) countDown(n int64) {
	n = min(max(n, 1), math.MaxInt8)
	t.setLowerCheck(int8(n))
	if t.os.lowerSeen < math.MaxInt32-math.MaxInt8 {
		t.os.lowerSeen += int32(n)
	}
}

// setLowerCheck sets t's Checkpoint countdown to n, and preempt's bit
// preemptCountdown with it: set while n is not 0. On t's goroutine.
func (t *Task) setLowerCheck(n int8) {
	switch {
	case n == t.lowerCheck:
	case n == 0:
		t.preempt.And(^uint32(preemptCountdown))
	case t.lowerCheck == 0:
		t.preempt.Or(preemptCountdown)
	}
	t.lowerCheck = n
}

// unlockThread is lockThread's undo, once t has ended: the thread's setting
// goes back to what it was if t's lowering changed it.
func (s *Scheduler) unlockThread(t *Task) {
	t.os.tid.Store(0)
	if t.os.lowered.Load() && !t.os.foundLowered {
		if err := t.os.loweredFrom.Restore(); err != nil {
			// New's probe succeeded, so this is unexpected. The
			// goroutine stays locked to its lowered thread rather
			// than leave the runtime a lowered thread to run others on.
			s.log.Warn("cpusched: putting a task's thread priority back failed; the calling goroutine stays on its lowered thread", "err", err)
			return
		}
	}
	runtime.UnlockOSThread()
}

// unlockThreadToWait unlocks the goroutine of t, a task on its own
// goroutine that has given its slot up to wait, from its thread, unless
// the thread is lowered (then it waits locked, as a worker would); it
// reports whether it did. lockThread is its undo, once t runs again:
// possibly on another thread, which is not lowered either. Whether the
// thread is lowered cannot change between its check and the unlock: t
// holds no slot here and, where it parked, cleared its tid under s.mu
// (parkedLocked), so no lowerer finds its thread even where t was given
// its slot back meanwhile.
func (s *Scheduler) unlockThreadToWait(t *Task) bool {
	if !s.osOwn() || t.os.handoff || t.os.lowered.Load() {
		return false
	}
	t.os.tid.Store(0)
	runtime.UnlockOSThread()
	return true
}

// noteWake adds to t.os.uncomputed, for a task on its own goroutine
// that has just been given a slot (by another goroutine, or by its own at
// once), the time since then: the time its goroutine waited to run, which
// under load (a hundred connections' goroutines on 2 CPUs) can pass
// osLowerAfter on its own. Call it on t's goroutine: nothing else writes
// t.since while t holds its slot and has not run yet, but the idle watch
// (idle.go), which may give the slot of a watched task whose thread is
// slow to wake up, and back: a watched task reads it under s.mu, and
// only while it holds its slot.
func (s *Scheduler) noteWake(t *Task) {
	if !s.osOwn() || t.os.handoff {
		return
	}
	if t.idleWatched {
		s.mu.Lock()
		defer s.mu.Unlock()
		if t.state != stateRunning {
			return
		}
	}
	t.os.uncomputed.Add(max(0, s.clock.Now()-t.since))
}

// lowerLongLocked lowers the threads of the running tasks on their own
// goroutines that have computed for osLowerAfter (lowerIfLongLocked). It
// returns how long until the next such task may reach osLowerAfter (at
// most osLowerAfter) and whether the monitor should keep looking: a task
// is running unlowered, or one got a slot within lowerIdle.
func (s *Scheduler) lowerLongLocked(now int64) (next int64, look bool) {
	next = int64(osLowerAfter)
	if !s.cfg.hooks.monitorLowers() {
		return next, false
	}
	look = now-s.os.lastStart < int64(lowerIdle)
	for _, t := range s.running {
		if t.os.lowered.Load() || t.os.handoff {
			continue
		}
		look = true
		if d := s.lowerIfLongLocked(t, now); d > 0 {
			next = min(next, d)
		}
	}
	return next, look
}

// lowerIfLongLocked lowers the thread of t, a running task on its own
// goroutine whose thread is not lowered, once t has computed for
// osLowerAfter: its thread's CPU time since it was first seen on that
// thread, by the monitor or at a Checkpoint, on top of what it had
// computed on earlier threads as of the last reading there (t.os.computed).
// It returns how long t has left to compute before that, or 0 once there
// is nothing more to do for it. The monitor calls it for every such task, and the task itself
// at its first Checkpoint and then at checks it paces (lowerSelf), so
// that a task is lowered on time even when the monitor's timer is not: Go
// runs a P's timers when that P schedules, and the P that set the
// monitor's timer is often the one now running the task.
//
// Why not slot time: on a busy machine the kernel runs other threads for
// milliseconds while a normal-priority task holds its slot. Counted as
// computing, that lowered some of lab http's short tasks, and in the ab
// check put small tasks, lowered and so long for the lane, behind the long
// ones for tens of milliseconds
// (docs/measurements/ospriority-settings.md#the-ab-checks-max). What t
// computed before it was first seen is not counted: with Checkpoints, one
// Checkpoint's worth of work.
func (s *Scheduler) lowerIfLongLocked(t *Task, now int64) (left int64) {
	tid := int(t.os.tid.Load())
	if t.hold.Load() != holdNone || tid == 0 {
		// In a Blocking call that keeps the slot (not computing), or its
		// goroutine has not reached fn yet or waits unlocked.
		return int64(osLowerAfter)
	}
	if int(t.os.markTid) != tid {
		t.os.markTid, t.os.markCPU = int32(tid), osprio.ThreadCPUOf(tid)-int64(t.os.computed)
		return int64(osLowerAfter) - int64(t.os.computed)
	}
	// Below osLowerAfter of computingBound, no need to read the clock.
	used := t.computingBound(now)
	if d := int64(osLowerAfter) - used; d > 0 {
		return d
	}
	cpu := osprio.ThreadCPUOf(tid)
	used = cpu - t.os.markCPU
	t.os.computed = int32(min(used, math.MaxInt32))
	if d := int64(osLowerAfter) - used; d > 0 {
		return d
	}
	if s.os.keepNormal.Load() {
		// Long, but its thread stays as it is while other processes keep
		// the CPUs busy (contention.go): raised, as if lowered and put back.
		before, err := osprio.CurrentThread(tid)
		if err != nil {
			return int64(osLowerAfter)
		}
		t.os.cpuStart = cpu - used
		t.os.loweredFrom = before
		t.os.foundLowered = before.Lowered()
		t.os.raised = !t.os.foundLowered
		t.os.lowered.Store(true)
		t.preempt.Or(preemptTurns) // at normal priority while contended (turns.go)
		return 0
	}
	before, lowered, err := osprio.LowerThread(tid)
	if err != nil {
		// The task's own end must not change the thread; look again later.
		s.log.Warn("cpusched: lowering a task's thread failed; it runs at normal priority", "err", err)
		return int64(osLowerAfter)
	}
	// Lowered now, or already at the setting: a Run nested in a lowered
	// task, a thread the program lowered itself, or the outer task of a
	// nested Run that lowered the thread first. Either way the task now
	// counts as lowered (the lane measures it by its thread's CPU time
	// from here on, taskCPULocked, on top of what it computed so far); its end
	// puts back the setting the thread had only if it lowered the thread
	// itself. (Putting back what it found would lower the thread for good
	// in the last case, once the inner task's end had raised it.)
	t.os.cpuStart = cpu - used
	t.os.loweredFrom = before
	t.os.foundLowered = !lowered
	t.os.lowered.Store(true)
	return 0
}

// computingBound is t's slot time up to now less the time it did not
// compute (t.os.uncomputed): what t, holding its slot, has computed, or more
// (the kernel may have run other threads meanwhile). Under s.mu, or on
// t's goroutine outside a Blocking call that keeps its slot (lowerSelf).
func (t *Task) computingBound(now int64) int64 {
	return t.runTime + now - t.since - t.os.uncomputed.Load()
}

// lowerCheckEvery is how many Checkpoints a task on its own goroutine
// makes before its next check whether to lower its thread (lowerSelf)
// when there is nothing to pace it by: after the first check, and after a
// wait. Later checks are paced by the task's rate of Checkpoints. The
// first check comes at the task's first Checkpoint (call sets the
// countdown to lowerCheckMark), so that its mark is taken close to its
// start; after a wait, at the lowerCheckEvery-th, so that a task that
// waits between short stretches (lab http's 64 KiB writes) does not take
// the lock and read the clock after each.
const lowerCheckEvery = 8

// lowerCheckMark is the countdown of a check that is to mark the thread
// (Checkpoint's slow path calls lowerSelf with mark set at once).
const lowerCheckMark = -1

// lowerSelf is the Checkpoint countdown's check: t, running on its own
// goroutine on an unlowered thread, lowers it if it has computed for
// osLowerAfter, and marks its thread if nobody has (the monitor may have
// first); mark is set for the first check, which is for that. Call it on
// t's goroutine.
//
// Only a check that may lower or must mark takes the lock: t's slot time
// less the time it did not compute bounds what it computed from above,
// and below osLowerAfter there is nothing to do but set the next check,
// paced by the Checkpoints so far. Its goroutine may read runTime and
// since without the lock outside a Blocking call that keeps its slot:
// only this goroutine writes them then (the hold timer writes them only
// while a hold is armed). A locked check every eighth Checkpoint made a
// task with very frequent Checkpoints measurably slower, more so in
// parallel (docs/measurements/ospriority-settings.md#the-ab-checks-max).
func (s *Scheduler) lowerSelf(t *Task, mark bool) {
	now := s.clock.Now()
	if mark {
		t.os.lowerSeen++
	} else if t.hold.Load() == holdNone && !t.idleWatched { // the idle watch writes runTime and since (idle.go)
		if used := t.computingBound(now); used < int64(osLowerAfter) {
			// The next check when, at the rate of its Checkpoints so
			// far, t may have computed osLowerAfter: slot time runs
			// ahead of computing, so the check comes early, never late.
			n := int64(lowerCheckEvery)
			if used > 0 && t.os.lowerSeen > 0 {
				n = (int64(osLowerAfter) - used) * int64(t.os.lowerSeen) / used
			}
			t.countDown(n)
			return
		}
	}
	s.mu.Lock()
	if t.state == stateRunning && !t.os.lowered.Load() {
		s.lowerIfLongLocked(t, now) // marks the thread if nobody has
	}
	s.mu.Unlock()
	switch {
	case t.os.lowered.Load():
		t.setLowerCheck(0)
	case mark:
		t.countDown(lowerCheckEvery)
	default:
		// Slot time says it may have computed enough, its CPU clock says
		// not yet: its thread is not running much. Check less often.
		t.countDown(4 * lowerCheckEvery)
	}
}
