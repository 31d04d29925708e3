package cpusched

// Retiring lowered threads: where a lowered thread cannot be raised back
// (no CAP_SYS_NICE and RLIMIT_NICE 0, as in Docker's and Kubernetes'
// containers), a task on one leaves it once the scheduler is contended,
// and the thread is ended.
//
// Why. Contended (contention.go), the scheduler raises every lowered task
// thread back to normal priority, because a SCHED_IDLE thread beside
// another busy process gets a few milliseconds a second and holds its P
// meanwhile: every stop-the-world waits for it. Without the privilege to
// raise, a task handed off to a lowered thread kept it until it ended, so
// a long task begun before the other process came stalled the program for
// as long as the kernel took to give it the CPU it needed, at 0.3% of a
// CPU: measured beside a busy process, the probe's p99 41-63x the floor,
// collections stopping the world for 336-537 ms
// (docs/design.md#without-the-privilege-to-raise).
//
// How. A goroutine cannot be moved off the thread it is locked to without
// unlocking it, and an unlocked lowered thread would go back to the
// runtime's pool and run any goroutine at SCHED_IDLE. So the task's
// goroutine starts a few goroutines (the runtime queues them on its own
// P, which the thread runs next), unlocks, and waits: the first of them
// that the lowered thread runs locks it, sees by its id that it is the
// lowered thread, releases the task and returns, and a goroutine that
// exits locked takes its thread with it (runtime.LockOSThread's doc).
// The others, run elsewhere, unlock and return. The task's goroutine goes
// on, unlocked, on another thread at normal priority until the task ends;
// its hand-off thread's loop then ends too (handoffLoop).
//
// Not certain: in the moment between the unlock and the first of them,
// the thread may run a goroutine a timer or the collector readied first,
// while other Ps steal the retiring goroutines. If none ran on the
// thread, and the task's goroutine is still on it, it locks it again and
// tries again (after retireTries it stays); if the task's goroutine has
// moved, the thread went back to the pool lowered ("loose"): logged, and
// counted in Stats.LooseThreads.
//
// When. A task leaves at its next Checkpoint once the guard turned
// contended (preemptLeave, set by the guard), before it parks for its
// slot, when it is given its slot back, and before a Blocking call waits.
// Work that makes no Checkpoint and no Blocking call cannot leave: a task
// that never yields keeps its thread until it returns. So a hand-off
// thread goes first to unraisableNice, and only a task that has yielded
// takes it on to SCHED_IDLE (idleSelf); a thread at SCHED_IDLE then ends
// with its task (idleSpent).

import (
	"runtime"
	"sync/atomic"

	"github.com/cpusched/cpusched/internal/osprio"
)

// threadLeft is taskThread.markTid of a handed-off task that left its
// hand-off thread: a handed-off task has no other use for the field, and
// a field of its own would take the Task past its size class.
const threadLeft = -1

// left reports whether t is a handed-off task whose goroutine left its
// hand-off thread. Call it on t's goroutine or under s.mu.
func (t *Task) left() bool { return t.handoff && t.thread.markTid == threadLeft }

// mustLeave reports whether t's goroutine should leave its thread now: t
// is a handed-off task whose lowered thread cannot be raised back, and
// the scheduler is contended. Call it on t's goroutine; it locks s.mu
// only on that path.
func (s *Scheduler) mustLeave(t *Task) bool {
	if !t.handoff || t.left() || s.os == nil || s.os.raisable || !s.os.keepNormal.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !t.thread.raised && t.thread.tid.Load() != 0
}

