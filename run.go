package cpusched

// Running fn: the task's goroutine calls fn with panic recovery, ends the
// task and hands its slot on.

import (
	"context"
	"runtime/debug"
)

// spawn starts the goroutine of t, a spawned task that never ran (Go's,
// or a Run handed off), which is where every such task starts: a new
// goroutine that runs t and then the next never-started Go task it can
// (runGo), or in IsolationOSPriority, for a task handed off, a hand-off
// thread's (osMode.spawnHandoff: an idle one woken, or a new one,
// handoffLoop). It reports whether that thread was awake (handoffThread);
// hint is resume's.
func (s *Scheduler) spawn(t *Task, hint wakeHint) (awake bool) {
	if awake, ok := s.os.spawnHandoff(t, hint); ok {
		return awake
	}
	go s.runGo(t)
	return false
}

// runGo is the goroutine of Go tasks, and a hand-off thread's: after one
// ends, it runs the next task if that is also a Go task that never started
// and may run on this goroutine (osRun.continues), saving a goroutine
// start. It returns the mode's record of the last task's run, which tells
// a hand-off thread whether its goroutine left it (retire.go).
func (s *Scheduler) runGo(t *Task) (last osRun) {
	for t != nil {
		t, last, _ = s.call(t, true)
	}
	return last
}

// execute runs Run task t, which holds a slot, and ends it.
func (s *Scheduler) execute(t *Task) error {
	_, _, err := s.call(t, false)
	return err
}

// call runs fn with panic recovery and ends the task. When inline is true
// and the next task is a Go task that never ran and may run on this
// goroutine (run.continues), call returns it instead of starting a
// goroutine for it. run is the mode's record of the call (osRun).
func (s *Scheduler) call(t *Task, inline bool) (next *Task, run osRun, err error) {
	// Made before finish: once finish has ended a handed-off Run's Handle,
	// its caller may recycle t (runTasks).
	run.of(t)
	if err := t.ctx.Err(); err != nil {
		// Its context ended while it was being dispatched: an expired
		// context is never started.
		n, first := s.finish(t, err, false)
		if inline && n != nil && n.spawned && first && run.continues(n) {
			return n, run, err
		}
		s.resume(n, first, wakeAny)
		return nil, run, err
	}
	// fn runs under the task's pprof labels and, when tracing, in a
	// "cpusched.run" region of its trace task.
	restore := t.setLabels()
	t.traceRegion(traceRun)
	s.os.begin(t, &run)
	normal := false
	defer func() {
		if !normal {
			t.leave(restore)
			run.returned(t)
			r := recover()
			if r == nil {
				err = errGoexit // runtime.Goexit in fn: end the task, let the goroutine exit
			} else {
				err = &PanicError{Value: r, Stack: debug.Stack()}
			}
			n, first := s.finish(t, err, r != nil)
			s.resume(n, first, wakeAny)
			next = nil
		}
		s.os.end(t, &run) // after the task has ended
	}()
	err = t.fn(t)
	normal = true
	t.leave(restore)
	run.returned(t)
	n, first := s.finish(t, err, false)
	if inline && n != nil && n.spawned && first && run.continues(n) {
		s.os.runsNext(n, &run)
		return n, run, err
	}
	s.resume(n, first, run.hint())
	return nil, run, err
}

// finish ends t, which holds a slot, and hands the slot on. The caller must
// resume the returned task.
func (s *Scheduler) finish(t *Task, err error, panicked bool) (next *Task, first bool) {
	seq := s.statsSeq.Load()
	now := s.clock.Now()
	read := noCPURead
	if t.idleWatched || t.runTime+now-t.since >= cpuReadMin {
		// A system call, so before the lock; a watched task's fields
		// are read only under it (idle.go).
		read = s.readCPU(t)
	}
	s.mu.Lock()
	if s.statsSeq.Load() != seq {
		now = s.clock.Now() // after the Stats snapshot's: RunTime never goes back
	}
	yields := s.rq.nwaiting > 0 && s.yieldsLocked(t) // a slot is kept only for a task that waits
	s.os.settleIdleLocked(t, now, &read)
	cpu := s.taskCPULocked(t, &read)
	s.chargeLocked(t, now, cpu)
	s.os.endedLocked(t, max(cpu, -1))
	s.releaseSlotLocked(t)
	s.rq.deactivate(t, true)
	switch {
	case panicked:
		s.stats.panicked++
	case err == nil:
		s.stats.completed++
	case t.preempt.Load()&preemptCancel != 0 || t.ctx.Err() != nil:
		s.stats.canceled++
	default:
		s.stats.failed++
	}
	s.endLocked(t)
	if !s.keepSlotLocked(yields, now) {
		next, first = s.pickLocked(now)
	}
	s.mu.Unlock()
	if tc := t.taskCtx.Load(); tc != nil {
		tc.stop()
		tc.cancel(context.Canceled)
	}
	t.fn = nil
	if t.spawned {
		t.handle.err = err
		t.handle.end()
	}
	return next, first
}

// endLocked records that t has ended.
func (s *Scheduler) endLocked(t *Task) {
	s.dropWatchLocked(t)
	t.state = stateDone
	t.endTrace()
	g := t.gstats
	g.ended++
	if t.started {
		s.stats.classRuns[t.classID].record(t.runTime)
		g.runs.record(t.runTime)
	}
	s.live--
	if s.closed && s.live == 0 {
		s.closeDrainedLocked()
	}
}
