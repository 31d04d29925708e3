package cpusched

// The transitions: the points where the core calls IsolationOSPriority.
// The core (submit.go, slots.go, run.go, task.go, charge.go, monitor.go,
// stats.go, close.go, scheduler.go) calls the mode only through these
// methods of
// Scheduler.os, and tests no state of the mode's itself. In the other
// modes Scheduler.os is nil: each transition then does nothing, or
// answers what leaves the core's path as it is, and inlines to that nil
// test where Run and Checkpoint pass, so those modes pay a compare
// (BenchmarkRun, BenchmarkCheckpoint). Where a transition's answer steers
// the core (a Blocking call that keeps its slot, a hand-off thread that
// starts a task, a next task run on the same goroutine), the answer is
// the mode's. As the runtime's proc.go keeps its Ms (threads) apart from
// its Ps (the right to run Go code) and moves a P between Ms through
// acquirep, releasep and handoffp, the core owns the slots and the mode
// the threads the tasks holding them run on.
//
// In the order of a task's life (the lifecycle at the top of scheduler.go),
// with the core's function that calls each, and where the mode's work is:
//
//	watchIdle        initTask       a task with WithIdleRelease is
//	                                watched (idle.go)
//	admit            Run, Go        a new task is handed off or not
//	                                (dispatch.go)
//	spawnHandoff     spawn          a handed-off task's first start, on a
//	                                hand-off thread (handoff.go)
//	acquiredLocked   startLocked    a task has a slot (osStartLocked)
//	osRun.of, begin, call           fn begins: on its own goroutine,
//	  osRun, runsNext,              locked to its thread (lowering.go), or
//	  end                           on a hand-off thread, fitted to the
//	                                guard's state (handoff.go); fn's end
//	countdown        Checkpoint     a countdown to a lowering check ran
//	                                out (lowering.go)
//	mayLeave         yield,         a task whose lowered thread cannot be
//	                 Blocking       raised leaves it (retire.go)
//	clock,           readCPU,       a task's CPU time by its thread's
//	  cpuOfClock-    cpuOfClock-    clock, for the charge and the lane
//	  Locked,        Locked,        (ospriority.go); where there is none,
//	  cpuOfLocked,   taskCPUOf-     the lane's measure of its slot time
//	  slotMeasure,   Locked,        (ownLaneCPU), and whether the task
//	  waitsUnlocked  setCPU,        waits unlocked, its stretches measured
//	                 laneCPU,       from when it locks a thread again
//	                 cpuSoFar-      (lowering.go: markAfterWait)
//	                 Locked
//	checkpoint-      yield          an own thread marked at a charge that
//	  ChargedLocked                 found no mark (lowering.go)
//	park, unpark     waitForSlot    the wait for the slot back at a
//	                                Checkpoint (pin.go)
//	keepsSlot,       block,         a Blocking call keeps its slot or
//	  holdLocked,    Blocking       gives it up and waits unlocked or not
//	  endHold,                      (hold.go, lowering.go)
//	  unlockToWait,
//	  relock,
//	  noteBlock
//	noteWake         unblock        back on a slot after Blocking
//	                                (lowering.go)
//	settleIdle-      yield, block,  a task whose slot the idle watch
//	  Locked         finish         gave up takes one back (idle.go)
//	retakenLocked    retakeLocked   it leaves the watch's list
//	waitingLocked    preempt-       a task waits: kept slots arm their
//	                 ForLocked      timers (hold.go)
//	parkedLocked     parkLocked     a task parks: a stretch that resumes
//	                                unlocked is not measured (charge.go)
//	releasedLocked   releaseSlot-   a task's slot is taken (pin.go)
//	                 Locked
//	slotLeftEmpty,   resume         the slot goes on: nobody takes it, or
//	  waking                        the next task's thread is placed or
//	                                pinned (pin.go)
//	endedLocked      finish         a task ends: the table of task
//	                                lengths learns it (osEndLocked)
//	lentLocked       slotsLocked    slots lent to the rest of the program
//	                                (lend.go)
//	monitorLocked    monitor        long tasks' threads lowered, slots
//	                                lent, the guard, the idle watch
//	                                (lowering.go, lend.go, contention.go,
//	                                idle.go)
//	statsLocked      Stats          the mode's counters
//	close            release        the hand-off threads stopped,
//	                                GOMAXPROCS put back (handoff.go)
//	cpuClock         New            the lane reads threads' CPU clocks
//
// The core tells the mode one thing about itself: what the goroutine that
// hands a slot on does next (wakeHint, slots.go).

