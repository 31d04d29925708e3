package cpusched

// Where a lowered thread cannot be raised back (no CAP_SYS_NICE and
// RLIMIT_NICE 0, as in Docker's and Kubernetes' containers): hand-off
// threads are lowered to a nice value, never to SCHED_IDLE, and once the
// scheduler is contended a task on one leaves it and the thread is ended.
//
// Why. Contended (contention.go), the scheduler raises every lowered task
// thread back to normal priority, because a SCHED_IDLE thread beside
// another busy process gets a few milliseconds a second and holds its P
// meanwhile: every stop-the-world waits for it. Without the privilege to
// raise, a task on a SCHED_IDLE thread kept it until it ended: the
// bench's neighbor step read 41x the floor, collections stopping the world
// for 336 ms. Leaving the thread (below) does not save a SCHED_IDLE one:
// to reach its next Checkpoint, and then to end, the starved thread needs
// the CPU it does not get, with its P held all the while. Measured, the
// neighbor step with the leave but SCHED_IDLE threads: 237-311x the
// floor, stop-the-world pauses of 0.4-1.3 s; with nice 10 threads and the
// leave, 1.8-2.9x, pauses of 10-29 ms, on a machine busy with other work
// (docs/design.md#without-the-privilege-to-raise). A thread at nice 10
// (weight 110 against 1024) gets about a tenth of a CPU beside a busy
// process, so it reaches its Checkpoint, leaves, or, never yielding,
// finishes its task within a few of its kernel slices. The price is the
// isolation on a quiet machine: the kernel does not preempt a nice-10
// thread the instant a server thread wakes, as it does a SCHED_IDLE one,
// unless the thread's slice is the longer (unraisableSlice), and gives it
// longer turns, which its task cuts short at its Checkpoints (turns.go).
//
// How. A goroutine cannot be moved off the thread it is locked to without
// unlocking it, and an unlocked lowered thread would go back to the
// runtime's pool and run any goroutine at its low priority. So the task's
// goroutine starts a few goroutines (the runtime queues them on its own
// P, which the thread runs next), unlocks, and waits: the first of them
// that the lowered thread runs locks it, sees by its id that it is the
// lowered thread, releases the task and returns, and a goroutine that
// exits locked takes its thread with it (runtime.LockOSThread's doc).
// The others, run elsewhere, unlock and return. The task's goroutine goes
// on on another thread at normal priority until the task ends, locked to
// it so that its CPU is still read by a thread's clock (lockLanded,
// charge.go); its hand-off thread's loop then unlocks it and ends too
// (handoffLoop), leaving that thread to the runtime.
//
// Not certain: in the moment between the unlock and the first of them,
// the thread may run a goroutine a timer or the collector readied first,
// while other Ps steal the retiring goroutines, which come back for a
// while (retireWait). If none ran on the thread, and the task's goroutine
// is still on it, it locks it again and tries again (after retireTries it
// stays); if the task's goroutine has moved, the thread went back to the
// pool lowered ("loose"): logged, and counted in Stats.LooseThreads. The
// next task that locks such a thread while contended ends it
// (onNormalThread).
//
// When. A task leaves at its next Checkpoint once the guard turned
// contended (preemptLeave, set by the guard), before it parks for its
// slot, when it is given its slot back, before a Blocking call waits, and
// before fn begins if it was handed off just before the guard turned.
// Work that makes no Checkpoint and no Blocking call cannot leave: a task
// that never yields keeps its nice-10 thread until it returns.

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
)

// threadLeft is osTask.markTid of a handed-off task that left its
// hand-off thread: a handed-off task has no other use for the field, and
// a field of its own would take the Task past its size class (osTask).
const threadLeft = -1

// left reports whether its task is a handed-off one whose goroutine left
// its hand-off thread. Call it on the task's goroutine or under s.mu.
func (o *osTask) left() bool { return o.handoff && o.markTid == threadLeft }

