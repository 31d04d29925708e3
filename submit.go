package cpusched

// Submission: Run and Go make a task, check its options and admit it to
// a free slot or the queue.

import (
	"context"
	"errors"
	"sync"
)

// Run runs fn as a task and returns its error once it has ended. It blocks
// while the task waits for a slot. fn runs on the calling goroutine, so Run
// costs no goroutine when a slot is free; in IsolationOSPriority it runs
// on a low-priority hand-off thread instead when fn's recent tasks ran long,
// and always where a lowered thread cannot be raised back (see
// IsolationOSPriority). It returns ErrClosed after Close,
// ErrQueueFull when the queue is full, an option's error for an out-of-range
// TaskOption, ctx's error if ctx ends before the task starts (fn is then
// never run), and a *PanicError if fn panicked. On every failure before fn
// starts, the scheduler is left as if Run had not been called, except for
// the Stats counters. A Run nested inside a task of the same Scheduler
// needs a second slot: with every slot held by such callers it waits
// forever, as a nested semaphore acquire would.
//
// Cost: an empty task with a free slot takes less than a plain goroutine +
// WaitGroup, and once warm Run allocates nothing: it reuses the Tasks of
// ended Runs, so the *Task passed to fn must not be used after fn returns
// (docs/performance.md#library-costs); see IsolationOSPriority for its
// hand-off.
func (s *Scheduler) Run(ctx context.Context, fn func(*Task) error, opts ...TaskOption) error {
	t, group, err := s.initTask(runTasks.Get().(*Task), ctx, fn, opts, false)
	if err != nil {
		return err
	}
	// Where IsolationOSPriority hands the task off, fn must run on a
	// low-priority hand-off thread, so the task is started like Go's
	// (spawned) and the caller waits for its end.
	t.spawned = s.os.admit(t)
	t.callerWaits = true
	started, err := s.submit(t, group)
	if err != nil {
		recycle(t)
		return err
	}
	if t.spawned {
		// fn runs on a hand-off thread; this goroutine only waits for the
		// end. It must not touch t.wake, which that thread owns once t has
		// started.
		if started {
			err := awaitEnd(t, s.spawn(t, wakeAny))
			recycle(t)
			return err
		}
		done := t.handle.Done()
		select {
		case <-done:
		case <-ctx.Done():
			if s.cancelQueued(t) {
				recycle(t)
				return ctx.Err()
			}
			<-done // it started meanwhile
		}
		err := t.handle.err
		recycle(t)
		return err
	}
	if started {
		err := s.execute(t)
		recycle(t)
		return err
	}
	// Queued: watch ctx here rather than with an AfterFunc, so that a
	// queued Run costs no more than the Task (a per-context AfterFunc adds
	// several times that when every task has its own context). t.wake was
	// made by submit under s.mu, before any other goroutine could see t.
	select {
	case <-t.wake:
	case <-ctx.Done():
		if s.cancelQueued(t) {
			recycle(t)
			return ctx.Err()
		}
		<-t.wake // it got its slot meanwhile
	}
	if t.state == stateDone { // removed by Close; the send on wake orders this read
		err := t.handle.err
		recycle(t)
		return err
	}
	err = s.execute(t)
	recycle(t)
	return err
}

// Go queues fn as a task and returns at once; the Handle tells when it has
// ended and its error. A queued task costs no goroutine (one is started
// when the task gets a slot) and one allocation, its Task; Wait or Done
// called before the task has ended adds the Handle's channel, and the
// first task of each distinct cancelable context a context.AfterFunc
// that watches it (docs/performance.md#library-costs). Go's own error is
// only for a task it refused (ErrClosed, ErrQueueFull, an out-of-range
// option, a nil fn); an expired ctx is accepted and the task ends at once
// with ctx's error.
func (s *Scheduler) Go(ctx context.Context, fn func(*Task) error, opts ...TaskOption) (*Handle, error) {
	t, group, err := s.newTask(ctx, fn, opts, true)
	if err != nil {
		return nil, err
	}
	s.os.admit(t)
	started, err := s.submit(t, group)
	if err != nil {
		return nil, err
	}
	if started {
		s.spawn(t, wakeAny)
	}
	return &t.handle, nil
}

// newTask makes a new task (Go's). A Go task is never recycled, so it does
// not take a Task from runTasks: that would only leave the next Run to
// allocate one, and cost Go a pool look-up that mostly misses.
func (s *Scheduler) newTask(ctx context.Context, fn func(*Task) error, opts []TaskOption, spawned bool) (t *Task, group string, err error) {
	return s.initTask(new(Task), ctx, fn, opts, spawned)
}

