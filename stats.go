package cpusched

// Stats: the snapshot of a Scheduler's counters, and its Histogram.

import (
	"math"
	"math/bits"
	"time"
)

// Stats is a snapshot of a Scheduler's counters. Every accepted task is
// counted in Submitted and, once it has ended, in exactly one of Completed,
// Failed, Canceled and Panicked; until then it is Queued (never started) or
// Started (running on a slot, parked waiting for it back, or in Blocking).
// So at any moment Submitted == Completed + Failed + Canceled + Panicked +
// Queued + Started, and Running + Blocked <= Started.
type Stats struct {
	Submitted uint64 // tasks accepted
	Completed uint64 // ended with a nil error
	Failed    uint64 // ended with a non-nil error
	Canceled  uint64 // never started (context ended, or removed by Close), or ended with an error after their context ended or Close cancelled them
	Panicked  uint64 // fn panicked
	Rejected  uint64 // refused: ErrClosed, ErrQueueFull, bad options
	Preempted uint64 // times a task gave its slot to another at a Checkpoint

	Queued  int // accepted, not yet started
	Started int // started, not yet ended

	Running int    // tasks holding a slot now: at most Workers, except after a Close that gave up (cancelled tasks get a slot at once to unwind) and while a task with WithIdleRelease that took its slot back computes past them
	Blocked int    // tasks inside Blocking now, and tasks with WithIdleRelease whose slots were given up while their threads slept
	Workers int    // worker slots
	Lent    int    // slots IsolationOSPriority lends to the rest of the program now, while it keeps its Ps busy: at most Workers-1
	Lends   uint64 // times it lent one

	Isolation Isolation // the mode in effect

	QueueWait    time.Duration // total time tasks waited for their first slot
	MaxQueueWait time.Duration // the longest such wait
	RunTime      time.Duration // total slot time used by tasks, up to the snapshot (the running tasks' time so far included)
	LaneRunTime  time.Duration // the part of RunTime the small-task lane gave: small tasks run ahead of their turn, within a share of each period
	LentTime     time.Duration // slot time lent to the rest of the program (Lent summed over time): over an interval, its growth divided by the interval is the average number of slots lent

	// CPUTime is the CPU time tasks used while they held their slots, as
	// the kernel counts it for their threads, up to the snapshot; what
	// the policy shares by weight follows it (docs/design.md#what-a-task-is-charged).
	// It is measured where a task's goroutine is locked to its thread, as
	// in IsolationOSPriority, from the thread's CPU clock read at the
	// task's Checkpoints that come to the scheduler, its Blocking calls
	// and its end; a running task's so far is read from its thread at the
	// snapshot. A task on its own goroutine is measured from its first
	// Checkpoint (or the slice monitor's first look at it): what it
	// computed before is left out. CPU used inside Blocking's fn, while
	// the task has given its slot up, is not counted. A task that left its
	// hand-off thread (see ThreadsRaisable) is measured on the thread it
	// moved to, which its goroutine stays locked to, and one that starts
	// on its own goroutine while contended where threads cannot be
	// raised, on the thread it starts on, locked till it ends. Everywhere
	// else, a task's time on its slot counts as it does in RunTime: in
	// IsolationReserve and IsolationNone (the runtime moves a goroutine
	// between threads, so no thread's clock is the task's), for a task on
	// its own goroutine that comes to the scheduler before its first
	// Checkpoint (as a short task without one ends), and for a task that
	// held its slot for less than 20 us in all (its end reads no clock).
	// CPUTimeFallback is that part of CPUTime. CPUTime <= RunTime; a
	// running task whose CPU cannot be read at the snapshot but may be
	// measured later is counted once it is, so CPUTime never goes back.
	CPUTime         time.Duration
	CPUTimeFallback time.Duration

	// Contended is true while IsolationOSPriority runs every task thread
	// at normal priority because other processes keep the CPUs busy;
	// Contentions counts the times it began, and ContendedTime is its
	// length so far (its growth over an interval, over the interval, is
	// the share of it spent contended). While it is, the process's threads
	// also run with the kernel's shortest time slice (see
	// IsolationOSPriority). See docs/design.md#a-busy-machine.
	Contended     bool
	Contentions   uint64
	ContendedTime time.Duration

	// ThreadsRaisable is true where IsolationOSPriority raises a lowered
	// thread back to its setting: it can (CAP_SYS_NICE, or an RLIMIT_NICE
	// that allows it; New probes once), and the process has more than one
	// CPU (docs/design.md#one-cpu). A container usually cannot (Docker's
	// and Kubernetes' defaults): there, and on one CPU, a lowered thread
	// is never raised; while contended, a task leaves its lowered thread at its
	// next Checkpoint and the thread is ended, and RetiredThreads counts
	// the threads so ended. LooseThreads counts the times one could not be
	// ended and went back to the runtime's pool lowered (rare, and a task
	// that lands on one while contended ends it, counted as retired: see
	// docs/design.md#without-the-privilege-to-raise).
	ThreadsRaisable bool
	RetiredThreads  uint64
	LooseThreads    uint64

	// IdleReleases counts the times a task with WithIdleRelease gave its
	// slot up because its thread slept inside fn without Blocking.
	IdleReleases uint64

	// KeptSlots counts the times a task that yields ended while the task
	// next in line was a new call that cannot yield (of a kind that runs
	// past its slices: WithKind), and its slot was kept free for up to a
	// millisecond for the next task that yields, so that a closed-loop
	// caller's next task does not wait out the whole call; KeptTaken
	// counts those a task arriving meanwhile took. The time a slot stood
	// kept is charged to the policy as the slot time of the task that
	// took it, where that task yields (its group's weight pays for it),
	// but is not in RunTime or CPUTime. See
	// docs/design.md#task-scheduling-eevdf-scaled-down.
	KeptSlots uint64
	KeptTaken uint64

	Classes [ClassIdle + 1]ClassStats // indexed by Class
	// Groups has the tracked groups: the default group "" and every group
	// named by SetGroupWeight (counted from that call on), idle or not.
	Groups map[string]GroupStats
	// OtherGroups counts the tasks of every other group together, so that
	// the snapshot's size does not grow with the number of group names.
	// Its Weight is DefaultGroupWeight, the weight of each such group.
	OtherGroups GroupStats
}

