package cpusched

// Two read-only views of work that runs past its slice without coming to
// the scheduler, for an adapter that must tell the waits it can shorten
// from those it cannot (httpsched's WithMaxQueueWait). The policy's own
// view is the group estimate (runQueue.noteOverrun, GroupStats.Overrun).

import "time"

// Overrun returns how far the task has run past the end of its slice, up
// to now, while other tasks waited for a slot, once the scheduler has asked
// it to give its slot up (its slice over, others waiting) and until it
// comes to the scheduler (a Checkpoint, a Blocking call): 0 otherwise. A
// task that calls Checkpoint as often as its doc asks reads at most the
// work between two calls; one in a call that cannot yield (bcrypt, gzip)
// reads how long the others have waited for that call past its slice.
// (GroupStats.Overrun is the scheduler's running estimate per group,
// taken as each task comes to it.) Call it from the
// goroutine that runs fn. Unless the task has been asked, it costs an
// atomic load; then it takes the scheduler's lock.
func (t *Task) Overrun() time.Duration {
	if t == nil {
		return 0
	}
	if t.preempt.Load()&preemptSlice == 0 {
		return 0
	}
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overrunLocked(t, s.clock.Now())
}

// overrunLocked is t's overrun at now, as Overrun says.
func (s *Scheduler) overrunLocked(t *Task, now int64) time.Duration {
	if t.state != stateRunning || s.rq.nwaiting == 0 || t.preempt.Load()&preemptSlice == 0 {
		return 0
	}
	return time.Duration(max(now-max(t.sliceEnd, s.rq.waitingSince), 0))
}

// Overruns appends to dst the overrun (as Task.Overrun) of each task
// holding a slot now whose overrun is above 0, in no order, and returns
// it with the number of slots tasks may hold now: Workers, less the
// slots lent (IsolationOSPriority). While as many tasks have an overrun
// as there are slots, every slot is held by work that has not come to a
// Checkpoint past its slice, and the waiting tasks wait for that work
// whatever their class or weight; the smallest overrun says how long that
// has lasted. It takes the scheduler's lock.
func (s *Scheduler) Overruns(dst []time.Duration) (overruns []time.Duration, slots int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slots = s.slotsLocked()
	if s.rq.nwaiting == 0 {
		return dst, slots
	}
	now := s.clock.Now()
	for _, t := range s.running {
		if over := s.overrunLocked(t, now); over > 0 {
			dst = append(dst, over)
		}
	}
	return dst, slots
}

// groupOverrun returns the overrun estimate of the named group: how far
// past the end of its slice a task of the group ran before it came to
// the scheduler (at a Checkpoint, a Blocking call or its end), averaged
// over the group's last overrunWindow of run time while other tasks
// waited; the largest of its classes'. It is 0 for a group with no run
// queue node (an untracked group with no task).
func (q *runQueue) groupOverrun(name string) time.Duration {
	var over int64
	for i := range q.queues {
		if g := q.queues[i].byName[name]; g != nil {
			over = max(over, g.overrun)
		}
	}
	return time.Duration(over)
}
