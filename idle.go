package cpusched

// The idle watch: in IsolationOSPriority a task with WithIdleRelease
// whose thread sleeps inside fn (it waits on I/O, a lock or a channel
// without Blocking) gives its slot up, and takes one back once its thread
// computes again.
//
// The problem. A handler run as a task by a wrapper that cannot edit it
// never calls Blocking; when it waits mid-way, its thread sleeps while
// it holds its slot, and the tasks queued behind it wait for nothing.
// The task's goroutine cannot be asked: it is asleep, and will not come
// to a Checkpoint until it computes again.
//
// What can tell. The kernel's CPU clock of the task's thread, which the
// mode already reads from other threads (lowerIfLongLocked, the guard, a
// Stats snapshot: osprio.ThreadCPUOf), is the task's while its goroutine
// is locked to that thread: a hand-off thread, or a task's own thread
// while fn runs (lowering.go). Two readings d apart that are equal say
// that the thread did not run at all in between: the clock only grows.
// But a thread the kernel does not run is not asleep: a lowered thread,
// or one at nice 10 where threads cannot be raised, waits while busier
// threads take the CPUs, runnable all along. Its state (R in its stat
// file, which the guard reads too) tells it apart; such a thread keeps
// its slot (idleRunnable).
//
// How, in the slice monitor's pass (osMode.monitorLocked, idleLocked),
// under s.mu, with no goroutine or timer of its own:
//  1. Look: for each running watched task whose fn has begun and whose
//     thread it can read (idleLookLocked), the monitor reads its thread's clock where its
//     look is d old, and begins a new look where the clock moved or the
//     thread changed. A look is taken only while tasks wait, at most one
//     reading per d per task; the monitor wakes for the next look due.
//  2. Release: a look whose clock has not moved in d, while tasks wait,
//     gives the slot up (releaseIdleLocked), as the hold timer gives up a
//     Blocking call's kept slot: the task is charged up to now by its
//     thread's clock (charge.go: its idle stretch costs a quarter of its
//     slot time, as a kept slot's does), moves to stateBlocking (counted
//     in Stats.Blocked), and the slot goes to the next task. Its preempt
//     bit preemptIdle makes its next Checkpoint come to the scheduler.
//  3. Retake: the monitor reads a released task's clock at each pass,
//     at least every idleRetakeTick; once it moved, the task takes a slot
//     back at once (retakeLocked), even past the slots, and every running
//     task is asked (preemptLend) so that the first to come to a
//     Checkpoint gives its slot up and nobody takes it (yield). Its
//     Checkpoint, Blocking call or end, where it comes first, takes the
//     slot back the same way (settleIdleLocked), and then goes on as
//     usual. The CPU its thread used since the release is charged as run
//     time: the retake backdates the stretch it begins by that much.
//
// Rejected: a timer per task, as the hold's: a slot is idle for the
// timer's length whether or not the thread sleeps, and only the clock
// says it does. Making the task wait in the queue for its slot back: it
// computes whether it has a slot or not, and it cannot be made to wait
// without coming to the scheduler; counted as running, it is at least
// charged and seen (Stats.Running above Workers until a task ends or
// yields).
//
// The task's goroutine must not read without s.mu what a release or a
// retake writes without its cooperation (since, runTime, waited): for a
// watched task (Task.idleWatched, set before it is published) lowerSelf,
// finish and Waited take the lock where the others read unlocked.

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
)

// WithIdleRelease's range. Below the minimum the monitor would wake
// more often than a few times a slice for each watched task, and a
// release and retake cost two hand-offs between threads, more than a
// Blocking call's kept slot (blockHold) is worth keeping; above the
// maximum a slot idle that long is no longer what the option is for.
const (
	minIdleRelease = time.Millisecond
	maxIdleRelease = 10 * time.Second
)

// idleRetakeTick bounds how long a released task's thread may compute
// before the monitor sees it and gives it a slot back: the lender's
// tick, at which the monitor wakes anyway while tasks run (lendLocked),
// so that a watch with a longer d adds no wake-ups then.
const idleRetakeTick = lendTick

// idleWatch is the monitor's watch of one task with WithIdleRelease
// (osRare.idle); under s.mu.
type idleWatch struct {
	after    int64 // WithIdleRelease's d
	clock    int64 // tid's CPU clock, read at since
	since    int64 // when the look began: tid has not run since, as far as known
	tid      int32 // the thread of the look; 0: no look
	released bool  // the watch gave the slot up: the task is in stateBlocking, in osMode.idle
	// begun is set by the task's goroutine as fn begins (osMode.begin):
	// until then its thread, which may have its tid already (a hand-off
	// thread's, set in handoffBegin), is the scheduler's, not fn's, and
	// its clock standing still says nothing of fn.
	begun atomic.Bool
}

// watchTask has the monitor watch t, a new task, with WithIdleRelease's
// d (watchIdle).
func (m *osMode) watchTask(t *Task, d time.Duration) {
	t.idleWatched = true
	t.os.rare = &osRare{idle: idleWatch{after: int64(d)}}
}