// leaveThread moves t's goroutine off its lowered hand-off thread and ends
// the thread (see the file comment). From then on t runs unlocked, as a
// task on its own goroutine whose thread is not lowered, until it ends.
func (s *Scheduler) leaveThread(t *Task) {
	tid := t.thread.tid.Load()
	s.mu.Lock()
	t.thread.markTid = threadLeft
	t.thread.tid.Store(0) // the guard and the raise look for it no more
	s.mu.Unlock()
	switch retireThread() {
	case retireEnded:
		s.os.retired.Add(1)
	case retireLoose:
		s.os.loose.Add(1)
		s.log.Warn("cpusched: a lowered thread could not be ended and went back to the runtime's pool; it runs other goroutines at low priority until the process exits")
	case retireStayed:
		s.mu.Lock()
		t.thread.markTid = 0
		t.thread.tid.Store(tid)
		s.mu.Unlock()
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
// retirements: 1 goroutine left 2-4% of the threads loose, 8 left 0.5-0.9%).
const (
	retireTries = 3
	retirers    = 8
)

// retireThread unlocks the calling goroutine, locked to its thread, and
// ends that thread (retireEnded). Where the goroutines meant to end it all
// ran on other threads retireTries times in a row, the caller stays
// locked to the thread (retireStayed), or, if it has moved meanwhile,
// runs unlocked elsewhere and the thread went back to the pool
// (retireLoose).
func retireThread() int {
	tid := osprio.ThreadID()
	for range retireTries {
		var taken atomic.Bool
		ended := make(chan bool, retirers)
		for range retirers {
			go func() {
				runtime.LockOSThread()
				if osprio.ThreadID() == tid && taken.CompareAndSwap(false, true) {
					ended <- true
					return // exit locked: the runtime ends the thread
				}
				runtime.UnlockOSThread()
				ended <- false
			}()
		}
		runtime.UnlockOSThread()
		for range retirers {
			if <-ended {
				return retireEnded
			}
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
	if t.handoff && !t.left() && !t.thread.raised {
		t.preempt.Or(preemptLeave)
	}
}

// unraisableNice is where a hand-off thread that cannot be raised back
// goes first: a nice value, not SCHED_IDLE. A task that never yields
// (a bcrypt or gzip call) cannot leave its thread when another process
// takes the CPUs, and at SCHED_IDLE it would get 0.3% of a CPU beside it,
// with its P held and every collection waiting for it; at nice 10
// (weight 110 against 1024) it gets about a tenth of a CPU, and the
// kernel runs it within a few of its slices. A task that does yield goes
// on to SCHED_IDLE once it has computed for osLowerAfter (idleSelf): it
// can leave. Raising a nice value needs no privilege; lowering it does.
const unraisableNice = 10

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
	if err := osprio.LowerNice(0, unraisableNice); err != nil {
		// New's probe succeeded, so this is unexpected; the task still
		// runs, at normal priority.
		s.log.Warn("cpusched: lowering a hand-off thread's priority failed; its tasks run at normal priority", "err", err)
		return true
	}
	return false
}

// idleSelf is lowerSelf for a task handed off to a thread at
// unraisableNice (handoffBegin sets its Checkpoint countdown), and
// Blocking's check for it: once it has computed for osLowerAfter by its
// thread's CPU clock, and while the machine is quiet, it lowers its thread
// to SCHED_IDLE, the isolation the mode is for: having made a Checkpoint
// or a Blocking call, it can leave the thread should another process take
// the CPUs. The checks are paced by its Checkpoints so far, as
// lowerSelf's. The thread ends with the task (idleSpent).
func (s *Scheduler) idleSelf(t *Task, mark bool) {
	if mark {
		t.thread.lowerSeen++
	}
	if s.os.keepNormal.Load() || t.left() {
		t.countDown(4 * lowerCheckEvery) // contended: it stays, and leaves if asked
		return
	}
	used := osprio.ThreadCPU() - t.thread.cpuStart
	if used < int64(osLowerAfter) {
		n := int64(lowerCheckEvery)
		if used > 0 && t.thread.lowerSeen > 0 {
			n = (int64(osLowerAfter) - used) * int64(t.thread.lowerSeen) / used
		}
		t.countDown(n)
		return
	}
	t.thread.lowerCheck = 0
	if err := osprio.Lower(); err != nil {
		s.log.Warn("cpusched: lowering a hand-off thread to SCHED_IDLE failed; it stays at its nice value", "err", err)
	}
}

// idleSpent reports, on a hand-off thread whose task has ended, whether
// the thread is at SCHED_IDLE where it cannot be raised back: it then ends
// (its goroutine exits locked) rather than run a next task that may
// never yield.
func (s *Scheduler) idleSpent() bool {
	if s.os.raisable {
		return false
	}
	cur, err := osprio.Current()
	return err == nil && cur.Idle()
}
