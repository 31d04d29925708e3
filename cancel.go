package cpusched

// Cancellation: the one path that cancels a task whatever its state
// (cancelLocked), for a context that ends (contextDone), a Run caller that
// stops waiting (cancelQueued) and Close giving up (killAll); and the
// context watches.

import "context"

// ctxWatch watches one Done channel for all the tasks whose context has
// it: one context.AfterFunc per distinct context rather than per task keeps
// a queued task's cost low when many tasks share a context.
type ctxWatch struct {
	done  <-chan struct{}
	stop  func() bool
	tasks list[Task] // through Task.watchLink
	n     int
}

func watchLink(t *Task) *link[Task] { return &t.watchLink }

// addWatchLocked starts watching t's context, if it can end.
func (s *Scheduler) addWatchLocked(t *Task) {
	done := t.ctx.Done()
	if done == nil {
		return
	}
	w := s.watches[done]
	if w == nil {
		w = &ctxWatch{done: done, tasks: list[Task]{at: watchLink}}
		if s.watches == nil {
			s.watches = map[<-chan struct{}]*ctxWatch{}
		}
		s.watches[done] = w
		ctx := t.ctx
		w.stop = context.AfterFunc(ctx, func() { s.contextDone(w) })
	}
	t.watch = w
	w.tasks.pushBack(t)
	w.n++
}

// dropWatchLocked stops watching t's context.
func (s *Scheduler) dropWatchLocked(t *Task) {
	w := t.watch
	if w == nil {
		return
	}
	w.tasks.remove(t)
	t.watch = nil
	w.n--
	if w.n == 0 {
		w.stop()
		delete(s.watches, w.done)
	}
}

// notifyRemoved ends a task removed from the queue before it started.
func (s *Scheduler) notifyRemoved(t *Task, err error) {
	t.handle.err = err
	t.fn = nil
	if t.spawned {
		t.handle.end()
		return
	}
	t.wake <- struct{}{}
}

// cancelAction is what the caller of cancelLocked must do for the task
// once it has unlocked s.mu.
type cancelAction uint8

const (
	cancelAsked   cancelAction = iota // nothing: the task was asked to return
	cancelRemoved                     // notifyRemoved: it never started and is gone
	cancelResumed                     // resume: it was given a slot to return on
)

// cancelLocked cancels t according to its state:
//   - queued: it never started; it is removed from the queue and ended as
//     canceled (cancelRemoved: whoever waits for it must be told).
//   - running, blocking: preemptCancel is set, so Checkpoint fails and
//     Blocking's return finds the task cancelled (cancelAsked).
//   - parked: preemptCancel is set and the task must get a slot before
//     others to return. Once Close gave up (s.killing) it gets one at once,
//     even past Workers, not to wait behind a task that never returns
//     (cancelResumed); otherwise it moves to the exit queue, which the next
//     free slot serves first, and a running task is asked to make room
//     (cancelAsked).
//   - done: nothing.
func (s *Scheduler) cancelLocked(t *Task, now int64) cancelAction {
	switch t.state {
	case stateQueued:
		s.rq.remove(t)
		s.rq.deactivate(t, true)
		s.queued--
		s.stats.leftQueueLocked(t, now-t.since)
		s.stats.canceled++
		s.endLocked(t)
		return cancelRemoved
	case stateRunning, stateBlocking:
		t.preempt.Or(preemptCancel)
	case stateParked:
		t.preempt.Or(preemptCancel)
		if s.killing {
			s.rq.remove(t)
			s.startLocked(t, now) // sets preemptCancel again: s.killing
			return cancelResumed
		}
		if t.qidx != qExit {
			s.rq.remove(t)
			s.rq.deactivate(t, false)
			t.qidx = qExit
			s.rq.activate(t, false)
			s.rq.add(t)
			s.preemptForLocked(t, now)
		}
	}
	return cancelAsked
}

// cancelled does, after unlocking, what cancelLocked asked of its caller;
// err is what a removed task's waiter gets.
func (s *Scheduler) cancelled(t *Task, a cancelAction, err error) {
	switch a {
	case cancelRemoved:
		s.notifyRemoved(t, err)
	case cancelResumed:
		s.resume(t, false, wakeAny)
	}
}

// contextDone runs (via context.AfterFunc) when a watched context ends and
// cancels the tasks that share it.
func (s *Scheduler) contextDone(w *ctxWatch) {
	type cancelled struct {
		t *Task
		a cancelAction
	}
	var todo []cancelled
	now := s.clock.Now()
	s.mu.Lock()
	for t := w.tasks.head; t != nil; {
		next := t.watchLink.next // cancelLocked may drop t from the list
		if a := s.cancelLocked(t, now); a != cancelAsked {
			todo = append(todo, cancelled{t, a})
		}
		t = next
	}
	s.mu.Unlock()
	for _, c := range todo {
		s.cancelled(c.t, c.a, c.t.ctx.Err())
	}
}

// cancelQueued ends t, a Run task whose caller saw ctx end and returns
// ctx's error itself, if t has not started; it reports whether it did.
func (s *Scheduler) cancelQueued(t *Task) bool {
	s.mu.Lock()
	if t.state != stateQueued {
		s.mu.Unlock()
		return false
	}
	s.cancelLocked(t, s.clock.Now())
	s.mu.Unlock()
	t.fn = nil
	return true
}

// killAll cancels every task for Close once its ctx ended: queued ones are
// removed (their waiters get ErrClosed), the others are asked to return,
// parked ones on a slot of their own.
func (s *Scheduler) killAll() {
	s.mu.Lock()
	s.killing = true // tasks inside Blocking, or started from now on, see it in unblock and startLocked
	// Cancel the tasks' contexts under the lock (kill's AfterFuncs run in
	// their own goroutines), in the same critical section that empties the
	// queue: a running task that returns as its context ends must not find
	// a queued task to start before they are removed below, and a task whose
	// Checkpoint fails must find its Context done.
	s.kill()
	tasks := append(s.rq.waiting(), s.running...) // first: cancelLocked changes both
	now := s.clock.Now()
	actions := make([]cancelAction, len(tasks))
	for i, t := range tasks {
		t.cancelContextClosed()
		actions[i] = s.cancelLocked(t, now)
	}
	s.mu.Unlock()
	for i, t := range tasks {
		s.cancelled(t, actions[i], ErrClosed)
	}
}

// cancelContextClosed cancels t's context, if it was asked for, with
// cause ErrClosed, before Close's preemptCancel reaches t: a task whose
// Checkpoint returns ErrClosed finds its Context done, so an adapter can
// tell a cut task by the context's cause. (The AfterFunc on killCtx that
// Context registers does it too, but in a goroutine of its own, later.)
func (t *Task) cancelContextClosed() {
	if tc := t.taskCtx.Load(); tc != nil {
		tc.cancel(ErrClosed)
	}
}
