package cpusched

// The hold: in IsolationOSPriority a Blocking call whose recent calls were
// short keeps its task's slot while fn runs (block), for up to blockHold
// once another task waits (the hold timer, armHoldLocked). Giving the slot
// up and getting it back there costs a hand-off between threads: for a
// short call, more than the call. The timer's goroutine, releaseHold, is
// one more that gives a slot to a task (pickLocked).

import "time"

// keepsSlot reports whether t's Blocking call, about to begin, keeps its
// slot: in IsolationOSPriority, where the moving average of t's calls (for
// its first call, of all tasks' calls) is under blockHold.
func (s *Scheduler) keepsSlot(t *Task) bool {
	if s.os == nil {
		return false
	}
	avg := t.os.blockAvg
	if avg == 0 {
		avg = s.os.blockAvg.Load() // a first call: go by the other tasks' calls
	}
	return avg > 0 && avg < int64(blockHold)
}

// holdLocked keeps t's slot for its Blocking call, which begins at now
// (see Blocking). While no task waits for a slot that costs nobody
// anything; once one does, the hold timer gives the slot up blockHold
// after the call began.
func (s *Scheduler) holdLocked(t *Task, now int64) {
	t.hold.Store(holdKept)
	t.os.holdStart = now
	if s.rq.nwaiting > 0 {
		s.armHoldLocked(t, now)
	}
}

// Task.hold's values.
const (
	holdNone     int32 = iota
	holdKept           // a Blocking call keeps the slot, no timer set
	holdArmed          // the same, with holdTimer set: a task waits
	holdReleased       // holdTimer gave the slot up
)

// blockHold is how long a Blocking call may keep its slot in
// IsolationOSPriority: about twice the cost of giving the slot up and
// getting it back through waiting hand-off threads (BenchmarkRunOSPriority/
// blocking before the hold, docs/measurements/ospriority-settings.md#hand-off).
const blockHold = 50 * time.Microsecond

// releaseHold is holdTimer's function: a Blocking call that kept its slot
// has run for blockHold, so the slot goes to another task now. The time
// it kept the slot is charged as run time, as the slot was taken (its
// thread's CPU clock read from here: charge.go).
func (s *Scheduler) releaseHold(t *Task) {
	s.mu.Lock()
	now := s.clock.Now() // after any Stats snapshot's: RunTime never goes back
	if !t.hold.CompareAndSwap(holdArmed, holdReleased) {
		s.mu.Unlock() // fn returned first (or a stale timer of an earlier call)
		return
	}
	s.giveUpSlotLocked(t, now, s.taskCPUOfLocked(t))
	next, first := s.pickLocked(now)
	s.mu.Unlock()
	s.resume(next, first)
}

// endHold ends a Blocking call that kept its slot when it began: if
// holdTimer gave the slot up meanwhile, t waits for one again.
func (s *Scheduler) endHold(t *Task, start int64) {
	now := s.clock.Now()
	s.noteBlock(t, now-start)
	if s.osOwn() {
		// The slot time this call kept is waiting, which the monitor does
		// not count toward lowering: all of it, or up to blockHold where
		// the hold timer gave the slot up.
		kept := now - start
		if t.hold.Load() == holdReleased {
			kept = min(kept, int64(blockHold))
		}
		t.os.uncomputed.Add(kept)
	}
	if t.hold.CompareAndSwap(holdKept, holdNone) {
		return
	}
	if t.hold.CompareAndSwap(holdArmed, holdNone) {
		s.mu.Lock() // holdTimer is set under s.mu
		t.os.holdTimer.Stop()
		s.mu.Unlock()
		return
	}
	t.hold.Store(holdNone)
	unlocked := s.unlockThreadToWait(t)
	s.unblock(t, now-start)
	if unlocked {
		s.lockThread(t, false)
	}
}

// noteBlock adds a Blocking call of d to t's and the scheduler's moving
// averages.
func (s *Scheduler) noteBlock(t *Task, d int64) {
	d = max(d, 1)
	t.os.blockAvg = ewma(t.os.blockAvg, d)
	if s.os != nil {
		s.os.blockAvg.Store(ewma(s.os.blockAvg.Load(), d))
	}
}

// armHoldsLocked sets the hold timers of the Blocking calls that keep
// their slots, now that a task waits for one.
func (s *Scheduler) armHoldsLocked(now int64) {
	if s.os == nil {
		return
	}
	for _, r := range s.running {
		if r.hold.Load() == holdKept {
			s.armHoldLocked(r, now)
		}
	}
}

// armHoldLocked sets t's hold timer to give its slot up blockHold after
// its Blocking call began.
func (s *Scheduler) armHoldLocked(t *Task, now int64) {
	if !t.hold.CompareAndSwap(holdKept, holdArmed) {
		return // fn returned meanwhile
	}
	d := max(time.Duration(t.os.holdStart+int64(blockHold)-now), 0)
	if t.os.holdTimer == nil {
		t.os.holdTimer = time.AfterFunc(d, func() { s.releaseHold(t) })
	} else {
		t.os.holdTimer.Reset(d)
	}
}
