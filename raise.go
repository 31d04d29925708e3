package cpusched

// Fitting task threads to the guard's state (contention.go): while other
// processes keep the CPUs busy the mode's lowered task threads are raised
// back to the setting they had, and lowered again once they calm down;
// where a lowered thread cannot be raised, its task leaves it instead
// (retire.go). The guard decides; these carry it out, at the transitions
// (enterContendedLocked, leaveContendedLocked), when a task gets a slot
// (fitThreadLocked) and when a hand-off thread begins a task
// (fitHandoffThread).

import "github.com/cpusched/cpusched/internal/osprio"

// fitThreadLocked makes the thread of t, which has just been given a slot,
// fit the scheduler's state: raised while contended, lowered otherwise.
func (s *Scheduler) fitThreadLocked(t *Task) {
	if s.os.guard == nil {
		return
	}
	if s.os.guard.contended {
		s.raiseLocked(t)
	} else if t.os.raised {
		s.relowerLocked(t)
	}
}

// fitHandoffThread makes the calling hand-off thread, about to run a task,
// fit the scheduler's state: lowered while quiet, raised while contended
// (where it can be raised); it reports whether it left the thread raised.
// It is the only place a hand-off thread is
// lowered or raised by itself, and it holds no slot's CPU yet: a thread
// that lowered itself with its task done, while other processes kept the
// CPUs busy, could be left waiting with its P before it parked, and stop
// the world meanwhile.
func (s *Scheduler) fitHandoffThread() (raised bool) {
	cur, err := osprio.Current()
	if err != nil {
		return false
	}
	if !s.os.raisable {
		return s.fitUnraisable(cur) // retire.go
	}
	lowered := cur.Lowered()
	switch {
	case !lowered && !s.os.keepNormal.Load():
		if err := osprio.Lower(); err != nil {
			// New's probe succeeded, so this is unexpected; the task still
			// runs, at normal priority.
			s.log.Warn("cpusched: lowering a hand-off thread's priority failed; its tasks run at normal priority", "err", err)
		}
	case lowered && s.os.keepNormal.Load() && s.osOwn():
		s.mu.Lock()
		from := s.os.handoffFrom
		s.mu.Unlock()
		if err := from.Restore(); err != nil {
			s.log.Warn("cpusched: raising a hand-off thread failed; it stays lowered", "err", err)
			return false
		}
		return true
	case !lowered && s.os.keepNormal.Load():
		return true
	}
	return false
}

// raiseLocked puts the thread of t, if lowered, back to the setting it
// had, and marks t raised. Without the privilege to raise, it asks a
// handed-off task to leave its thread at its next Checkpoint instead
// (leaveLocked); a task on its own goroutine has no lowered thread there.
func (s *Scheduler) raiseLocked(t *Task) {
	if t.os.left() {
		return // at normal priority, never lowered (lockLanded)
	}
	tid := int(t.os.tid.Load())
	if !s.os.raisable {
		s.leaveLocked(t) // it leaves the thread instead (retire.go)
	}
	if !s.osOwn() || t.os.raised || tid == 0 {
		return
	}
	from := t.os.loweredFrom
	switch {
	case t.os.handoff:
		from = s.os.handoffFrom
	case !t.os.lowered.Load() || t.os.foundLowered:
		return
	}
	if err := from.RestoreThread(tid); err != nil {
		s.log.Warn("cpusched: raising a task's thread failed; it stays lowered", "err", err)
		return
	}
	t.os.raised = true
	if !t.os.handoff {
		t.preempt.Or(preemptTurns) // its countdown ended when lowered (turns.go)
	}
}

// relowerLocked lowers the thread of t, raised while contended, again.
func (s *Scheduler) relowerLocked(t *Task) {
	tid := int(t.os.tid.Load())
	if !t.os.raised || tid == 0 {
		return
	}
	if !s.os.raisable {
		// Where it could not be raised again, a task whose thread ran at
		// normal priority goes to the milder setting (retire.go).
		if err := osprio.LowerNice(tid, unraisableNice, s.os.lowSlice); err != nil {
			s.log.Warn("cpusched: lowering a task's thread again failed; it runs at normal priority", "err", err)
			return
		}
		t.os.raised = false
		return
	}
	if _, _, err := osprio.LowerThread(tid); err != nil {
		s.log.Warn("cpusched: lowering a task's thread again failed; it runs at normal priority", "err", err)
		return
	}
	t.os.raised = false
}