import (
	"math"
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
)

// admit is Run's and Go's step for t, a new task: whether t is handed off
// (dispatch), in which case the scheduler starts its goroutine (spawn).
func (m *osMode) admit(t *Task) (handoff bool) {
	if m == nil {
		return false
	}
	t.os.handoff = m.dispatch(t)
	return t.os.handoff
}

// spawnHandoff is spawn's step for t, a task that never ran: if t is
// handed off, a hand-off thread starts it (ok), and awake reports whether
// that thread was awake (startHandoff). hint is the caller's (resume).
func (m *osMode) spawnHandoff(t *Task, hint wakeHint) (awake, ok bool) {
	if m == nil || !t.os.handoff {
		return false, false
	}
	return m.s.startHandoff(t, hint != wakeAny), true
}

// acquiredLocked is startLocked's step, t having just been given a slot
// at now (osStartLocked).
func (m *osMode) acquiredLocked(t *Task, now int64) {
	if m != nil {
		m.s.osStartLocked(t, now)
	}
}

// releasedLocked is releaseSlotLocked's step, t having given its slot up,
// n slots now taken: the slice pins count it (cpuTable.left).
func (m *osMode) releasedLocked(t *Task, n int) {
	if m != nil && m.pins != nil {
		m.pins.left(t, n)
	}
}

// slotLeftEmpty is resume's step where the caller leaves its slot empty:
// every slice pin is put back (cpuTable.drop).
func (m *osMode) slotLeftEmpty() {
	if m != nil && m.pins != nil {
		m.pins.drop()
	}
}

// waking is resume's step before it wakes next, a task given a slot that
// waits for it: next's thread is placed for its slice, or pinned to the
// caller's CPU, as hint says (placeWoken).
func (m *osMode) waking(next *Task, hint wakeHint) {
	if m != nil {
		m.s.placeWoken(next, hint)
	}
}

// lentLocked is how many slots are lent to the rest of the program now
// (lend.go), for slotsLocked and turns (turns.go).
func (m *osMode) lentLocked() int {
	if m == nil {
		return 0
	}
	return m.lent
}

// waitingLocked is preemptForLocked's step, a task now waiting for a slot
// at now: the Blocking calls that keep theirs set their timers
// (armHoldsLocked).
func (m *osMode) waitingLocked(now int64) {
	if m != nil {
		m.armHoldsLocked(now)
	}
}

// watchIdle is initTask's step for t, a new task, with WithIdleRelease's
// d (0 where it was not given): the monitor watches whether t's thread
// sleeps (watchTask, idle.go).
func (m *osMode) watchIdle(t *Task, d time.Duration) {
	if m != nil && d > 0 {
		m.watchTask(t, d)
	}
}

// settleIdleLocked is the step of t's goroutine under s.mu as it comes to
// the scheduler at now (yield, block, finish), read its reading of its
// thread's clock: a task whose slot the idle watch gave up takes one
// back, and goes on as if it had held it (settleLocked).
func (m *osMode) settleIdleLocked(t *Task, now int64, read *cpuRead) {
	if t.idleWatched {
		m.settleLocked(t, now, read)
	}
}

// retakenLocked is retakeLocked's step, t taking a slot back after the
// idle watch gave its up: t leaves the watch's list (unwatchReleased).
func (m *osMode) retakenLocked(t *Task) { m.unwatchReleased(t) }

