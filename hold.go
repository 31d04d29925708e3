package cpusched

// The hold: in IsolationOSPriority a Blocking call whose recent calls were
// short keeps its task's slot while fn runs (block), for up to blockHold
// once another task waits (the hold timer, armHoldLocked). Giving the slot
// up and getting it back there costs a hand-off between threads: for a
// short call, more than the call. The timer's goroutine, releaseHold, is
// one more that gives a slot to a task (pickLocked). The core calls the
// hold at block (blocking, holdLocked), Blocking (endHold, noteBlock) and
// preemptForLocked (waitingLocked): transitions.go.

import "time"

// keepsSlot reports whether t's Blocking call, about to begin, keeps its
// slot: where the moving average of t's calls (for its first call, of all
// tasks' calls) is under blockHold.
func (m *osMode) keepsSlot(t *Task) bool {
	if m == nil {
		return false // only this mode keeps slots so
	}
	avg := t.os.blockAvg
	if avg == 0 {
		avg = m.blockAvg.Load() // a first call: go by the other tasks' calls
	}
	return avg > 0 && avg < int64(blockHold)
}

// holdLocked keeps t's slot for its Blocking call, which begins at now
// (see Blocking). While no task waits for a slot that costs nobody
// anything; once one does, the hold timer gives the slot up blockHold
// after the call began.
func (m *osMode) holdLocked(t *Task, now int64) {
	t.hold.Store(holdKept)
	t.os.holdStart = now
	if m.s.rq.nwaiting > 0 {
		m.armHoldLocked(t, now)
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
func (m *osMode) releaseHold(t *Task) {
	s := m.s
	s.mu.Lock()
	now := s.clock.Now() // after any Stats snapshot's: RunTime never goes back
	if !t.hold.CompareAndSwap(holdArmed, holdReleased) {
		s.mu.Unlock() // fn returned first (or a stale timer of an earlier call)
		return
	}
	s.giveUpSlotLocked(t, now, s.taskCPUOfLocked(t))
	next, first := s.pickLocked(now)
	s.mu.Unlock()
	s.resume(next, first, wakeAny)
}

// endHold ends a Blocking call that kept its slot when it began: if
// holdTimer gave the slot up meanwhile, t waits for one again.
func (m *osMode) endHold(t *Task, start int64) {
	s := m.s
	now := s.clock.Now()
	m.noteBlock(t, now-start)
	if m.own {
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
		t.os.rare.holdTimer.Stop()
		s.mu.Unlock()
		return
	}
	t.hold.Store(holdNone)
	w := m.unlockToWait(t)
	s.unblock(t, now-start)
	m.relock(t, w)
}

// noteBlock is Blocking's step once a call of d has returned: it adds d
// to t's and the scheduler's moving averages, which keepsSlot goes by.
func (m *osMode) noteBlock(t *Task, d int64) {
	if m == nil {
		return
	}
	d = max(d, 1)
	t.os.blockAvg = ewma(t.os.blockAvg, d)
	m.blockAvg.Store(ewma(m.blockAvg.Load(), d))
}

// armHoldsLocked sets the hold timers of the Blocking calls that keep
// their slots, now that a task waits for one.
func (m *osMode) armHoldsLocked(now int64) {
	for _, r := range m.s.running {
		if r.hold.Load() == holdKept {
			m.armHoldLocked(r, now)
		}
	}
}

// armHoldLocked sets t's hold timer to give its slot up blockHold after
// its Blocking call began.
func (m *osMode) armHoldLocked(t *Task, now int64) {
	if !t.hold.CompareAndSwap(holdKept, holdArmed) {
		return // fn returned meanwhile
	}
	d := max(time.Duration(t.os.holdStart+int64(blockHold)-now), 0)
	if t.os.rare == nil {
		t.os.rare = new(osRare)
	}
	if r := t.os.rare; r.holdTimer == nil {
		r.holdTimer = time.AfterFunc(d, func() { m.releaseHold(t) })
	} else {
		r.holdTimer.Reset(d)
	}
}

// reusable reports whether a Run's Task may go back to runTasks
// (recycle): not where its Blocking calls set a hold timer, whose function
// (releaseHold) may still be about to run with it.
func (o *osTask) reusable() bool { return o.rare == nil || o.rare.holdTimer == nil }
