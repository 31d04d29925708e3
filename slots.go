package cpusched

// Slots: a task takes a slot (startLocked), gives it up at a Checkpoint
// (yield) or for Blocking (block, unblock; or keeps it, hold.go), and is
// asked to give it up early (preemptForLocked).

// startLocked gives t a slot and starts its slice; it returns true when t
// never ran before.
func (s *Scheduler) startLocked(t *Task, now int64) (first bool) {
	return s.takeSlotLocked(t, now, t.ctx.Err() != nil)
}

// takeSlotLocked is startLocked with ended, whether t's context has
// ended, read by the caller: submit has just read it under s.mu, and a
// context's Err is an interface call that Run's fast path would pay twice.
func (s *Scheduler) takeSlotLocked(t *Task, now int64, ended bool) (first bool) {
	first = !t.started
	// A goroutine that hands a slot on may have read now before it took
	// the lock (finish, with a system call between), and t may have come
	// to wait after that: its slot begins when it began to wait, not
	// before, so that its wait is never below 0.
	now = max(now, t.since)
	w := now - t.since // since it was queued or parked: 0 if it never waited
	t.waited += w
	if first {
		if t.state == stateQueued {
			s.queued--
			s.stats.leftQueueLocked(t, w)
			s.stats.queueWait += w
			s.stats.maxQueueWait = max(s.stats.maxQueueWait, w)
		}
		s.stats.classWaits[t.classID].record(w)
		t.gstats.waits.record(w)
	}
	if t.callerWaits && t.watch == nil {
		s.addWatchLocked(t) // it waited unwatched; from now on, watch ctx
	}
	t.started = true
	t.state = stateRunning
	t.runIdx = int16(len(s.running))
	s.running = append(s.running, t)
	s.os.acquiredLocked(t, now)
	t.since = now
	t.sliceEnd = now + s.rq.sliceLeft(t)
	if t.preempt.Load()&^preemptKept != 0 {
		// Tested first: a locked AND is dearer than the load, and a new
		// task has nothing to clear.
		t.preempt.And(preemptKept)
	}
	if s.killing || ended {
		// Close gave up, or the context ended unseen (a Run that waited
		// unwatched, or joined a watch that had already fired).
		if s.killing {
			t.cancelContextClosed()
		}
		t.preempt.Or(preemptCancel)
	}
	if s.rq.nwaiting > 0 {
		s.watchLocked()
		s.kickMonitor() // this slice may end before the one the monitor waits for
	}
	return first
}

// releaseSlotLocked takes t out of the running set.
func (s *Scheduler) releaseSlotLocked(t *Task) {
	last := len(s.running) - 1
	if i := int(t.runIdx); i != last {
		s.running[i] = s.running[last]
		s.running[i].runIdx = int16(i)
	}
	s.running[last] = nil
	s.running = s.running[:last]
	t.runIdx = -1
	t.laneRun = false
	s.os.releasedLocked(t, len(s.running))
}

// slotsLocked is how many tasks may hold slots now: the workers less the
// slots lent to the rest of the program (lend.go).
func (s *Scheduler) slotsLocked() int { return s.workers - s.os.lentLocked() }

// wakeHint says what the goroutine that gives a task its slot (resume)
// does next. IsolationOSPriority wakes the task's thread on the CPU that a
// long task's thread leaves (pin.go); the other modes ignore it.
type wakeHint uint8

const (
	wakeAny   wakeHint = iota // the caller goes on, or its task was short
	wakeLeave                 // the caller's task ran long, and has ended
	wakeYield                 // the caller yields its slot at a Checkpoint, and waits
)

// resume lets next run on the slot it was given, after unlocking: it
// starts next's goroutine if next never ran and is spawned, and otherwise
// wakes next on its wake channel. next nil: the caller left a slot empty.
func (s *Scheduler) resume(next *Task, first bool, hint wakeHint) {
	switch {
	case next == nil:
		s.os.slotLeftEmpty()
	case next.spawned && first:
		s.spawn(next, hint)
	default:
		s.os.waking(next, hint)
		next.wake <- struct{}{}
	}
}