// initTask sets t up as a new task: a new one (newTask), or for Run one
// from runTasks, which is zero but for its wake channel.
func (s *Scheduler) initTask(t *Task, ctx context.Context, fn func(*Task) error, opts []TaskOption, spawned bool) (*Task, string, error) {
	tc, err := applyTaskOptions(opts)
	if err != nil {
		s.reject()
		return nil, "", err
	}
	if fn == nil {
		s.reject()
		return nil, "", errors.New("cpusched: fn is nil")
	}
	if ctx == nil {
		s.reject()
		return nil, "", errors.New("cpusched: ctx is nil")
	}
	// t is zero but for a recycled Task's wake channel (recycle), so only
	// the fields that differ are set: a second clear of the Task's 384
	// bytes would be a good part of what Run costs.
	t.s = s
	t.fn = fn
	t.ctx = ctx
	t.classID = int8(tc.class)
	t.qidx = int8(queueOf(tc.class))
	t.spawned = spawned
	t.slice = int32(tc.slice)
	t.groupName = tc.group
	t.runIdx = -1
	if t.slice == 0 {
		t.slice = int32(s.cfg.slice)
		if tc.class == ClassBatch {
			t.slice = int32(min(int64(t.slice)*batchSliceFactor, int64(maxSlice)))
		}
	}
	t.ent = entity{weight: niceWeight(int(tc.nice)), heapIdx: -1, task: t, kind: kindOf(tc, fn)}
	s.os.watchIdle(t, tc.idleRelease)
	t.startTrace()
	return t, tc.group, nil
}

// runTasks holds the Tasks of ended Run calls for the next Runs. A Run
// holds the last reference to its Task once it returns: the *Task passed
// to fn is valid only until fn returns; the task has left the running set,
// the run queue and its context's watch, under s.mu; whoever handed it a
// slot or removed it sent on wake before Run received; and a hand-off thread that
// ran a handed-off Run ends its Handle last (call reads no field of it
// after finish). Recycling it saves Run its one allocation, and a queued
// Run its wake channel. A Go task is not recycled: the caller keeps its
// Handle.
var runTasks = sync.Pool{New: func() any { return new(Task) }}

// recycle clears t, the Task of a Run about to return (see runTasks), and
// puts it in runTasks, keeping its wake channel, which is empty: every
// send on it was received. A task whose Blocking calls set a hold timer is
// left to the collector: the timer's function (releaseHold) may still be
// about to run with it.
func recycle(t *Task) {
	if !t.os.reusable() {
		return
	}
	wake := t.wake
	if len(wake) != 0 {
		wake = nil // not expected (see above): never hand a stale wake-up on
	}
	*t = Task{wake: wake} // drops the references to fn, ctx and the rest
	runTasks.Put(t)
}

func (s *Scheduler) reject() {
	s.mu.Lock()
	s.stats.rejected++
	s.mu.Unlock()
}

// submit accepts t and either gives it a slot at once (started) or queues
// it. A task whose ctx has already ended is accepted and ended as canceled.
func (s *Scheduler) submit(t *Task, group string) (started bool, err error) {
	now := s.clock.Now()
	s.mu.Lock()
	if s.closed || (!s.freeSlotLocked() || s.rq.nwaiting > 0) && s.queued >= s.cfg.queueLimit {
		err := ErrQueueFull
		if s.closed {
			err = ErrClosed
		}
		s.stats.rejected++
		s.mu.Unlock()
		t.endTrace()
		return false, err
	}
	free := s.freeSlotLocked() && s.rq.nwaiting == 0
	s.stats.submitted++
	s.stats.classSubmitted[t.classID]++
	t.gstats = s.groupStatsLocked(t.groupName)
	t.gstats.submitted++
	s.prepareLabelsLocked(t)
	s.live++
	if err := t.ctx.Err(); err != nil {
		// An expired context is never started.
		s.stats.canceled++
		s.endLocked(t)
		s.mu.Unlock()
		t.handle.err = err
		if t.spawned {
			t.handle.end()
			return false, nil
		}
		return false, err
	}
	t.since = now
	if !t.callerWaits || free {
		s.addWatchLocked(t)
	}
	s.rq.activate(t, true)
	if free {
		s.takeSlotLocked(t, now, false) // its context was read above
		s.mu.Unlock()
		return true, nil
	}
	t.state = stateQueued
	if !t.spawned && t.wake == nil { // a recycled Task may have one (recycle)
		t.wake = make(chan struct{}, 1) // a Go task gets a goroutine instead
	}
	s.queued++
	s.stats.classQueued[t.classID]++
	s.stats.classQueuedSince[t.classID] += now
	s.rq.add(t)
	next, first := s.endKeepLocked(t, now)
	if next == t {
		s.mu.Unlock()
		return true, nil // the slot kept at a task's end (keep.go)
	}
	s.preemptForLocked(t, now)
	s.watchLocked()
	s.mu.Unlock()
	if next != nil {
		s.resume(next, first, wakeAny)
	}
	return false, nil
}
