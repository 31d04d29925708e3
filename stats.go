package cpusched

import "time"

// Stats is a snapshot of a Scheduler's counters. Every accepted task is
// counted in Submitted and, once it has ended, in exactly one of Completed,
// Failed, Canceled and Panicked; until then it is Queued (never started) or
// Running (started: holding a slot, waiting for it back, or in Blocking).
// So at any moment Submitted == Completed + Failed + Canceled + Panicked +
// Queued + Running.
type Stats struct {
	Submitted uint64 // tasks accepted
	Completed uint64 // ended with a nil error
	Failed    uint64 // ended with a non-nil error
	Canceled  uint64 // never started (context ended, or removed by Close), or ended with an error after their context ended or Close cancelled them
	Panicked  uint64 // fn panicked
	Rejected  uint64 // refused: ErrClosed, ErrQueueFull, bad options
	Preempted uint64 // times a task gave its slot to another at a Checkpoint

	Queued  int // accepted, not yet started
	Running int // started, not yet ended

	Active  int // tasks holding a slot now
	Blocked int // tasks inside Blocking now
	Workers int // worker slots

	Isolation Isolation // the mode in effect

	QueueWait    time.Duration // total time tasks waited for their first slot
	MaxQueueWait time.Duration // the longest such wait
	RunTime      time.Duration // total slot time used by tasks

	Classes [numClasses]ClassStats // indexed by Class
	Groups  map[string]GroupStats  // every group that has had a task
}

// ClassStats are the counters of one class.
type ClassStats struct {
	Submitted uint64
	RunTime   time.Duration
}

// GroupStats are the counters of one group.
type GroupStats struct {
	Weight    int
	Submitted uint64
	Ended     uint64
	RunTime   time.Duration
}

// Stats returns a snapshot of the counters, taken under the scheduler's lock.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &s.stats
	st := Stats{
		Submitted:    c.submitted,
		Completed:    c.completed,
		Failed:       c.failed,
		Canceled:     c.canceled,
		Panicked:     c.panicked,
		Rejected:     c.rejected,
		Preempted:    c.preempted,
		Queued:       s.waitingNew,
		Running:      s.live - s.waitingNew,
		Active:       len(s.running),
		Blocked:      s.blocked,
		Workers:      s.workers,
		Isolation:    s.cfg.isolation,
		QueueWait:    time.Duration(c.queueWait),
		MaxQueueWait: time.Duration(c.maxQueueWait),
		RunTime:      time.Duration(c.runTime),
		Groups:       make(map[string]GroupStats, len(s.groups)),
	}
	for i := range st.Classes {
		st.Classes[i] = ClassStats{Submitted: c.classSubmitted[i], RunTime: time.Duration(c.classRunTime[i])}
	}
	for name, g := range s.groups {
		st.Groups[name] = GroupStats{Weight: s.groupWeightLocked(name), Submitted: g.submitted, Ended: g.ended, RunTime: time.Duration(g.runTime)}
	}
	return st
}