// osRun is the mode's record of one call of a task's fn (call), kept by
// the task's goroutine: what happens after the task has ended must not
// read the task, which a Run caller may have recycled by then. The zero
// value, the other modes', changes nothing.
type osRun struct {
	handoff bool // the task was handed off
	locked  bool // begin locked the task's own goroutine to its thread: end unlocks it
	left    bool // the goroutine left its hand-off thread (retire.go): it runs no next task
	long    bool // with slice pins, fn ran past callerSpin: its thread leaves its CPU to the next (pin.go)
	// start is, with slice pins, when fn began on a hand-off thread, by
	// the monotonic clock (handoffBegin); 0 without.
	start int64
}

// of is call's first step: r, zero, becomes the record of this call of
// t's fn. (Set in place: an osRun literal copied in stalled the store
// that followed, measurably in Run.)
func (r *osRun) of(t *Task) { r.handoff = t.os.handoff }

// begin is call's step before fn runs (beginFn).
func (m *osMode) begin(t *Task, r *osRun) {
	if m != nil {
		m.s.beginFn(t, r)
		if t.idleWatched {
			m.s.cfg.hooks.beginningFn(t)
			t.os.rare.idle.begun.Store(true) // the watch may look now (idleLookLocked)
		}
	}
}

// returned is call's step once fn has returned or panicked, before the
// task is ended (finish): whether its goroutine left its hand-off thread,
// and with slice pins whether fn ran long.
func (r *osRun) returned(t *Task) {
	if r.handoff {
		r.handoffReturned(t)
	}
}

// handoffReturned is returned's step for a handed-off task.
func (r *osRun) handoffReturned(t *Task) {
	r.left = t.os.left()
	r.long = r.start > 0 && systemClock{}.Now()-r.start >= int64(callerSpin)
}

// continues reports whether n, a task that never ran, given the slot of
// the task that has just ended, may run next on the same goroutine
// (runGo): it is dispatched as that task was, on its own goroutine or
// handed off, and the goroutine did not leave its thread.
func (r *osRun) continues(n *Task) bool { return n.os.handoff == r.handoff && !r.left }

// hint is how the goroutine hands on the slot of the task that has just
// ended (resume): a long task's thread leaves its CPU to the next.
func (r *osRun) hint() wakeHint {
	if r.long {
		return wakeLeave
	}
	return wakeAny
}

// runsNext is call's step where its goroutine goes on to run n
// (continues): with slice pins, a hand-off thread places itself for n's
// slice (cpuTable.place).
func (m *osMode) runsNext(n *Task, r *osRun) {
	if m != nil && m.pins != nil {
		m.placeNext(n, r)
	}
}

// placeNext is runsNext's step with slice pins.
func (m *osMode) placeNext(n *Task, r *osRun) {
	if n.os.handoff {
		m.pins.place(n, int32(osprio.ThreadID()), placeIf(r.long, placeSelf))
	}
}

// end is call's last step, after the task has ended and its slot has gone
// on: the task's own goroutine is unlocked from its thread, whose setting
// is put back (unlockThread).
func (m *osMode) end(t *Task, r *osRun) {
	if r.locked {
		m.s.unlockThread(t)
	}
}

// countdown is Checkpoint's step where no preempt bit is set but the
// task's countdown (Task.lowerCheck, which only this mode sets) is, at
// its end (checkpointSlow counts the rest down): the end of a task's turn
// (turns.go), or the check whether to lower the task's thread
// (lowerSelf).
func (m *osMode) countdown(t *Task) {
	switch {
	case t.os.handoff || !m.own || t.os.lowered.Load():
		// A hand-off task counts down to its turns (turns.go); a task on
		// its own goroutine where threads cannot be raised, dispatched
		// while contended (lockContended), or whose thread counts as
		// lowered, raised while contended (preemptTurns), takes turns
		// while contended, nothing after.
		m.s.turn(t)
	case t.lowerCheck == lowerCheckMark:
		m.s.lowerSelf(t, true)
	default:
		m.s.lowerSelf(t, false) // sets the next countdown, or 0, on every path
	}
}

