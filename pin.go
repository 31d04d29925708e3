package cpusched

// Pinned hand-offs: in IsolationOSPriority, a task that gives its slot to a
// parked task at a Checkpoint wakes the next task's thread on the CPU it
// is about to leave.
//
// Both are lowered threads, the yielding one about to sleep and the next
// one asleep. Woken without a hint, the next thread is placed by the
// kernel's wake-up rules, which count a CPU that runs only SCHED_IDLE
// threads as idle: it was often queued behind the other slot's task, where
// SCHED_IDLE threads take turns by the kernel's slice of milliseconds,
// while the CPU the yielding thread left ran nothing, and the P the runtime
// had handed to the woken thread (with the goroutines and timers queued on
// it) waited with it (docs/performance.md#pinned-hand-offs). So the
// yielding thread pins the next thread to its own CPU (handOff), and
// the woken thread puts its own mask back as soon as it runs
// (waitPinnable; handoffThread.wait for an idle hand-off thread), before
// anything else: two system calls per hand-off, at most one
// hand-off per slice and slot.
//
// Only a thread that waits locked is pinned: a hand-off thread, or a task's
// own goroutine on its lowered thread. A parked task's waitTid is its
// thread's id while it waits, negated by the pin to tell it to restore
// (one field: a Task stays in its size class, TestQueuedTaskMemory).
// Only yield pins: at a task's end its thread may go on (a Run caller's
// own goroutine) or spin for the next task (handoffThread), and the ends
// of long tasks are fewer than their slices. A parked task is woken once,
// by whoever gave it a slot (or by its cancellation, which does not pin),
// so a pin cannot outlive the wake.

import "github.com/cpusched/cpusched/internal/osprio"

// pinForHandOff pins the thread that next, a parked task given a slot by
// the calling task's thread, waits on to this thread's CPU, which the
// caller is about to leave.
func (s *Scheduler) pinForHandOff(next *Task) {
	if tid := next.waitTid.Load(); tid > 0 && pinHere(tid) {
		next.waitTid.Store(-tid)
	}
}

// pinHere pins thread tid to the calling thread's CPU and reports whether
// it did.
func pinHere(tid int32) bool {
	cpu := osprio.CPU()
	return cpu >= 0 && osprio.PinThread(int(tid), cpu) == nil
}

// unpin is a pinned thread's first step once woken: it puts back mask, the
// mask the thread read before it waited.
func (s *Scheduler) unpin(mask *osprio.Affinity) {
	if s.cfg.onPinnedWake != nil {
		s.cfg.onPinnedWake()
	}
	if err := mask.Restore(); err != nil {
		// Unexpected (the mask was the thread's own); the thread stays
		// on one CPU until its next pinned wake.
		s.log.Warn("cpusched: putting a thread's CPU mask back after a hand-off failed", "err", err)
	}
}

// waitPinnable is waitForSlot's wait on t.wake where t's goroutine waits
// locked to a lowered thread: its mask is read first and put back after
// the wake if a hand-off pinned it.
func (s *Scheduler) waitPinnable(t *Task) {
	var mask osprio.Affinity
	if !mask.ReadAffinity() {
		<-t.wake
		return
	}
	t.waitTid.Store(int32(osprio.ThreadID()))
	<-t.wake
	if t.waitTid.Swap(0) < 0 {
		s.unpin(&mask)
	}
}