// yield is Checkpoint's slow path: charge t's run time and, if another task
// should run now, give it t's slot and wait for a slot again.
func (s *Scheduler) yield(t *Task) {
	s.os.mayLeave(t) // before it parks: its wake is then a goroutine's
	read := s.readCPU(t)
	s.mu.Lock()
	now := s.clock.Now() // after any Stats snapshot's: RunTime never goes back
	s.os.settleIdleLocked(t, now, &read)
	if t.state != stateRunning || t.hold.Load() != holdNone || t.preempt.Load()&preemptCancel != 0 {
		// Checkpoint inside Blocking's fn (no slot to give, or one that
		// call keeps), or cancelled meanwhile (keep the slot and unwind).
		s.mu.Unlock()
		return
	}
	asked := t.preempt.Load() &^ (preemptCountdown | preemptTurns)
	sliceOver := now >= t.sliceEnd
	cpu := s.taskCPULocked(t, &read)
	s.chargeLocked(t, now, cpu) // renews the deadline when the request is used up
	s.os.checkpointChargedLocked(t, cpu, read.clock)
	t.preempt.And(preemptKept)
	if sliceOver {
		t.sliceEnd = now + s.rq.sliceLeft(t)
	}
	if len(s.running) > s.slotsLocked() {
		// A slot was lent (lend.go): t gives up its own, and nobody
		// takes it.
		s.rq.add(t)
		s.parkLocked(t)
		s.mu.Unlock()
		s.resume(nil, false, wakeAny)
		s.waitForSlot(t)
		return
	}
	if asked&^(preemptLend|preemptLeave) == 0 && !sliceOver {
		// Asked only to make room for a lent slot, which another task
		// has made, or to leave its thread, which it has: go on.
		s.mu.Unlock()
		return
	}
	if s.rq.nwaiting == 0 || asked == preemptLane && !sliceOver && s.rq.lanePeek(now) == nil {
		// Nobody waits, or only to make room for a lane task that another
		// slot has taken (or whose lane has closed): go on.
		s.mu.Unlock()
		return
	}
	s.rq.add(t)
	next := s.rq.pick(now)
	if next == t {
		s.mu.Unlock()
		return
	}
	s.parkLocked(t)
	s.stats.preempted++
	first := s.startLocked(next, now)
	s.mu.Unlock()
	s.resume(next, first, wakeYield)
	s.waitForSlot(t)
}

// parkLocked takes the slot of t, which waits in the run queue now.
func (s *Scheduler) parkLocked(t *Task) {
	s.os.parkedLocked(t)
	s.releaseSlotLocked(t)
	t.state = stateParked
	if t.wake == nil {
		t.wake = make(chan struct{}, 1)
	}
}

// waitForSlot is yield's wait, after parkLocked, until t is given a slot
// again.
func (s *Scheduler) waitForSlot(t *Task) {
	t.traceEndRegion()
	var p osPark
	s.os.park(t, &p)
	<-t.wake
	s.os.unpark(t, &p)
	t.traceRegion(traceRun)
}

// block gives up t's slot for a Blocking call.
func (s *Scheduler) block(t *Task, now int64) blockHow {
	keep := s.os.keepsSlot(t)
	read := noCPURead
	if !keep {
		read = s.readCPU(t) // a system call: not on the kept path
	}
	s.mu.Lock()
	s.os.settleIdleLocked(t, s.clock.Now(), &read)
	if t.state != stateRunning || t.hold.Load() != holdNone { // a nested Blocking call
		s.mu.Unlock()
		return blockNested
	}
	if keep {
		s.os.holdLocked(t, now)
		s.mu.Unlock()
		return blockKept
	}
	now = s.clock.Now() // after any Stats snapshot's: RunTime never goes back
	s.giveUpSlotLocked(t, now, s.taskCPULocked(t, &read))
	next, first := s.pickLocked(now)
	s.mu.Unlock()
	s.resume(next, first, wakeAny)
	return blockReleased
}

// blockHow is what block did with the task's slot.
type blockHow int8

const (
	blockReleased blockHow = iota // given to another task
	blockKept                     // kept while fn runs, for up to blockHold
	blockNested                   // already given up or kept by an outer Blocking call
)

// giveUpSlotLocked charges t's run time up to now (cpu as chargeLocked's)
// and takes its slot for a Blocking call.
func (s *Scheduler) giveUpSlotLocked(t *Task, now, cpu int64) {
	t.preempt.And(preemptKept) // a slice end or urgent request is moot now
	s.chargeLocked(t, now, cpu)
	t.avgBurst = ewma(t.avgBurst, t.burst)
	t.burst = 0
	s.releaseSlotLocked(t)
	s.rq.deactivate(t, false)
	t.state = stateBlocking
	s.blocked++
}

// pickLocked gives a free slot to the task the policy picks, if any; the
// caller must resume it after unlocking.
func (s *Scheduler) pickLocked(now int64) (next *Task, first bool) {
	if !s.freeSlotLocked() {
		return nil, false // the free slot is lent (lend.go) or kept (keep.go)
	}
	if next = s.rq.pick(now); next != nil {
		first = s.startLocked(next, now)
	}
	return next, first
}