// mayLeave is the step of t's goroutine at a Checkpoint that comes to the
// scheduler (yield) and before a Blocking call waits: a handed-off task
// whose lowered thread cannot be raised leaves it while contended
// (mustLeave, leaveThread), and a task on its own goroutine whose thread
// runs at normal priority while contended begins its turns (preemptTurns).
func (m *osMode) mayLeave(t *Task) {
	if m == nil {
		return
	}
	m.s.leaveIfMust(t)
	if t.preempt.Load()&preemptTurns != 0 {
		t.preempt.And(^uint32(preemptTurns))
		if m.keepNormal.Load() {
			t.beginTurns(m.s.clock.Now())
		}
	}
}

// endedLocked is finish's step under s.mu, t ending on its slot, cpu
// its CPU time since fn began, or -1 (osEndLocked).
func (m *osMode) endedLocked(t *Task, cpu int64) {
	if m != nil {
		m.s.osEndLocked(t, cpu)
	}
}

// osPark is the mode's state of a task's goroutine across its wait for
// its slot back at a Checkpoint (park, unpark).
type osPark struct {
	unlocked bool  // an own goroutine waits unlocked from its thread: locked again after
	locked   bool  // it waits locked to a lowered thread: it yields on waking, and may leave
	placed   bool  // with slice pins, a hand-off thread that its waker places (cpuTable.place)
	masked   bool  // mask is the thread's CPU mask, put back if its waker pinned it
	tid      int32 // the waiting thread, where placed
	mask     osprio.Affinity
}

// park is waitForSlot's step before t's goroutine waits on t.wake
// (parkThread).
func (m *osMode) park(t *Task, p *osPark) {
	if m != nil {
		m.s.cfg.hooks.parking(t)
		m.s.parkThread(t, p)
	}
}

// unpark is waitForSlot's step once t's goroutine has its slot back
// (unparkThread).
func (m *osMode) unpark(t *Task, p *osPark) {
	if m != nil {
		m.s.unparkThread(t, p)
	}
}

// osWait says whether a task's own goroutine waits unlocked from its
// thread (unlockToWait), to be locked again after (relock).
type osWait struct{ unlocked bool }

// unlockToWait is Blocking's step where the call gives the slot up,
// before fn runs: t's goroutine waits, in fn and for its slot back,
// unlocked from its thread where that is not lowered (unlockThreadToWait).
func (m *osMode) unlockToWait(t *Task) osWait {
	if m == nil {
		return osWait{}
	}
	return osWait{m.s.unlockThreadToWait(t)}
}

// relock is unlockToWait's undo, once t holds a slot again
// (lockThread).
func (m *osMode) relock(t *Task, w osWait) {
	if w.unlocked {
		m.s.lockThread(t, false)
	}
}

// noteWake is unblock's step once t's goroutine, parked after a Blocking
// call, has its slot back (noteWake).
func (m *osMode) noteWake(t *Task) {
	if m != nil {
		m.s.noteWake(t)
	}
}

// clock is readCPU's reading of t's thread's CPU clock, on t's goroutine
// (threadClock); -1 in the other modes.
func (m *osMode) clock(t *Task) int64 {
	if m == nil {
		return -1
	}
	return m.threadClock(t)
}

// cpuOfClockLocked is cpuOfClockLocked's step: t's CPU time since fn
// began from clock, a reading of its thread's clock (cpuOfClock); -1, for
// its slot time, in the other modes, which read no clock.
func (m *osMode) cpuOfClockLocked(t *Task, clock int64) int64 {
	if m == nil {
		return -1
	}
	return m.cpuOfClock(t, clock)
}

// cpuOfLocked is taskCPUOfLocked's step: running task t's CPU time since
// fn began, its thread's clock read from this thread (threadCPUOfLocked);
// -1 in the other modes.
func (m *osMode) cpuOfLocked(t *Task) int64 {
	if m == nil {
		return -1
	}
	return m.threadCPUOfLocked(t)
}

// waitsUnlocked reports whether t runs on its own goroutine and its thread
// is not lowered, so that it waits unlocked from its thread
// (unlockThreadToWait), and the charge of its stretches is measured only
// from the mark taken as it locks a thread again (markAfterWait): for the
// lane's measure (laneCPU) and a Stats snapshot (cpuSoFarLocked).
func (m *osMode) waitsUnlocked(t *Task) bool {
	return m != nil && m.own && !t.os.handoff && !t.os.lowered.Load()
}