// mustLeave reports whether t's goroutine should leave its thread now: t
// is a handed-off task whose lowered thread cannot be raised back, and
// the scheduler is contended. Call it on t's goroutine; it locks s.mu
// only on that path.
func (s *Scheduler) mustLeave(t *Task) bool {
	if !t.os.handoff || t.os.left() || s.os == nil || s.os.raisable || !s.os.keepNormal.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !t.os.raised && t.os.tid.Load() != 0
}

// leaveIfMust has t's goroutine leave its thread if it must (mustLeave,
// leaveThread): at a Checkpoint that comes to the scheduler, before a
// Blocking call waits, once it has its slot back, and before fn begins on
// a hand-off thread (osMode.mayLeave).
func (s *Scheduler) leaveIfMust(t *Task) {
	if s.mustLeave(t) {
		s.leaveThread(t)
	}
}

// leaveThread moves t's goroutine off its lowered hand-off thread and ends
// the thread (see the file comment). From then on t runs at normal
// priority until it ends, its goroutine locked to the thread it lands on
// (lockLanded), so that its CPU is still read by a thread's clock. A task
// holding its slot is charged first, by the old thread's clock: a Stats
// snapshot read that clock, and the charge must not count less.
func (s *Scheduler) leaveThread(t *Task) {
	tid := t.os.tid.Load()
	read := s.readCPU(t)
	s.mu.Lock()
	cpu := s.taskCPULocked(t, &read)
	if t.state == stateRunning {
		s.chargeLocked(t, s.clock.Now(), cpu)
	}
	t.os.markTid = threadLeft
	t.os.tid.Store(0) // nobody reads its thread until it has another
	s.mu.Unlock()
	switch s.retire() {
	case retireLoose:
		s.log.Warn("cpusched: a lowered thread could not be ended and went back to the runtime's pool; it runs other goroutines at low priority until a task that lands on it while contended ends it")
	case retireStayed:
		s.mu.Lock()
		t.os.markTid = 0
		t.os.tid.Store(tid)
		s.mu.Unlock()
		return
	}
	s.lockLanded(t, cpu)
}

// lockLanded locks the goroutine of t, which has just left its hand-off
// thread, to the thread it runs on now, a runtime thread at normal
// priority, until t ends (the goroutine then exits unlocked:
// handoffLoop), and records it as t's thread. t's CPU time since fn began
// goes on from cpu, its old thread's reading as it left (taskCPULocked's,
// or -1): cpuStart is set so that the new thread's clock reads cpu now,
// and the stretch under way, marked by the old thread's clock, stays
// measured; what the retirement itself took between the two readings is
// not counted. Where cpu is -1 the stretch under way is not measured
// (charge.go), and the next is, from the reading that ends this one.
//
// Such a thread is never lowered: it could not be raised back, which is
// the stall leaving avoids. Nothing lowers it: lowering is for tasks on
// their own goroutines (lowering.go), a hand-off thread lowers only
// itself, as a task begins (fitHandoffThread), and the guard's raise
// and starvation reads skip a task that left (raiseLocked,
// markThreadsLocked), so it is never marked raised, which is what the
// guard lowers again once calm (relowerLocked). The cost is that of a hand-off task's: its waits
// (for its slot, in Blocking) are waits of a locked thread, a switch
// between threads each; such tasks are few, those running while the
// scheduler is contended where threads cannot be raised.
func (s *Scheduler) lockLanded(t *Task, cpu int64) {
	t.beginTurns(s.clock.Now()) // while contended (turns.go)
	if !s.rq.cpuClock {
		return // no clock to read: it runs unlocked, charged slot time
	}
	runtime.LockOSThread()
	s.onNormalThread()
	clock := osprio.ThreadCPU()
	s.mu.Lock()
	if cpu >= 0 {
		t.os.cpuStart = clock - cpu
	} else {
		t.os.cpuStart = clock
		t.unmarkCPU()
	}
	t.os.tid.Store(int32(osprio.ThreadID()))
	s.mu.Unlock()
}