// ClassStats are the counters of one class.
type ClassStats struct {
	Submitted  uint64
	RunTime    time.Duration // as Stats.RunTime, for the class's tasks
	CPUTime    time.Duration // as Stats.CPUTime, for the class's tasks
	QueueWaits Histogram     // each started task's wait for its first slot (0 when a slot was free)
	RunTimes   Histogram     // each ended task's total slot time, for tasks that started
	// QueueTime is the time the class's tasks have spent queued for their
	// first slot, up to the snapshot: the waits of those that started or
	// were removed while queued, and the time so far of those still
	// queued. Its growth over an interval, over the interval's length, is
	// the mean number of the class's tasks queued in it. It differs from
	// QueueWaits.Sum, which counts a wait only once its task starts, in
	// counting a wait while it lasts.
	QueueTime time.Duration
}

// GroupStats are the counters of one group.
type GroupStats struct {
	Weight     int
	Submitted  uint64
	Ended      uint64
	RunTime    time.Duration // as Stats.RunTime, for the group's tasks
	CPUTime    time.Duration // as Stats.CPUTime, for the group's tasks
	QueueWaits Histogram     // as ClassStats.QueueWaits, for the group's tasks
	RunTimes   Histogram     // as ClassStats.RunTimes, for the group's tasks
	// Overrun is the scheduler's running estimate of how far past the end
	// of their slice the group's tasks run before they come to it (at a
	// Checkpoint, a Blocking call or their end), over the group's last
	// 100 ms of run time while other tasks waited: near 0 for work that
	// yields, about a task's length for work that cannot (a bcrypt or
	// gzip call). Where a task's CPU time is measured (as CPUTime), it
	// counts the CPU the task used past its slice, not the time its
	// thread waited for the CPU; where the scheduler reads threads' CPU
	// but could not read a stretch's (its task had not yet begun to run
	// on a thread it knows), that stretch does not count. The policy
	// keeps the same estimate per kind of task (WithKind) in the group,
	// and places a new task of a kind that runs past its slices as a
	// long one: this figure is all the group's kinds together. 0 in
	// Stats.OtherGroups.
	Overrun time.Duration
}

// HistogramBuckets is the number of buckets of a Histogram.
const HistogramBuckets = 22

// Histogram counts durations in HistogramBuckets buckets whose upper bounds
// double from 1us to 2^20 us (about 1.05 s), the last bucket having none:
// Counts[i] counts the durations d with BucketBound(i-1) < d <= BucketBound(i).
// Recording one costs a few nanoseconds and no allocation. The zero value is
// an empty histogram.
type Histogram struct {
	Counts [HistogramBuckets]uint64
	Sum    time.Duration // the sum of the durations counted
}

// BucketBound returns the upper bound of bucket i of a Histogram:
// 1us<<i for i in 0..HistogramBuckets-2, and math.MaxInt64 (no bound) for
// the last bucket. It panics for i outside 0..HistogramBuckets-1, as an
// index out of range would.
func BucketBound(i int) time.Duration {
	if i < 0 || i >= HistogramBuckets {
		panic("cpusched: BucketBound index out of range")
	}
	if i == HistogramBuckets-1 {
		return math.MaxInt64
	}
	return time.Microsecond << i
}