// unblock queues t again after a Blocking call and waits for its slot.
func (s *Scheduler) unblock(t *Task, waited int64) {
	read := s.readCPU(t)
	now := s.clock.Now()
	s.mu.Lock()
	t.setCPU(s.taskCPULocked(t, &read), t.runTime) // the stretch after the call is measured from here (charge.go)
	s.blocked--
	t.avgWait = ewma(t.avgWait, waited)
	t.since = now // from now on it waits for a slot
	if t.preempt.Load()&preemptCancel != 0 && !s.killing {
		t.qidx = qExit
	}
	s.rq.activate(t, false)
	if s.killing || s.freeSlotLocked() && s.rq.nwaiting == 0 {
		// Once Close gave up, a task back from Blocking gets a slot at
		// once, even past Workers, to return (startLocked cancels it).
		s.startLocked(t, now)
		s.mu.Unlock()
		return
	}
	t.state = stateParked
	if t.wake == nil {
		t.wake = make(chan struct{}, 1)
	}
	s.rq.add(t)
	s.preemptForLocked(t, now)
	s.watchLocked()
	s.mu.Unlock()
	<-t.wake
	s.os.noteWake(t)
}

// retakeLocked gives t, whose slot IsolationOSPriority's idle watch gave
// up while its thread slept (idle.go), a slot back at now, its thread
// computing again: at once, even past the slots, since it computes
// whether it holds one or not. Past them, every running task is asked
// to come to its next Checkpoint, where the first gives its slot up and
// nobody takes it (yield). cpu is t's CPU time since fn began
// (taskCPULocked's), or below 0: the time t was without a slot counts as
// a Blocking call's wait, and the CPU its thread used since the release
// is charged with the stretch that begins, backdated by that much.
func (s *Scheduler) retakeLocked(t *Task, now, cpu int64) {
	s.os.retakenLocked(t)
	s.blocked--
	t.avgWait = ewma(t.avgWait, max(now-t.since, 1))
	var ran int64
	if cpu >= 0 && t.cpuUsed >= 0 {
		ran = min(max(cpu-t.cpuUsed, 0), now-t.since)
	} else {
		t.setCPU(cpu, t.runTime)
	}
	t.since = now
	s.rq.activate(t, false)
	s.startLocked(t, now)
	t.since = now - ran
	if len(s.running) > s.slotsLocked() {
		for _, r := range s.running {
			r.preempt.Or(preemptLend)
		}
	}
}

// ewma is a moving average that weighs the newest sample 1/4.
func ewma(avg, sample int64) int64 {
	if avg == 0 {
		return sample
	}
	return (3*avg + sample) / 4
}

// preemptForLocked sets the timers of Blocking calls that keep their
// slots (now that t waits for one), and asks a running task to yield at
// its next Checkpoint when queued task t should have its slot: exit over everything, realtime
// (unless throttled) over fair and idle, normal over idle, and a task the
// lane would run now over fair tasks past their first slice (wakeup
// preemption, see preemptForLaneLocked). Batch and idle never preempt
// early, nor does a task in the lane while the lane would not run it:
// EEVDF does not pick lane tasks, so a yield would not give it the slot.
func (s *Scheduler) preemptForLocked(t *Task, now int64) {
	s.os.waitingLocked(now)
	if t.inLane {
		if s.rq.lanePeek(now) != nil {
			s.preemptForLaneLocked(now)
		}
		return
	}
	var victimMin int // running tasks with qidx >= victimMin may be preempted
	switch {
	case t.qidx == qExit:
		victimMin = qRealtime
	case t.qidx == qRealtime && !s.rq.rtThrottled():
		victimMin = qFair
	case t.qidx == qFair && t.class() == ClassNormal:
		victimMin = qIdle
	default:
		return
	}
	var victim *Task
	for _, r := range s.running {
		if int(r.qidx) < victimMin || r.preempt.Load()&preemptUrgent != 0 {
			continue
		}
		if victim == nil || r.qidx > victim.qidx || r.qidx == victim.qidx && r.sliceEnd < victim.sliceEnd {
			victim = r
		}
	}
	if victim != nil {
		victim.preempt.Or(preemptUrgent)
	}
}

// preemptForLaneLocked is wakeup preemption, as EEVDF's, for the lane: it
// asks every running task that is not itself a small task (fair tasks that
// have used a slice, counting the run time since they were last charged,
// and idle tasks) to come to its next Checkpoint rather than at its slice
// end, where the first to come hands its slot to the lane and the others
// go on (yield). This is what lets long slices (fewer switches) and short
// waits for small tasks go together. A task within its first slice is
// never preempted early: it came first, and once preempted it would join
// the lane itself and take the next runner's slot in turn.
//
// Asking all of them, not one: in IsolationOSPriority the one asked may be
// on a thread the kernel is not running, and the lane task would wait for
// the other slot's slice end.
func (s *Scheduler) preemptForLaneLocked(now int64) {
	for _, r := range s.running {
		if r.qidx == qIdle || r.qidx == qFair && s.rq.pastLane(r, now) {
			r.preempt.Or(preemptLane)
		}
	}
}
