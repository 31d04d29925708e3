package cpusched

// Running fn: the task's goroutine calls fn with panic recovery, ends the
// task and hands its slot on.

import (
	"context"
	"runtime/debug"
	"time"
)

// runGo is the goroutine of Go tasks: after one ends, it runs the next task
// if that is also a Go task that never started, saving a goroutine start.
// It reports whether the goroutine left its hand-off thread on the way
// (retire.go).
func (s *Scheduler) runGo(t *Task) (left bool) {
	for t != nil {
		t, left, _ = s.call(t, true)
	}
	return left
}

// execute runs Run task t, which holds a slot, and ends it.
func (s *Scheduler) execute(t *Task) error {
	_, _, err := s.call(t, false)
	return err
}

// call runs fn with panic recovery and ends the task. When inline is true
// and the next task is a Go task that never ran and is dispatched as t was
// (on its own goroutine or handed off), call returns it instead of
// starting a goroutine for it. left reports that t's goroutine left its
// hand-off thread (retire.go): it then runs no next task inline.
func (s *Scheduler) call(t *Task, inline bool) (next *Task, left bool, err error) {
	// Read before finish: once finish has ended a handed-off Run's Handle,
	// its caller may recycle t (runTasks).
	handoff := t.os.handoff
	if err := t.ctx.Err(); err != nil {
		// Its context ended while it was being dispatched: an expired
		// context is never started.
		n, first := s.finish(t, err, false)
		if inline && n != nil && n.spawned && first && n.os.handoff == handoff {
			return n, false, err
		}
		s.resume(n, first)
		return nil, false, err
	}
	// fn runs under the task's pprof labels and, when tracing, in a
	// "cpusched.run" region of its trace task.
	if s.osOwn() && !t.os.handoff {
		s.noteWake(t)
		s.lockThread(t, true)
		defer s.unlockThread(t) // after the task has ended (the defer below)
	}
	restore := t.setLabels()
	t.traceRegion(traceRun)
	var start time.Time // with slice pins, for a hand-off task: when fn began
	if t.os.handoff {
		start = s.handoffBegin(t)
		if s.mustLeave(t) {
			s.leaveThread(t) // handed off just before the guard turned contended (retire.go)
		}
	}
	normal := false
	defer func() {
		if normal {
			return
		}
		t.leave(restore)
		left = t.os.left() // read before finish, as handoff
		r := recover()
		if r == nil {
			err = errGoexit // runtime.Goexit in fn: end the task, let the goroutine exit
		} else {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
		n, first := s.finish(t, err, r != nil)
		s.resume(n, first)
		next = nil
	}()
	err = t.fn(t)
	normal = true
	t.leave(restore)
	left = t.os.left() // read before finish, as handoff
	// A long task's thread leaves its CPU to the next task, or goes on
	// with it (pin.go).
	pin := !start.IsZero() && time.Since(start) >= callerSpin
	n, first := s.finish(t, err, false)
	if inline && n != nil && n.spawned && first && n.os.handoff == handoff && !left {
		s.placeInline(n, pin)
		return n, false, err
	}
	s.resumePinned(n, first, pin)
	return nil, left, err
}

// finish ends t, which holds a slot, and hands the slot on. The caller must
// resume the returned task.
func (s *Scheduler) finish(t *Task, err error, panicked bool) (next *Task, first bool) {
	seq := s.statsSeq.Load()
	now := s.clock.Now()
	read := noCPURead
	if t.runTime+now-t.since >= cpuReadMin {
		read = s.readCPU(t) // before the lock: a system call
	}
	s.mu.Lock()
	if s.statsSeq.Load() != seq {
		now = s.clock.Now() // after the Stats snapshot's: RunTime never goes back
	}
	cpu := s.taskCPULocked(t, &read)
	s.chargeLocked(t, now, cpu)
	if s.os != nil {
		s.osEndLocked(t, max(cpu, -1))
	}
	s.releaseSlotLocked(t)
	s.rq.deactivate(t)
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
	next, first = s.pickLocked(now)
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