// Count returns the number of durations counted.
func (h *Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// record counts d (ns).
func (h *Histogram) record(d int64) {
	i := 0
	if d > int64(time.Microsecond) {
		// The bucket whose bound 1us<<i is the first >= d.
		i = min(bits.Len64(uint64(d-1)/uint64(time.Microsecond)), HistogramBuckets-1)
	}
	h.Counts[i]++
	h.Sum += time.Duration(d)
}

// Stats returns a snapshot of the counters, taken under the scheduler's lock.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.statsSeq.Add(1) // after its readings of the running tasks' clocks (taskCPULocked)
	c := &s.stats
	st := Stats{
		Submitted:       c.submitted,
		Completed:       c.completed,
		Failed:          c.failed,
		Canceled:        c.canceled,
		Panicked:        c.panicked,
		Rejected:        c.rejected,
		Preempted:       c.preempted,
		KeptSlots:       c.kept,
		KeptTaken:       c.keptTaken,
		Queued:          s.queued,
		Started:         s.live - s.queued,
		Running:         len(s.running),
		Blocked:         s.blocked,
		Workers:         s.workers,
		Isolation:       s.cfg.isolation,
		QueueWait:       time.Duration(c.queueWait),
		MaxQueueWait:    time.Duration(c.maxQueueWait),
		RunTime:         time.Duration(c.runTime),
		LaneRunTime:     time.Duration(c.laneRunTime),
		CPUTime:         time.Duration(c.cpuTime),
		CPUTimeFallback: time.Duration(c.cpuFallback),
		Groups:          make(map[string]GroupStats, len(s.groups)),
	}
	now := s.clock.Now()
	// The running tasks' slot time since they were last charged (at a
	// Checkpoint, a Blocking call, a slice's end): without it, a task that
	// never calls Checkpoint would show no run time until it ended, and
	// the load reports would read its held slot as free. Their CPU time
	// so far too, read from their threads where it is measured (a system
	// call per running task).
	var classRun [numClasses]runningTimes
	groupRun := map[*groupCounters]runningTimes{}
	for _, t := range s.running {
		d := now - t.since
		if d <= 0 {
			continue
		}
		cpu, fallback := s.cpuSoFarLocked(t, d)
		st.RunTime += time.Duration(d)
		st.CPUTime += time.Duration(cpu)
		if fallback {
			st.CPUTimeFallback += time.Duration(cpu)
		}
		r := runningTimes{d, cpu}
		classRun[t.classID].add(r)
		g := groupRun[t.gstats]
		g.add(r)
		groupRun[t.gstats] = g
	}
	for i := range st.Classes {
		st.Classes[i] = ClassStats{Submitted: c.classSubmitted[i], QueueWaits: c.classWaits[i], RunTimes: c.classRuns[i],
			RunTime:   time.Duration(c.classRunTime[i] + classRun[i].run),
			CPUTime:   time.Duration(c.classCPUTime[i] + classRun[i].cpu),
			QueueTime: time.Duration(c.classQueueDone[i] + c.classQueued[i]*now - c.classQueuedSince[i])}
	}
	for name, g := range s.groups {
		gs := addRun(g.snapshot(), groupRun[g])
		gs.Overrun = s.rq.groupOverrun(name)
		st.Groups[name] = gs
	}
	st.OtherGroups = addRun(s.otherGroups.snapshot(), groupRun[&s.otherGroups])
	st.OtherGroups.Weight = DefaultGroupWeight
	s.os.statsLocked(&st, now)
	return st
}

// leftQueueLocked counts queued task t leaving the queue after waiting w
// (to start, or removed); under s.mu.
func (c *counters) leftQueueLocked(t *Task, w int64) {
	c.classQueued[t.classID]--
	c.classQueuedSince[t.classID] -= t.since
	c.classQueueDone[t.classID] += w
}

// addRun adds the running tasks' stretches so far, r, to st's RunTime and
// CPUTime.
func addRun(st GroupStats, r runningTimes) GroupStats {
	st.RunTime += time.Duration(r.run)
	st.CPUTime += time.Duration(r.cpu)
	return st
}

// snapshot returns g's counters as GroupStats.
func (g *groupCounters) snapshot() GroupStats {
	return GroupStats{Weight: g.weight, Submitted: g.submitted, Ended: g.ended, RunTime: time.Duration(g.runTime), CPUTime: time.Duration(g.cpuTime), QueueWaits: g.waits, RunTimes: g.runs}
}