// slotMeasure is the lane's measure of t from slot, its slot time, where
// its thread's clock gives none (setCPU, laneCPU): for a task on its own
// goroutine, ownLaneCPU's; slot for the others, and in the other modes.
func (m *osMode) slotMeasure(t *Task, slot int64) int64 {
	if m != nil && m.own && !t.os.handoff {
		return t.ownLaneCPU(slot)
	}
	return slot
}

// parkedLocked is parkLocked's step, t having given its slot up to wait
// for it in the run queue: where t's goroutine waits unlocked
// (waitsUnlocked), the stretch it begins is marked as not measured
// (unmarkCPU), as it may come back on another thread, and t's thread is
// no longer its own (tid 0) from here, under s.mu, rather than from
// unlockThreadToWait: another goroutine may give t its slot back before
// t's goroutine gets there, and a monitor pass that then found t running
// on its thread could lower the thread while the goroutine, having seen
// it unlowered, unlocks from it, leaving a lowered thread to the
// runtime's pool. With tid 0 no pass lowers it until lockThread.
func (m *osMode) parkedLocked(t *Task) {
	if m.waitsUnlocked(t) {
		t.unmarkCPU()
		t.os.tid.Store(0)
	}
}

// checkpointChargedLocked is yield's step once it has charged t, at a
// Checkpoint, with cpu (taskCPULocked's) from clock, the reading: a task
// on its own goroutine on a thread that has no mark yet (cpu -1 from a
// clock read) has its thread marked, and the stretch that begins is
// measured from clock (markStretchLocked).
func (m *osMode) checkpointChargedLocked(t *Task, cpu, clock int64) {
	if m != nil && cpu < 0 && clock >= 0 && !t.os.handoff && !t.os.lowered.Load() {
		t.markStretchLocked(t.os.tid.Load(), clock)
	}
}

// monitorLocked is the mode's part of a monitor pass at now: it lowers
// the threads of long tasks on their own goroutines (lowerLongLocked),
// lends slots or takes them back (lendLocked), runs the guard
// (guardLocked) and the idle watch (idleLocked). It returns how long until it needs the next pass
// (math.MaxInt64 for never), whether the monitor should keep running for
// it, and the tasks a slot given back lets run, which the caller resumes
// after unlocking.
func (m *osMode) monitorLocked(now int64) (next int64, look bool, started []startedTask) {
	next = math.MaxInt64
	if m == nil {
		return next, false, nil
	}
	s := m.s
	if m.own {
		next, look = s.lowerLongLocked(now)
	}
	d, started := m.lendLocked(now)
	if d > 0 {
		next, look = min(next, d), true
	}
	if d := s.guardLocked(now); d > 0 {
		next, look = min(next, d), true
	}
	d, idle, more := m.idleLocked(now)
	return min(next, d), look || idle, append(started, more...)
}

// statsLocked adds the mode's counters to st, at now.
func (m *osMode) statsLocked(st *Stats, now int64) {
	if m == nil {
		return
	}
	st.Lends = m.lends
	st.LentTime = time.Duration(m.lentTimeLocked(now))
	st.Lent = m.lent
	st.ThreadsRaisable = m.raisable
	st.RetiredThreads = m.retired.Load()
	st.LooseThreads = m.loose.Load()
	st.IdleReleases = m.idleReleases
	if g := m.guard; g != nil {
		st.Contended, st.Contentions = g.contended, g.contentions
		st.ContendedTime = time.Duration(g.contendedTime(now))
	}
}

// close is release's step, once every task has ended and the monitor
// has stopped: a hold on the short kernel slices is let go (kslice.go),
// the hand-off threads exit, and GOMAXPROCS is put back (stopThreads).
func (m *osMode) close() {
	if m != nil {
		m.dropSlices()
		m.s.stopThreads()
	}
}

// cpuClock reports whether the lane measures tasks by their threads' CPU
// clocks (runQueue.cpuClock): in this mode, where the clocks can be read.
func (m *osMode) cpuClock() bool { return m != nil && osprio.Supported() }