// idleLocked is the idle watch's part of a monitor pass at now: released
// tasks whose threads compute take slots back, and running ones whose
// threads have slept for their d give theirs up while tasks wait. It
// returns how long until it needs the next pass (math.MaxInt64 for
// never), whether the monitor should keep running for it, and the tasks
// a slot given up lets run, which the caller resumes after unlocking.
func (m *osMode) idleLocked(now int64) (next int64, look bool, started []startedTask) {
	next = math.MaxInt64
	s := m.s
	for i := 0; i < len(m.idle); {
		t := m.idle[i]
		w := &t.os.rare.idle
		look = true
		next = min(next, w.after, int64(idleRetakeTick))
		if c := m.idleClock(t); t.os.tid.Load() != w.tid || c < 0 || c == w.clock {
			i++ // asleep, or its thread cannot be read: it comes back itself
			continue
		}
		s.retakeLocked(t, now, s.taskCPUOfLocked(t)) // drops m.idle[i]
	}
	if s.rq.nwaiting == 0 {
		return next, look, nil
	}
	var asleep []*Task
	for _, t := range s.running {
		if !t.idleWatched {
			continue
		}
		look = true
		if d := m.idleLookLocked(t, now); d > 0 {
			next = min(next, d)
		} else {
			asleep = append(asleep, t)
		}
	}
	for _, t := range asleep {
		if s.rq.nwaiting == 0 {
			break // the others keep theirs: nobody would take them
		}
		m.releaseIdleLocked(t, now)
		next = min(next, t.os.rare.idle.after, int64(idleRetakeTick))
		if n, first := s.pickLocked(now); n != nil {
			started = append(started, startedTask{n, first})
		}
	}
	return next, look, started
}

// idleLookLocked looks at running watched task t at now: it returns 0
// where t's thread has not run for its d, and otherwise how long until
// its look is due.
func (m *osMode) idleLookLocked(t *Task, now int64) int64 {
	w := &t.os.rare.idle
	tid := t.os.tid.Load()
	if tid == 0 || !w.begun.Load() || t.hold.Load() != holdNone || t.os.left() {
		// Not on a thread it is locked to, fn not begun yet, or in a
		// Blocking call that keeps the slot (the hold timer's): nothing
		// to look at.
		w.tid = 0
		return w.after
	}
	if w.tid != tid {
		w.tid, w.clock, w.since = tid, m.idleClock(t), now
		return w.after
	}
	if d := w.since + w.after - now; d > 0 {
		return d
	}
	if c := m.idleClock(t); c != w.clock || c < 0 || m.idleRunnable(tid) {
		w.clock, w.since = c, now
		return w.after
	}
	return 0
}

// idleRunnable reports whether thread tid, whose clock has not moved for
// a look, is runnable (its state R): the kernel has not run it, a thread
// at nice 10 or SCHED_IDLE beside busier ones, and it will compute as
// soon as it gets a CPU. Released, its slot would start another task that
// cannot run either, and the retake would take one past Workers. False
// where it cannot be read, and where the tests play the threads' clocks
// (testHooks.cpuReading) but not their states (guardSource): their
// threads' real states do not follow the clocks they play.
func (m *osMode) idleRunnable(tid int32) bool {
	if m.guard == nil || m.guard.src.threadWait == nil {
		return false
	}
	if h := m.s.cfg.hooks; h != nil && h.cpuReading != nil && h.guardSource == nil {
		return false
	}
	_, runnable, ok := m.guard.src.threadWait(int(tid))
	return ok && runnable
}

// idleClock is the CPU clock of watched task t's thread, read from this
// thread, or the tests' reading in its place (testHooks.cpuReading); -1
// where it cannot be read.
func (m *osMode) idleClock(t *Task) int64 {
	if cpu, ok := m.s.cfg.hooks.taskCPU(t); ok {
		return cpu
	}
	tid := t.os.tid.Load()
	if tid == 0 {
		return -1
	}
	if c := osprio.ThreadCPUOf(int(tid)); c > 0 {
		return c
	}
	return -1
}

// releaseIdleLocked gives up the slot of t, a running watched task whose
// thread has not run since its look began, at now, as the hold timer does
// a kept slot (releaseHold): t is charged up to now by its thread's clock
// and waits outside its slot, as in Blocking, and its next Checkpoint
// comes to the scheduler (preemptIdle) to take a slot back. The idle
// stretch counts as not computing, for lowering and the table of task
// lengths, as a kept Blocking call's does.
func (m *osMode) releaseIdleLocked(t *Task, now int64) {
	s := m.s
	w := &t.os.rare.idle
	t.os.uncomputed.Add(max(min(now-w.since, now-t.since), 0))
	s.giveUpSlotLocked(t, now, s.taskCPUOfLocked(t))
	w.released = true
	t.preempt.Or(preemptIdle)
	m.idle = append(m.idle, t)
	m.idleReleases++
}

// settleLocked is settleIdleLocked's step for watched task t at now: if
// the idle watch gave its slot up, t takes one back (retakeLocked), its
// CPU time from read.
func (m *osMode) settleLocked(t *Task, now int64, read *cpuRead) {
	if t.os.rare.idle.released {
		m.s.retakeLocked(t, now, m.s.taskCPULocked(t, read))
	}
}

// unwatchReleased is retakenLocked's step: t, released, leaves the
// watch's list, and its next look begins afresh.
func (m *osMode) unwatchReleased(t *Task) {
	w := &t.os.rare.idle
	w.released, w.tid = false, 0
	for i, r := range m.idle {
		if r == t {
			last := len(m.idle) - 1
			m.idle[i] = m.idle[last]
			m.idle[last] = nil
			m.idle = m.idle[:last]
			return
		}
	}
}