// lockContended locks the goroutine of t, a task that runs on its own
// goroutine where threads cannot be raised (dispatched while contended:
// dispatch), to its thread while fn runs, as lockLanded does for a task
// that left its hand-off thread, so that its CPU time is read by the
// thread's clock rather than falling back to slot time: unlocked, its
// goroutine could move between threads mid-stretch. The thread is marked
// from fn's start (markStretchLocked; nothing else uses the mark here,
// as own goroutines are lowered only where threads can be raised), and
// it waits for its slot locked (unlockThreadToWait, parkedLocked leave
// it be). Nothing lowers it, nor marks it raised (raiseLocked,
// markThreadsLocked skip a task on its own goroutine without the
// privilege); end unlocks it (unlockThread). The cost is a locked
// goroutine's: each wait for a slot is a switch between threads, for the
// tasks that start while the scheduler is contended.
func (s *Scheduler) lockContended(t *Task) {
	runtime.LockOSThread()
	s.onNormalThread()
	tid := int32(osprio.ThreadID())
	clock := osprio.ThreadCPU()
	s.mu.Lock()
	t.os.tid.Store(tid)
	t.markStretchLocked(tid, clock)
	s.mu.Unlock()
	t.beginTurns(s.clock.Now()) // while contended (turns.go)
}

// onNormalThread ends the thread the calling goroutine has just locked
// (lockLanded, lockContended) if it is lowered, and locks the one it
// lands on, up to retireTries times: a thread an earlier retirement left
// loose in the runtime's pool (retireLoose) is still at unraisableNice,
// and a task that runs on one while contended is the stall that leaving
// avoids. So loose threads do not stay for the life of the process: the
// next task that lands on one while contended ends it. It costs a system
// call (sched_getattr) on paths that already make two. A thread whose
// nice value is no higher than that of New's caller is not lowered, so a
// process started at a nice value does not end its every thread. Its
// retirements count in Stats as a leaving task's do (retire).
func (s *Scheduler) onNormalThread() {
	for range retireTries {
		cur, err := osprio.Current()
		if err != nil || !cur.Idle() && cur.Nice() <= s.os.baseNice {
			return
		}
		if s.retire() == retireStayed {
			return
		}
		runtime.LockOSThread()
	}
}

// What retireThread did.
const (
	retireEnded  = iota // the thread ended; the caller runs unlocked elsewhere
	retireLoose         // the caller runs unlocked elsewhere, the thread in the pool
	retireStayed        // the caller is still locked to the thread
)

// retireTries bounds the tries to end a lowered thread while the caller
// is still on it; retirers is how many goroutines each try starts, so
// that another P stealing some of them from the thread's P leaves it
// others (measured, a program allocating and sleeping on 2 CPUs, 2,000
// retirements: 1 goroutine left 2-4% of the threads loose, 8 left
// 0.5-0.9%). A retirer that ran on another thread naps retireNap and
// tries again, for up to retireWait, the caller's wait.
//
// Why they come back. Starting a goroutine wakes an idle thread to steal
// it, and beside a busy process the woken thread, at normal priority,
// likely takes the CPU from the lowered one before its goroutine waits:
// the retirers all run elsewhere, and the thread, when the kernel runs it
// again, finds no work and goes idle in the pool. A retirer readied again
// by its timer wakes an idle thread, and the runtime wakes the one idled
// last first: often the lowered thread, which then finds the retirer.
// Yielding instead of napping kept the retirers running on the other
// threads and left more threads loose, not fewer
// (docs/measurements/unprivileged.md#retiring-a-thread).
const (
	retireTries = 3
	retirers    = 8
	retireWait  = 20 * time.Millisecond
	retireNap   = 50 * time.Microsecond
)

// retire is retireThread with its outcome counted in Stats
// (RetiredThreads, LooseThreads).
func (s *Scheduler) retire() int {
	how := retireThread()
	switch how {
	case retireEnded:
		s.os.retired.Add(1)
	case retireLoose:
		s.os.loose.Add(1)
	}
	return how
}

// retireThread unlocks the calling goroutine, locked to its thread, and
// ends that thread (retireEnded). Where the goroutines meant to end it all
// ran on other threads retireTries times in a row, the caller stays
// locked to the thread (retireStayed), or, if it has moved meanwhile,
// runs unlocked elsewhere and the thread went back to the pool
// (retireLoose).
func retireThread() int {
	tid := osprio.ThreadID()
	for range retireTries {
		// taken: a retirer has the thread, or the caller gave up; the
		// retirers stop at it.
		var taken atomic.Bool
		ended := make(chan struct{})
		deadline := time.Now().Add(retireWait)
		for range retirers {
			go func() {
				for {
					runtime.LockOSThread()
					if osprio.ThreadID() == tid && taken.CompareAndSwap(false, true) {
						close(ended)
						return // exit locked: the runtime ends the thread
					}
					runtime.UnlockOSThread()
					if taken.Load() || time.Now().After(deadline) {
						return
					}
					time.Sleep(retireNap)
				}
			}()
		}
		runtime.UnlockOSThread()
		wait := time.NewTimer(retireWait)
		select {
		case <-ended:
			wait.Stop()
			return retireEnded
		case <-wait.C:
		}
		if !taken.CompareAndSwap(false, true) {
			<-ended // a retirer took the thread as the wait ended
			return retireEnded
		}
		if osprio.ThreadID() != tid {
			return retireLoose
		}
		runtime.LockOSThread() // still on it: lock it again
	}
	return retireStayed
}

// leaveLocked asks t, a running task whose lowered hand-off thread cannot
// be raised back, to leave that thread at its next Checkpoint; the
// contended guard calls it where it would raise the thread (raiseLocked).
func (s *Scheduler) leaveLocked(t *Task) {
	if t.os.handoff && !t.os.left() && !t.os.raised {
		t.preempt.Or(preemptLeave)
	}
}

// unraisableNice is the setting of a hand-off thread that cannot be raised
// back (see the file comment): a nice value, not SCHED_IDLE. Raising a
// nice value needs no privilege; lowering it back does. 10 against 5 was
// within the noise of the one busy machine it was measured on; 10 keeps
// more of the quiet machine's isolation.
const unraisableNice = 10

// unraisableSlice is the kernel time slice a hand-off thread takes with
// unraisableNice, from base, the kernel's slice for a normal thread
// (osprio.BaseSlice): twice it, or 0 (the kernel's own) where the kernel
// reports none.
//
// Why. A server thread that wakes beside a running nice-10 thread
// should take the CPU at once, as it takes it from a SCHED_IDLE one. The
// kernel's EEVDF does not always let it: a thread it has just picked runs
// protected until it has used its slice (RUN_TO_PARITY), and a woken
// thread cuts that short only if its own slice is the shorter
// (PREEMPT_SHORT). Hand-off threads are picked afresh at every slot
// hand-off, so a woken server thread often landed in such a window and
// waited out the rest of it, and then for the next tick. With a slice
// longer than the server threads' own, every wake-up of theirs cuts the
// window. Twice, not far longer: EEVDF gives a thread with a longer slice
// its share in longer, rarer turns, and beside a busy process a nice-10
// thread that waits longer for its turn leaves later (a 20 ms slice
// stalled the neighbor step once in three, 201 ms). The measurements
// (BenchmarkWakeBesideTurns in internal/osprio, perf sched, the bench)
// are in docs/measurements/unprivileged.md#the-kernels-slice.
func unraisableSlice(base time.Duration) time.Duration {
	if base <= 0 {
		return 0
	}
	return 2 * base
}

// fitUnraisable is fitHandoffThread where a lowered thread cannot be
// raised back: cur is the thread's setting. A thread at normal priority
// goes to unraisableNice while the machine is quiet and stays normal while
// contended (it reports raised, true: normal priority); one lowered
// already stays so, raised false (while contended, its task leaves it at
// once: mustLeave).
func (s *Scheduler) fitUnraisable(cur osprio.Attr) (raised bool) {
	if cur.Idle() || cur.Nice() > 0 {
		return false
	}
	if s.os.keepNormal.Load() {
		return true
	}
	if err := osprio.LowerNice(0, unraisableNice, s.os.lowSlice); err != nil {
		// New's probe succeeded, so this is unexpected; the task still
		// runs, at normal priority.
		s.log.Warn("cpusched: lowering a hand-off thread's priority failed; its tasks run at normal priority", "err", err)
		return true
	}
	return false
}
